import { html, type Html } from '../html.ts';
import { layout } from './layout.ts';

// What a person sees when a console request fails: a plain explanation and a way back, never a
// JSON error body or a stack trace.

export function errorPage(input: { status: number; title: string; message: string; requestId?: string }): Html {
  return layout(
    { area: 'public' },
    {
      title: input.title,
      body: html`<div class="card narrow" data-status="${input.status}">
  <h1>${input.title}</h1>
  <p>${input.message}</p>
  ${input.requestId ? html`<p class="muted">Request id: <span class="mono">${input.requestId}</span></p>` : ''}
  <div class="actions"><a class="button secondary" href="/console">Back to the console</a></div>
</div>`,
    },
  );
}
