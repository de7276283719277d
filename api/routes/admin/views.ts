import { microsToUsd } from '../../../core/money.ts';
import type { AccountWithAvailable } from '../../../store/accounts.ts';
import type { ApiKeyDocument } from '../../../store/api-keys.ts';

export function toAccountView(account: AccountWithAvailable) {
  return {
    id: account._id,
    name: account.name,
    balance_usd: microsToUsd(account.balance_micros),
    available_usd: microsToUsd(account.available_micros),
    held_usd: microsToUsd(account.held_micros),
    spent_usd: microsToUsd(account.spent_micros),
    webhook_secret: account.webhook_secret,
    created_at: account.created_at.toISOString(),
  };
}

export function toKeyView(key: ApiKeyDocument) {
  return {
    id: key._id,
    name: key.name,
    prefix: key.prefix,
    last4: key.last4,
    models: key.models,
    created_at: key.created_at.toISOString(),
    last_used_at: key.last_used_at?.toISOString() ?? null,
    revoked_at: key.revoked_at?.toISOString() ?? null,
    status: key.revoked_at ? ('revoked' as const) : ('active' as const),
  };
}

export function toKeyDetailView(key: ApiKeyDocument) {
  return {
    ...toKeyView(key),
    account_id: key.account_id,
    rate_limits: { requests_per_minute: key.rate_limits?.requests_per_minute ?? null, tokens_per_minute: key.rate_limits?.tokens_per_minute ?? null },
  };
}
