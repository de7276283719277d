import { z } from 'zod';

// Caller-supplied addresses (callback_url, reference media) as one plain grammar that every
// parser involved agrees on. The gateway parses URLs the WHATWG way (`new URL`), callers'
// tools and the OpenAPI document's readers the RFC 3986 way, and the two differ at the edges:
// WHATWG accepts `http://a/b c` and `%zz`, refuses `http://1.2.3.999` and `http://xn--a`; RFC
// 3986 the other way round. Inside this grammar both accept everything and the server checks
// the same pattern the document shows, so no address is valid to one reader and not the other
// (but for a label starting `xn--` that is not valid punycode, below).
//
// A host is a DNS name of two labels or more whose last label starts with a letter (so it is
// never read as an IPv4 number), its labels starting and ending with a letter or digit with hyphens between, runs of
// them included (`deploy-preview-42--site.netlify.app`, `green---svc.a.run.app`, the punycode
// `xn--80ak6aa92e.com`); or a dotted IPv4 address. A label starting `xn--` must also be valid
// punycode, which only the WHATWG parse (z.url) checks: the pattern cannot. IPv6 literals and
// non-ASCII names are not accepted; send the punycode name instead. Port 0 is no port to call.

const octet = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const label = '[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
const lastLabel = '[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
// A name of one label is completed by each resolver with its own search domains (`metadata` is
// metadata.google.internal on GCE, `redis` a service of the fetcher's own Kubernetes namespace),
// so it names no host the gateway can judge (core/host-names.ts): only `localhost` is taken.
const localhost = '[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]';
const host = `(?:(?:${label}\\.)+${lastLabel}|${localhost}|(?:${octet}\\.){3}${octet})`;
// Leading zeros allowed (`:080` is port 80 to every parser), a port of 0 not.
const port = '0*(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
const pchar = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})";
const tail = `(?:/(?:${pchar}|/)*)?(?:\\?(?:${pchar}|[/?])*)?(?:#(?:${pchar}|[/?])*)?`;

export const HTTP_URL_PATTERN = new RegExp(`^[Hh][Tt][Tt][Pp][Ss]?://${host}(?::${port})?${tail}$`);

/** `user:password@` before the host: named for what it is, not as a malformed host. */
const CREDENTIALS = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*@/;

export const httpUrl = z
  .url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' })
  .refine((value) => !CREDENTIALS.test(value), 'must not contain credentials (user:password@); put a secret in the path or query instead')
  .regex(HTTP_URL_PATTERN, 'must be an absolute http(s) URL with a DNS name or IPv4 address (a name of more than one label, or localhost; no IPv6, no port 0), and percent-encoded special characters');
