import type { CatalogModel } from '../../../core/catalog.ts';
import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import { html, type Html } from '../html.ts';
import { NAME_MAX_CHARACTERS } from '../forms.ts';
import { formError, textField, type FormState } from './fields.ts';
import { formatTime, maskedKey } from './format.ts';
import { csrfField, layout, type Notice, type PageFrame } from './layout.ts';
import { limitsLabel } from './limits.ts';
import type { EffectiveLimits } from '../../services/rate-limits/limit-settings.ts';

// The API keys pages: the list with the creation form, the one-time plaintext, a key's models,
// and the confirmation before a revocation.

type AccountFrame = Extract<PageFrame, { area: 'account' }>;

export function keyStatusBadge(key: ApiKeyDocument): Html {
  return key.revoked_at ? html`<span class="badge revoked">revoked</span>` : html`<span class="badge active">active</span>`;
}

export function modelsLabel(models: string[] | null): string {
  return models ? models.join(', ') : 'all models';
}

function keysTable(keys: ApiKeyDocument[], limitsOf: (key: ApiKeyDocument) => EffectiveLimits): Html {
  if (keys.length === 0) return html`<p class="muted">No keys yet. Create one below.</p>`;
  return html`<div class="table-wrap"><table>
  <thead><tr><th>Name</th><th>Key</th><th>Models</th><th>Limits</th><th>Created</th><th>Last used</th><th>Status</th><th></th></tr></thead>
  <tbody>${keys.map(
    (key) => html`<tr data-key-id="${key._id}">
    <td class="text">${key.name}</td>
    <td class="mono">${maskedKey(key)}</td>
    <td class="text">${modelsLabel(key.models)}</td>
    <td class="limits" data-testid="key-limits">${key.revoked_at ? html`<span class="muted">—</span>` : limitsLabel(limitsOf(key))}</td>
    <td>${formatTime(key.created_at)}</td>
    <td>${formatTime(key.last_used_at)}</td>
    <td>${keyStatusBadge(key)}</td>
    <td><a href="/console/usage?key=${key._id}">Usage</a>${
      key.revoked_at ? '' : html` · <a href="/console/keys/${key._id}/models">Models</a> · <a class="danger-link" href="/console/keys/${key._id}/revoke">Delete</a>`
    }</td>
  </tr>`,
  )}</tbody>
</table></div>`;
}

export function modelChoices(models: readonly CatalogModel[], state: FormState, chosenModels: readonly string[]): Html {
  const chosen = new Set(chosenModels);
  const kinds: Array<[CatalogModel['kind'], string]> = [['video', 'Video'], ['chat', 'Chat'], ['image', 'Images']];
  return html`<fieldset>
  <legend>Models (leave all unticked to allow every model)</legend>
  ${kinds.map(([kind, label]) => {
    const ofKind = models.filter((model) => model.kind === kind);
    return ofKind.length === 0
      ? ''
      : html`<div><span class="muted">${label}:</span> ${ofKind.map(
          (model) => html`<label><input type="checkbox" name="models" value="${model.id}"${chosen.has(model.id) ? html` checked` : ''}> ${model.id}</label>`,
        )}</div>`;
  })}
  ${state.errors?.models ? html`<p class="field-error">${state.errors.models}</p>` : ''}
</fieldset>`;
}

/** Links to the newest keys and to older ones, where there are pages either way. */
function pageLinks(page: KeysPageInput): Html {
  if (page.isFirstPage && !page.olderAfter) return html``;
  return html`<nav class="actions" aria-label="Pages of keys">${page.isFirstPage ? '' : html`<a class="button secondary" href="/console/keys">← Newest keys</a>`}${
    page.olderAfter ? html`<a class="button secondary" href="/console/keys?after=${page.olderAfter}" rel="next">Older keys →</a>` : ''
  }</nav>`;
}

interface KeysPageInput {
  keys: ApiKeyDocument[];
  /** The last key shown, when older keys follow on another page. */
  olderAfter: string | null;
  isFirstPage: boolean;
}

export function keysPage(
  frame: AccountFrame,
  input: KeysPageInput & { limitsOf: (key: ApiKeyDocument) => EffectiveLimits; models: readonly CatalogModel[]; state?: FormState; chosenModels?: string[]; notice?: Notice | null; formReference: string },
): Html {
  const state = input.state ?? {};
  const table = input.keys.length === 0 && !input.isFirstPage ? html`<p class="muted">No older keys.</p>` : keysTable(input.keys, input.limitsOf);
  return layout(frame, {
    title: 'API keys',
    notice: input.notice,
    body: html`<h1>API keys</h1>
<div class="card">${table}${pageLinks(input)}<p class="muted">Limits are per minute. Higher limits are arranged with the operator.</p></div>
<div class="card" id="create">
  <h2>Create a key</h2>
  ${formError(state)}
  <form method="post" action="/console/keys">
    ${csrfField(frame.csrfToken)}
    <input type="hidden" name="reference" value="${input.formReference}">
    ${textField(state, { name: 'name', label: 'Name', required: true, placeholder: 'e.g. production', autocomplete: 'off', maxlength: NAME_MAX_CHARACTERS })}
    ${modelChoices(input.models, state, input.chosenModels ?? [])}
    <div class="actions"><button type="submit">Create key</button></div>
  </form>
  <p class="muted">Treat keys like passwords: keep them in environment variables, out of version control; use separate keys for development and production, and delete a key that may have leaked.</p>
</div>`,
  });
}

export function createdKeyPage(frame: AccountFrame, input: { key: ApiKeyDocument | null; plaintext: string | null }): Html {
  const body =
    input.key && input.plaintext
      ? html`<h1>Your new key</h1>
<div class="alert warning" role="alert"><strong>Copy this key now.</strong> It is shown only this once: Framegate stores only a hash of it and cannot show it again. If you lose it, delete it and create another.</div>
<div class="card">
  <p>Key <strong>${input.key.name}</strong> (${modelsLabel(input.key.models)})</p>
  <div class="secret-box">
    <input id="new-key" type="text" readonly value="${input.plaintext}" aria-label="The new API key" data-select-on-focus data-testid="new-key">
    <button type="button" data-copy="#new-key" hidden>Copy</button>
  </div>
  <p class="muted">Use it as <code>Authorization: Bearer &lt;key&gt;</code>, or as the API key of an OpenAI client whose base URL ends in <code>/v1</code>.</p>
  <div class="actions"><a class="button secondary" href="/console/keys">Done</a></div>
</div>`
      : html`<h1>Key already shown</h1>
<div class="card"><p>A key's plaintext is shown only once, right after it is created, and this one has been shown already. If you did not copy it, delete the key and create another.</p>
<div class="actions"><a class="button secondary" href="/console/keys">Back to API keys</a></div></div>`;
  return layout(frame, { title: 'New key', body });
}

/** Changes the models a key may use, the key itself unchanged (its callers keep it). */
export function keyModelsPage(frame: AccountFrame, input: { key: ApiKeyDocument; models: readonly CatalogModel[]; state?: FormState; chosenModels?: readonly string[] }): Html {
  const state = input.state ?? {};
  return layout(frame, {
    title: 'Key models',
    body: html`<h1>Models of key “${input.key.name}”</h1>
<div class="card">
  <p>Key <span class="mono">${maskedKey(input.key)}</span> may use ${modelsLabel(input.key.models)} now. The change applies to its next call, in about a second everywhere; the key itself stays the same, and video tasks already submitted run to their end.</p>
  ${formError(state)}
  <form method="post" action="/console/keys/${input.key._id}/models">
    ${csrfField(frame.csrfToken)}
    ${modelChoices(input.models, state, input.chosenModels ?? input.key.models ?? [])}
    <div class="actions"><button type="submit">Save models</button><a class="button secondary" href="/console/keys">Cancel</a></div>
  </form>
</div>`,
  });
}

/** Asks before a key is deleted: the holder's keys page, or an operator's account page (whose
 * addresses `paths` gives: where the form posts, where Cancel goes). */
export function revokeConfirmPage(frame: Exclude<PageFrame, { area: 'public' }>, key: ApiKeyDocument, paths = { action: `/console/keys/${key._id}/revoke`, cancel: '/console/keys' }): Html {
  return layout(frame, {
    title: 'Delete key',
    body: html`<h1>Delete key “${key.name}”?</h1>
<div class="card">
  <p>Key <span class="mono">${maskedKey(key)}</span> (${modelsLabel(key.models)}) stops working at once: every call made with it is answered 401 from now on. Video tasks already submitted with it run to their end, and are billed as usual. This cannot be undone.</p>
  <form method="post" action="${paths.action}">
    ${csrfField(frame.csrfToken)}
    <div class="actions"><button type="submit" class="danger">Delete key</button><a class="button secondary" href="${paths.cancel}">Cancel</a></div>
  </form>
</div>`,
  });
}
