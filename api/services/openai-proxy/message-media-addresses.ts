import { refusedOnSight, type Allowlist } from '../../../core/outbound-guard.ts';

// Media parts of chat messages name URLs the upstream fetches: OpenAI's `image_url`, and on
// self-hosted OpenAI-compatible servers (vLLM) `video_url` and `audio_url` as well. Such a
// server runs inside the operator's network, so a literal internal address there would have it
// fetch from its neighbours (cloud metadata, the store, Temporal) for the caller. As for a video
// submission's reference media (api/services/submission-addresses.ts), a literal address (or a
// localhost name) the allowlist does not admit is a 400 naming the part; a name is passed on as
// given, for the upstream resolves it; data: URLs carry their media and name no host.

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The URL a content part names (`{type: T, T: {url}}`, or `T: "<url>"` as some clients send
 * an image), or undefined. */
function partUrl(part: Json): string | undefined {
  if (typeof part.type !== 'string' || part.type === 'text' || !Object.hasOwn(part, part.type)) return undefined;
  const value = part[part.type];
  const url = typeof value === 'string' ? value : isObject(value) ? value.url : undefined;
  return typeof url === 'string' ? url : undefined;
}

/** The first media URL in `messages` on a literal internal address, as a 400's message and
 * field; null when there is none. */
export function internalMediaAddressIn(messages: readonly unknown[], allowlist: Allowlist): { message: string; param: string } | null {
  for (const [messageIndex, message] of messages.entries()) {
    if (!isObject(message) || !Array.isArray(message.content)) continue;
    for (const [partIndex, part] of message.content.entries()) {
      if (!isObject(part)) continue;
      const raw = partUrl(part);
      if (raw === undefined) continue;
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        continue;
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') continue;
      const refused = refusedOnSight(url, allowlist);
      if (!refused) continue;
      const param = `messages.${messageIndex}.content.${partIndex}.${part.type as string}.url`;
      return { message: `${param}: ${refused.whatItIs}, which the gateway does not send a model provider to; give an address on the public internet, or the media inline as a data: URL.`, param };
    }
  }
  return null;
}
