import { html, type Html } from '../html.ts';
import { formError, textField, type FormState } from './fields.ts';
import { csrfField, layout, type Notice } from './layout.ts';

// The two doors into the console: account holders with the email and password an operator set
// up, operators with the admin token.

/** Where the form sends its signer after signing in, when not to the area's home. */
function returnField(next: string | null | undefined): Html {
  return next ? html`<input type="hidden" name="next" value="${next}">` : html``;
}

export function accountSignInPage(input: { csrfToken: string; state?: FormState; notice?: Notice | null; next?: string | null }): Html {
  const state = input.state ?? {};
  return layout(
    { area: 'public' },
    {
      title: 'Sign in',
      notice: input.notice,
      body: html`<div class="card narrow">
  <h1>Sign in</h1>
  ${formError(state)}
  <form method="post" action="/console/sign-in">
    ${csrfField(input.csrfToken)}
    ${returnField(input.next)}
    ${textField(state, { name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true })}
    ${textField(state, { name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true })}
    <div class="actions"><button type="submit">Sign in</button></div>
  </form>
  <p class="muted">Your operator sets up console sign-ins. Operators: <a href="/console/operator/sign-in">sign in with the admin token</a>.</p>
</div>`,
    },
  );
}

export function operatorSignInPage(input: { csrfToken: string; state?: FormState; notice?: Notice | null; disabled: boolean; next?: string | null }): Html {
  const state = input.state ?? {};
  const form = input.disabled
    ? html`<div class="alert warning">Operator sign-in is disabled: the api has no ADMIN_TOKEN.</div>`
    : html`<form method="post" action="/console/operator/sign-in">
    ${csrfField(input.csrfToken)}
    ${returnField(input.next)}
    ${textField(state, { name: 'admin_token', label: 'Admin token', type: 'password', autocomplete: 'off', required: true })}
    <div class="actions"><button type="submit">Sign in</button></div>
  </form>`;
  return layout(
    { area: 'public' },
    {
      title: 'Operator sign in',
      notice: input.notice,
      body: html`<div class="card narrow">
  <h1>Operator sign in</h1>
  ${formError(state)}
  ${form}
  <p class="muted">Account holders: <a href="/console/sign-in">sign in with email and password</a>.</p>
</div>`,
    },
  );
}

/** Where a typed or bookmarked /console/sign-out lands: signing out is a form (a link could be
 * followed by anyone's page), so this page offers it. */
export function signOutPage(input: { csrfToken: string; home: string }): Html {
  return layout(
    { area: 'public' },
    {
      title: 'Sign out',
      body: html`<div class="card narrow">
  <h1>Sign out?</h1>
  <form method="post" action="/console/sign-out">
    ${csrfField(input.csrfToken)}
    <div class="actions"><button type="submit">Sign out</button> <a class="button secondary" href="${input.home}">Stay signed in</a></div>
  </form>
</div>`,
    },
  );
}

export const SESSION_EXPIRED_NOTICE: Notice = { kind: 'warning', text: 'Your session expired. Sign in again.' };
export const SIGNED_OUT_NOTICE: Notice = { kind: 'success', text: 'You are signed out.' };
