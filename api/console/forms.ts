import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { consolePageOrNull } from './return-to.ts';
import { hasOnlyNameCharacters } from '../../core/characters.ts';
import { MAX_USD_AMOUNT, MICROS_PER_USD, usdTextToMicros } from '../../core/money.ts';
import { consoleEmail, consolePassword } from '../services/account-onboarding.ts';

// Every console form body and query is parsed with zod here. A refusal does not become a bare
// 400: the page is rendered again with the message next to the field and what was typed kept
// (passwords and the CSRF token excepted).

export type FormErrors = Record<string, string>;
export type FormValues = Record<string, string>;

export type FormResult<T> = { ok: true; data: T } | { ok: false; errors: FormErrors; values: FormValues };

const NEVER_ECHOED = new Set(['_csrf', 'password', 'console_password', 'admin_token', 'current_password', 'new_password', 'repeat_password']);

function typedValues(body: unknown): FormValues {
  const values: FormValues = {};
  if (body && typeof body === 'object') {
    for (const [name, value] of Object.entries(body)) {
      if (typeof value === 'string' && !NEVER_ECHOED.has(name)) values[name] = value;
    }
  }
  return values;
}

/** The fields the pages send hidden (a form's one-time reference): their errors are the form's. */
const HIDDEN_FIELDS = new Set(['reference']);

export function parseForm<Schema extends z.ZodType>(schema: Schema, body: unknown): FormResult<z.output<Schema>> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return { ok: true, data: parsed.data };
  const errors: FormErrors = {};
  for (const issue of parsed.error.issues) {
    const field = String(issue.path[0] ?? 'form');
    // A hidden field has nowhere to show its error: the form does.
    errors[HIDDEN_FIELDS.has(field) ? 'form' : field] ??= issue.message;
  }
  return { ok: false, errors, values: typedValues(body) };
}

/** A field left empty in a form arrives as ''; that means "not given". */
const blankToUndefined = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);

/** A checkbox group arrives as nothing, one string or an array of strings. */
const toList = (value: unknown) => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

function usdText(options: { positive: boolean }) {
  return z
    .string()
    .transform((text, context) => {
      const micros = usdTextToMicros(text);
      if (micros === null) {
        context.addIssue({ code: 'custom', message: 'Enter an amount in USD such as 25 or 12.50 (at most 6 decimals).' });
        return z.NEVER;
      }
      if (options.positive && micros === 0) {
        context.addIssue({ code: 'custom', message: 'Enter an amount greater than 0.' });
        return z.NEVER;
      }
      // The admin API's limit on one movement, so both ways in take the same amounts.
      if (micros > MAX_USD_AMOUNT * MICROS_PER_USD) {
        context.addIssue({ code: 'custom', message: `Enter at most ${MAX_USD_AMOUNT.toLocaleString('en-US')} USD.` });
        return z.NEVER;
      }
      return micros;
    });
}

/** The page to return to after signing in (return-to.ts); anything else is no page. */
const returnTo = z.unknown().optional().transform((value) => consolePageOrNull(value));

export const signInForm = z.object({
  email: z.string().trim().min(1, 'Enter your email.').max(254),
  password: z.string().min(1, 'Enter your password.').max(256),
  next: returnTo,
});

export const operatorSignInForm = z.object({ admin_token: z.string().min(1, 'Enter the admin token.').max(1024), next: returnTo });

const NAME_CHARACTERS_HINT = 'Use a name on one line, without control characters or direction overrides.';
/** The longest key or account name; the pages' name fields stop the typing there too. */
export const NAME_MAX_CHARACTERS = 200;
const keyName = z.string().trim().min(1, 'Give the key a name.').max(NAME_MAX_CHARACTERS, `Keep the name to ${NAME_MAX_CHARACTERS} characters at most.`).refine(hasOnlyNameCharacters, NAME_CHARACTERS_HINT);

function modelList(modelIds: readonly string[]) {
  const knownModel = z.string().refine((modelId) => modelIds.includes(modelId), 'Choose models from the list.');
  return z.preprocess(toList, z.array(knownModel));
}

export function createKeyForm(modelIds: readonly string[]) {
  return z.object({ name: keyName, models: modelList(modelIds), reference });
}

/** The models a refused form had ticked, to tick them again on the page it comes back on. */
export function tickedModels(body: unknown): string[] {
  const models = (body as Record<string, unknown> | undefined)?.models ?? [];
  return [models].flat().filter((model): model is string => typeof model === 'string');
}

/** A key's models changed: none ticked is every model, as at creation. */
export function keyModelsForm(modelIds: readonly string[]) {
  return z.object({ models: modelList(modelIds) });
}

export const createAccountForm = z
  .object({
    name: z.string().trim().min(1, 'Give the account a name.').max(NAME_MAX_CHARACTERS).refine(hasOnlyNameCharacters, NAME_CHARACTERS_HINT),
    opening_balance_usd: z.preprocess(blankToUndefined, usdText({ positive: false }).optional()),
    console_email: z.preprocess(blankToUndefined, consoleEmail.optional()),
    console_password: z.preprocess(blankToUndefined, consolePassword.optional()),
  })
  .refine((form) => (form.console_email === undefined) === (form.console_password === undefined), {
    message: 'Give both an email and a password for the console sign-in, or neither.',
    path: ['console_password'],
  });

/** A form's one-time id, rendered into it (formReference()): the same form sent twice acts once. */
const reference = z.string({ error: 'Reload the page and try again.' }).regex(/^[A-Za-z0-9_-]{16,64}$/, 'Reload the page and try again.');

/** A fresh one-time id for a form. */
export function formReference(): string {
  return randomBytes(16).toString('base64url');
}

export const addCreditsForm = z.object({
  amount_usd: usdText({ positive: true }),
  // A resubmitted form credits once: its reference names the ledger entry.
  reference,
});

export const signInCredentialsForm = z.object({ console_email: consoleEmail, console_password: consolePassword });

/** A holder's own new password, with the current one. */
export const changePasswordForm = z
  .object({
    current_password: z.string().min(1, 'Enter your current password.').max(256),
    new_password: consolePassword,
    repeat_password: z.string().max(256),
  })
  .refine((form) => form.repeat_password === form.new_password, { message: 'The two new passwords differ.', path: ['repeat_password'] });

/** A query parameter sent twice arrives as an array: one value is meant. */
const single = (message: string) => (issue: { input?: unknown }) => (Array.isArray(issue.input) ? message : undefined);

const utcDay = z.string({ error: single('Give one date.') }).regex(/^\d{4}-\d{2}-\d{2}$/, 'Use a date like 2025-01-31.')
  // A round trip refuses days that do not exist, such as 2025-02-31.
  .refine((day) => { const date = new Date(`${day}T00:00:00Z`); return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(day); }, 'Not a date.');

export const usageQuery = z.object({
  from: z.preprocess(blankToUndefined, utcDay.optional()),
  to: z.preprocess(blankToUndefined, utcDay.optional()),
  key: z.preprocess(blankToUndefined, z.string({ error: single('Choose one key.') }).max(100).optional()),
  // The last task of the page before (Older tasks →).
  tasks_after: z.preprocess(blankToUndefined, z.string({ error: single('Follow one page link.') }).max(100).optional()),
});

/**
 * A query's fields parsed one by one: the valid ones are kept, a refused one is left out with
 * its message. A form's page shows all its fields again; a report keeps what it can use, so one
 * bad day does not throw away the key chosen beside it.
 */
export function parseQueryFields<Shape extends z.ZodRawShape>(schema: z.ZodObject<Shape>, query: unknown): { data: Partial<z.output<z.ZodObject<Shape>>>; errors: FormErrors } {
  const raw = (query ?? {}) as Record<string, unknown>;
  const data: Record<string, unknown> = {};
  const errors: FormErrors = {};
  for (const [field, fieldSchema] of Object.entries(schema.shape)) {
    const parsed = (fieldSchema as z.ZodType).safeParse(raw[field]);
    if (parsed.success) {
      if (parsed.data !== undefined) data[field] = parsed.data;
    } else errors[field] = parsed.error.issues[0]?.message ?? 'Not valid.';
  }
  return { data: data as Partial<z.output<z.ZodObject<Shape>>>, errors };
}

/** A per-minute limit typed in a form: empty clears the override. */
const perMinuteText = z.preprocess(
  blankToUndefined,
  z
    .string()
    .trim()
    .regex(/^\d{1,10}$/, 'Enter a whole number without separators, or leave it empty.')
    .transform(Number)
    .refine((value) => value >= 1 && value <= 1_000_000_000, 'Enter a number from 1 to 1,000,000,000.')
    .optional(),
);

export const rateLimitsForm = z.object({
  requests_per_minute: perMinuteText.transform((value) => value ?? null),
  tokens_per_minute: perMinuteText.transform((value) => value ?? null),
});
