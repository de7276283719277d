import { lookup } from 'node:dns/promises';
import { GatewayError } from './errors.ts';
import { forbiddenRange, type Allowlist } from './outbound-guard.ts';

// Caller URLs that someone else fetches (a vendor's reference media, an upstream's chat media)
// or that the worker calls later (a callback) are judged when they arrive. Literal addresses are
// judged on sight (outbound-guard.ts, refusedOnSight); this judges names, by resolving them
// as the fetcher would: a public name may point inside (`169.254.169.254.nip.io`, a company's
// `*.internal`), and a model server or vendor inside the operator's network would then fetch
// from its neighbours for the caller.
//
// What it cannot see: a name that answers the gateway one way and the fetcher another a moment
// later (DNS rebinding, split horizons). The worker's own calls are checked again on the
// connected socket; a fetcher's are its own.

/** Resolves a name to its addresses, as getaddrinfo does (hosts file included). */
export type HostResolver = (hostname: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (hostname) => (await lookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

/** How long a name may take to resolve before the caller is told to try again. */
export const HOST_LOOKUP_TIMEOUT_MS = 3_000;

// The resolver's "no such name" answers: the fetcher, asking the same resolvers, finds nothing
// there either, so the URL goes on and fails where it is fetched (the machine this was written
// on resolves no public name at all, and its tests' example.com URLs must still pass). EINVAL
// is getaddrinfo's answer to a name no DNS can hold (over 253 characters): asking again would
// not help.
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA', 'EINVAL']);

/** A caller's name, and the field it came in. */
export interface NamedHost {
  hostname: string;
  param: string;
}

export interface HostRefusal {
  param: string;
  /** `internal`: it resolved to an address the allowlist does not admit; `unresolved`: the
   * resolver failed or took too long (worth a retry, unlike a refusal). */
  why: 'internal' | 'unresolved';
  /** For the log: the address and range, or the resolver's error. Never sent to the caller,
   * who would otherwise map the operator's network by its DNS answers. */
  detail: string;
}

type Verdict = { why: 'internal' | 'unresolved'; detail: string } | null;

/** The most lookups this process runs at once. getaddrinfo blocks a thread of libuv's pool (4
 * threads), which the api shares with scrypt (console sign-in, key creation) and the store
 * driver's own lookups; a name whose DNS server never answers holds its thread for glibc's whole
 * timeout (5 s, tried twice), long after the caller was told to retry. Callers' names never
 * take more than half the pool. */
export const MAX_LOOKUPS_IN_FLIGHT = 2;
let lookupsInFlight = 0;
const waitingForSlot: Array<() => void> = [];

function nextWaiting(): void {
  while (lookupsInFlight < MAX_LOOKUPS_IN_FLIGHT && waitingForSlot.length > 0) waitingForSlot.shift()!();
}

/** `lookup()` once a slot is free. A slot is held until the lookup itself settles, whoever stopped
 * waiting for it; a lookup whose caller gave up (`gaveUp()`) before its turn is never started. */
function inSlot(lookup: () => Promise<string[]>, gaveUp: () => boolean): Promise<string[]> {
  return new Promise((settle, fail) => {
    const start = () => {
      if (gaveUp()) return fail(new Error('gave up before a lookup slot was free'));
      lookupsInFlight += 1;
      lookup()
        .then(settle, fail)
        .finally(() => {
          lookupsInFlight -= 1;
          nextWaiting();
        });
    };
    waitingForSlot.push(start);
    nextWaiting();
  });
}

async function judgeName(hostname: string, allowlist: Allowlist, resolve: HostResolver, timeoutMs: number): Promise<Verdict> {
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  // Not unref'd: cleared below once the answer is in, and a lookup that never answers must
  // still end.
  const tooLong = new Promise<'timeout'>((settle) => {
    timer = setTimeout(() => {
      timedOut = true;
      settle('timeout');
    }, timeoutMs);
  });
  try {
    const addresses = await Promise.race([inSlot(() => resolve(hostname), () => timedOut), tooLong]);
    // An answer that came after the deadline may already sit in a caching resolver, where the
    // fetcher would find it: a slow name is not let through unjudged.
    if (addresses === 'timeout') return { why: 'unresolved', detail: `${hostname} did not resolve within ${timeoutMs} ms` };
    // Every address, not the first: an attacker's DNS could hide 127.0.0.1 among public answers.
    for (const address of addresses) {
      const range = forbiddenRange(address, allowlist);
      if (range !== null) return { why: 'internal', detail: `${hostname} resolves to ${address} (${range})` };
    }
    return null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (NO_SUCH_NAME.has(code)) return null;
    return { why: 'unresolved', detail: `${hostname}: ${code || (error as Error).message}` };
  } finally {
    clearTimeout(timer);
  }
}

/** The first of `hosts` (in the order given) whose name resolves to an address the allowlist
 * does not admit, or could not be resolved; null when none. Each distinct name is asked once,
 * all at the same time. */
export async function firstRefusedName(hosts: readonly NamedHost[], allowlist: Allowlist, resolve: HostResolver = systemResolver, timeoutMs = HOST_LOOKUP_TIMEOUT_MS): Promise<HostRefusal | null> {
  const verdicts = new Map<string, Promise<Verdict>>();
  for (const { hostname } of hosts) {
    const name = hostname.toLowerCase();
    if (!verdicts.has(name)) verdicts.set(name, judgeName(name, allowlist, resolve, timeoutMs));
  }
  for (const { hostname, param } of hosts) {
    const verdict = await verdicts.get(hostname.toLowerCase())!;
    if (verdict) return { param, ...verdict };
  }
  return null;
}

/** Whether `hostname` (a WHATWG-parsed URL's) is a name that only resolving can judge: not an
 * IP literal (the parse writes every IPv4 form as a dotted quad, IPv6 in brackets). Localhost
 * names are judged on sight. */
export function isResolvableName(hostname: string): boolean {
  if (hostname === '' || hostname.startsWith('[')) return false;
  if (/^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)) return false;
  return !/(?:^|\.)localhost\.?$/i.test(hostname);
}

/** The caller's error for `refusal`: a 400 for a name that leads inside, a 503 to retry for one
 * that could not be resolved. `fetcher` names who would have been sent there. */
export function hostRefusalError(refusal: HostRefusal, fetcher: string): GatewayError {
  if (refusal.why === 'internal') {
    return new GatewayError('invalid_request', `${refusal.param}: its host resolves to an internal address, which the gateway does not send ${fetcher} to; give an address on the public internet.`, refusal.param);
  }
  return new GatewayError('service_unavailable', `${refusal.param}: its host could not be resolved just now, and the gateway sends ${fetcher} to no name it has not checked; try again.`, refusal.param, { 'retry-after': '1' });
}
