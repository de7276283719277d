import { Resolver } from 'node:dns/promises';
import { namesTried, systemSearchList, type SearchList } from './dns-search-list.ts';
import { GatewayError } from './errors.ts';
import { forbiddenRange, isLiteralOrLocalhost, type Allowlist } from './outbound-guard.ts';

// Caller URLs that someone else fetches (a vendor's reference media, an upstream's chat media)
// or that the worker calls later (a callback) are judged when they arrive. Literal addresses are
// judged on sight (outbound-guard.ts, refusedOnSight); this judges names, by asking DNS for
// them as the fetcher would: a public name may point inside (`169.254.169.254.nip.io`, a
// company's `*.internal`), and a model server or vendor inside the operator's network would
// then fetch from its neighbours for the caller.
//
// DNS is asked directly (c-ares: Node's `Resolver`), not through getaddrinfo: a getaddrinfo call
// cannot be cancelled and holds a thread of libuv's pool (shared with scrypt) for the resolver's
// whole timeout, so callers naming a zone whose server never answers could fill the pool. So
// this api's hosts file is not read (the fetcher's is out of view anyway), and resolv.conf's
// search domains are applied here (core/dns-search-list.ts), as the fetcher's getaddrinfo does.
//
// What it cannot see: a name that answers the gateway one way and the fetcher another a moment
// later (DNS rebinding, split horizons). The worker's own calls are checked again on the
// connected socket; a fetcher's are its own.

/** How long a name may take to resolve before the caller is told to try again. */
export const HOST_LOOKUP_TIMEOUT_MS = 3_000;

/** The most distinct names one request may ask the gateway to resolve (each is two queries per
 * name the search list makes of it): a 20 MB chat body could otherwise carry a hundred thousand
 * names of the caller's own zone. */
export const MAX_NAMES_PER_REQUEST = 16;

// Answers that leave the fetcher, asking the same DNS, nothing to fetch: the URL goes on and
// fails where it is fetched. No such name, no address of that family (or a server that does not
// do that family's queries: NOTIMP, FORMERR, as old ones answer AAAA), a name no DNS can hold,
// and a zone whose servers fail. SERVFAIL is let through knowingly: a lame delegation answers it
// to every asker, so refusing it would be a 503 that retrying never clears, while a recursive
// resolver also answers it for a zone that was merely slow, whose later answer may then sit in
// its cache for the fetcher; an attacker owning the zone gains nothing by it that answering
// each asker differently (rebinding, out of reach anyway) would not give.
const NOTHING_TO_FETCH = new Set(['ENOTFOUND', 'ENODATA', 'EBADNAME', 'ESERVFAIL', 'ENOTIMP', 'EFORMERR']);
// This gateway's own DNS refusing or unreachable: every name fails alike until the operator
// mends DNS_SERVERS or resolv.conf, so it is logged as theirs to fix. A timeout is the zone's.
const DNS_FAULTS = new Set(['ECONNREFUSED', 'EREFUSED']);

/** A caller's name, and the field it came in. */
export interface NamedHost {
  hostname: string;
  param: string;
}

export interface HostRefusal {
  param: string;
  /** `internal`: it resolved to an address the allowlist does not admit; `unresolved`: DNS
   * failed or took too long (worth a retry, unlike a refusal); `too many`: the request named
   * more than MAX_NAMES_PER_REQUEST hosts, this one the first beyond; `single label`: a name
   * without a dot (`redis`), which each fetcher completes with its own search domains (its own
   * Kubernetes namespace first), out of this gateway's view. */
  why: 'internal' | 'unresolved' | 'too many' | 'single label';
  /** For the log: the address and range, or DNS's errors. Never sent to the caller, who would
   * otherwise map the operator's network by its DNS answers. */
  detail: string;
  /** The gateway's own DNS refused or could not be reached (the operator's to fix). */
  dnsFault?: true;
}

type Verdict = Omit<HostRefusal, 'param'> | null;

/** DNS_SERVERS as a list: comma-separated `ip`, `ip:port` or `[ipv6]:port`. */
export function dnsServers(value: string): string[] {
  return value.split(',').map((server) => server.trim()).filter(Boolean);
}

/** Judges callers' names against the allowlist, asking `servers` (DNS_SERVERS; the system's
 * resolv.conf when empty). */
export class HostNameCheck {
  // One resolver per server, for the process (c-ares keeps a socket per server for all queries),
  // asked in turn by askInTurn: c-ares's own failover, given two servers, waited for the silent
  // first one past the deadline in 8 of 20 lookups here.
  private readonly resolvers: Resolver[];

  constructor(
    private readonly allowlist: Allowlist,
    servers: readonly string[] = [],
    private readonly timeoutMs = HOST_LOOKUP_TIMEOUT_MS,
    private readonly searchList: SearchList = systemSearchList(),
  ) {
    const resolver = (server?: string) => {
      const made = new Resolver({ timeout: timeoutMs, tries: 1 });
      // setServers throws on a malformed address: at start, not on a caller's request.
      if (server !== undefined) made.setServers([server]);
      return made;
    };
    this.resolvers = servers.length > 0 ? servers.map(resolver) : [resolver()];
  }

  /** The first of `hosts` (in the order given) whose name resolves to an address the allowlist
   * does not admit, or could not be resolved; null when none. Each distinct name is asked once,
   * all at the same time, once they are known to be few enough. */
  async firstRefused(hosts: readonly NamedHost[]): Promise<HostRefusal | null> {
    const distinct = new Set<string>();
    for (const { hostname, param } of hosts) {
      const name = hostname.toLowerCase();
      if (!name.replace(/\.$/, '').includes('.')) return { param, why: 'single label', detail: `${hostname} has no dot` };
      distinct.add(name);
      if (distinct.size > MAX_NAMES_PER_REQUEST) return { param, why: 'too many', detail: `more than ${MAX_NAMES_PER_REQUEST} names` };
    }
    const verdicts = new Map([...distinct].map((name) => [name, this.judge(name)]));
    for (const { hostname, param } of hosts) {
      const verdict = await verdicts.get(hostname.toLowerCase())!;
      if (verdict) return { param, ...verdict };
    }
    return null;
  }

  /** As firstRefused, as the caller's error (hostRefusalError), with its detail logged (as a
   * warning when this gateway's DNS is at fault); `fetcher` names who would have been sent to a
   * field's URL. */
  async refusalError(hosts: readonly NamedHost[], fetcher: (param: string) => string, log: HostCheckLog, fields: object = {}): Promise<GatewayError | null> {
    if (hosts.length === 0) return null;
    const refusal = await this.firstRefused(hosts);
    if (!refusal) return null;
    const line = { ...fields, param: refusal.param, why: refusal.why, detail: refusal.detail };
    if (refusal.dnsFault) log.warn(line, "the gateway's DNS refused or could not be reached: every name fails alike; check DNS_SERVERS or resolv.conf");
    else log.info(line, 'caller host refused');
    return hostRefusalError(refusal, fetcher(refusal.param));
  }

  private async judge(hostname: string): Promise<Verdict> {
    // Every name the fetcher's resolver may try, asked at once; the first in its order that has
    // an address is the one it fetches (a search domain answering every name, `*.corp.internal`,
    // must not condemn a public name tried before it).
    const names = namesTried(hostname, this.searchList);
    const share = this.timeoutMs / this.resolvers.length;
    const ask = (query: (resolver: Resolver) => Promise<string[]>) => askInTurn(this.resolvers, share, query);
    const answers = await withinDeadline(Promise.all(names.map((name) => Promise.allSettled([ask((resolver) => resolver.resolve4(name)), ask((resolver) => resolver.resolve6(name))]))), this.timeoutMs);
    if (answers === 'timeout') return { why: 'unresolved', detail: `${hostname}: no answer within ${this.timeoutMs} ms` };
    for (const [index, name] of names.entries()) {
      const addresses = answers[index]!.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []));
      // Every address, not the first: an attacker's DNS could hide 127.0.0.1 among public answers.
      for (const address of addresses) {
        const range = forbiddenRange(address, this.allowlist);
        if (range !== null) return { why: 'internal', detail: `${hostname} resolves to ${address} (${range})${name === hostname ? '' : ` as ${name}`}` };
      }
      // A failure that an answer may hide (a timeout) leaves open which name, or which of its
      // addresses, the fetcher gets.
      const retryable = failureCodes(answers[index]!).filter((code) => !NOTHING_TO_FETCH.has(code));
      if (retryable.length > 0) return { why: 'unresolved', detail: `${name}: ${[...new Set(retryable.map(readableCode))].join(', ')}`, ...(retryable.some((code) => DNS_FAULTS.has(code)) ? { dnsFault: true } : {}) };
      if (addresses.length > 0) return null;
    }
    return null;
  }
}

export interface HostCheckLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

function failureCodes(answers: PromiseSettledResult<string[]>[]): string[] {
  return answers.flatMap((answer) => (answer.status === 'rejected' ? [String((answer.reason as NodeJS.ErrnoException).code ?? answer.reason)] : []));
}

function readableCode(code: string): string {
  return code === 'ETIMEOUT' ? 'no answer in time' : code;
}

// A server's failures that another server may not share: it is silent, down or refusing.
const SERVER_FAULTS = new Set(['ETIMEOUT', 'ECONNREFUSED', 'EREFUSED', 'ESERVFAIL']);

/** `query` of the first resolver; of the next one too when the first has not answered within
 * `shareMs` or failed as a server (SERVER_FAULTS), and so on, as getaddrinfo goes down
 * resolv.conf's servers. The first answer wins (an address list, or a verdict on the name such
 * as NXDOMAIN); when every server failed, the last failure. */
function askInTurn(resolvers: readonly Resolver[], shareMs: number, query: (resolver: Resolver) => Promise<string[]>): Promise<string[]> {
  return new Promise((answer, fail) => {
    let asked = 0;
    let failed = 0;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const settle = (finish: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      finish();
    };
    const askNext = () => {
      clearTimeout(timer);
      if (settled || asked === resolvers.length) return;
      const resolver = resolvers[asked]!;
      asked += 1;
      if (asked < resolvers.length) timer = setTimeout(askNext, shareMs);
      query(resolver).then(
        (addresses) => settle(() => answer(addresses)),
        (error: NodeJS.ErrnoException) => {
          failed += 1;
          if (!SERVER_FAULTS.has(error.code ?? '')) settle(() => fail(error));
          else if (failed === resolvers.length) settle(() => fail(error));
          else if (failed === asked) askNext();
        },
      );
    };
    askNext();
  });
}

/** `work`, or 'timeout' once `ms` passed. The queries go on to c-ares's own timeout (the same
 * `ms`), and are then dropped. */
async function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'timeout'>((settle) => {
    timer = setTimeout(() => settle('timeout'), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `hostname` (a WHATWG-parsed URL's) is a name only DNS can judge: not an IP literal
 * nor a localhost name, which are judged on sight. */
export function isResolvableName(hostname: string): boolean {
  return hostname !== '' && !isLiteralOrLocalhost(hostname);
}

/** The caller's error for `refusal`: a 400 for a name that leads inside, a single label or one
 * name too many, a 503 to retry for one that could not be resolved. `fetcher` names who would
 * have been sent there. */
export function hostRefusalError(refusal: HostRefusal, fetcher: string): GatewayError {
  const { param } = refusal;
  if (refusal.why === 'internal') return new GatewayError('invalid_request', `${param}: its host resolves to an internal address, which the gateway does not send ${fetcher} to; give an address on the public internet.`, param);
  if (refusal.why === 'single label') return new GatewayError('invalid_request', `${param}: its host is a single label, which only a network's own resolver completes (to a host inside it); give the host's full DNS name.`, param);
  if (refusal.why === 'too many') return new GatewayError('invalid_request', `${param}: the request names more than ${MAX_NAMES_PER_REQUEST} distinct hosts, each of which the gateway resolves before sending ${fetcher} there; fetch from fewer hosts, or send the media inline as data: URLs.`, param);
  return new GatewayError('service_unavailable', `${param}: its host could not be resolved just now, and the gateway sends ${fetcher} to no name it has not checked; try again.`, param, { 'retry-after': '1' });
}
