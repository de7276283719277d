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

/** The most distinct names one request may ask the gateway to resolve: two queries each, and a
 * 20 MB chat body could otherwise carry a hundred thousand names of the caller's own zone. */
export const MAX_NAMES_PER_REQUEST = 16;

// Answers that leave the fetcher, asking the same DNS, nothing to fetch: the URL goes on and
// fails where it is fetched. No such name, no address of that family, a name no DNS can hold,
// and a zone whose servers fail (a lame delegation answers SERVFAIL to every asker, and its
// owner could as well answer NXDOMAIN, which passes). What is left (a timeout, this gateway's
// own DNS refusing or unreachable) is worth a retry: a slow answer may sit in a caching
// resolver by the time the fetcher asks, so it is never let through unjudged.
const NOTHING_TO_FETCH = new Set(['ENOTFOUND', 'ENODATA', 'EBADNAME', 'ESERVFAIL']);

/** A caller's name, and the field it came in. */
export interface NamedHost {
  hostname: string;
  param: string;
}

export interface HostRefusal {
  param: string;
  /** `internal`: it resolved to an address the allowlist does not admit; `unresolved`: DNS
   * failed or took too long (worth a retry, unlike a refusal); `too many`: the request named
   * more than MAX_NAMES_PER_REQUEST hosts, this one the first beyond. */
  why: 'internal' | 'unresolved' | 'too many';
  /** For the log: the address and range, or DNS's errors. Never sent to the caller, who would
   * otherwise map the operator's network by its DNS answers. */
  detail: string;
}

type Verdict = Omit<HostRefusal, 'param'> | null;

/** DNS_SERVERS as a list: comma-separated `ip`, `ip:port` or `[ipv6]:port`. */
export function dnsServers(value: string): string[] {
  return value.split(',').map((server) => server.trim()).filter(Boolean);
}

/** Judges callers' names against the allowlist, asking `servers` (DNS_SERVERS; the system's
 * resolv.conf when empty). */
export class HostNameCheck {
  private readonly servers: string[];

  constructor(
    private readonly allowlist: Allowlist,
    servers: readonly string[] = [],
    private readonly timeoutMs = HOST_LOOKUP_TIMEOUT_MS,
    private readonly searchList: SearchList = systemSearchList(),
  ) {
    this.servers = [...servers];
    // setServers throws on a malformed address: at start, not on a caller's request.
    if (this.servers.length > 0) new Resolver().setServers(this.servers);
  }

  /** The first of `hosts` (in the order given) whose name resolves to an address the allowlist
   * does not admit, or could not be resolved; null when none. Each distinct name is asked once,
   * all at the same time. */
  async firstRefused(hosts: readonly NamedHost[]): Promise<HostRefusal | null> {
    const verdicts = new Map<string, Promise<Verdict>>();
    for (const { hostname, param } of hosts) {
      const name = hostname.toLowerCase();
      if (verdicts.has(name)) continue;
      if (verdicts.size === MAX_NAMES_PER_REQUEST) return { param, why: 'too many', detail: `more than ${MAX_NAMES_PER_REQUEST} names` };
      verdicts.set(name, this.judge(name));
    }
    for (const { hostname, param } of hosts) {
      const verdict = await verdicts.get(hostname.toLowerCase())!;
      if (verdict) return { param, ...verdict };
    }
    return null;
  }

  /** As firstRefused, as the caller's error (hostRefusalError), with its detail logged;
   * `fetcher` names who would have been sent to a field's URL. */
  async refusalError(hosts: readonly NamedHost[], fetcher: (param: string) => string, log: { info(fields: object, message: string): void }, fields: object = {}): Promise<GatewayError | null> {
    if (hosts.length === 0) return null;
    const refusal = await this.firstRefused(hosts);
    if (!refusal) return null;
    log.info({ ...fields, param: refusal.param, why: refusal.why, detail: refusal.detail }, 'caller host refused');
    return hostRefusalError(refusal, fetcher(refusal.param));
  }

  private async judge(hostname: string): Promise<Verdict> {
    // Every name the fetcher's resolver may try, asked at once; the first in its order that has
    // an address is the one it fetches (a search domain answering every name, `*.corp.internal`,
    // must not condemn a public name tried before it).
    const names = namesTried(hostname, this.searchList);
    // A resolver per name: cancel() ends every query of its resolver.
    const resolver = new Resolver({ timeout: this.timeoutMs, tries: 1 });
    if (this.servers.length > 0) resolver.setServers(this.servers);
    // c-ares's timeout is per server tried; this bounds the whole.
    const deadline = setTimeout(() => resolver.cancel(), this.timeoutMs);
    const answers = await Promise.all(names.map((name) => Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)])));
    clearTimeout(deadline);
    for (const [index, name] of names.entries()) {
      const addresses = answers[index]!.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []));
      // Every address, not the first: an attacker's DNS could hide 127.0.0.1 among public answers.
      for (const address of addresses) {
        const range = forbiddenRange(address, this.allowlist);
        if (range !== null) return { why: 'internal', detail: `${hostname} resolves to ${address} (${range})${name === hostname ? '' : ` as ${name}`}` };
      }
      // A failure that an answer may hide (a timeout) leaves open which name, or which of its
      // addresses, the fetcher gets.
      const failures = answers[index]!.flatMap((answer) => (answer.status === 'rejected' ? [String((answer.reason as NodeJS.ErrnoException).code ?? answer.reason)] : []));
      const described = new Set(failures.filter((code) => !NOTHING_TO_FETCH.has(code)).map((code) => (code === 'ETIMEOUT' || code === 'ECANCELLED' ? `no answer within ${this.timeoutMs} ms` : code)));
      if (described.size > 0) return { why: 'unresolved', detail: `${name}: ${[...described].join(', ')}` };
      if (addresses.length > 0) return null;
    }
    return null;
  }
}

/** Whether `hostname` (a WHATWG-parsed URL's) is a name only DNS can judge: not an IP literal
 * nor a localhost name, which are judged on sight. */
export function isResolvableName(hostname: string): boolean {
  return hostname !== '' && !isLiteralOrLocalhost(hostname);
}

/** The caller's error for `refusal`: a 400 for a name that leads inside or one name too many, a
 * 503 to retry for one that could not be resolved. `fetcher` names who would have been sent
 * there. */
export function hostRefusalError(refusal: HostRefusal, fetcher: string): GatewayError {
  const { param } = refusal;
  if (refusal.why === 'internal') return new GatewayError('invalid_request', `${param}: its host resolves to an internal address, which the gateway does not send ${fetcher} to; give an address on the public internet.`, param);
  if (refusal.why === 'too many') return new GatewayError('invalid_request', `${param}: the request names more than ${MAX_NAMES_PER_REQUEST} distinct hosts, each of which the gateway resolves before sending ${fetcher} there; fetch from fewer hosts, or send the media inline as data: URLs.`, param);
  return new GatewayError('service_unavailable', `${param}: its host could not be resolved just now, and the gateway sends ${fetcher} to no name it has not checked; try again.`, param, { 'retry-after': '1' });
}
