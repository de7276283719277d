import type { AccountWithLimits } from '../../../store/accounts.ts';
import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import { effectiveLimits, type EffectiveLimits } from '../../services/rate-limits/limit-settings.ts';
import { html, type Html } from '../html.ts';
import { formError, type FormState } from './fields.ts';
import { maskedKey } from './format.ts';
import type { CatalogModel } from '../../../core/catalog.ts';
import { modelChoices, modelsLabel } from './keys.ts';
import { csrfField, layout } from './layout.ts';
import { limitFields, limitsLabel } from './limits.ts';

// One key's own limits and models, on a page of its own (linked from its row on the account
// page): a form inside a wide table would sit off-screen on a phone, and this needs no
// JavaScript either.

export interface KeyLimitsView {
  csrfToken: string;
  account: Pick<AccountWithLimits, '_id' | 'name' | 'rate_limits'>;
  key: ApiKeyDocument;
  defaults: EffectiveLimits;
  /** The catalog's models, for the key's models form. */
  models: readonly CatalogModel[];
  state?: FormState;
  /** The models form refused, with what was ticked. */
  modelsState?: { state: FormState; chosen: readonly string[] };
}

export function keyLimitsPage(view: KeyLimitsView): Html {
  const { account, key, csrfToken } = view;
  const state = view.state ?? {};
  const accountHref = `/console/operator/accounts/${account._id}`;
  // An empty field falls back to the account's override, else to the configured default.
  const fallback = {
    limits: effectiveLimits(null, account.rate_limits, view.defaults),
    requestsFrom: account.rate_limits?.requests_per_minute ? 'account' : 'default',
    tokensFrom: account.rate_limits?.tokens_per_minute ? 'account' : 'default',
  };
  return layout(
    { area: 'operator', csrfToken },
    {
      title: `Limits of ${key.name}`,
      body: html`<p><a href="${accountHref}#keys">← ${account.name}</a></p>
<h1>Rate limits of key “${key.name}”</h1>
<div class="card"><dl class="facts">
  <dt>Key</dt><dd class="mono">${maskedKey(key)}</dd>
  <dt>Models</dt><dd>${modelsLabel(key.models)}</dd>
  <dt>Applies now</dt><dd data-testid="key-limits">${limitsLabel(effectiveLimits(key.rate_limits, account.rate_limits, view.defaults))}</dd>
</dl></div>
<div class="card">
  <h2>This key's own limits</h2>
  <p class="muted">They win over the account's. Empty means the account's, or the default where it has none (${limitsLabel(fallback.limits)}).</p>
  ${formError(state)}
  <form method="post" action="${accountHref}/keys/${key._id}/rate-limits">
    ${csrfField(csrfToken)}
    ${limitFields(state, key.rate_limits, fallback)}
    <div class="actions"><button type="submit">Save limits</button><a href="${accountHref}#keys">Cancel</a></div>
  </form>
</div>
${key.revoked_at ? '' : html`<div class="card" id="models">
  <h2>Models</h2>
  <p class="muted">The same key, its callers unchanged: from its next call it may use the models ticked here, and no others.</p>
  ${formError(view.modelsState?.state ?? {})}
  <form method="post" action="${accountHref}/keys/${key._id}/models">
    ${csrfField(csrfToken)}
    ${modelChoices(view.models, view.modelsState?.state ?? {}, view.modelsState?.chosen ?? key.models ?? [])}
    <div class="actions"><button type="submit">Save models</button><a href="${accountHref}#keys">Cancel</a></div>
  </form>
</div>`}`,
    },
  );
}
