import { taskView } from '../../../core/task-view.ts';
import { neverAnswered, type TaskDocument } from '../../../store/tasks.ts';
import { html, safeHref, type Html } from '../html.ts';
import { formatTime, formatTimeToSecond, formatUsd } from './format.ts';
import { layout, type PageFrame } from './layout.ts';

// Video tasks as the console shows them: the latest ones in a table (status, clip link, webhook
// state) and one task with every webhook delivery attempt.

export interface TaskLinks {
  publicBaseUrl: string;
  /** The console's own address of a clip only the gateway can fetch (the API's needs a key). */
  gatewayClipHref?: (taskId: string) => string;
  /** Where a task's own page is; null when there is none (operator lists link Temporal instead). */
  detailHref: ((taskId: string) => string) | null;
  /** The task's workflow history in the Temporal Web UI (operators only). */
  temporalHref?: (taskId: string) => string;
  keyNames: Map<string, string>;
}

function cost(task: TaskDocument): string {
  if (task.status === 'succeeded') return formatUsd(task.price_micros);
  if (task.status === 'failed') return 'not billed';
  return `${formatUsd(task.price_micros)} held`;
}

function clipLink(task: TaskDocument, links: TaskLinks): Html {
  const viaConsole = task.status === 'succeeded' && task.content_via_gateway && links.gatewayClipHref;
  const href = viaConsole ? links.gatewayClipHref!(task._id) : safeHref(taskView(task, links.publicBaseUrl).url as string | undefined);
  return href ? html`<a href="${href}" rel="noopener noreferrer">clip</a>` : html`<span class="muted">—</span>`;
}

type ShownWebhookState = NonNullable<TaskDocument['webhook']>['state'] | 'unsent';

/** What the webhook's state says about its destination, in the holder's words. */
const WEBHOOK_STATES: Record<ShownWebhookState, string> = {
  pending: 'Not delivered yet (it is tried again on a schedule) to',
  unsent: 'Not sent (the submission failed inside the gateway before the task started, so no callback is made) to',
  delivered: 'Delivered to',
  gone: 'Stopped (the receiver answered 410 Gone) for',
  refused: 'Not sent (the destination is not allowed) to',
  exhausted: 'Not delivered (every attempt failed) to',
  stopped: 'Stopped (an operator stopped the task\'s work before it was delivered) for',
};

/** A task closed before it started (gateway_unavailable) never sends its webhook (README,
 * Errors). Its stored state is `stopped` (store/abandoned-tasks.ts, activities/billing.ts), which
 * reads as an operator's doing, or `pending` from before those set it, which would promise an
 * attempt to come. */
function shownWebhookState(task: TaskDocument & { webhook: NonNullable<TaskDocument['webhook']> }): ShownWebhookState {
  const closedUnstarted = neverAnswered(task);
  const neverSent = (task.webhook.state === 'pending' || task.webhook.state === 'stopped') && task.webhook.attempts.length === 0;
  return neverSent && closedUnstarted ? 'unsent' : task.webhook.state;
}

function webhookSummary(task: TaskDocument): Html {
  if (!task.webhook) return html`<span class="muted">none</span>`;
  const attempts = task.webhook.attempts.length;
  const state = shownWebhookState({ ...task, webhook: task.webhook });
  return html`<span class="badge ${state}">${state}</span> ${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`;
}

export function tasksTable(tasks: TaskDocument[], links: TaskLinks, whenEmpty = 'No video tasks yet.'): Html {
  if (tasks.length === 0) return html`<p class="muted">${whenEmpty}</p>`;
  return html`<div class="table-wrap"><table data-testid="tasks">
  <thead><tr><th>Task</th><th>Model</th><th>Key</th><th>Status</th><th class="num">Seconds</th><th class="num">Cost</th><th>Created</th><th>Clip</th><th>Webhook</th>${
    links.temporalHref ? html`<th>History</th>` : ''
  }</tr></thead>
  <tbody>${tasks.map(
    (task) => html`<tr data-task-id="${task._id}">
    <td class="mono">${links.detailHref ? html`<a href="${links.detailHref(task._id)}">${task._id}</a>` : task._id}</td>
    <td>${task.model}</td>
    <td class="text">${links.keyNames.get(task.key_id) ?? task.key_id}</td>
    <td><span class="badge ${task.status}">${task.status}</span></td>
    <td class="num">${task.seconds} · ${task.resolution}</td>
    <td class="num">${cost(task)}</td>
    <td>${formatTime(task.created_at)}</td>
    <td>${clipLink(task, links)}</td>
    <td>${webhookSummary(task)}</td>${
      links.temporalHref ? html`<td><a href="${links.temporalHref(task._id)}" rel="noopener noreferrer" target="_blank">Temporal UI</a></td>` : ''
    }
  </tr>`,
  )}</tbody>
</table></div>`;
}

/** Where a list of tasks continues: its newest page (when this is a later one) and the page of
 * older tasks (when there are more). */
export interface TaskPages {
  newestHref: string | null;
  olderHref: string | null;
}

/** Links to the newest tasks and to older ones, where there are pages either way. */
export function tasksPager(pages: TaskPages): Html {
  if (!pages.newestHref && !pages.olderHref) return html``;
  return html`<nav class="actions" aria-label="Pages of tasks">${pages.newestHref ? html`<a class="button secondary" href="${pages.newestHref}">← Newest tasks</a>` : ''}${
    pages.olderHref ? html`<a class="button secondary" href="${pages.olderHref}" rel="next">Older tasks →</a>` : ''
  }</nav>`;
}

/** The pages around one page of tasks, on a page whose address is `path` with `query` (what
 * else it shows: days, a key), the cursor in `tasks_after`. */
export function taskPagesAt(path: string, query: Record<string, string | undefined>, page: { tasks: TaskDocument[]; hasMore: boolean; isFirstPage: boolean }): TaskPages {
  const href = (after: string | undefined) => {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries({ ...query, tasks_after: after })) if (value !== undefined && value !== '') params.set(name, value);
    const search = params.toString();
    return `${path}${search ? `?${search}` : ''}#tasks`;
  };
  const last = page.tasks[page.tasks.length - 1];
  return { newestHref: page.isFirstPage ? null : href(undefined), olderHref: page.hasMore && last ? href(last._id) : null };
}

function attemptsTable(task: TaskDocument): Html {
  const attempts = task.webhook?.attempts ?? [];
  if (attempts.length === 0) return html`<p class="muted">No delivery attempts yet.</p>`;
  return html`<div class="table-wrap"><table data-testid="webhook-attempts">
  <thead><tr><th class="num">#</th><th>At</th><th>Outcome</th><th class="num">HTTP status</th><th class="num">Took</th><th>Error</th></tr></thead>
  <tbody>${attempts.map(
    (attempt) => html`<tr>
    <td class="num">${attempt.attempt}</td>
    <td>${formatTimeToSecond(new Date(attempt.at))}</td>
    <td><span class="badge ${attempt.outcome}">${attempt.outcome}</span></td>
    <td class="num">${attempt.status ?? '—'}</td>
    <td class="num">${attempt.duration_ms} ms</td>
    <td>${attempt.error ?? ''}</td>
  </tr>`,
  )}</tbody>
</table></div>`;
}

export function taskDetailPage(frame: PageFrame, task: TaskDocument, links: TaskLinks): Html {
  const clip = clipLink(task, links);
  return layout(frame, {
    title: `Task ${task._id}`,
    body: html`<h1>Video task</h1>
<div class="card"><dl class="facts">
  <dt>Task</dt><dd class="mono">${task._id}</dd>
  <dt>Status</dt><dd><span class="badge ${task.status}">${task.status}</span>${task.status === 'running' ? ` (${task.progress}%)` : ''}</dd>
  <dt>Model</dt><dd>${task.model}</dd>
  <dt>Key</dt><dd>${links.keyNames.get(task.key_id) ?? task.key_id}</dd>
  <dt>Clip</dt><dd>${task.seconds} s · ${task.resolution} · ${task.ratio} · ${clip}</dd>
  <dt>Cost</dt><dd>${cost(task)}</dd>
  ${task.error ? html`<dt>Error</dt><dd>${task.error.code}: ${task.error.message}</dd>` : ''}
  <dt>Created</dt><dd>${formatTimeToSecond(task.created_at)}</dd>
  <dt>Updated</dt><dd>${formatTimeToSecond(task.updated_at)}</dd>
  <dt>Status API</dt><dd class="mono">GET ${links.publicBaseUrl}/v1/video/generations/${task._id}</dd>
</dl></div>
<h2>Webhook</h2>
<div class="card">
  ${task.webhook ? html`<p>${WEBHOOK_STATES[shownWebhookState({ ...task, webhook: task.webhook })]} <span class="mono">${task.webhook.url}</span>: ${webhookSummary(task)}</p>` : html`<p class="muted">This task was submitted without a callback_url.</p>`}
  ${task.webhook ? attemptsTable(task) : ''}
</div>
<p><a href="/console/usage">← Usage &amp; spend</a></p>`,
  });
}
