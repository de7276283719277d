import { isResolvableName, type NamedHost } from '../../../core/host-names.ts';
import { refusedOnSight, type Allowlist } from '../../../core/outbound-guard.ts';

// Media parts of chat messages name URLs the upstream fetches: OpenAI's `image_url`, and on
// self-hosted OpenAI-compatible servers (vLLM) `video_url`, `audio_url` and `input_image` as
// well. Such a server runs inside the operator's network, so a literal internal address there
// would have it fetch from its neighbours (cloud metadata, the store, Temporal) for the caller.
// As for a video submission's reference media (api/services/submission-addresses.ts), a literal
// address (or a localhost name) the allowlist does not admit is a 400 naming the part; a name
// is handed back to be resolved (core/host-names.ts), off this synchronous pass that every chat
// call makes; data: URLs carry their media and name no host.
//
// Which key of a part a server reads is its own choice (vLLM reads `image_url` beside a `uuid`
// whatever the `type`), so every key of a part but `type` and `text` is looked at: a string, or
// an object's `url`. What is checked is what is sent: a URL is passed on as parsed here (the
// WHATWG way), so a server whose parser reads `http://a\@10.0.0.1/` as another host gets the
// host checked; and an http(s) URL this parser cannot read (an IPv6 zone id, which Python's
// reads) is refused rather than passed on unchecked. A `file:` URL would have the server read
// its own files.

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The scheme of a value as URL parsers read it: past leading controls and spaces, with tabs
 * and newlines inside dropped (`h\ttp:` is `http:` to them). Only the start is looked at, so a
 * data: URL of megabytes costs nothing here. */
function schemeOf(value: string): string | undefined {
  return /^[\x00-\x20]*([a-z][a-z0-9+.-]*):/i.exec(value.slice(0, 64).replace(/[\t\n\r]/g, ''))?.[1]?.toLowerCase();
}

export interface MediaAddressRefusal {
  message: string;
  param: string;
}

/** The refusal of `raw`, the URL at `param`; or the form to pass on instead (as parsed), or
 * null to pass it as it is. A name to resolve is added to `names`. */
function judge(raw: string, param: string, allowlist: Allowlist, names: NamedHost[]): MediaAddressRefusal | { href: string } | null {
  const scheme = schemeOf(raw);
  if (scheme === 'file') return { param, message: `${param}: a file: URL would have the model provider read its own files; give an http(s) URL, or the media inline as a data: URL.` };
  if (scheme !== 'http' && scheme !== 'https') return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { param, message: `${param}: not a URL the gateway can read, and it sends the model provider no address it has not checked; give an absolute http(s) URL, or the media inline as a data: URL.` };
  }
  const refused = refusedOnSight(url, allowlist);
  if (refused) return { param, message: `${param}: ${refused.whatItIs}, which the gateway does not send a model provider to; give an address on the public internet, or the media inline as a data: URL.` };
  if (isResolvableName(url.hostname)) names.push({ hostname: url.hostname, param });
  return url.href === raw ? null : { href: url.href };
}

/** The first media URL in `messages` the gateway does not send an upstream to on sight, as a
 * 400's message and field; null when there is none. URLs whose parsed form differs from the one
 * sent are replaced by it in `messages`. The names of the others are added to `names`, which
 * the caller resolves before the call (HostNameCheck). */
export function internalMediaAddressIn(messages: readonly unknown[], allowlist: Allowlist, names: NamedHost[] = []): MediaAddressRefusal | null {
  for (const [messageIndex, message] of messages.entries()) {
    if (!isObject(message) || !Array.isArray(message.content)) continue;
    for (const [partIndex, part] of message.content.entries()) {
      if (!isObject(part)) continue;
      for (const key of Object.keys(part)) {
        if (key === 'type' || key === 'text') continue;
        const value = part[key];
        const at = `messages.${messageIndex}.content.${partIndex}.${key}`;
        if (typeof value === 'string') {
          const verdict = judge(value, at, allowlist, names);
          if (verdict && 'href' in verdict) part[key] = verdict.href;
          else if (verdict) return verdict;
        } else if (isObject(value) && typeof value.url === 'string') {
          const verdict = judge(value.url, `${at}.url`, allowlist, names);
          if (verdict && 'href' in verdict) value.url = verdict.href;
          else if (verdict) return verdict;
        }
      }
    }
  }
  return null;
}
