import type { AccountWithLimits } from '../../../store/accounts.ts';
import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import type { TaskDocument } from '../../../store/tasks.ts';
import { ZERO_USAGE, type UsageTotals } from '../../../store/usage-reports.ts';
import { html, type Html } from '../html.ts';
import { formError, textField, type FormState } from './fields.ts';
import { formatCount, formatTime, formatUsd, maskedKey } from './format.ts';
import { keyStatusBadge, modelsLabel } from './keys.ts';
import { KEYS_SHOWN, keysShown, type ShownKeys } from './keys-shown.ts';
import { csrfField, layout, type Notice } from './layout.ts';
import { moneyShown } from './money-shown.ts';
import { tasksPager, tasksTable, type TaskLinks, type TaskPages } from './tasks.ts';
import { accountLimitsCard, limitsLabel } from './limits.ts';
import { effectiveLimits, type EffectiveLimits } from '../../services/rate-limits/limit-settings.ts';

// One account as an operator sees it: money, console sign-ins, keys with their spend, and the
// latest video tasks, each a link into its workflow history in the Temporal Web UI.

export interface OperatorAccountView {
  csrfToken: string;
  account: AccountWithLimits;
  consoleEmails: string[];
  keys: ApiKeyDocument[];
  usageByKey: Map<string, UsageTotals>;
  /** Which run of the keys by spend is listed (from 1; `keys_page` in the query). */
  keysPage: number;
  tasks: TaskDocument[];
  taskPages: TaskPages;
  taskLinks: TaskLinks;
  /** Names this rendering of the credits form, so a resubmission credits once. */
  creditReference: string;
  creditsState?: FormState;
  deductionState?: FormState;
  signInState?: FormState;
  /** The configured per-minute limits, shown where no override applies. */
  defaultLimits: EffectiveLimits;
  limitsState?: FormState;
  notice?: Notice | null;
}

function keysWithSpend(view: OperatorAccountView): Html {
  const { usageByKey, account } = view;
  if (view.keys.length === 0) return html`<p class="muted">No keys.</p>`;
  const shown = keysShown(view.keys, usageByKey, { page: view.keysPage });
  const { keys } = shown;
  return html`<div class="table-wrap"><table data-testid="operator-keys">
  <thead><tr><th>Name</th><th>Key</th><th>Models</th><th>Status</th><th>Limits</th><th>Created</th><th>Last used</th><th class="num">Requests</th><th class="num">Spend</th></tr></thead>
  <tbody>${keys.map((key) => {
    const usage = usageByKey.get(key._id) ?? ZERO_USAGE;
    // A revoked key answers 401 whatever its limits: nothing to change there.
    const change = key.revoked_at
      ? ''
      : html`<br><a href="/console/operator/accounts/${account._id}/keys/${key._id}/rate-limits" aria-label="Change the limits of ${key.name}">Change</a>`;
    const remove = key.revoked_at ? '' : html`<br><a href="/console/operator/accounts/${account._id}/keys/${key._id}/revoke" aria-label="Delete ${key.name}">Delete</a>`;
    const changeModels = key.revoked_at ? '' : html`<br><a href="/console/operator/accounts/${account._id}/keys/${key._id}/rate-limits#models" aria-label="Change the models of ${key.name}">Change</a>`;
    return html`<tr data-key-id="${key._id}">
    <td class="text">${key.name}</td><td class="mono">${maskedKey(key)}</td><td class="text">${modelsLabel(key.models)}${changeModels}</td><td>${keyStatusBadge(key)}${remove}</td>
    <td class="limits" data-testid="key-limits">${limitsLabel(effectiveLimits(key.rate_limits, account.rate_limits, view.defaultLimits))}${change}</td>
    <td>${formatTime(key.created_at)}</td><td>${formatTime(key.last_used_at)}</td>
    <td class="num">${formatCount(usage.requests)}</td><td class="num">${formatUsd(usage.spend_micros)}</td>
  </tr>`;
  })}
</tbody>
</table></div>${keysPager(account._id, shown, view.keys.length)}`;
}

/** Where the listed keys stand among all the account's, and links to the runs beside them. */
function keysPager(accountId: string, shown: ShownKeys, total: number): Html {
  if (shown.pages === 1) return html``;
  const first = (shown.page - 1) * KEYS_SHOWN + 1;
  const href = (page: number) => `/console/operator/accounts/${accountId}?keys_page=${page}#keys`;
  return html`<p class="muted" data-testid="keys-hidden">Keys ${formatCount(first)} to ${formatCount(first + shown.keys.length - 1)} of ${formatCount(total)}, those that spent the most first.</p>
<nav class="actions" aria-label="Pages of keys">${shown.page > 1 ? html`<a class="button secondary" href="${href(shown.page - 1)}" rel="prev">← Keys that spent more</a>` : ''}${
    shown.page < shown.pages ? html`<a class="button secondary" href="${href(shown.page + 1)}" rel="next">Keys that spent less →</a>` : ''
  }</nav>`;
}

export function operatorAccountPage(view: OperatorAccountView): Html {
  const { account, csrfToken } = view;
  const money = moneyShown(account);
  const creditsState = view.creditsState ?? {};
  const deductionState = view.deductionState ?? {};
  const signInState = view.signInState ?? {};
  return layout(
    { area: 'operator', csrfToken },
    {
      title: account.name,
      notice: view.notice,
      body: html`<p><a href="/console/operator">← Accounts</a></p>
<h1>${account.name}</h1>
<dl class="stats">
  <div><dt>Balance</dt><dd data-testid="operator-balance">${formatUsd(money.availableMicros)}</dd></div>
  <div><dt>Held</dt><dd data-testid="operator-held">${formatUsd(money.heldMicros)}</dd></div>
  <div><dt>Spent</dt><dd>${formatUsd(money.spentMicros)}</dd></div>
</dl>
<p class="muted">The balance counts what api processes keep ready for this account's next chat and image calls and have not spent; held is what video tasks and calls in flight set aside.</p>
<div class="card"><dl class="facts">
  <dt>Id</dt><dd class="mono">${account._id}</dd>
  <dt>Created</dt><dd>${formatTime(account.created_at)}</dd>
  <dt>Console sign-ins</dt><dd data-testid="console-emails">${view.consoleEmails.length > 0 ? view.consoleEmails.join(', ') : html`<span class="muted">none</span>`}</dd>
</dl></div>
<div class="card" id="credits">
  <h2>Add credits</h2>
  ${formError(creditsState)}
  <form method="post" action="/console/operator/accounts/${account._id}/credits" class="inline-form">
    ${csrfField(csrfToken)}
    <input type="hidden" name="reference" value="${view.creditReference}">
    ${textField(creditsState, { name: 'amount_usd', label: 'Amount (USD)', required: true, inputmode: 'decimal', autocomplete: 'off' })}
    <div class="submit"><button type="submit">Add credits</button></div>
  </form>
</div>
<div class="card" id="deductions">
  <h2>Take credits back</h2>
  <p class="muted">From the free balance only, for a mistaken credit or a refund paid elsewhere; not counted as spending.</p>
  ${formError(deductionState)}
  <form method="post" action="/console/operator/accounts/${account._id}/deductions" class="inline-form">
    ${csrfField(csrfToken)}
    <input type="hidden" name="reference" value="${view.creditReference}">
    ${textField(deductionState, { name: 'amount_usd', id: 'field-deduction-amount_usd', label: 'Amount to take back (USD)', required: true, inputmode: 'decimal', autocomplete: 'off' })}
    <div class="submit"><button type="submit">Take back</button></div>
  </form>
</div>
<div class="card" id="sign-in">
  <h2>Console sign-in</h2>
  <p class="muted">Adds a sign-in for this account, or sets a new password for one of its emails.</p>
  ${formError(signInState)}
  <form method="post" action="/console/operator/accounts/${account._id}/sign-ins">
    ${csrfField(csrfToken)}
    ${textField(signInState, { name: 'console_email', label: 'Email', type: 'email', required: true, autocomplete: 'off' })}
    ${textField(signInState, { name: 'console_password', label: 'Password (12+ characters)', type: 'password', required: true, autocomplete: 'new-password' })}
    <div class="actions"><button type="submit" class="secondary">Save sign-in</button></div>
  </form>
</div>
${accountLimitsCard({ accountId: account._id, csrfToken, overrides: account.rate_limits, defaults: view.defaultLimits, ...(view.limitsState ? { state: view.limitsState } : {}) })}
<div class="card" id="keys"><h2>Keys and spend (all time)</h2>${keysWithSpend(view)}</div>
<div class="card" id="tasks"><h2>Latest video tasks</h2>${tasksTable(view.tasks, view.taskLinks)}${tasksPager(view.taskPages)}</div>`,
    },
  );
}
