/**
 * Self-contained HTML reports and CSV tables (check --report/--csv, tune --report/--csv): one
 * file, no script, no network (a Content-Security-Policy of `default-src 'none'` says so to the
 * browser), charts drawn as inline SVG. Every string that reaches the page goes through `esc`
 * (kernel names, capture paths, compiler errors: they come from captures, which may be someone
 * else's), every number through `num`; CSV cells are quoted (RFC 4180) and a text cell that a
 * spreadsheet would take for a formula (= + - @, tab, CR first) is prefixed with a quote.
 */
import { escapeBidi, escapeForTerminal } from "../escape.ts";

/** Text for HTML content or a double- or single-quoted attribute. */
export function esc(s: string | number | null | undefined): string {
  // bidi controls and line separators shown as \uNNNN (a name shown reversed would mislead), as on a terminal
  return escapeBidi(String(s ?? ""))
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;")
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g, "\ufffd"); // C0 and C1 controls are not HTML characters
}

/** A finite number for SVG coordinates (NaN and ±∞ would break the drawing). */
const num = (x: number) => (Number.isFinite(x) ? Number(x.toFixed(2)) : 0);

/** Markup already escaped, to put in a table cell as it is. */
export interface Html {
  html: string;
}
export const raw = (html: string): Html => ({ html });
const cell = (c: string | number | null | Html) => (c !== null && typeof c === "object" ? c.html : esc(c));

/** The colours of verdicts, as the terminal output words them. */
export const COLORS = { good: "#2e7d32", bad: "#c62828", warn: "#ef6c00", neutral: "#546e7a", faint: "#b0bec5", accent: "#1565c0" } as const;

/** One HTML table: a header row and rows of cells (text is escaped; `raw` cells are not). */
export function table(headers: string[], rows: (string | number | null | Html)[][], o: { numeric?: number[] } = {}): string {
  const right = new Set(o.numeric ?? []);
  const td = (c: string | number | null | Html, i: number, tag: "td" | "th") => `<${tag}${right.has(i) ? ' class="n"' : ""}>${cell(c)}</${tag}>`;
  return `<table><thead><tr>${headers.map((h, i) => td(h, i, "th")).join("")}</tr></thead><tbody>\n${rows.map((r) => `<tr>${r.map((c, i) => td(c, i, "td")).join("")}</tr>`).join("\n")}\n</tbody></table>`;
}

export interface IntervalItem {
  label: string;
  /** The point (a time ratio). */
  value: number;
  low: number;
  high: number;
  color: string;
}

/**
 * Horizontal interval chart: one row per item, its interval as a bar and its value as a dot, on a
 * logarithmic axis (a ratio of 2 and one of 0.5 are as far from 1); a solid line at `reference`
 * (1: the baseline) and dashed lines at the thresholds.
 */
export function intervalChart(items: IntervalItem[], o: { reference: number; thresholds: number[]; axis: string }): string {
  const W = 900;
  const left = 300;
  const right = 30;
  const rowH = 22;
  const top = 30;
  const H = top + items.length * rowH + 40;
  const vals = items
    .flatMap((i) => [i.low, i.high, i.value])
    .concat(o.reference, ...o.thresholds)
    .filter((x) => x > 0 && Number.isFinite(x));
  let lo = Math.log(Math.min(...vals));
  let hi = Math.log(Math.max(...vals));
  const pad = Math.max((hi - lo) * 0.08, 0.02);
  lo -= pad;
  hi += pad;
  const x = (v: number) => num(left + ((Math.log(Math.max(v, 1e-12)) - lo) / (hi - lo)) * (W - left - right));
  const ticks = niceTicks(Math.exp(lo), Math.exp(hi));
  const L: string[] = [
    `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(o.axis)}">`,
  ];
  L.push(`<rect x="${left}" y="${top - 10}" width="${W - left - right}" height="${items.length * rowH + 10}" fill="#fafafa"/>`);
  for (const t of ticks)
    L.push(
      `<line x1="${x(t)}" y1="${top - 10}" x2="${x(t)}" y2="${top + items.length * rowH}" stroke="#eceff1"/><text x="${x(t)}" y="${H - 22}" text-anchor="middle" class="tick">${esc(fmt(t))}</text>`,
    );
  for (const t of o.thresholds)
    L.push(`<line x1="${x(t)}" y1="${top - 10}" x2="${x(t)}" y2="${top + items.length * rowH}" stroke="${COLORS.warn}" stroke-dasharray="4 3"/>`);
  L.push(`<line x1="${x(o.reference)}" y1="${top - 10}" x2="${x(o.reference)}" y2="${top + items.length * rowH}" stroke="#37474f" stroke-width="1.5"/>`);
  items.forEach((it, i) => {
    const y = top + i * rowH + rowH / 2;
    L.push(`<text x="${left - 8}" y="${y + 4}" text-anchor="end" class="label">${esc(shorten(it.label, 44))}</text>`);
    L.push(`<line x1="${x(it.low)}" y1="${y}" x2="${x(it.high)}" y2="${y}" stroke="${it.color}" stroke-width="6" stroke-linecap="round" opacity="0.45"/>`);
    L.push(
      `<circle cx="${x(it.value)}" cy="${y}" r="5" fill="${it.color}"><title>${esc(`${it.label}: ${fmt(it.value)} [${fmt(it.low)}–${fmt(it.high)}]`)}</title></circle>`,
    );
  });
  L.push(`<text x="${(left + W - right) / 2}" y="${H - 4}" text-anchor="middle" class="axis">${esc(o.axis)}</text></svg>`);
  return L.join("\n");
}

export interface BarItem {
  label: string;
  /** null: no bar (a config that did not build), said in `note`. */
  value: number | null;
  color: string;
  note?: string;
}

/** Horizontal bar chart from 0 (µs per config), a value at each bar's end; `reference` a solid line (the app's own time). */
export function barChart(items: BarItem[], o: { axis: string; unit: string; reference?: number }): string {
  const W = 900;
  const left = 300;
  const right = 110;
  const rowH = 22;
  const top = 20;
  const H = top + items.length * rowH + 40;
  const max = Math.max(...items.map((i) => i.value ?? 0), o.reference ?? 0) * 1.05 || 1;
  const x = (v: number) => num(left + (v / max) * (W - left - right));
  const L: string[] = [
    `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(o.axis)}">`,
  ];
  for (const t of niceTicks(0, max, true))
    L.push(
      `<line x1="${x(t)}" y1="${top - 6}" x2="${x(t)}" y2="${top + items.length * rowH}" stroke="#eceff1"/><text x="${x(t)}" y="${H - 22}" text-anchor="middle" class="tick">${esc(fmt(t))}</text>`,
    );
  items.forEach((it, i) => {
    const y = top + i * rowH;
    L.push(`<text x="${left - 8}" y="${y + rowH / 2 + 4}" text-anchor="end" class="label">${esc(shorten(it.label, 44))}</text>`);
    if (it.value === null) L.push(`<text x="${left + 4}" y="${y + rowH / 2 + 4}" class="note">${esc(it.note ?? "no time")}</text>`);
    else
      L.push(
        `<rect x="${left}" y="${y + 3}" width="${num(x(it.value) - left)}" height="${rowH - 6}" fill="${it.color}"><title>${esc(`${it.label}: ${fmt(it.value)} ${o.unit}`)}</title></rect><text x="${x(it.value) + 4}" y="${y + rowH / 2 + 4}" class="value">${esc(`${fmt(it.value)} ${o.unit}`)}</text>`,
      );
  });
  if (o.reference !== undefined)
    L.push(
      `<line x1="${x(o.reference)}" y1="${top - 6}" x2="${x(o.reference)}" y2="${top + items.length * rowH}" stroke="#37474f" stroke-width="1.5" stroke-dasharray="5 3"/>`,
    );
  L.push(`<text x="${(left + W - right) / 2}" y="${H - 4}" text-anchor="middle" class="axis">${esc(o.axis)}</text></svg>`);
  return L.join("\n");
}

/**
 * A heatmap over two axes: `value(x, y)` gives a cell's text and its number (coloured from the
 * lowest, green, to the highest, red), or a text without a number (grey: a config that did not
 * build or match), or null (no such config: `empty` written in it).
 */
export function heatmap(
  xs: string[],
  ys: string[],
  value: (x: string, y: string) => { v: number | null; text: string } | null,
  o: { xAxis: string; yAxis: string; empty: string; title: string },
): string {
  const cw = Math.max(64, Math.min(110, Math.floor(760 / Math.max(1, xs.length))));
  const ch = 30;
  const left = 140;
  const top = 46;
  const W = left + xs.length * cw + 20;
  const H = top + ys.length * ch + 20;
  const cells = ys.map((y) => xs.map((x) => value(x, y)));
  const vs = cells.flat().flatMap((c) => (c && c.v !== null ? [c.v] : []));
  const [lo, hi] = [Math.min(...vs), Math.max(...vs)];
  const colour = (v: number) => {
    const t = hi > lo ? (v - lo) / (hi - lo) : 0;
    return `hsl(${num(120 - 120 * t)}, 65%, ${num(62 - 10 * t)}%)`;
  };
  const L: string[] = [
    `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(o.title)}">`,
  ];
  L.push(
    `<text x="${left + (xs.length * cw) / 2}" y="14" text-anchor="middle" class="axis">${esc(o.xAxis)}</text><text x="8" y="${top - 8}" class="axis">${esc(o.yAxis)}</text>`,
  );
  xs.forEach((x, i) => L.push(`<text x="${left + i * cw + cw / 2}" y="${top - 8}" text-anchor="middle" class="tick">${esc(shorten(x, 12))}</text>`));
  ys.forEach((y, j) => {
    L.push(`<text x="${left - 8}" y="${top + j * ch + ch / 2 + 4}" text-anchor="end" class="tick">${esc(shorten(y, 18))}</text>`);
    xs.forEach((x, i) => {
      const c = cells[j]![i];
      const [cx, cy] = [left + i * cw, top + j * ch];
      L.push(
        `<rect x="${cx}" y="${cy}" width="${cw - 2}" height="${ch - 2}" fill="${c && c.v !== null ? colour(c.v) : "#eceff1"}"><title>${esc(`${o.xAxis}=${x} ${o.yAxis}=${y}: ${c ? c.text : o.empty}`)}</title></rect>`,
      );
      L.push(`<text x="${cx + (cw - 2) / 2}" y="${cy + ch / 2 + 4}" text-anchor="middle" class="cell">${esc(c ? c.text : o.empty)}</text>`);
    });
  });
  L.push("</svg>");
  return L.join("\n");
}

/** A whole report page: title, a line under it, then the sections (already markup). */
export function page(title: string, subtitle: string, sections: string[]): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #263238; margin: 24px; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; } .sub { color: #607d8b; margin: 0 0 16px; }
table { border-collapse: collapse; margin: 8px 0; } th, td { border-bottom: 1px solid #eceff1; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f5f7f8; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; } code, .mono { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
.chart text { font: 12px system-ui, sans-serif; fill: #37474f; } .chart .tick { fill: #78909c; font-size: 11px; } .chart .axis { font-weight: 600; } .chart .cell { font-size: 11px; fill: #102027; } .chart .note { fill: #c62828; font-size: 11px; }
.tag { display: inline-block; padding: 0 6px; border-radius: 3px; color: #fff; font-size: 12px; }
</style></head>
<body>
<h1>${esc(title)}</h1>
<p class="sub">${esc(subtitle)}</p>
${sections.join("\n")}
</body></html>
`;
}

/** A coloured word (a verdict). */
export function tag(text: string, color: string): Html {
  return raw(`<span class="tag" style="background:${/^#[0-9a-f]{6}$/i.test(color) ? color : COLORS.neutral}">${esc(text)}</span>`);
}

/**
 * RFC 4180 CSV: every cell quoted when it holds a quote, comma, semicolon, tab or line break;
 * formula-like text made inert (a `'` before it) at a cell's start and after each `;` in it: a
 * spreadsheet set to `;` as separator (semicolon locales) splits every line there, quotes or not,
 * and `f();=6*7;` in a kernel name became a formula cell (adversary 74).
 */
export function csv(rows: (string | number | null | undefined)[][]): string {
  const c = (v: string | number | null | undefined) => {
    if (v === null || v === undefined) return "";
    if (typeof v === "number") return Number.isFinite(v) ? String(v) : "";
    // a cell holds untrusted text (a kernel name from a results file, a compiler's message): the terminal's escaping, on one line
    v = escapeForTerminal(v, { oneLine: true });
    const lead = /^[=+\-@\t\r]/.test(v) && !/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(v) ? `'${v}` : v;
    // read with `;` as the separator, a field starts after each `;` inside a cell, where quotes do not hold: its formula made inert too
    const s = lead.replace(/;(\s*)([=+\-@])/g, ";$1'$2");
    return /[",;\t\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return rows.map((r) => r.map(c).join(",")).join("\r\n") + "\r\n";
}

function shorten(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

function fmt(v: number): string {
  const a = Math.abs(v);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toPrecision(2);
}

/** About five round tick values between lo and hi (linear, from 0 when `fromZero`). */
function niceTicks(lo: number, hi: number, fromZero = false): number[] {
  const span = hi - lo || Math.abs(hi) || 1;
  const step0 = span / 5;
  const mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= step0) ?? 10 * mag;
  const out: number[] = [];
  for (let t = fromZero ? 0 : Math.ceil(lo / step) * step; t <= hi + 1e-12 && out.length < 12; t += step)
    if (t >= lo - 1e-12) out.push(Number(t.toPrecision(12)));
  return out;
}
