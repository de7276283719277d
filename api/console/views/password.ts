import { html, type Html } from '../html.ts';
import { formError, textField, type FormState } from './fields.ts';
import { csrfField, layout, type Notice, type PageFrame } from './layout.ts';

// A holder's own password: the current one, then the new one twice. Changing it signs out every
// other browser (their sessions are bound to the old password), not this one.

type AccountFrame = Extract<PageFrame, { area: 'account' }>;

export function passwordPage(frame: AccountFrame, input: { state?: FormState; notice?: Notice | null }): Html {
  const state = input.state ?? {};
  return layout(frame, {
    title: 'Password',
    notice: input.notice ?? null,
    body: html`<h1>Password</h1>
<div class="card">
  <p class="muted">At least 12 characters. Every other browser signed in to this account is signed out; this one stays signed in.</p>
  ${formError(state)}
  <form method="post" action="/console/password">
    ${csrfField(frame.csrfToken)}
    ${textField(state, { name: 'current_password', label: 'Current password', type: 'password', required: true, autocomplete: 'current-password' })}
    ${textField(state, { name: 'new_password', label: 'New password', type: 'password', required: true, autocomplete: 'new-password' })}
    ${textField(state, { name: 'repeat_password', label: 'New password again', type: 'password', required: true, autocomplete: 'new-password' })}
    <div class="actions"><button type="submit">Change password</button></div>
  </form>
</div>`,
  });
}
