import type { EffectiveLimits } from '../../services/rate-limits/limit-settings.ts';
import type { RateLimitOverrides } from '../../services/rate-limits/rate-limiter.ts';
import { html, type Html } from '../html.ts';
import { formError, textField, type FormState } from './fields.ts';
import { formatCount } from './format.ts';
import { csrfField } from './layout.ts';

// Per-minute limits in the console: what applies to a key (read-only for holders, who arrange
// higher limits with the operator), the two override fields the operator's forms share, and
// the account's override form. An empty field clears the override.

export type Overrides = RateLimitOverrides | null | undefined;

/** What an empty field falls back to, and where that figure comes from ("default", "account"). */
export interface Fallback {
  limits: EffectiveLimits;
  requestsFrom: string;
  tokensFrom: string;
}

export function limitsLabel(limits: EffectiveLimits): Html {
  return html`<span class="nowrap">${formatCount(limits.requestsPerMinute)} req/min</span> · <span class="nowrap">${formatCount(limits.tokensPerMinute)} tok/min</span>`;
}

function overrideValues(overrides: Overrides): Record<string, string> {
  return {
    requests_per_minute: overrides?.requests_per_minute ? String(overrides.requests_per_minute) : '',
    tokens_per_minute: overrides?.tokens_per_minute ? String(overrides.tokens_per_minute) : '',
  };
}

/** The two fields, filled with the saved overrides (or what was typed, when refused). */
export function limitFields(state: FormState, overrides: Overrides, fallback: Fallback): Html {
  const shown: FormState = { values: state.values ?? overrideValues(overrides), ...(state.errors ? { errors: state.errors } : {}) };
  // Digits only in the placeholder: a person copies what they see, and "3,000" is refused.
  return html`${textField(shown, { name: 'requests_per_minute', label: 'Requests per minute', placeholder: `${fallback.limits.requestsPerMinute} (${fallback.requestsFrom})`, inputmode: 'numeric', autocomplete: 'off' })}
${textField(shown, { name: 'tokens_per_minute', label: 'Chat tokens per minute', placeholder: `${fallback.limits.tokensPerMinute} (${fallback.tokensFrom})`, inputmode: 'numeric', autocomplete: 'off' })}`;
}

/** The account's overrides; empty fields fall back to the configured defaults. */
export function accountLimitsCard(input: { accountId: string; csrfToken: string; overrides: Overrides; defaults: EffectiveLimits; state?: FormState }): Html {
  const state = input.state ?? {};
  return html`<div class="card" id="rate-limits">
  <h2>Rate limits</h2>
  <p class="muted">For every key of this account, unless a key has its own (set it from the key's row below). Empty means the default (${limitsLabel(input.defaults)}).</p>
  ${formError(state)}
  <form method="post" action="/console/operator/accounts/${input.accountId}/rate-limits" class="inline-form">
    ${csrfField(input.csrfToken)}
    ${limitFields(state, input.overrides, { limits: input.defaults, requestsFrom: 'default', tokensFrom: 'default' })}
    <div class="submit"><button type="submit" class="secondary">Save limits</button></div>
  </form>
</div>`;
}
