import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import { ZERO_USAGE, addUsage, type UsageTotals } from '../../../store/usage-reports.ts';
import type { TaskDocument } from '../../../store/tasks.ts';
import { html, type Html } from '../html.ts';
import type { FormState } from './fields.ts';
import { formatCount, formatUsd, maskedKey } from './format.ts';
import { keysShown } from './keys-shown.ts';
import { layout, type PageFrame } from './layout.ts';
import { spendChart } from './spend-chart.ts';
import { tasksPager, tasksTable, type TaskLinks, type TaskPages } from './tasks.ts';

// Usage and spend per key over a range of UTC days: headline figures, one row per key, the
// spend-per-day chart and the latest video tasks.

type AccountFrame = Extract<PageFrame, { area: 'account' }>;

export interface UsageView {
  fromDay: string;
  toDay: string;
  days: string[];
  keys: ApiKeyDocument[];
  selectedKeyId: string | null;
  byKey: Map<string, UsageTotals>;
  byDay: Map<string, UsageTotals>;
  tasks: TaskDocument[];
  taskPages: TaskPages;
  taskLinks: TaskLinks;
  state?: FormState;
}

function headline(totals: UsageTotals): Html {
  const figures: Array<[string, string, string]> = [
    ['Spend', formatUsd(totals.spend_micros), 'spend'],
    ['Requests', formatCount(totals.requests), 'requests'],
    ['Chat tokens in / out', `${formatCount(totals.input_tokens)} / ${formatCount(totals.output_tokens)}`, 'tokens'],
    ['Video seconds', formatCount(totals.video_seconds), 'video-seconds'],
    ['Images', formatCount(totals.images), 'images'],
  ];
  return html`<dl class="stats">${figures.map(([label, value, id]) => html`<div><dt>${label}</dt><dd data-testid="total-${id}">${value}</dd></div>`)}</dl>`;
}

/** A row's figures after its label cell, in the columns of both tables below. */
function figureCells(usage: UsageTotals): Html {
  return html`<td class="num">${formatCount(usage.requests)}</td>
    <td class="num">${formatCount(usage.input_tokens)}</td>
    <td class="num">${formatCount(usage.output_tokens)}</td>
    <td class="num">${formatCount(usage.video_seconds)}</td>
    <td class="num">${formatCount(usage.images)}</td>`;
}

const FIGURE_HEADERS = html`<th class="num">Requests</th><th class="num">Tokens in</th><th class="num">Tokens out</th><th class="num">Video s</th><th class="num">Images</th><th class="num">Spend</th>`;

/** The days with usage, each with its figures: the chart's bars carry theirs only in SVG
 * titles, which a keyboard, a touch screen or a screen reader does not reach. */
function perDayTable(days: string[], byDay: Map<string, UsageTotals>): Html {
  const used = days.filter((day) => (byDay.get(day)?.requests ?? 0) > 0 || (byDay.get(day)?.spend_micros ?? 0) > 0);
  if (used.length === 0) return html``;
  return html`<details class="per-day"><summary>Each day as a table</summary><div class="table-wrap"><table data-testid="usage-by-day">
  <thead><tr><th>Day (UTC)</th>${FIGURE_HEADERS}</tr></thead>
  <tbody>${used.map((day) => html`<tr data-day="${day}"><td>${day}</td>${figureCells(byDay.get(day)!)}<td class="num">${formatUsd(byDay.get(day)!.spend_micros)}</td></tr>`)}</tbody>
</table></div></details>`;
}

/** `total` covers every key the figures are about, those left out (`hidden`) included. */
export function usageByKeyTable(keys: ApiKeyDocument[], byKey: Map<string, UsageTotals>, total: UsageTotals, hidden = 0): Html {
  const rows = keys.map((key) => {
    const usage = byKey.get(key._id) ?? ZERO_USAGE;
    return html`<tr data-key-id="${key._id}">
    <td class="text">${key.name} <span class="mono muted">${maskedKey(key)}</span>${key.revoked_at ? html` <span class="badge revoked">revoked</span>` : ''}</td>
    ${figureCells(usage)}
    <td class="num" data-testid="key-spend">${formatUsd(usage.spend_micros)}</td>
  </tr>`;
  });
  return html`<div class="table-wrap"><table data-testid="usage-by-key">
  <thead><tr><th>Key</th>${FIGURE_HEADERS}</tr></thead>
  <tbody>${rows}
  ${hidden > 0 ? html`<tr class="muted" data-testid="keys-hidden"><td class="text" colspan="7">${formatCount(hidden)} more keys, which spent less, are not listed; the total counts them.</td></tr>` : ''}
  <tr class="total"><td>Total</td>${figureCells(total)}<td class="num">${formatUsd(total.spend_micros)}</td></tr>
  </tbody>
</table></div>`;
}

/** What the range form's messages name their field by. */
const FIELD_LABELS: Record<string, string> = { from: 'From', to: 'To', key: 'Key', tasks_after: 'Older tasks' };

/** `menuKeys`: the keys the menu offers (those the page lists, and the chosen one). */
function rangeForm(view: UsageView, menuKeys: ApiKeyDocument[]): Html {
  const errors = view.state?.errors ?? {};
  // A refused field is marked and its message linked to it, so a screen reader reads them together.
  const marked = (field: string) => (errors[field] ? html` aria-invalid="true" aria-describedby="${field}-error"` : '');
  return html`<form method="get" action="/console/usage" class="inline-form card" aria-label="Date range">
  <div><label for="from">From (UTC)</label><input id="from" name="from" type="date" value="${view.fromDay}"${marked('from')}></div>
  <div><label for="to">To (UTC)</label><input id="to" name="to" type="date" value="${view.toDay}"${marked('to')}></div>
  <div><label for="key">Key</label><select id="key" name="key"${marked('key')}>
    <option value="">All keys</option>
    ${menuKeys.map((key) => html`<option value="${key._id}"${key._id === view.selectedKeyId ? html` selected` : ''}>${key.name} (${maskedKey(key)})</option>`)}
  </select></div>
  <div class="submit"><button type="submit">Show</button></div>
  ${Object.entries(errors).map(([field, message]) => html`<p class="field-error" role="alert" id="${field}-error">${FIELD_LABELS[field] ? `${FIELD_LABELS[field]}: ` : ''}${message}</p>`)}
</form>`;
}

export function usagePage(frame: AccountFrame, view: UsageView): Html {
  const listed = keysShown(view.keys, view.byKey, { alsoShow: view.selectedKeyId });
  const shown = view.selectedKeyId ? { keys: view.keys.filter((key) => key._id === view.selectedKeyId), hidden: 0 } : listed;
  const shownKeys = shown.keys;
  const totals = [...view.byKey.entries()].filter(([keyId]) => !view.selectedKeyId || keyId === view.selectedKeyId).reduce((sum, [, usage]) => addUsage(sum, usage), ZERO_USAGE);
  const spendByDay = new Map([...view.byDay.entries()].map(([day, usage]) => [day, usage.spend_micros]));
  return layout(frame, {
    title: 'Usage & spend',
    body: html`<h1>Usage &amp; spend</h1>
${rangeForm(view, listed.keys)}
<p class="muted">${view.fromDay} to ${view.toDay} (UTC)${view.selectedKeyId ? html`, key ${shownKeys[0]?.name ?? view.selectedKeyId}` : ', all keys'}.</p>
${headline(totals)}
<div class="card"><h2>Spend per day</h2>${spendChart({ days: view.days, spendByDay })}${perDayTable(view.days, view.byDay)}</div>
<div class="card"><h2>Per key</h2>${usageByKeyTable(shownKeys, view.byKey, totals, shown.hidden)}</div>
<div class="card" id="tasks"><h2>Video tasks in these days</h2>${tasksTable(view.tasks, view.taskLinks, 'No video tasks in these days.')}${tasksPager(view.taskPages)}</div>`,
  });
}
