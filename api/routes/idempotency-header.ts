import { z } from 'zod';
import { IDEMPOTENCY_KEY_PATTERN } from '../plugins/idempotency.ts';

// The Idempotency-Key request header, for the routes that honour it. api/plugins/idempotency.ts
// checks it (a 400 naming the header); the pattern here is that same check, written into the
// OpenAPI document. Loose: the request's other headers pass through untouched.
export const idempotencyHeaders = z.looseObject({
  'idempotency-key': z
    .string()
    .meta({ pattern: IDEMPOTENCY_KEY_PATTERN.source })
    .optional()
    .describe('Makes a retry safe: the same key and body within 24 hours replay the first answer; another body under the key is a 422, a duplicate while the first runs a 409.'),
});
