import { previousSecretsInGrace } from '../../../store/accounts.ts';
import { html, type Html } from '../html.ts';
import { formatTime, maskedSecret } from './format.ts';
import { csrfField, layout, type Notice, type PageFrame } from './layout.ts';

// The webhook signing secret: masked until asked for (a POST, so it never sits in a GET URL,
// history or cache), and rotatable with a grace period during which deliveries carry
// signatures from both the new and the previous secret.

type AccountFrame = Extract<PageFrame, { area: 'account' }>;

function graceLabel(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400} ${seconds === 86_400 ? 'day' : 'days'}`;
  if (seconds % 3_600 === 0) return `${seconds / 3_600} ${seconds === 3_600 ? 'hour' : 'hours'}`;
  return `${seconds} seconds`;
}

export function webhooksPage(frame: AccountFrame, input: { revealed: boolean; graceSeconds: number; notice?: Notice | null }): Html {
  const { account } = frame;
  const inGrace = previousSecretsInGrace(account);
  const secret = input.revealed
    ? html`<div class="secret-box">
    <input id="webhook-secret" type="text" readonly value="${account.webhook_secret}" aria-label="Webhook signing secret" data-select-on-focus data-testid="webhook-secret">
    <button type="button" data-copy="#webhook-secret" hidden>Copy</button>
  </div>`
    : html`<form method="post" action="/console/webhooks/reveal" class="secret-box">
    ${csrfField(frame.csrfToken)}
    <span class="mono" data-testid="masked-secret">${maskedSecret(account.webhook_secret)}</span>
    <button type="submit" class="secondary">Show secret</button>
  </form>`;
  const previous = inGrace.length
    ? html`${inGrace.map(
        (earlier) =>
          html`<p class="alert warning">Rotation in progress: deliveries are also signed with the earlier secret <span class="mono">${maskedSecret(earlier.secret)}</span> until ${formatTime(earlier.expires_at)}. Switch your receiver to the new secret before then.</p>`,
      )}
  <form method="post" action="/console/webhooks/retire-earlier">
    ${csrfField(frame.csrfToken)}
    <p>If an earlier secret leaked, stop it now instead: receivers still on it stop verifying at once.</p>
    <div class="actions"><button type="submit" class="secondary">Stop earlier secrets now</button></div>
  </form>`
    : '';
  return layout(frame, {
    title: 'Webhooks',
    notice: input.notice,
    body: html`<h1>Webhooks</h1>
<div class="card">
  <h2>Signing secret</h2>
  <p>Task webhooks (sent to the <code>metadata.callback_url</code> of a video task) are signed per <a href="https://www.standardwebhooks.com" rel="noopener noreferrer">Standard Webhooks</a>: verify <code>webhook-signature</code> over <code>webhook-id</code>, <code>webhook-timestamp</code> and the raw body with this secret.</p>
  ${secret}
  ${previous}
</div>
<div class="card">
  <h2>Rotate the secret</h2>
  <p>Rotating creates a new secret at once. For ${graceLabel(input.graceSeconds)} afterwards, every delivery carries two signatures, one from each secret, so receivers keep verifying while you update them. After that only the new secret signs.</p>
  <form method="post" action="/console/webhooks/rotate">
    ${csrfField(frame.csrfToken)}
    <div class="actions"><button type="submit" class="secondary">Rotate secret</button></div>
  </form>
</div>`,
  });
}
