import { html, type Html } from '../html.ts';
import { formatUsd } from './format.ts';

// Spend per day as an inline SVG bar chart, drawn on the server: no script, no chart library,
// and it scales with the page (viewBox) down to a phone's width. Each bar carries a <title>
// with its exact figure, and the chart a text summary for screen readers.

const WIDTH = 720;
const HEIGHT = 220;
const MARGIN = { top: 12, right: 8, bottom: 26, left: 64 };

/** A round axis maximum at or above `value` (1, 2 or 5 times a power of ten micro-USD). */
function niceCeiling(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

export function spendChart(input: { days: string[]; spendByDay: Map<string, number> }): Html {
  const { days, spendByDay } = input;
  const values = days.map((day) => spendByDay.get(day) ?? 0);
  const total = values.reduce((sum, value) => sum + value, 0);
  const highest = Math.max(0, ...values);
  const top = niceCeiling(highest);
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const slot = plotWidth / Math.max(1, days.length);
  const barWidth = Math.max(1, slot * 0.8);
  const y = (value: number) => MARGIN.top + plotHeight - (value / top) * plotHeight;
  const labelEvery = Math.max(1, Math.ceil(days.length / 7));
  const busiest = days[values.indexOf(highest)];

  // Without spend there is nothing to scale: only the baseline. A half-way line only where its
  // value is a whole micro-dollar, so no two labels ever read the same.
  const fractions = highest === 0 ? [0] : top % 2 === 0 ? [0, 0.5, 1] : [0, 1];
  const gridLines = fractions.map(
    (fraction) => html`<line class="axis" stroke="#d9dee7" x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(top * fraction).toFixed(1)}" y2="${y(top * fraction).toFixed(1)}"/>
<text x="${MARGIN.left - 6}" y="${(y(top * fraction) + 4).toFixed(1)}" text-anchor="end">${formatUsd(Math.round(top * fraction))}</text>`,
  );
  const bars = days.map((day, index) => {
    const value = values[index]!;
    const x = MARGIN.left + index * slot + (slot - barWidth) / 2;
    const bar =
      value > 0
        ? html`<rect class="bar" fill="#2557d6" x="${x.toFixed(1)}" y="${y(value).toFixed(1)}" width="${barWidth.toFixed(1)}" height="${Math.max(1, y(0) - y(value)).toFixed(1)}" data-day="${day}" data-spend-micros="${value}"><title>${day}: ${formatUsd(value)}</title></rect>`
        : '';
    const label =
      index % labelEvery === 0 || index === days.length - 1
        ? html`<text x="${(MARGIN.left + index * slot + slot / 2).toFixed(1)}" y="${HEIGHT - 8}" text-anchor="middle">${day.slice(5)}</text>`
        : '';
    return html`${bar}${label}`;
  });
  const summary =
    total > 0 ? `Total ${formatUsd(total)} over ${days.length} days; highest ${formatUsd(highest)} on ${busiest}.` : `No spend in these ${days.length} days.`;

  return html`<figure class="chart" data-testid="spend-chart">
<div class="chart-scroll"><svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="spend-chart-title spend-chart-desc" preserveAspectRatio="xMidYMid meet">
<title id="spend-chart-title">Spend per day (UTC)</title>
<desc id="spend-chart-desc">${summary}</desc>
${gridLines}
${bars}
</svg></div>
<figcaption class="muted">${summary}</figcaption>
</figure>`;
}
