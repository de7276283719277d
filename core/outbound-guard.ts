import { lookup } from 'node:dns/promises';
import net from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, errors as undiciErrors } from 'undici';
import { withArticle } from './characters.ts';

/** The longest caller URL the gateway calls (a webhook's); longer ones are refused at submission. */
export const MAX_CALLER_URL_LENGTH = 2048;

// SSRF protection for requests to caller-supplied URLs (webhooks, reference media).
// The check happens inside the undici connector, on the addresses we resolve ourselves and
// connect to, and again on the socket's remote address: checking the URL's hostname up front
// would be defeated by DNS rebinding (the name resolves to a public address for the check and
// to 127.0.0.1 for the connection) and by odd IP notations.

type IpAddress = ipaddr.IPv4 | ipaddr.IPv6;

/** CIDRs that may be reached despite the guard (OUTBOUND_ALLOWLIST). */
export type Allowlist = ReadonlyArray<[IpAddress, number]>;

export class ForbiddenDestinationError extends Error {
  readonly code = 'FRAMEGATE_FORBIDDEN_DESTINATION';
  constructor(readonly hostname: string, readonly address: string, readonly range: string) {
    const prefix = address.includes(':') ? 128 : 32;
    super(
      `refused to connect to ${hostname} at ${address} (${range} address); ` +
        // The "loopback" keyword allows loopback addresses only: naming it for others misleads.
        `to allow it, add ${address}/${prefix}${range === 'loopback' ? ' (or "loopback")' : ''} to OUTBOUND_ALLOWLIST`,
    );
    this.name = 'ForbiddenDestinationError';
  }

  /** What the caller who gave the URL may read (a webhook attempt on their task): not the
   * address the name resolved to, nor the operator's allowlist, which would let a caller map
   * the gateway's internal network by its DNS answers. The message above goes to the log. */
  get publicMessage(): string {
    return `refused: ${this.whatItIs}, which the gateway does not call`;
  }

  /** "10.0.0.1 is a private address": the host and its range, in words. */
  get whatItIs(): string {
    return `${this.hostname} is ${withArticle(readableRange(this.range))} address`;
  }
}

/** ipaddr.js's range names that do not read as words. */
const RANGE_WORDS: Record<string, string> = {
  carrierGradeNat: 'carrier-grade NAT',
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  ipv4Compatible: 'IPv4-compatible',
  ipv4Mapped: 'IPv4-mapped',
  rfc6145: 'NAT64',
  rfc6052: 'NAT64',
};

/** A range as words: `carrierGradeNat` reads "carrier-grade NAT"; "6to4 of private" (an IPv6
 * address carrying an IPv4 one) reads "6to4 (carrying private)". */
function readableRange(range: string): string {
  const [outer, ...inner] = range.split(' of ');
  const words = RANGE_WORDS[outer!] ?? outer!;
  return inner.length === 0 ? words : `${words} (carrying ${readableRange(inner.join(' of '))})`;
}

/** Parses OUTBOUND_ALLOWLIST: comma-separated CIDRs, or the word `loopback`. Throws on a typo so
 * a misconfigured worker fails at start instead of silently refusing (or allowing) destinations. */
export function parseOutboundAllowlist(value: string | undefined): Allowlist {
  const entries: Array<[IpAddress, number]> = [];
  for (const item of (value ?? '').split(',').map((part) => part.trim()).filter(Boolean)) {
    if (item.toLowerCase() === 'loopback') {
      entries.push(ipaddr.parseCIDR('127.0.0.0/8'), ipaddr.parseCIDR('::1/128'));
      continue;
    }
    let entry: [IpAddress, number];
    try {
      entry = ipaddr.parseCIDR(item);
    } catch {
      throw new Error(`OUTBOUND_ALLOWLIST: "${item}" is neither a CIDR (like 10.0.0.0/8 or ::1/128) nor "loopback"`);
    }
    // Addresses are compared in their IPv4 form when they are IPv4-mapped, so entries are too.
    const [network, bits] = entry;
    if (network.kind() === 'ipv6' && (network as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      entry = [(network as ipaddr.IPv6).toIPv4Address(), bits - 96];
    }
    entries.push(entry);
  }
  return entries;
}

// The IPv4 address an IPv6 address carries when packets to it end up at that IPv4 host.
// Local-use NAT64 (64:ff9b:1::/48) and Teredo are left out on purpose: where the IPv4 part sits
// depends on the operator, so they are refused outright.
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const parts = address.parts;
  const lastTwo = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  if (address.isIPv4MappedAddress()) return address.toIPv4Address();
  const range = address.range();
  if (range === 'rfc6145') return lastTwo(parts[6]!, parts[7]!);
  if (range === 'rfc6052' && parts[2] === 0) return lastTwo(parts[6]!, parts[7]!); // 64:ff9b::/96
  if (range === '6to4') return lastTwo(parts[1]!, parts[2]!);
  return null;
}

// ::/96 holds the deprecated IPv4-compatible form (::127.0.0.1); nothing legitimate lives there.
function isIPv4Compatible(address: ipaddr.IPv6): boolean {
  return address.parts.slice(0, 6).every((part) => part === 0);
}

/** The range name when `ip` must not be reached, or null when it may. */
export function forbiddenRange(ip: string, allowlist: Allowlist): string | null {
  if (!ipaddr.isValid(ip)) return 'unparseable';
  let address: IpAddress = ipaddr.parse(ip);
  // Compare mapped forms as their IPv4 selves, so `loopback` in the allowlist also admits a
  // dual-stack socket reporting ::ffff:127.0.0.1, and ::ffff:10.0.0.1 is private.
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    address = (address as ipaddr.IPv6).toIPv4Address();
  }
  if (allowlist.some(([network, bits]) => network.kind() === address.kind() && address.match(network, bits))) return null;
  if (address.kind() === 'ipv4') return address.range() === 'unicast' ? null : address.range();
  const address6 = address as ipaddr.IPv6;
  const range = address6.range();
  if (range === 'unicast') return isIPv4Compatible(address6) ? 'ipv4Compatible' : null;
  const inner = embeddedIPv4(address6);
  if (!inner) return range;
  const innerRange = forbiddenRange(inner.toString(), allowlist);
  return innerRange === null ? null : `${range} of ${innerRange}`;
}

export function isForbiddenAddress(ip: string, allowlist: Allowlist): boolean {
  return forbiddenRange(ip, allowlist) !== null;
}

// `localhost` and its subdomains are loopback by RFC 6761, whatever a resolver says; with a
// trailing dot too (`localhost.`, the same name written fully qualified).
const LOCALHOST_NAME = /(?:^|\.)localhost\.?$/i;
const DOTTED_QUAD = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** Whether a WHATWG-parsed URL's host is judged on sight (refusedOnSight) rather than by DNS: an
 * IP literal (the parse writes every IPv4 form as a dotted quad, IPv6 in brackets) or a
 * localhost name. */
export function isLiteralOrLocalhost(hostname: string): boolean {
  return hostname.startsWith('[') || DOTTED_QUAD.test(hostname) || LOCALHOST_NAME.test(hostname);
}

/** The refusal the gateway's connection to `url` would meet, when it shows without asking DNS:
 * its host is a literal address (or a localhost name) the allowlist does not admit. Null when
 * only the connection can tell. */
export function refusedOnSight(url: URL, allowlist: Allowlist): ForbiddenDestinationError | null {
  const hostname = url.hostname;
  // An IPv6 literal (`[::1]`, `[fd00::1]`, `[::ffff:a9fe:a9fe]`): the WHATWG parse keeps its
  // brackets. Callback URLs never hold one (api/routes/http-url.ts), but chat messages' media
  // URLs are not held to that grammar.
  const bracketed = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : null;
  // A localhost name resolves to ::1 as well where /etc/hosts says so (most containers), and
  // the worker refuses a name when any of its addresses is forbidden.
  // The WHATWG parse writes every IPv4 host as a dotted quad (`0x7f.1` is `127.0.0.1`); only
  // those are handed to ipaddr, whose check of a name throws and catches inside (30 µs a call,
  // on the chat path for every media URL).
  const addresses =
    bracketed !== null ? [bracketed] : LOCALHOST_NAME.test(hostname) ? ['127.0.0.1', '::1'] : DOTTED_QUAD.test(hostname) && ipaddr.IPv4.isValid(hostname) ? [hostname] : [];
  for (const address of addresses) {
    const range = forbiddenRange(address, allowlist);
    if (range !== null) return new ForbiddenDestinationError(hostname, address, range);
  }
  return null;
}

/** Early, DNS-free validation of a callback URL: absolute http(s), no credentials. The guarded
 * dispatcher still decides at connect time where the request may go. */
export function validateCallerUrl(raw: string): URL | string {
  if (raw.length > MAX_CALLER_URL_LENGTH) return `the URL is longer than ${MAX_CALLER_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'not an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the scheme must be http or https, not ${url.protocol.slice(0, -1)}`;
  if (url.username || url.password) return 'the URL must not contain credentials (user:password@)';
  if (!url.hostname) return 'the URL has no host';
  return url;
}

/** Resolves a hostname to the addresses we may connect to; throws ForbiddenDestinationError when
 * any of them is forbidden (an attacker controlling DNS could otherwise hide 127.0.0.1 among
 * public answers and win on a retry). */
export async function vetDestination(hostname: string, allowlist: Allowlist): Promise<string[]> {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  // WHATWG URL parsing already turns 0x7f.1, 017700000001 and 2130706433 into 127.0.0.1, but a
  // hostname that reached us another way would be read by getaddrinfo in the same lenient way;
  // ipaddr.js parses those IPv4 notations too, so they are checked without asking the resolver.
  let addresses: string[];
  if (net.isIP(bare)) addresses = [bare];
  else if (ipaddr.IPv4.isValid(bare)) addresses = [ipaddr.IPv4.parse(bare).toString()];
  // Loopback by RFC 6761, as the api judged it at submission (refusedOnSight): glibc's resolver
  // knows `localhost` from /etc/hosts but not `hooks.localhost`, whose webhook then failed every
  // attempt for three days with ENOTFOUND.
  else if (LOCALHOST_NAME.test(bare)) addresses = ['127.0.0.1', '::1'];
  else addresses = (await lookup(bare, { all: true, verbatim: true })).map((entry) => entry.address);
  if (addresses.length === 0) throw new Error(`${hostname} resolved to no address`);
  for (const address of addresses) {
    const range = forbiddenRange(address, allowlist);
    if (range !== null) throw new ForbiddenDestinationError(hostname, address, range);
  }
  return addresses;
}

// One TCP connection to an already vetted address; the remote address is checked again on
// 'connect', before undici (or TLS) has written a byte.
function connectTcp(hostname: string, address: string, port: number, allowlist: Allowlist, signal: AbortSignal): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address, port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 });
    const onAbort = () => socket.destroy(signal.reason as Error);
    const onError = (error: Error) => {
      signal.removeEventListener('abort', onAbort);
      reject(error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('error', onError);
    socket.once('connect', () => {
      signal.removeEventListener('abort', onAbort);
      socket.removeListener('error', onError);
      const remote = socket.remoteAddress ?? 'unknown';
      const range = forbiddenRange(remote, allowlist);
      if (range !== null) {
        socket.destroy();
        reject(new ForbiddenDestinationError(hostname, remote, range));
        return;
      }
      resolve(socket);
    });
  });
}

async function connectVetted(hostname: string, port: number, allowlist: Allowlist, timeoutMs: number): Promise<net.Socket> {
  const signal = AbortSignal.timeout(timeoutMs);
  const timedOut = () => new undiciErrors.ConnectTimeoutError(`connect to ${hostname}:${port} timed out after ${timeoutMs} ms`);
  const addresses = await Promise.race([
    vetDestination(hostname, allowlist),
    new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(timedOut()), { once: true })),
  ]);
  // Try each vetted address in turn (an IPv6 answer on a machine without IPv6 should not make
  // the destination unreachable), sharing one connect deadline.
  let lastError: unknown;
  for (const address of addresses) {
    if (signal.aborted) throw timedOut();
    try {
      return await connectTcp(hostname, address, port, allowlist, signal);
    } catch (error) {
      if (error instanceof ForbiddenDestinationError) throw error;
      lastError = signal.aborted ? timedOut() : error;
    }
  }
  throw lastError;
}

/** An undici Agent that only connects to addresses the guard allows. Its users never follow
 * redirects: a redirect to an internal URL would be checked too, but it is not ours to follow. */
export function createGuardedDispatcher(options: {
  allowlist: Allowlist;
  connectTimeoutMs?: number;
  /** Replaces the trusted CAs (Node's `ca`): for allowlisted receivers behind a private CA, and tests. */
  tls?: Pick<ConnectionOptions, 'ca'>;
}): Agent {
  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  // undici's own connector only does the TLS part, over the socket we opened: SNI and
  // certificate checks use the original hostname, not the address.
  const tlsOverSocket = buildConnector({ ...options.tls, timeout: timeoutMs });
  const connector: buildConnector.connector = (connectOptions, callback) => {
    const port = Number(connectOptions.port) || (connectOptions.protocol === 'https:' ? 443 : 80);
    connectVetted(connectOptions.hostname, port, options.allowlist, timeoutMs).then(
      (socket) => {
        if (connectOptions.protocol !== 'https:') return callback(null, socket);
        tlsOverSocket({ ...connectOptions, httpSocket: socket }, (...result) => {
          if (result[0]) socket.destroy();
          callback(...result);
        });
      },
      (error: Error) => callback(error, null),
    );
  };
  return new Agent({ connect: connector });
}
