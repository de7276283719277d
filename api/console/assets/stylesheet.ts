// The console's whole stylesheet, served as /console/assets/console.css (no build step). Mobile
// first: one column and scrollable tables on a phone, wider layout from 720px.

export const CONSOLE_STYLESHEET = `
:root { --ink: #1c2330; --muted: #5b6578; --line: #d9dee7; --bg: #f5f7fa; --card: #fff;
  --accent: #2557d6; --accent-ink: #fff; --danger: #b42318; --ok: #067647; --warn-bg: #fff7e0;
  --warn-line: #e6b400; --error-bg: #fdecea; --ok-bg: #e8f6ee; font-size: 16px; }
* { box-sizing: border-box; }
/* Author rules such as button { display: inline-block } would otherwise show hidden elements. */
[hidden] { display: none !important; }
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  background: var(--bg); line-height: 1.45; }
a { color: var(--accent); }
header.top { background: var(--ink); color: #fff; padding: .6rem 1rem; display: flex; flex-wrap: wrap;
  gap: .5rem 1.25rem; align-items: center; }
header.top .brand { font-weight: 700; color: #fff; text-decoration: none; margin-right: auto; }
header.top nav { display: flex; gap: .9rem; flex-wrap: wrap; }
header.top nav a { color: #cfd8ea; text-decoration: none; padding: .2rem 0; }
header.top nav a[aria-current="page"] { color: #fff; border-bottom: 2px solid #fff; }
header.top .balance { font-variant-numeric: tabular-nums; overflow-wrap: anywhere; min-width: 0; }
header.top .balance strong { color: #fff; }
header.top form { margin: 0; }
header.top button { background: transparent; color: #cfd8ea; border: 1px solid #56607a; padding: .25rem .6rem; }
main { max-width: 1240px; margin: 0 auto; padding: 1rem; overflow-wrap: break-word; }
h1 { font-size: 1.5rem; margin: .5rem 0 1rem; overflow-wrap: anywhere; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .6rem; }
.card > h2:first-child, .card > h1:first-child { margin-top: 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; margin-bottom: 1rem; }
.narrow { max-width: 26rem; margin: 2rem auto; }
.muted { color: var(--muted); }
.table-wrap { overflow-x: auto; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .45rem .5rem; border-bottom: 1px solid var(--line); white-space: nowrap; vertical-align: top; }
th { font-weight: 600; color: var(--muted); background: #fafbfd; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: 700; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; }
label { display: block; font-weight: 600; margin: .6rem 0 .25rem; }
input[type=text], input[type=email], input[type=password], input[type=date], input[type=number], select {
  width: 100%; padding: .5rem .6rem; border: 1px solid var(--line); border-radius: 6px; font: inherit; background: #fff; }
fieldset { border: 1px solid var(--line); border-radius: 6px; margin: .8rem 0; padding: .4rem .8rem .6rem; }
fieldset label { font-weight: 400; display: inline-flex; gap: .35rem; margin: .25rem 1rem .25rem 0; align-items: center; }
button, .button { display: inline-block; font: inherit; padding: .5rem .9rem; border-radius: 6px; border: 1px solid var(--accent);
  background: var(--accent); color: var(--accent-ink); cursor: pointer; text-decoration: none; }
button.secondary, .button.secondary { background: #fff; color: var(--accent); }
button.danger, .button.danger { background: var(--danger); border-color: var(--danger); color: #fff; }
.actions { display: flex; gap: .6rem; flex-wrap: wrap; align-items: center; margin-top: .9rem; }
.inline-form { display: flex; gap: .6rem; flex-wrap: wrap; align-items: flex-end; }
.inline-form > div { flex: 1 1 10rem; }
.inline-form > div.submit { flex: 0 0 auto; }
.inline-form .field-error { flex-basis: 100%; }
/* A key's limits wrap between their two figures rather than widen the table. */
td.limits { white-space: normal; }
/* Names and model lists wrap (a 200-character name included), so a row's actions stay on screen. */
td.text { white-space: normal; overflow-wrap: anywhere; min-width: 8rem; max-width: 18rem; }
.nowrap { white-space: nowrap; }
.field-error { color: var(--danger); font-size: .88rem; margin: .2rem 0 0; }
.alert { border-radius: 6px; padding: .7rem .9rem; margin: 0 0 1rem; border: 1px solid; }
.alert.warning { background: var(--warn-bg); border-color: var(--warn-line); }
.alert.error { background: var(--error-bg); border-color: var(--danger); }
.alert.success { background: var(--ok-bg); border-color: var(--ok); }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600; background: #e8ecf3; }
.badge.active, .badge.succeeded, .badge.delivered { background: var(--ok-bg); color: var(--ok); }
.badge.revoked, .badge.failed, .badge.exhausted, .badge.gone, .badge.refused, .badge.stopped { background: var(--error-bg); color: var(--danger); }
.badge.running, .badge.submitted, .badge.pending { background: #e7eefc; color: var(--accent); }
.badge.unsent { background: var(--bg); color: var(--muted); }
.secret-box { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; }
.secret-box input { flex: 1 1 18rem; font-family: ui-monospace, Menlo, Consolas, monospace; }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: .6rem; margin-bottom: 1rem; }
.stats div { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .6rem .8rem; }
.stats dt { color: var(--muted); font-size: .82rem; }
.stats dd { margin: 0; font-size: 1.15rem; font-weight: 700; font-variant-numeric: tabular-nums; }
.chart { margin: 0; }
/* Below about 34rem the chart keeps its size and scrolls sideways, like the tables, instead of
   shrinking its labels past reading. */
.chart .chart-scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
.chart svg { width: 100%; min-width: 34rem; height: auto; display: block; }
.chart figcaption { margin-top: .4rem; }
.chart .bar { fill: var(--accent); }
.chart .axis { stroke: var(--line); }
.chart text { fill: var(--muted); font-size: 11px; font-family: system-ui, sans-serif; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
@media (min-width: 720px) { main { padding: 1.5rem; } h1 { font-size: 1.7rem; } }
`;
