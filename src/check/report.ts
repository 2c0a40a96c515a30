/**
 * What `kerncap check` says: the line of each capture as it finishes (stderr, src/check/
 * progress.ts draws it), the summary table (stdout, regressions first), the counts and the exit
 * code: 1 when any capture mismatches or is slower beyond its interval, else 2 when any could not
 * be checked (error), else 0 (skipped captures do not fail a check: their reason is in the table
 * and in JUnit).
 */
import { escapeForTerminal } from "../escape.ts";
import { STATUSES, type CheckRecord, type Status } from "../format/check-record.ts";
import { plural } from "../util/format.ts";
import { ERROR_CODES, type ErrorCode } from "../error-codes.ts";

export type Summary = Record<Status, number> & { captures: number; faster: number };

export function summarize(records: CheckRecord[]): Summary {
  const s = Object.fromEntries(STATUSES.map((x) => [x, 0])) as Record<Status, number>;
  for (const r of records) s[r.status]++;
  return { ...s, captures: records.length, faster: records.filter((r) => r.time?.verdict === "faster").length };
}

export function exitCodeOf(records: CheckRecord[]): number {
  const s = summarize(records);
  return s.mismatch || s.slower ? 1 : s.error ? 2 : 0;
}

/** Regressions first (STATUSES' order), then by identity. */
export function ordered(records: CheckRecord[]): CheckRecord[] {
  const rank = (r: CheckRecord) => STATUSES.indexOf(r.status);
  return [...records].sort((a, b) => rank(a) - rank(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** "1.02× [0.98–1.05]", "no baseline", "—". */
export function timeCell(r: CheckRecord): string {
  const t = r.time;
  if (!t) return "—";
  if (t.ratio !== null) return `${t.ratio.toFixed(2)}× [${t.low!.toFixed(2)}–${t.high!.toFixed(2)}]${t.verdict === "faster" ? " faster" : ""}`;
  return t.verdict.replace("-", " ");
}

/** A rebuild's builder (src/rebuild/rebuilder.ts Builder: build.sh or pruned) as check's lines name it: "rebuilt by the pruned TU in 0.20 s", as validate says "(pruned TU)". */
export const builderWords = (b: string): string => (b === "pruned" ? "the pruned TU" : b);

/** What an E_NO_GPU reason of a --rebuild puts between its build and the machine's message ("rebuilt by build.sh in 0.29 s (it compiles); not replayed: no NVIDIA driver: …"). */
export const NOT_REPLAYED = "; not replayed: ";

/** The short words a row gives the machine's missing GPU in place of its message (said once above the table: noGpuLines). */
const NO_GPU_WORDS = "no GPU (E_NO_GPU)";

/** An E_NO_GPU record's reason split: what came before the machine's message (a --rebuild's build, or nothing), and that message. */
function noGpuParts(r: CheckRecord): { before: string; message: string } | undefined {
  if (r.status !== "error" || r.code !== "E_NO_GPU" || !r.reason) return undefined;
  const i = r.reason.indexOf(NOT_REPLAYED);
  return i < 0 ? { before: "", message: r.reason } : { before: r.reason.slice(0, i + NOT_REPLAYED.length), message: r.reason.slice(i + NOT_REPLAYED.length) };
}

/** The short words a row gives a received capture's refusal (its record's reason, a paragraph naming the files and their digest, said once in the record and the JUnit element). */
const UNTRUSTED_WORDS = "received: its build runs only after --trust (the record's reason names what it runs and its digest) (E_UNTRUSTED)";

/**
 * A row's reason where it is not the record's whole one: a capture not replayed for want of a GPU
 * says "no GPU (E_NO_GPU)" (after its --rebuild's build, when there was one), the machine's message
 * being the same on every row (noGpuLines says it once); a received capture's refusal its short
 * words (nu16 #14: a 600-character paragraph four times over: the progress line, the table, twice
 * in the JUnit); undefined for any other record.
 */
export function rowReason(r: CheckRecord): string | undefined {
  if (r.status === "error" && r.code === "E_UNTRUSTED") return UNTRUSTED_WORDS;
  const p = noGpuParts(r);
  return p && `${p.before}${NO_GPU_WORDS}`;
}

/**
 * The machine's own messages of the captures not replayed for want of a GPU, each said once
 * ("no GPU here (E_NO_GPU, 3 captures): no NVIDIA driver: libcuda could not be loaded; …"); a merge
 * of shards run on several machines may hold several. Escaped, one line each.
 */
export function noGpuLines(records: CheckRecord[]): string[] {
  const by = new Map<string, number>();
  for (const r of records) {
    const p = noGpuParts(r);
    if (p) by.set(p.message, (by.get(p.message) ?? 0) + 1);
  }
  return [...by].map(([message, n]) => `no GPU here (E_NO_GPU, ${plural(n, "capture")}): ${escapeForTerminal(message, { oneLine: true })}`);
}

/** What to show beside the verdict: the reason of a regression, error or skip (rowReason's where it has one); the note otherwise. */
function detail(r: CheckRecord): string {
  if (r.status === "slower") return r.time?.reason ?? "";
  return rowReason(r) ?? r.reason ?? r.note ?? (r.numerics !== "bit-exact" ? (r.numerics ?? "") : "");
}

const us = (r: CheckRecord) => (r.timing ? `${r.timing.medianUs.toFixed(1)} µs` : "");

/** One capture's line: status, time ratio, median, identity, kernel, why. */
export function recordLine(r: CheckRecord): string {
  // one line whatever the names hold: a kernel name, an id or a reason from a capture or a results file may carry controls or newlines
  const one = (s: string) => escapeForTerminal(s, { oneLine: true });
  const kernel = r.kernel ? `  ${one(r.kernel.length > 60 ? r.kernel.slice(0, 57) + "…" : r.kernel)}` : "";
  const why = detail(r);
  return `${r.status.padEnd(8)} ${timeCell(r).padEnd(22)} ${us(r).padStart(11)}  ${one(r.id)}${kernel}${why ? ` — ${one(why)}` : ""}`;
}

/** `--print-summary` of check (ncu's option): one line per capture (the default), per kernel, per GPU, or the count line only. */
export const CHECK_SUMMARIES = ["per-capture", "per-kernel", "per-gpu", "none"] as const;
export type CheckSummary = (typeof CHECK_SUMMARIES)[number];

/** The summary table (regressions first, or one row per kernel or GPU: groupTable) and the count line; above it, once, the machine's message of a missing GPU (noGpuLines). */
export function summaryTable(records: CheckRecord[], seconds: number, by: CheckSummary = "per-capture"): string {
  const s = summarize(records);
  const L = [
    ...noGpuLines(records),
    ...(by === "per-capture"
      ? [`${"STATUS".padEnd(8)} ${"TIME vs BASELINE".padEnd(22)} ${"MEDIAN".padStart(11)}  CAPTURE  KERNEL — WHY`, ...ordered(records).map(recordLine)]
      : by === "none"
        ? []
        : [groupTable(records, by === "per-kernel" ? "kernel" : "gpu")]),
  ];
  const built = records.filter((r) => r.verdict === "built").length;
  L.push(countLine(s, seconds) + (built ? ` (${built} of them built only: --build-only replays none)` : ""));
  return L.join("\n");
}

/**
 * The count line of a check: "5 captures checked (2.0 s of checks): 1 slower, 2 errors, 2 ok (1
 * faster than the baseline)", the seconds summed over the captures (workers check side by side,
 * and a resumed run's kept records count: not the run's wall time); when none could be replayed (every one an error or skipped) no "checked" and no
 * time: "6 captures: 5 errors, 1 skipped".
 */
export function countLine(s: Summary, seconds: number): string {
  const parts = STATUSES.filter((x) => s[x]).map((x) => (x === "error" ? plural(s[x], "error") : `${s[x]} ${x}`));
  const checked = s.ok + s.mismatch + s.slower;
  const head = s.captures && !checked ? plural(s.captures, "capture") : `${plural(s.captures, "capture")} checked (${seconds.toFixed(1)} s of checks)`;
  return `${head}: ${parts.join(", ") || "none"}${s.faster ? ` (${s.faster} faster than the baseline)` : ""}`;
}

/** The most captures named in one step of errorSummary (the table names every one). */
const NAMED = 3;

/**
 * What the end of a check says about its captures that could not be checked (status error): a
 * line counting them by code, most frequent first ("6 of 6 captures could not be checked: 5
 * E_NO_GPU, 1 E_CHECKSUM"), and one next step per code, in that order: E_NO_GPU, run where the
 * captures' GPU is (--resume checks only what is not done); E_CHECKSUM, the capture is damaged:
 * capture or restore it; E_UNTRUSTED, --trust; any other code its hint from src/error-codes.ts. A step names its captures (up to 3)
 * but for E_NO_GPU (the machine's, not theirs). `how`: a run (--resume, in its results folder,
 * checks every error again) or --merge of the shards' files (their shards' commands do).
 * Codes and identities come from records (a results file from someone else): escaped, one line.
 */
export function errorSummary(records: CheckRecord[], how: "run" | "merge"): { line: string; steps: string[] } {
  const one = (x: string) => escapeForTerminal(x, { oneLine: true });
  const byCode = new Map<string, string[]>();
  for (const r of records) if (r.status === "error") byCode.set(r.code ?? "E_INTERNAL", [...(byCode.get(r.code ?? "E_INTERNAL") ?? []), r.id]);
  const codes = [...byCode].sort((a, b) => b[1].length - a[1].length || (a[0] < b[0] ? -1 : 1));
  const errors = codes.reduce((a, [, ids]) => a + ids.length, 0);
  // --resume checks every capture that ended in an error again, and none that has a verdict (src/check/check.ts openResults)
  const resume = (flags: string, it: string) =>
    how === "run"
      ? `the same command with ${flags} checks ${it} again, and only ${it}`
      : it === "it"
        ? `its shard's command with ${flags} checks it again`
        : `their shards' commands with ${flags} check them again`;
  const steps = codes.map(([code, ids]) => {
    const named = ids.length <= NAMED ? `: ${ids.map(one).join(", ")}` : `: ${ids.slice(0, NAMED).map(one).join(", ")} and ${ids.length - NAMED} more`;
    const what = `${one(code)} (${code === "E_NO_GPU" ? ids.length : `${ids.length}${named}`})`;
    const it = ids.length > 1 ? "them" : "it";
    switch (code) {
      case "E_NO_GPU":
        return `${what}: no GPU here to replay on; on a machine with the ${ids.length > 1 ? "captures'" : "capture's"} GPU and driver, ${resume("--resume", it)} (kerncap doctor says what this machine lacks); here, kerncap check --rebuild --build-only checks that ${ids.length > 1 ? "they build" : "it builds"}, with no GPU`;
      case "E_CHECKSUM":
        return `${what}: the capture${ids.length > 1 ? "s are" : " is"} damaged (a file missing, cut or altered); capture ${it} again or restore ${it} from a copy, then ${resume("--resume", it)}`;
      case "E_UNTRUSTED":
        // plain --trust is refused where the capture is another user's, in a folder others can write, or its build.sh is not kerncap's
        // (trial 11: the hint sent the user round in a loop); a digest the user read is what works there, and it is recorded
        return `${what}: received, so --rebuild did not run ${ids.length > 1 ? "their" : "its"} build.sh; read it (its record's reason names the files), and if you trust ${it}, ${resume("--trust --resume", it)}, or, where plain --trust is not enough (another user's capture, a folder others write, a build.sh of its own), run kerncap validate DIR --trust=DIGEST on ${ids.length > 1 ? "each" : "it"} (recorded: check then builds ${it}) and ${resume("--resume", it)}`;
      default:
        return `${what}: ${Object.hasOwn(ERROR_CODES, code) ? ERROR_CODES[code as ErrorCode].hint : "the reason in the table says why"}`;
    }
  });
  return {
    line: `${errors} of ${plural(records.length, "capture")} could not be checked: ${codes.map(([code, ids]) => `${ids.length} ${one(code)}`).join(", ")}`,
    steps,
  };
}

/**
 * One row per kernel (the record's kernel name; "?" when the capture could not be read) or per GPU
 * (the CUDA_VISIBLE_DEVICES entry its worker had; "-": the GPUs the check process saw): captures,
 * the count of each status, and the geometric mean of the time ratios against the baseline (of
 * the captures that have one; "—" when none). Groups with a regression first, then by name.
 */
export function groupTable(records: CheckRecord[], by: "kernel" | "gpu"): string {
  const one = (x: string) => escapeForTerminal(x, { oneLine: true });
  const groups = new Map<string, CheckRecord[]>();
  for (const r of records) {
    const k = by === "kernel" ? (r.kernel ?? "?") : (r.gpu ?? "-");
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  const rows = [...groups].map(([name, rs]) => {
    const s = summarize(rs);
    const ratios = rs.map((r) => r.time?.ratio).filter((x): x is number => typeof x === "number" && x > 0);
    const geo = ratios.length ? Math.exp(ratios.reduce((a, x) => a + Math.log(x), 0) / ratios.length) : null;
    return {
      bad: s.mismatch + s.slower + s.error,
      cells: [
        String(s.captures),
        ...STATUSES.map((x) => String(s[x])),
        geo === null ? "—" : `${geo.toFixed(2)}×`,
        one(name.length > 80 ? name.slice(0, 77) + "…" : name),
      ],
    };
  });
  rows.sort((a, b) => Number(b.bad > 0) - Number(a.bad > 0) || (a.cells.at(-1)! < b.cells.at(-1)! ? -1 : 1));
  const head = ["captures", ...STATUSES, "time (geomean)", by === "kernel" ? "kernel" : "gpu"];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r.cells[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i < head.length - 1 ? x.padStart(w[i]!) : x)).join("  ");
  return [line(head), ...rows.map((r) => line(r.cells))].join("\n");
}
