import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import type { EffectiveLimits } from '../../services/rate-limits/limit-settings.ts';
import { html, type Html } from '../html.ts';
import { formError, textField, type FormState } from './fields.ts';
import { formatCount } from './format.ts';
import { csrfField } from './layout.ts';

// Per-minute limits in the console: what applies to a key (read-only for holders, who arrange
// higher limits with the operator), and the operator's override forms for an account and for
// each of its keys. An empty field clears the override.

type Overrides = { requests_per_minute?: number | null; tokens_per_minute?: number | null } | null | undefined;

export function limitsLabel(limits: EffectiveLimits): Html {
  return html`<span class="nowrap">${formatCount(limits.requestsPerMinute)} req/min</span> · <span class="nowrap">${formatCount(limits.tokensPerMinute)} tok/min</span>`;
}

function overrideValues(overrides: Overrides): Record<string, string> {
  return {
    requests_per_minute: overrides?.requests_per_minute ? String(overrides.requests_per_minute) : '',
    tokens_per_minute: overrides?.tokens_per_minute ? String(overrides.tokens_per_minute) : '',
  };
}

function limitFields(state: FormState, overrides: Overrides, fallback: EffectiveLimits, idPrefix: string): Html {
  const shown: FormState = { values: state.values ?? overrideValues(overrides), ...(state.errors ? { errors: state.errors } : {}) };
  return html`${textField(shown, { name: 'requests_per_minute', id: `${idPrefix}-rpm`, label: 'Requests per minute', placeholder: `${fallback.requestsPerMinute} (default)`, autocomplete: 'off' })}
${textField(shown, { name: 'tokens_per_minute', id: `${idPrefix}-tpm`, label: 'Chat tokens per minute', placeholder: `${fallback.tokensPerMinute} (default)`, autocomplete: 'off' })}`;
}

/** The account's overrides; empty fields fall back to the configured defaults. */
export function accountLimitsCard(input: { accountId: string; csrfToken: string; overrides: Overrides; defaults: EffectiveLimits; state?: FormState }): Html {
  const state = input.state ?? {};
  return html`<div class="card" id="rate-limits">
  <h2>Rate limits</h2>
  <p class="muted">For every key of this account, unless a key has its own. Empty means the default (${limitsLabel(input.defaults)}).</p>
  ${formError(state)}
  <form method="post" action="/console/operator/accounts/${input.accountId}/rate-limits" class="inline-form">
    ${csrfField(input.csrfToken)}
    ${limitFields(state, input.overrides, input.defaults, 'account')}
    <div class="submit"><button type="submit" class="secondary">Save limits</button></div>
  </form>
</div>`;
}

/** A key's own overrides, folded away until opened (works without JavaScript). */
export function keyLimitsForm(input: { accountId: string; csrfToken: string; key: ApiKeyDocument; accountLimits: EffectiveLimits; state?: FormState }): Html {
  const state = input.state ?? {};
  return html`<details${state.errors ? html` open` : ''}><summary>Set key limits</summary>
  ${formError(state)}
  <form method="post" action="/console/operator/accounts/${input.accountId}/keys/${input.key._id}/rate-limits" class="inline-form">
    ${csrfField(input.csrfToken)}
    ${limitFields(state, input.key.rate_limits, input.accountLimits, input.key._id)}
    <div class="submit"><button type="submit" class="secondary">Save</button></div>
  </form>
</details>`;
}
