import { z } from 'zod';
import { usdToMicros } from '../../../core/money.ts';
import { consoleEmail, consolePassword } from '../../services/account-onboarding.ts';

// USD amounts arrive as JSON numbers with at most 6 decimals; they become integer micro-USD
// here, at the edge, and never travel as floats.
function usdAmount(options: { positive: boolean }) {
  return z
    .number()
    .refine((value) => usdToMicros(value) !== null, 'must be a USD amount with at most 6 decimals')
    .refine((value) => (options.positive ? value > 0 : value >= 0), options.positive ? 'must be greater than 0' : 'must not be negative')
    .transform((value) => usdToMicros(value)!);
}

export const accountIdParams = z.object({ id: z.string().min(1) });

export const createAccountBody = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    balance_usd: usdAmount({ positive: false }).optional(),
    /** Optional web console sign-in for the account holder; both or neither. */
    console_email: consoleEmail.optional(),
    console_password: consolePassword.optional(),
  })
  .refine((body) => (body.console_email === undefined) === (body.console_password === undefined), {
    message: 'console_email and console_password go together',
    path: ['console_password'],
  });

export const addCreditsBody = z.strictObject({ amount_usd: usdAmount({ positive: true }) });

export const createKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  models: z.array(z.string().min(1)).min(1).optional(),
});

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

export const accountView = z.object({
  id: z.string(),
  name: z.string(),
  balance_usd: z.number(),
  held_usd: z.number(),
  spent_usd: z.number(),
  webhook_secret: z.string(),
  created_at: z.string(),
});

export const accountWithKeysView = accountView.extend({ keys: z.array(keyView) });

export const createdKeyView = z.object({
  id: z.string(),
  key: z.string(),
  name: z.string(),
  models: z.array(z.string()).nullable(),
  prefix: z.string(),
  last4: z.string(),
  created_at: z.string(),
});
