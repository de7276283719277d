import type { FormErrors, FormValues } from '../forms.ts';
import { html, type Html } from '../html.ts';

// Form controls with their label, the value typed so far and the message of a refused field,
// linked by aria-describedby so screen readers read the message with the field.

export interface FormState {
  values?: FormValues;
  errors?: FormErrors;
}

export function textField(state: FormState, input: {
  name: string;
  /** For a second form on the page with a field of the same name; else `field-<name>`. */
  id?: string;
  label: string;
  type?: 'text' | 'email' | 'password' | 'date';
  autocomplete?: string;
  required?: boolean;
  placeholder?: string;
  inputmode?: 'decimal' | 'numeric';
  /** The most characters the server takes: the browser stops the typing there. */
  maxlength?: number;
  value?: string;
}): Html {
  const id = input.id ?? `field-${input.name}`;
  const error = state.errors?.[input.name];
  const value = input.type === 'password' ? '' : (state.values?.[input.name] ?? input.value ?? '');
  return html`<div>
  <label for="${id}">${input.label}</label>
  <input id="${id}" name="${input.name}" type="${input.type ?? 'text'}" value="${value}"${input.autocomplete ? html` autocomplete="${input.autocomplete}"` : ''}${
    input.required ? html` required` : ''
  }${input.placeholder ? html` placeholder="${input.placeholder}"` : ''}${input.inputmode ? html` inputmode="${input.inputmode}"` : ''}${
    input.maxlength !== undefined ? html` maxlength="${String(input.maxlength)}"` : ''
  }${
    error ? html` aria-invalid="true" aria-describedby="${id}-error"` : ''
  }>
  ${error ? html`<p class="field-error" id="${id}-error">${error}</p>` : ''}
</div>`;
}

export function formError(state: FormState, field = 'form'): Html {
  const error = state.errors?.[field];
  return error ? html`<div class="alert error" role="alert">${error}</div>` : html``;
}
