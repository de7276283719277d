import type { AccountWithAvailable } from '../../../store/accounts.ts';
import { html, type Html } from '../html.ts';
import { NAME_MAX_CHARACTERS } from '../forms.ts';
import { formError, textField, type FormState } from './fields.ts';
import { formatTime, formatUsd } from './format.ts';
import { csrfField, layout, type Notice } from './layout.ts';
import { moneyShown } from './money-shown.ts';

// The operator's list of accounts, a page at a time, with the form that creates one (and,
// optionally, its holder's console sign-in).

export function operatorAccountsPage(input: {
  csrfToken: string;
  accounts: AccountWithAvailable[];
  page: number;
  hasNextPage: boolean;
  state?: FormState;
  notice?: Notice | null;
}): Html {
  const state = input.state ?? {};
  const rows = input.accounts.map((account) => {
    const money = moneyShown(account);
    return html`<tr data-account-id="${account._id}">
    <td><a href="/console/operator/accounts/${account._id}">${account.name}</a></td>
    <td class="mono">${account._id}</td>
    <td class="num">${formatUsd(money.availableMicros)}</td>
    <td class="num">${formatUsd(money.heldMicros)}</td>
    <td class="num">${formatUsd(money.spentMicros)}</td>
    <td>${formatTime(account.created_at)}</td>
  </tr>`;
  });
  const pager = html`<div class="actions">${input.page > 1 ? html`<a class="button secondary" href="/console/operator?page=${input.page - 1}">← Newer</a>` : ''}${
    input.hasNextPage ? html`<a class="button secondary" href="/console/operator?page=${input.page + 1}">Older →</a>` : ''
  }</div>`;
  return layout(
    { area: 'operator', csrfToken: input.csrfToken },
    {
      title: 'Accounts',
      notice: input.notice,
      body: html`<h1>Accounts</h1>
<div class="card">${
        input.accounts.length === 0
          ? html`<p class="muted">No accounts${input.page > 1 ? ' on this page' : ' yet'}.</p>`
          : html`<div class="table-wrap"><table data-testid="accounts">
  <thead><tr><th>Name</th><th>Id</th><th class="num">Balance</th><th class="num">Held</th><th class="num">Spent</th><th>Created</th></tr></thead>
  <tbody>${rows}</tbody>
</table></div>`
      }${pager}</div>
<div class="card" id="create">
  <h2>Create an account</h2>
  ${formError(state)}
  <form method="post" action="/console/operator/accounts">
    ${csrfField(input.csrfToken)}
    ${textField(state, { name: 'name', label: 'Name', required: true, autocomplete: 'off', maxlength: NAME_MAX_CHARACTERS })}
    ${textField(state, { name: 'opening_balance_usd', label: 'Opening balance (USD)', placeholder: '0', inputmode: 'decimal', autocomplete: 'off' })}
    ${textField(state, { name: 'console_email', label: 'Console sign-in email (optional)', type: 'email', autocomplete: 'off' })}
    ${textField(state, { name: 'console_password', label: 'Console password (12+ characters; give it to the holder safely)', type: 'password', autocomplete: 'new-password' })}
    <div class="actions"><button type="submit">Create account</button></div>
  </form>
</div>`,
    },
  );
}
