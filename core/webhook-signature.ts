import { createHmac, randomBytes } from 'node:crypto';

// Standard Webhooks signing (https://www.standardwebhooks.com): the signed content is
// `${webhook-id}.${webhook-timestamp}.${body}`, the key is the base64 part of a `whsec_` secret,
// and the header lists one `v1,<base64>` signature per active secret, space-separated, so a
// receiver keeps verifying while it rotates from the old secret to the new one.

const SECRET_PREFIX = 'whsec_';
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export interface WebhookSignatureInput {
  /** One `whsec_...` secret, or several during a rotation. */
  secret: string | readonly string[];
  webhookId: string;
  /** Unix seconds, as sent in `webhook-timestamp`. */
  timestamp: number;
  /** The exact body that goes on the wire: a re-serialised body would not verify. */
  body: string;
}

export interface WebhookSignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** A new secret: `whsec_` + base64 of 32 random bytes (the spec asks for 24 to 64). */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

// Buffer.from(…, 'base64') skips characters it does not understand, so a mangled secret would
// silently sign with the wrong key; refuse it instead. The prefix is optional, as in the
// reference libraries receivers verify with.
function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (encoded.length === 0 || !STRICT_BASE64.test(encoded)) {
    throw new Error('webhook secret must be "whsec_" followed by base64');
  }
  return Buffer.from(encoded, 'base64');
}

export function signWebhook(input: WebhookSignatureInput): WebhookSignatureHeaders {
  const secrets = typeof input.secret === 'string' ? [input.secret] : input.secret;
  if (secrets.length === 0) throw new Error('signWebhook needs at least one secret');
  if (!Number.isSafeInteger(input.timestamp) || input.timestamp < 0) {
    throw new Error(`webhook timestamp must be whole Unix seconds, got ${input.timestamp}`);
  }
  if (input.webhookId.length === 0) throw new Error('webhook id must not be empty');
  const signedContent = `${input.webhookId}.${input.timestamp}.${input.body}`;
  const signatures = secrets.map((secret) => `v1,${createHmac('sha256', secretKey(secret)).update(signedContent, 'utf8').digest('base64')}`);
  return {
    'webhook-id': input.webhookId,
    'webhook-timestamp': String(input.timestamp),
    'webhook-signature': signatures.join(' '),
  };
}
