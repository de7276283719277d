import { z } from 'zod';
import { listAfter, listAnswer, listLimit } from '../list-query.ts';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import { MAX_USD_AMOUNT, usdToMicros } from '../../../core/money.ts';
import { atMostCharacters, nameText, WHITESPACE_CLASS } from '../../../core/characters.ts';
import { consoleEmail, consolePassword } from '../../services/account-onboarding.ts';

// USD amounts arrive as JSON numbers with at most 6 decimals; they become integer micro-USD
// here, at the edge, and never travel as floats.
function usdAmount(options: { positive: boolean }) {
  const number = z.number({ error: 'must be a number of USD, like 12.5' });
  const signed = options.positive ? number.positive('must be greater than 0') : number.min(0, 'must not be negative');
  return signed
    .max(MAX_USD_AMOUNT, `must be at most ${MAX_USD_AMOUNT}`)
    .refine((value) => usdToMicros(value) !== null, 'must be a USD amount with at most 6 decimals')
    .meta({ multipleOf: 0.000001 })
    .transform((value) => usdToMicros(value)!);
}

export const accountIdParams = z.object({ id: atMostCharacters(z.string().min(1), 100, 'is longer than 100 characters') });

// The console's address rule (trimmed, lower-cased, an email of at most 254 characters), spelled
// as a pattern and a length on the text as sent, so the OpenAPI document states the whole rule.
const spaces = `[${WHITESPACE_CLASS}]*`;
const emailAsSent = new RegExp(`^${spaces}${z.regexes.email.source.replace(/^\^|\$$/g, '')}${spaces}$`);
const adminConsoleEmail = z.string().regex(emailAsSent, 'must be an email address').max(254, 'must be at most 254 characters').pipe(consoleEmail);

// balance_usd and a key's models take null as left out, as /v1's bodies do (clients serialising
// a missing value as null): not a 400 in zod's words ("expected number, received null"). The
// sign-in pair stays either sent or left out: the document's dependentRequired counts a null as
// sent.
export const createAccountBody = z
  .strictObject({
    name: nameText(200),
    balance_usd: usdAmount({ positive: false }).nullish(),
    /** Optional web console sign-in for the account holder; both or neither. */
    console_email: adminConsoleEmail.optional(),
    console_password: consolePassword.optional(),
  })
  .refine((body) => (body.console_email === undefined) === (body.console_password === undefined), {
    message: 'console_email and console_password go together',
    path: ['console_password'],
  })
  // The refinement above, as the OpenAPI document can say it.
  .meta({ dependentRequired: { console_email: ['console_password'], console_password: ['console_email'] }, examples: [{ name: 'Acme', balance_usd: 25 }] });

export const addCreditsBody = z.strictObject({ amount_usd: usdAmount({ positive: true }) }).meta({ examples: [{ amount_usd: 10 }] });

export const deductCreditsBody = z
  .strictObject({ amount_usd: usdAmount({ positive: true }).describe('Taken from the free balance (not from money held for calls in flight); not counted as spending.') })
  .meta({ examples: [{ amount_usd: 5 }] });

export const createKeyBody = z.strictObject({
  name: nameText(200),
  models: z.array(z.string().min(1)).min(1, 'must list at least one model, or be left out for every model').nullish(),
});

/** The body as the route documents it: `models` lists the catalog's ids. The route itself
 * refuses unknown ids, naming all of them in one message. */
export function createKeyBodyFor(catalog: Catalog) {
  const ids = catalog.all().map((model) => model.id);
  return createKeyBody
    .extend({
      models: createKeyBody.shape.models.meta({ items: { type: 'string', enum: ids }, description: 'The models the key may use; all when omitted.' }),
    })
    .meta({ examples: [{ name: 'production' }] });
}

/** PUT /admin/keys/{id}/models. */
export function keyModelsBodyFor(catalog: Catalog) {
  const ids = catalog.all().map((model) => model.id);
  return z
    .strictObject({
      models: z
        .array(z.string().min(1))
        .min(1, 'must list at least one model, or be null for every model')
        .nullable()
        .meta({ items: { type: 'string', enum: ids } })
        .describe('The models the key may use from now on; null for every model.'),
    })
    .meta({ examples: [{ models: [ids[0] ?? 'seedance-2.0'] }, { models: null }] });
}

/** The ids in `models` that are not in the catalog, refused in one message naming them all. */
export function unknownModels(catalog: Catalog, models: string[] | null): GatewayError | undefined {
  const unknown = models?.filter((modelId) => !catalog.find(modelId)) ?? [];
  return unknown.length > 0 ? new GatewayError('invalid_request', `Unknown model ids in 'models': ${unknown.join(', ')}.`, 'models') : undefined;
}

export const keyView = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  last4: z.string(),
  models: z.array(z.string()).nullable(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
  status: z.enum(['active', 'revoked']),
});

export const keyDetailView = keyView.extend({
  account_id: z.string(),
  rate_limits: z
    .object({ requests_per_minute: z.number().int().nullable(), tokens_per_minute: z.number().int().nullable() })
    .describe('The key’s own per-minute limits; null fields use the account’s (PUT /admin/keys/{id}/rate-limits).'),
});

export const accountView = z.object({
  id: z.string(),
  name: z.string(),
  balance_usd: z.number().describe('The free balance: what no task, call or spend lease holds.'),
  available_usd: z
    .number()
    .describe('What the account can spend now: balance_usd and the part of held_usd that api processes keep leased for its next chat and image calls and have not spent (returned to the balance minutes after the last call). Alert on this, not on balance_usd.'),
  held_usd: z.number().describe('Set aside for video tasks and calls in flight, and for spend leases.'),
  spent_usd: z.number(),
  webhook_secret: z.string(),
  created_at: z.string(),
});

export const accountWithKeysView = accountView.extend({ keys: z.array(keyView) });

// Strict: a misspelt parameter would otherwise list every account without a word.
export const accountListQuery = z.strictObject({
  limit: listLimit('accounts', 50, { emptyIsLeftOut: false }),
  after: listAfter('The last account id of the page before: the page of older accounts that follows it.'),
});

export const accountList = listAnswer(accountView);

export const createdKeyView = z.object({
  id: z.string(),
  key: z.string(),
  name: z.string(),
  models: z.array(z.string()).nullable(),
  prefix: z.string(),
  last4: z.string(),
  created_at: z.string(),
});
