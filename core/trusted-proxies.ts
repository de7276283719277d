import { isIP } from 'node:net';

// TRUST_PROXY: which proxies in front of the api may say who the caller is (X-Forwarded-For).
// The console counts failed sign-ins per address; behind a load balancer every visitor would
// otherwise be the balancer, and one visitor's guesses would lock everybody out. Only named
// proxies or a number of hops: trusting every X-Forwarded-For would let a caller pick the
// address it is counted under.

const RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Fastify's `trustProxy`: the proxies' addresses and ranges joined by commas, or for a hop
 * count, a judge that trusts that many hops from the socket (as Fastify does with a number,
 * which its types do not take). */
export type TrustedProxies = string | ((address: string, hop: number) => boolean);

/** Reads TRUST_PROXY; throws an Error whose message says what is wrong. */
export function parseTrustedProxies(value: string): TrustedProxies {
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) {
    const hops = Number(text);
    if (hops < 1 || hops > 10) throw new Error('a number of proxy hops must be from 1 to 10');
    return (_address, hop) => hop < hops;
  }
  const entries = text.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    if (RANGE_NAMES.has(entry)) continue;
    const [address, prefix, ...rest] = entry.split('/');
    const family = isIP(address ?? '');
    // A prefix of 0 is every address: the "trust all" refused below, spelled as a range.
    const prefixOk = prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (family === 6 ? 128 : 32));
    if (family === 0 || !prefixOk || rest.length > 0) {
      throw new Error(
        `'${entry}' is not an address, a range (10.0.0.0/8) or one of loopback, linklocal, uniquelocal; give the proxies in front of the api, or how many there are (1). Trusting every X-Forwarded-For would let callers choose their address.`,
      );
    }
  }
  return entries.join(',');
}
