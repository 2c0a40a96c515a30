/**
 * `tune --report FILE.html` and `--csv FILE.csv`: the configs as a table and a bar chart of their
 * median times (µs; the app's own module highlighted, its time a dashed line), and, when exactly
 * two of the configs' parameters vary (BLOCK_M × num_warps, TILE × maxrregcount), a heatmap of
 * the time over those two (src/util/html-report.ts draws and escapes: compiler errors and config
 * names come from the capture).
 */
import { frontends } from "../frontends/index.ts";
import type { TuneResult, TuneRow } from "../frontends/tune.ts";
import { barChart, COLORS, csv, esc, heatmap, page, table, tag } from "../util/html-report.ts";

const VERDICT_COLOR: Record<TuneRow["verdict"], string> = {
  match: COLORS.good,
  mismatch: COLORS.bad,
  "compile-error": COLORS.neutral,
  "launch-error": COLORS.bad,
  built: COLORS.neutral,
};

/** A config's parameters by name, as the frontend whose tune made it reads them (TuneDriver.params: Triton's constexprs and compile options; CUDA's macros, maxrregcount, the extra flags as one); {} when none does. */
export function configParams(c: unknown): Record<string, string> {
  for (const f of frontends()) {
    const p = f.tune?.params(c);
    if (p) return p;
  }
  return {};
}

const label = (r: TuneRow<unknown>) => (r.captured ? `${r.label || "app's config"} (the app's)` : r.label || "(no parameters)");

/** The parameters that take more than one value among the configs swept (the app's own row left out), in first-seen order. */
export function varyingParams(rows: TuneRow<unknown>[]): string[] {
  const values = new Map<string, Set<string>>();
  for (const r of rows) if (!r.captured) for (const [k, v] of Object.entries(configParams(r.config))) values.set(k, (values.get(k) ?? new Set()).add(v));
  return [...values].filter(([, s]) => s.size > 1).map(([k]) => k);
}

function numericOrder(vals: string[]): string[] {
  return vals.every((v) => /^-?\d+(\.\d+)?$/.test(v)) ? vals.sort((a, b) => Number(a) - Number(b)) : vals.sort();
}

/** The tune as one self-contained HTML page. */
export function tuneHtml(r: TuneResult<unknown>): string {
  const rows = r.rows as TuneRow<unknown>[];
  const app = rows.find((x) => x.captured);
  const w = r.winner;
  const sub = `kernel ${r.kernel} (${r.frontend}); ${rows.length} rows, built in ${r.seconds.compile.toFixed(1)} s, checked and timed in ${r.seconds.replay.toFixed(1)} s; ${w ? `winner: ${label(w)}${w.speedup && !w.captured ? `, ${w.speedup.toFixed(2)}× the app's` : ""}` : "no config matched the app's after state"}`;
  const sections: string[] = [];
  if (w && r.paste) sections.push(`<h2>To paste</h2><pre><code>${esc(r.paste)}</code></pre>`);
  sections.push(`<h2>Median time per config</h2>`);
  sections.push(
    barChart(
      rows.map((x) => ({
        label: label(x),
        value: x.verdict === "match" || x.verdict === "mismatch" ? x.medianUs : null,
        color: x.captured ? COLORS.accent : x.verdict === "match" ? COLORS.good : COLORS.bad,
        note: x.verdict,
      })),
      { axis: "median time per launch (µs); the app's own dashed", unit: "µs", ...(app?.medianUs != null ? { reference: app.medianUs } : {}) },
    ),
  );
  const vary = varyingParams(rows);
  if (vary.length === 2) {
    const [px, py] = vary as [string, string];
    const swept = [...rows.filter((x) => !x.captured), ...rows.filter((x) => x.captured)]; // the app's config is a cell too, where it has both parameters
    const xs = numericOrder([...new Set(swept.map((x) => configParams(x.config)[px]).filter((v): v is string => v !== undefined))]);
    const ys = numericOrder([...new Set(swept.map((x) => configParams(x.config)[py]).filter((v): v is string => v !== undefined))]);
    sections.push(`<h2>${esc(px)} × ${esc(py)}</h2>`);
    sections.push(
      heatmap(
        xs,
        ys,
        (xv, yv) => {
          const hit = swept.find((x) => configParams(x.config)[px] === xv && configParams(x.config)[py] === yv);
          if (!hit) return null;
          if (hit.verdict !== "match" || hit.medianUs === null) return { v: null, text: hit.verdict };
          return { v: hit.medianUs, text: `${hit.medianUs.toFixed(1)} µs` };
        },
        { xAxis: px, yAxis: py, empty: "—", title: `median µs over ${px} and ${py}` },
      ),
    );
  }
  // registers per thread where the frontend reads them from its modules (CUDA's cubins)
  const regs = rows.some((x) => x.registers !== undefined);
  sections.push(`<h2>Configs</h2>`);
  sections.push(
    table(
      ["config", "verdict", "median µs", "vs the app's", ...(regs ? ["registers"] : []), "note"],
      rows.map((x) => [
        label(x),
        tag(x.verdict, VERDICT_COLOR[x.verdict]),
        x.medianUs !== null ? x.medianUs.toFixed(2) : null,
        x.speedup !== null ? `${x.speedup.toFixed(2)}×` : null,
        ...(regs ? [x.registers ?? null] : []),
        x.error ?? x.note ?? "",
      ]),
      { numeric: [2, 3, ...(regs ? [4] : [])] },
    ),
  );
  return page(`kerncap tune: ${r.dir}`, sub, sections);
}

/** The configs as CSV: one row each, a column per parameter, then the verdict and times. */
export function tuneCsv(r: TuneResult<unknown>): string {
  const rows = r.rows as TuneRow<unknown>[];
  const params = [...new Set(rows.flatMap((x) => Object.keys(configParams(x.config))))];
  return csv([
    ["config", "captured", ...params, "verdict", "median_us", "speedup", "registers", "error"],
    ...rows.map((x) => {
      const p = configParams(x.config);
      return [
        x.label ?? "",
        x.captured ? "yes" : "no",
        ...params.map((k) => p[k] ?? null),
        x.verdict,
        x.medianUs,
        x.speedup,
        x.registers ?? null,
        x.error ?? null,
      ];
    }),
  ]);
}
