import type { AccountWithAvailable } from '../../../store/accounts.ts';
import { moneyShown } from './money-shown.ts';
import { html, type Html } from '../html.ts';
import { formatUsd } from './format.ts';

// The frame around every console page: header with navigation, the account's balance (on every
// page of an account holder) and the sign-out form, then the page's own content.

export type AccountSection = 'keys' | 'usage' | 'webhooks' | 'password';

export type PageFrame =
  | { area: 'public' }
  | {
      area: 'account';
      csrfToken: string;
      account: AccountWithAvailable;
      section?: AccountSection;
      /** The price of the cheapest video task the catalog offers: below it, every page says so. */
      cheapestVideoMicros?: number;
    }
  | { area: 'operator'; csrfToken: string };

export interface Notice {
  kind: 'success' | 'warning' | 'error';
  text: string;
}

const ACCOUNT_NAVIGATION: Array<[AccountSection, string, string]> = [
  ['keys', 'API keys', '/console/keys'],
  ['usage', 'Usage & spend', '/console/usage'],
  ['webhooks', 'Webhooks', '/console/webhooks'],
  ['password', 'Password', '/console/password'],
];

export function csrfField(token: string): Html {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

function signOutForm(csrfToken: string): Html {
  return html`<form method="post" action="/console/sign-out">${csrfField(csrfToken)}<button type="submit">Sign out</button></form>`;
}

function header(frame: PageFrame): Html {
  if (frame.area === 'public') return html`<header class="top"><a class="brand" href="/console">Framegate console</a></header>`;
  if (frame.area === 'operator') {
    return html`<header class="top">
  <a class="brand" href="/console/operator">Framegate console · operator</a>
  <nav aria-label="Sections"><a href="/console/operator" aria-current="page">Accounts</a></nav>
  ${signOutForm(frame.csrfToken)}
</header>`;
  }
  const { account, section } = frame;
  const money = moneyShown(account);
  return html`<header class="top">
  <a class="brand" href="/console/keys">Framegate console</a>
  <nav aria-label="Sections">${ACCOUNT_NAVIGATION.map(
    ([name, label, href]) => html`<a href="${href}"${section === name ? html` aria-current="page"` : ''}>${label}</a>`,
  )}</nav>
  <span class="balance" data-testid="balance">${account.name} · balance <strong>${formatUsd(money.availableMicros)}</strong>${
    money.heldMicros > 0 ? html` (held ${formatUsd(money.heldMicros)} for video tasks and calls in flight)` : ''
  }</span>
  ${signOutForm(frame.csrfToken)}
</header>`;
}

/** A holder whose balance no longer covers the cheapest video task learns it on every page,
 * not only from the API's 403s (console review). */
function lowBalanceNotice(frame: PageFrame): Html {
  if (frame.area !== 'account' || frame.cheapestVideoMicros === undefined) return html``;
  const available = frame.account.available_micros;
  if (available >= frame.cheapestVideoMicros) return html``;
  return noticeBox({
    kind: 'warning',
    text: `The balance (${formatUsd(available)}) is below the price of the cheapest video task (${formatUsd(frame.cheapestVideoMicros)}): video submissions are refused with 403 until credits are added, and chat and image calls once it no longer covers their worst case.`,
  });
}

export function noticeBox(notice: Notice | null | undefined): Html {
  return notice ? html`<div class="alert ${notice.kind}" role="${notice.kind === 'error' ? 'alert' : 'status'}">${notice.text}</div>` : html``;
}

export function layout(frame: PageFrame, page: { title: string; body: Html; notice?: Notice | null }): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · Framegate console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/assets/console.css">
<script src="/console/assets/console.js" defer></script>
</head>
<body>
${header(frame)}
<main>
${lowBalanceNotice(frame)}
${noticeBox(page.notice)}
${page.body}
</main>
</body>
</html>
`;
}
