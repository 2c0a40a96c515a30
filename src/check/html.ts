/**
 * `check --report FILE.html` and `--csv FILE.csv`: the check's records as a page to look at and
 * as a table for a spreadsheet (src/util/html-report.ts draws and escapes). The page: the counts;
 * each timed capture's time ratio against the baseline with its 99% interval (src/check/timing.ts)
 * as a chart, the slower/faster thresholds dashed; the table of every capture (regressions first,
 * as the terminal's); and each failed capture's first differing region (the runner's reason:
 * region VA, kind, bytes differing, first differing byte) or error.
 */
import type { CheckRecord, Status } from "../format/check-record.ts";
import { COLORS, csv, esc, intervalChart, page, table, tag } from "../util/html-report.ts";
import type { CheckReport } from "./check.ts";
import { countLine, timeCell } from "./report.ts";

const STATUS_COLOR: Record<Status, string> = { mismatch: COLORS.bad, slower: COLORS.warn, error: COLORS.bad, skipped: COLORS.neutral, ok: COLORS.good };

function ratioColor(r: CheckRecord): string {
  if (r.status !== "ok" && r.status !== "slower") return STATUS_COLOR[r.status];
  return r.time?.verdict === "slower" ? COLORS.warn : r.time?.verdict === "faster" ? COLORS.accent : COLORS.good;
}

/** The report as one self-contained HTML page. `title`: what was checked (the paths given). */
export function checkHtml(r: CheckReport, title: string): string {
  const s = r.summary;
  const sub = `${countLine(s, r.seconds)}; slower means the ratio's interval lies wholly above ${(1 + r.slowerPct / 100).toFixed(2)}×${r.baseline ? `; baseline ${r.baseline}` : ""}${r.rebuild ? "; rebuilt from the reproducers" : ""}${r.shard ? `; shard ${r.shard.index}/${r.shard.count}` : ""}`;
  const sections: string[] = [];
  const timed = r.captures.filter((c) => c.time && c.time.ratio !== null && c.time.low !== null && c.time.high !== null);
  sections.push(`<h2>Time against the baseline</h2>`);
  if (timed.length) {
    sections.push(
      intervalChart(
        timed.map((c) => ({ label: c.id, value: c.time!.ratio!, low: c.time!.low!, high: c.time!.high!, color: ratioColor(c) })),
        { reference: 1, thresholds: [1 - r.slowerPct / 100, 1 + r.slowerPct / 100], axis: "time ratio (this run / baseline), with its interval; log scale" },
      ),
    );
  } else
    sections.push(
      `<p>No capture has a time ratio: ${esc(!r.captures.length ? "no captures" : r.buildOnly ? "none was replayed or timed (--build-only: each reproducer built)" : "none was timed against a baseline (a first run records it)")}.</p>`,
    );
  sections.push(`<h2>Captures</h2>`);
  sections.push(
    table(
      ["status", "time vs baseline", "median µs", "baseline µs", "capture", "kernel", "why"],
      r.captures.map((c) => [
        tag(c.status, STATUS_COLOR[c.status]),
        timeCell(c),
        c.timing ? c.timing.medianUs.toFixed(2) : null,
        c.time?.baselineMedianUs != null ? c.time.baselineMedianUs.toFixed(2) : null,
        c.id,
        c.kernel,
        detailOf(c),
      ]),
      { numeric: [2, 3] },
    ),
  );
  const failed = r.captures.filter((c) => c.status === "mismatch" || c.status === "error");
  if (failed.length) {
    sections.push(`<h2>Failed captures</h2>`);
    for (const c of failed) {
      sections.push(`<h3 class="mono">${esc(c.id)}</h3><p>${tag(c.status, STATUS_COLOR[c.status]).html} <code>${esc(c.kernel ?? "")}</code></p>`);
      sections.push(
        `<p>${c.status === "mismatch" ? "First differing region: " : `Error ${esc(c.code ?? "")}: `}<code>${esc(c.reason ?? "(no reason recorded)")}</code></p><p class="sub">${esc(c.path)}</p>`,
      );
    }
  }
  return page(`kerncap check: ${title}`, sub, sections);
}

/** The table of the page as CSV, one row per capture (numbers unformatted: µs, ratios). */
export function checkCsv(r: CheckReport): string {
  return csv([
    [
      "status",
      "ratio",
      "ratio_low",
      "ratio_high",
      "time_verdict",
      "median_us",
      "baseline_median_us",
      "capture",
      "path",
      "kernel",
      "numerics",
      "code",
      "reason",
    ],
    ...r.captures.map((c) => [
      c.status,
      c.time?.ratio ?? null,
      c.time?.low ?? null,
      c.time?.high ?? null,
      c.time?.verdict ?? null,
      c.timing?.medianUs ?? null,
      c.time?.baselineMedianUs ?? null,
      c.id,
      c.path,
      c.kernel,
      c.numerics,
      c.code,
      detailOf(c),
    ]),
  ]);
}

function detailOf(c: CheckRecord): string {
  if (c.status === "slower") return c.time?.reason ?? "";
  return c.reason ?? c.note ?? "";
}
