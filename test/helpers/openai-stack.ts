import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { request } from 'undici';
import type { Config } from '../../core/config.ts';
import { buildSimulator } from '../../simulator/app.ts';
import { AccountStore, type AccountWithTotals } from '../../store/accounts.ts';
import type { LedgerEntry } from '../../store/ledger.ts';
import type { UsageRecord } from '../../store/usage.ts';
import { createAccount, createKey, startTestApp, type TestApp } from './app.ts';
import { settledAccount } from './settled-account.ts';
import type { UpstreamClientOptions } from '../../api/services/openai-proxy/upstream-client.ts';

// The api on a real port in front of an OpenAI-compatible upstream, driven with the official
// `openai` client the way a caller would: only baseURL and apiKey changed.

export interface OpenAiStack extends TestApp {
  baseUrl: string;
  /** A client for `key`, with the client's own retries off so every status surfaces once. */
  client(key: string): OpenAI;
  /** A funded account with an unrestricted key. */
  newCaller(name: string, balanceUsd?: number): Promise<{ accountId: string; key: string }>;
  account(accountId: string): Promise<AccountWithTotals>;
  ledgerEntries(accountId: string): Promise<LedgerEntry[]>;
  /** The account's usage records, polling until there are `expected` of them (a record is
   * written just after the capture). */
  usageRecords(accountId: string, expected?: number): Promise<UsageRecord[]>;
  /** The account once it holds nothing: chat and image calls are paid from a spend lease that
   * settles with the ledger a moment (about 0.3 s) after the account's last call. */
  settledAccount(accountId: string, timeoutMs?: number): Promise<AccountWithTotals>;
}

async function startApi(label: string, overrides: Partial<Record<keyof Config, string>>, upstreamClient?: UpstreamClientOptions, logStream?: { write(line: string): void }): Promise<OpenAiStack> {
  const harness = await startTestApp(label, overrides, { ...(upstreamClient ? { upstreamClient } : {}), ...(logStream ? { logStream } : {}) });
  await harness.app.listen({ host: '127.0.0.1', port: 0 });
  const baseUrl = `http://127.0.0.1:${(harness.app.server.address() as AddressInfo).port}`;
  const db = harness.database.db;
  const accounts = new AccountStore(db);
  const stack: OpenAiStack = {
    ...harness,
    async close() {
      // fetch (inside the openai client) may leave a connection open that never sent a request;
      // node counts it as busy until its headers timeout, which would stall close() for a minute.
      harness.app.server.closeAllConnections();
      await harness.close();
    },
    baseUrl,
    client: (key) => new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 20_000 }),
    async newCaller(name, balanceUsd = 10) {
      const account = await createAccount(harness.app, { name, balance_usd: balanceUsd });
      return { accountId: account.id, key: (await createKey(harness.app, account.id)).key };
    },
    async account(accountId) {
      const account = await accounts.find(accountId);
      if (!account) throw new Error(`no account ${accountId}`);
      return account;
    },
    ledgerEntries: async (accountId) => {
      const entries = await db.collection<LedgerEntry>('ledger').find({ account_id: accountId }).toArray();
      // Money put in by the test itself is not what the test is about.
      return entries.filter((entry) => entry.operation !== 'credit').sort((first, second) => first.seq - second.seq);
    },
    async usageRecords(accountId, expected = 0) {
      const deadline = Date.now() + 5_000;
      for (;;) {
        const records = await db.collection<UsageRecord>('usage').find({ account_id: accountId }).sort({ created_at: 1 }).toArray();
        if (records.length >= expected || Date.now() > deadline) return records;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    settledAccount: (accountId, timeoutMs) => settledAccount(accounts, accountId, timeoutMs, db),
  };
  return stack;
}

export interface SimulatorStack extends OpenAiStack {
  simulatorUrl: string;
  simulatorStats(): Promise<SimulatorCounts>;
}

/** What the simulator saw (simulator/stats.ts). */
export interface SimulatorCounts {
  chat_requests: number;
  chat_streams_aborted: number;
  image_requests: number;
  image_requests_left: number;
}

/** The simulator in-process on an ephemeral port, and the api in front of it. */
/** `logStream` receives the api's log lines (set LOG_LEVEL in `overrides`). */
export async function startOpenAiStack(label: string, overrides: Partial<Record<keyof Config, string>> = {}, logStream?: { write(line: string): void }): Promise<SimulatorStack> {
  const simulator = buildSimulator();
  await simulator.listen({ host: '127.0.0.1', port: 0 });
  const simulatorUrl = `http://127.0.0.1:${(simulator.server.address() as AddressInfo).port}`;
  const stack = await startApi(label, { SIMULATOR_URL: simulatorUrl, ...overrides }, undefined, logStream);
  const withSimulator = {
    ...stack,
    simulatorUrl,
    async simulatorStats() {
      const response = await request(`${simulatorUrl}/_sim/stats`);
      return (await response.body.json()) as SimulatorCounts;
    },
  };
  return closingAlso(withSimulator, () => simulator.close());
}

/** `stack`, whose close also runs `cleanup`, once the stack itself is closed. */
function closingAlso<T extends { close(): Promise<void> }>(stack: T, cleanup: () => unknown): T {
  const closeStack = stack.close;
  return {
    ...stack,
    async close() {
      await closeStack();
      await cleanup();
    },
  };
}

/** The local catalog as `edit` leaves it, in a temporary file, and how to remove it. */
function temporaryCatalog(edit: (catalog: any) => void): { file: string; remove: () => void } {
  const catalog = JSON.parse(readFileSync('config/catalog.local.json', 'utf8'));
  edit(catalog);
  const directory = mkdtempSync(path.join(tmpdir(), 'framegate-catalog-'));
  const file = path.join(directory, 'catalog.json');
  writeFileSync(file, JSON.stringify(catalog));
  return { file, remove: () => rmSync(directory, { recursive: true, force: true }) };
}

/** startOpenAiStack with the local catalog's models and `models` besides (a chat model of
 * another kind, say); the catalog file goes when the stack closes. */
export async function startOpenAiStackWithModels(label: string, models: object[]): Promise<SimulatorStack> {
  const catalog = temporaryCatalog((local) => local.models.push(...models));
  return closingAlso(await startOpenAiStack(label, { CATALOG_FILE: catalog.file }), catalog.remove);
}

export interface RecordedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, any>;
  /** The body as sent, for what parsing would change (integers beyond a number's). */
  text: string;
}

export type FakeHandler = (recorded: RecordedRequest, response: ServerResponse, attempt: number) => void | Promise<void>;

/** A tiny OpenAI-compatible upstream on loopback whose answers a test scripts, recording what
 * the gateway sent. */
export async function startFakeUpstream(handler: FakeHandler) {
  const received: RecordedRequest[] = [];
  const server = createServer((incoming, response) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const recorded: RecordedRequest = { path: incoming.url ?? '', headers: incoming.headers, body: text ? JSON.parse(text) : {}, text };
      received.push(recorded);
      void handler(recorded, response, received.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The api with the local catalog's OpenAI upstream pointed at `upstreamUrl`, and the chat
 * model's upstream id replaced, so tests can see the gateway swap model ids both ways. */
export async function startApiBeforeUpstream(
  label: string,
  upstreamUrl: string,
  options: { upstreamChatModel?: string; imageModel?: Record<string, unknown>; upstreamClient?: UpstreamClientOptions } = {},
): Promise<OpenAiStack> {
  const catalog = temporaryCatalog((local) => {
    local.upstreams['simulator-openai'].base_url = `${upstreamUrl}/v1`;
    local.upstreams['simulator-openai'].api_key = 'fake-upstream-key';
    if (options.upstreamChatModel) {
      const chat = local.models.find((model: { id: string }) => model.id === 'gpt-4o-mini');
      chat.upstream_model = options.upstreamChatModel;
    }
    // Fields set on the image model (its prices by quality and size, say).
    if (options.imageModel) Object.assign(local.models.find((model: { id: string }) => model.id === 'gpt-image-1'), options.imageModel);
  });
  return closingAlso(await startApi(label, { CATALOG_FILE: catalog.file }, options.upstreamClient), catalog.remove);
}

/** Writes an SSE head and returns a function sending one `data:` event. */
export function sseWriter(response: ServerResponse): (data: unknown) => void {
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  return (data) => response.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The gateway's price of a call, computed independently of core/chat-pricing.ts. */
export function expectedChatMicros(usage: { prompt_tokens: number; completion_tokens: number }): number {
  // gpt-4o-mini in config/catalog.local.json: 150000 and 600000 micro-USD per million tokens.
  return Math.ceil((usage.prompt_tokens * 150_000 + usage.completion_tokens * 600_000) / 1_000_000);
}
