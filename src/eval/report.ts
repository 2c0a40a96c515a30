/**
 * What `kerncap eval` reports: the records of its results file (src/format/eval-record.ts), one
 * per candidate and input, summed up per candidate (its worst verdict over the inputs, the mean
 * speedup), ranked, and printed as a table; the shards' results files merged (`--merge`).
 */
import { existsSync, lstatSync, statSync, type Stats } from "node:fs";
import { resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { notOwnFile } from "../user-group.ts";
import { warnSharedParent } from "../cache.ts";
import { log } from "../log.ts";
import { assertMergeSize, INPUT_FILE_MAX_BYTES, readInputFile } from "../format/paths.ts";
import { escapeForTerminal } from "../escape.ts";
import { escapedForMessage } from "../format/archive-common.ts";
import { parseRecords, type RecordKind } from "../check/results.ts";
import { missingShards } from "../check/merge.ts";
import type { Shard } from "../check/shard.ts";
import { documentId } from "../format/documents.ts";
import { EVAL_VERDICTS, EvalRecord, type EvalVerdict } from "../format/eval-record.ts";
import { RATIO_FACTOR, withinFactor } from "../format/check-record.ts";
import { nonFinite } from "../format/json-position.ts";
import { recordAuthHint } from "../format/record-auth.ts";
import { CANDIDATE_FAULT_CODES, type Candidate } from "./candidates.ts";
import { meanSpeedup } from "./timing.ts";
import { plural } from "../util/format.ts";
import { EVAL_SHARD_MARKER } from "../format/eval-record.ts";

/** The input of a candidate that never reached a GPU (its build's record). */
export const BUILD_INPUT = "(build)";

/** A record's identity in a results file: its candidate and input (a later record of one replaces an earlier one). */
export const recordKey = (candidate: string, input: string) => `${candidate}\u0000${input}`;

/** One candidate over every input. */
export interface CandidateSummary {
  candidate: string;
  label: string;
  kind: Candidate["kind"];
  /** match only when it matched on every input; else the worst of its inputs' verdicts (VERDICT_ORDER). */
  verdict: EvalVerdict;
  inputs: { input: string; verdict: EvalVerdict }[];
  /** Geometric mean over the inputs of the captured median / this median (above 1: faster), and the extremes of the inputs' intervals; null unless it matched everywhere with a comparison. */
  speedup: number | null;
  low: number | null;
  high: number | null;
  registers: number | null;
  stackFrameBytes: number | null;
  /** Spill stores and loads (bytes) of its build; null where unknown. */
  spillStoreBytes?: number | null;
  spillLoadBytes?: number | null;
  /** The first input's reason that made it not a match. */
  reason: string | null;
  /** That record's error code (E_PATCH, E_CANDIDATE, E_BUILD, E_NO_GPU …; nu7 #20: agent-skill.md promised it here, it was only in records[]); null for a match. */
  code: string | null;
  /** 1 for the fastest matching candidate; null when it does not match. */
  rank: number | null;
}

export interface EvalReport {
  /** The capture folder whose reproducer was built (the first input); null for --merge (its inputs are the shards' records'). */
  dir: string | null;
  inputs: string[];
  results: string | null;
  shard: Shard | null;
  workers: number;
  /** Ranked: the matching candidates fastest first, then those built and not judged (--build-only), then the rest by verdict (VERDICT_ORDER). */
  candidates: CandidateSummary[];
  records: EvalRecord[];
  summary: Record<EvalVerdict, number> & { candidates: number; byCode: Record<string, number>; unjudged: Unjudged };
  /** wall: the whole evaluation; build: the builds' wall times summed; run: the GPU runs' summed. */
  seconds: { wall: number; build: number; run: number };
  /** 2 when a candidate could not be judged (error), else 0 (the verdicts are the result); at least 2 for a --merge --partial that lacks shards. */
  exitCode: number;
  /** --merge --partial: the shards ("K/N") whose files were not given. */
  missingShards?: string[];
}

/**
 * The candidates not judged (verdict error), by why (unjudgedKind): noGpu (E_NO_GPU: built, no GPU
 * here: run where the capture's GPU is), candidate (the candidate's own fault, fixed only by its
 * author: CANDIDATE_FAULTS, and E_CONFINED, a confined build's refusal), other (a worker that died,
 * kerncap's own …: --resume tries them again).
 */
export interface Unjudged {
  noGpu: number;
  candidate: number;
  other: number;
}

/** Why a candidate whose verdict is error was not judged, by its code (see Unjudged). */
export function unjudgedKind(code: string | null): keyof Unjudged {
  if (code === "E_NO_GPU") return "noGpu";
  if (code !== null && (CANDIDATE_FAULTS.has(code) || code === "E_CONFINED")) return "candidate";
  return "other";
}

/** Worst first: a candidate's overall verdict is the first of its inputs' in this order. */
export const VERDICT_ORDER: readonly EvalVerdict[] = ["compile-error", "layout-change", "fault", "timeout", "mismatch", "error", "built", "match"];

/**
 * What the schema cannot say of an eval record: a match or mismatch was judged on a GPU, so it
 * holds its numerics, its device and its worker (a trial's forged match had none and was ranked);
 * and its numbers (a trial's record ranked first with speedup 1e999, read as Infinity): none
 * non-finite, none negative, medians and speedup interval positive, low ≤ speedup ≤ high (the
 * estimate lies in its interval: src/replay/stats.ts compareTimings), faster with its interval
 * above 1 and slower below, and the speedup within RATIO_FACTOR of baselineMedianUs /
 * candidateMedianUs (not 1%: the speedup is a Hodges–Lehmann estimate over the launch pairs, not
 * the medians' ratio; see RATIO_FACTOR); the comparison's seconds, waitSeconds, pairs (an integer)
 * and detectable never negative, its seconds and waitSeconds each no more than the record's
 * runSeconds. Read back by --resume and --merge (EVAL_RECORDS).
 */
export function evalRecordProblem(r: EvalRecord): string | undefined {
  if ((r.verdict === "match" || r.verdict === "mismatch") && (r.numerics === null || r.device === null || r.worker === null))
    return `a ${r.verdict} without the numerics, device or worker of the run that judged it`;
  if (r.verdict === "built" && (r.input !== BUILD_INPUT || !r.build.moduleSha256 || r.timing !== null || r.numerics !== null))
    return `a built record (--build-only) is a build's ("${BUILD_INPUT}", with its module's digest), never a run's`;
  const inf = nonFinite(r);
  if (inf) return inf;
  const negative = (
    [
      ["runSeconds", r.runSeconds],
      ["build.seconds", r.build.seconds],
      ["build.registers", r.build.registers],
      ["build.stackFrameBytes", r.build.stackFrameBytes],
    ] as const
  ).find(([, x]) => x !== null && x < 0);
  if (negative) return `${negative[0]} is ${negative[1]}: never negative`;
  const t = r.timing;
  if (t) {
    const bad = (["baselineMedianUs", "candidateMedianUs", "speedup", "low", "high"] as const).find((k) => !(t[k] > 0));
    if (bad) return `timing.${bad} is ${t[bad]}: a time and a ratio of times are positive`;
    if (!(t.low <= t.speedup && t.speedup <= t.high)) return `timing.speedup ${t.speedup} lies outside its interval [${t.low}, ${t.high}]`;
    if (t.verdict === "faster" && !(t.low > 1)) return `timing.verdict is "faster" but its interval [${t.low}, ${t.high}] does not lie above 1`;
    if (t.verdict === "slower" && !(t.high < 1)) return `timing.verdict is "slower" but its interval [${t.low}, ${t.high}] does not lie below 1`;
    // the comparison's own counts (adversary 75: a sealed record's waitSeconds -1e300 was merged as it was)
    const count = (
      [
        ["seconds", t.seconds],
        ["waitSeconds", t.waitSeconds],
        ["pairs", t.pairs],
        ["detectable", t.detectable],
      ] as const
    ).find(([, x]) => x !== undefined && x !== null && x < 0);
    if (count) return `timing.${count[0]} is ${count[1]}: never negative`;
    if (t.pairs !== undefined && !Number.isInteger(t.pairs)) return `timing.pairs is ${t.pairs}: a count of launch pairs`;
    const partOfRun = (["seconds", "waitSeconds"] as const).find((k) => (t[k] ?? 0) > r.runSeconds);
    if (partOfRun) return `timing.${partOfRun} ${t[partOfRun]} is more than runSeconds ${r.runSeconds}, of which it is a part`;
    const medians = t.baselineMedianUs / t.candidateMedianUs;
    if (!withinFactor(t.speedup, medians, RATIO_FACTOR))
      return `timing.speedup ${t.speedup} is not near baselineMedianUs / candidateMedianUs (${t.baselineMedianUs} / ${t.candidateMedianUs} = ${+medians.toPrecision(4)}): the speedup is of these times`;
  }
  return undefined;
}

/** The schema of the line a sharded eval given no candidate writes in its --jsonl file ({shard, at, auth}): that shard ran (--merge). */
export { EVAL_SHARD_MARKER };

export const EVAL_RECORDS: RecordKind<EvalRecord> = {
  schema: documentId("eval-record"),
  record: EvalRecord,
  problem: evalRecordProblem,
  what: "the eval's results file",
  hint: "The results file was altered or is not kerncap eval's; give another --jsonl file, or remove it to evaluate every candidate again.",
  resumeAuthHint: recordAuthHint("resume", "Nothing was evaluated.", "run without --resume to evaluate every candidate again, or write another --jsonl file"),
  marker: EVAL_SHARD_MARKER,
};

/** A name or message on one line of a terminal (src/escape.ts: a candidate's name and a compiler's message are untrusted text). */
const one = (s: string) => escapeForTerminal(s, { oneLine: true });

/** What an eval that kept no records says of its candidates built where there was no GPU (the MCP server words it as its tools take it: src/mcp/tool-hints.ts). */
export const NO_GPU_KEEP = "here, --build-only --jsonl FILE builds and keeps them, and the same command with --resume there judges them";
/** What an eval that kept no records says of its candidates that were not judged for a reason a run again may not meet. */
export const RERUN_RESUME = "rerun with --jsonl FILE, then --resume (with that --jsonl FILE) tries them again";

/**
 * A reason for one row of a table, on one line and escaped: a compiler's message by its first error
 * line (its first line says only that the build failed); another message longer than 80 characters
 * by its first clause and its error code ("no NVIDIA driver (E_NO_GPU)"), the whole message being
 * said once elsewhere (under the table, or as the command's error). Cut at a word, never inside one.
 */
export function shortReason(reason: string | null, max = 160, code?: string | null): string {
  const lines = (reason ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const err = lines.slice(1).find((l) => /\berror\b/i.test(l));
  let s = err ?? lines[0] ?? "";
  // a build killed at its limit says so, not only that it did not build (nu14 #5)
  const timed = /build\.sh timed out after \d+ s/.exec(s);
  if (!err && timed) s = timed[0];
  else if (!err && code && s.length > 80) {
    // "candidate PATH: what is wrong": the row names the candidate already; its first clause alone said nothing (a new user's finding)
    // (its ": " outside parentheses: one inside a parenthesis left "src/kernel.cu)" of the whole reason, nu89 #4)
    const head = firstClause(s);
    const body = s.startsWith("candidate ") && s.startsWith(": ", head.length) ? s.slice(head.length + 2) : s;
    s = `${firstClause(body)} (${code})`;
  }
  if (s.length > max) {
    const cut = s.lastIndexOf(" ", max - 1);
    s = `${s.slice(0, cut > max / 2 ? cut : max - 1)}…`;
  }
  return one(s);
}

/** `s` up to its first ": " or "; " outside parentheses (a clause never ends inside a parenthesis it opened). */
export function firstClause(s: string): string {
  let depth = 0;
  for (let i = 0; i < s.length - 1; i++) {
    const ch = s[i]!;
    if (ch === "(") depth++;
    else if (ch === ")") depth = Math.max(0, depth - 1);
    else if (depth === 0 && (ch === ":" || ch === ";") && s[i + 1] === " ") return s.slice(0, i);
  }
  return s;
}

/**
 * A candidate's reason as its row in rankedTable shows it: a compile error's first error diagnostic
 * (`src/k.cu:21: error: identifier "blockIdxx" is undefined`: nu12 #2, the table showed build.sh's
 * note instead), else shortReason with its record's error code.
 */
function rowReason(r: EvalReport, c: CandidateSummary): string {
  if (c.verdict === "match") return "";
  const rec = r.records.find((x) => x.candidate === c.candidate && x.reason === c.reason);
  const d = rec?.diagnostics?.find((x) => x.severity !== "warning");
  if (d) return shortReason(`${d.file}:${d.line}: ${d.severity}: ${d.text}`, 120);
  return shortReason(c.reason, 120, rec?.code);
}

/**
 * The full reasons that the table's rows show shortened, each once, with the candidates that gave
 * it ("  a.cu, b.cu: reason"): a reason of several lines (a compiler's messages) on its own lines,
 * indented under its first; each line escaped (src/escape.ts), blank lines left out.
 */
export function reasonNotes(r: EvalReport): string[] {
  const by = new Map<string, string[]>();
  for (const c of r.candidates) {
    if (!c.reason || rowReason(r, c) === one(c.reason)) continue;
    by.set(c.reason, [...(by.get(c.reason) ?? []), one(c.label)]);
  }
  return [...by].map(([reason, labels]) => {
    const [first, ...rest] = reason.split(/\r?\n/).filter((l) => l.trim());
    return [`  ${labels.join(", ")}: ${one(first ?? "")}`, ...rest.map((l) => `      ${one(l.trimEnd())}`)].join("\n");
  });
}

/** One record as a progress line: "match  1.07× [1.05–1.09]  label  input". */
export function recordLine(r: EvalRecord): string {
  const t = r.timing ? `${r.timing.speedup.toFixed(2)}× [${r.timing.low.toFixed(2)}–${r.timing.high.toFixed(2)}]` : "";
  const why = r.verdict === "match" ? "" : `  ${shortReason(r.reason, 160, r.code)}`;
  return `${r.verdict.padEnd(13)} ${t.padEnd(20)} ${one(r.label)}  ${one(r.input)}${why}`;
}

/**
 * The candidates' summaries from their records (a candidate's later record of one input replaces
 * an earlier one; a --build-only build's, any record of a run of it: a --merge of the file that a
 * build-only eval and its --resume on a GPU wrote), ranked (see EvalReport.candidates).
 */
export function summarize(records: EvalRecord[]): CandidateSummary[] {
  const by = new Map<string, EvalRecord[]>();
  for (const r of records) {
    const list = by.get(r.candidate) ?? [];
    const i = list.findIndex((x) => x.input === r.input);
    if (i >= 0) list[i] = r;
    else list.push(r);
    by.set(r.candidate, list);
  }
  for (const [candidate, rs] of by)
    if (rs.some((r) => r.verdict === "built") && rs.some((r) => r.input !== BUILD_INPUT))
      by.set(
        candidate,
        rs.filter((r) => r.verdict !== "built"),
      );
  const out: CandidateSummary[] = [];
  for (const [candidate, rs] of by) {
    const worst = VERDICT_ORDER.find((v) => rs.some((r) => r.verdict === v))!;
    const bad = rs.find((r) => r.verdict === worst && worst !== "match" && worst !== "built"); // a built candidate has no reason, as its record (nu14 #10)
    const sp = worst === "match" ? meanSpeedup(rs.map((r) => r.timing?.speedup)) : undefined;
    const withBuild = rs.find((r) => r.build.registers !== null) ?? rs[0]!;
    out.push({
      candidate,
      label: rs[0]!.label,
      kind: rs[0]!.kind,
      verdict: worst,
      inputs: rs.map((r) => ({ input: r.input, verdict: r.verdict })),
      speedup: sp ?? null,
      low: sp !== undefined ? Math.min(...rs.map((r) => r.timing!.low)) : null,
      high: sp !== undefined ? Math.max(...rs.map((r) => r.timing!.high)) : null,
      registers: withBuild.build.registers,
      stackFrameBytes: withBuild.build.stackFrameBytes,
      spillStoreBytes: withBuild.build.spillStoreBytes ?? null,
      spillLoadBytes: withBuild.build.spillLoadBytes ?? null,
      reason: bad ? `${bad.input === BUILD_INPUT ? "" : `${bad.input}: `}${bad.reason ?? bad.verdict}` : null,
      code: bad?.code ?? null,
      rank: null,
    });
  }
  // matches, then those built and not judged (--build-only: the usable ones where nothing ran: nu16 #7), then the rest worst first
  const order = (v: EvalVerdict) => (v === "match" ? -2 : v === "built" ? -1 : VERDICT_ORDER.indexOf(v));
  out.sort((a, b) => order(a.verdict) - order(b.verdict) || (b.speedup ?? 0) - (a.speedup ?? 0) || a.label.localeCompare(b.label, "en", { numeric: true }));
  let rank = 0;
  for (const c of out) if (c.verdict === "match") c.rank = ++rank;
  return out;
}

/** The report of `records`: the candidates summarized and ranked, the verdicts counted, the seconds summed. */
export function reportOf(
  records: EvalRecord[],
  o: { dir: string | null; inputs: string[]; results: string | null; shard: Shard | null; workers: number; wall: number },
): EvalReport {
  const candidates = summarize(records);
  // why the candidates are not matches, as a program reads it (nu10 #1: only the last line on stderr said it, in words)
  const byCode: Record<string, number> = {};
  const unjudged: Unjudged = { noGpu: 0, candidate: 0, other: 0 };
  for (const c of candidates) {
    if (c.code !== null) byCode[c.code] = (byCode[c.code] ?? 0) + 1;
    if (c.verdict === "error") unjudged[unjudgedKind(c.code)]++;
  }
  const summary = Object.fromEntries([
    ["candidates", candidates.length],
    ...EVAL_VERDICTS.map((v) => [v, candidates.filter((c) => c.verdict === v).length]),
    ["byCode", byCode],
    ["unjudged", unjudged],
  ]) as EvalReport["summary"];
  return {
    dir: o.dir,
    inputs: o.inputs,
    results: o.results,
    shard: o.shard,
    workers: o.workers,
    candidates,
    records,
    summary,
    seconds: { wall: o.wall, build: sumBy(records, (r) => r.build.seconds, true), run: sumBy(records, (r) => r.runSeconds) },
    exitCode: candidates.some((c) => c.verdict === "error") ? 2 : 0,
  };
}

/** The error codes of a candidate that does not fit the capture's src/ (./candidates.ts materialise): no rerun changes them. */
export const CANDIDATE_FAULTS: ReadonlySet<string> = new Set(CANDIDATE_FAULT_CODES);

/**
 * The line that ends an eval with candidates it could not judge (verdict error), by why: those
 * that do not fit src/ (CANDIDATE_FAULTS: fixed by their author, never by a rerun), those without
 * a GPU (E_NO_GPU: run where the GPU is), those a confined build refused (E_CONFINED: fixed by
 * their author, never by a rerun), and the rest (a worker that died …: --resume tries them
 * again; without a --jsonl file, how to get one). `how`: the eval wrote a --jsonl file ("jsonl"),
 * none ("none"), or the report is --merge's of the shards' files ("merge"); `buildOnly`: an eval
 * --build-only (its candidates are not judged: "could not be built").
 */
export function unjudgedLine(r: Pick<EvalReport, "candidates" | "records" | "summary">, how: "jsonl" | "none" | "merge", buildOnly = false): string {
  const errors = r.candidates.filter((c) => c.verdict === "error");
  const codeOf = (c: CandidateSummary) => r.records.find((x) => x.candidate === c.candidate && x.verdict === "error")?.code ?? "";
  // the kinds of summary.unjudged (unjudgedKind), the candidate's own fault said by code: a patch, or what a confined build refused
  const bad = errors.filter((c) => unjudgedKind(codeOf(c)) === "candidate" && codeOf(c) !== "E_CONFINED");
  const noGpu = errors.filter((c) => unjudgedKind(codeOf(c)) === "noGpu");
  const refused = errors.filter((c) => codeOf(c) === "E_CONFINED");
  const rest = errors.length - bad.length - noGpu.length - refused.length;
  const parts: string[] = [];
  if (bad.length) {
    const codes = [...new Set(bad.map(codeOf))].join(", ");
    parts.push(
      `${bad.map((c) => one(c.label)).join(", ")} ${bad.length > 1 ? "do" : "does"} not fit the capture's src/ (${codes}: the reason says why); fix ${bad.length > 1 ? "them" : "it"}: running again as ${bad.length > 1 ? "they are" : "it is"} changes nothing`,
    );
  }
  if (refused.length)
    parts.push(
      `${refused.map((c) => one(c.label)).join(", ")} ${refused.length > 1 ? "were" : "was"} refused by the confined build (E_CONFINED: the reason says what it read or names, or the limit it kept: a source file too large to scan); running again as ${refused.length > 1 ? "they are" : "it is"} changes nothing`,
    );
  if (noGpu.length)
    parts.push(
      how === "merge"
        ? `${plural(noGpu.length, "candidate")} ran where there was no GPU: run ${noGpu.length > 1 ? "their shards" : "its shard"} again with --resume on a machine with the capture's GPU (their kept builds are judged, not built again)`
        : how === "jsonl"
          ? `there is no GPU here for ${plural(noGpu.length, "candidate")}, which built (the same command with --resume on a machine with the capture's GPU ${noGpu.some((c) => r.records.some((x) => x.candidate === c.candidate && x.copy)) ? "judges their kept builds" : "builds and judges them: none was kept here"})`
          : `there is no GPU here for ${plural(noGpu.length, "candidate")}, which built (run the eval on a machine with the capture's GPU; ${NO_GPU_KEEP})`,
    );
  if (rest) {
    const again =
      how === "jsonl"
        ? "the same command with --resume tries them again"
        : how === "merge"
          ? "their shard's command with --resume (its --jsonl FILE) tries them again"
          : RERUN_RESUME;
    parts.push(`${bad.length || noGpu.length || refused.length ? `${rest} more: ` : ""}${again}`);
  }
  // an eval that judges nothing (--build-only) says so (nu13 #15)
  return `${errors.length} of ${plural(r.summary.candidates, "candidate")} could not be ${buildOnly ? "built" : "judged"} (error): ${parts.join("; ")}`;
}

/** Sum of f over records; once per candidate when `perCandidate` (a build is one per candidate, whatever its inputs). */
function sumBy(records: EvalRecord[], f: (r: EvalRecord) => number, perCandidate = false): number {
  const seen = new Set<string>();
  let s = 0;
  for (const r of records) {
    if (perCandidate) {
      if (seen.has(r.candidate)) continue;
      seen.add(r.candidate);
    }
    s += f(r);
  }
  return s;
}

/** The ranked table: one row per candidate; a label two candidates share (an edit pushed again, merged with the one before: nu13 #11) shown with its identity (label@hash). */
export function rankedTable(r: EvalReport): string {
  const uses = new Map<string, number>();
  for (const c of r.candidates) uses.set(c.label, (uses.get(c.label) ?? 0) + 1);
  const labelOf = (c: CandidateSummary) => (uses.get(c.label)! > 1 ? c.candidate : c.label);
  // what ran: a build-only eval (or a merge of one) judged nothing, on no input, with no worker (nu14 #10)
  const judged = r.records.some((x) => x.input !== BUILD_INPUT);
  const rows = r.candidates.map((c) => [
    c.rank !== null ? String(c.rank) : "-",
    c.verdict,
    c.speedup !== null ? `${c.speedup.toFixed(2)}×` : "",
    c.low !== null ? `${c.low.toFixed(2)}–${c.high!.toFixed(2)}` : "",
    c.registers !== null ? String(c.registers) : "",
    c.stackFrameBytes !== null ? String(c.stackFrameBytes) : "",
    // no input judged (a build-only eval, and its merge, which knows no inputs: 0/1 there, 0/0 merged, a new user's finding)
    c.verdict === "built" || (!judged && c.inputs[0]?.input === BUILD_INPUT)
      ? "—"
      : `${c.inputs.filter((i) => i.verdict === "match").length}/${c.inputs[0]?.input === BUILD_INPUT ? r.inputs.length : c.inputs.length}`,
    one(labelOf(c)),
    rowReason(r, c),
  ]);
  const head = ["rank", "verdict", "speedup", "interval", "regs", "frame B", "inputs ok", "candidate", "why"];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((x) => x[i]!.length)));
  const line = (x: string[]) =>
    x
      .map((c, i) => (i === x.length - 1 ? c : c.padEnd(w[i]!)))
      .join("  ")
      .trimEnd();
  const s = r.summary;
  const counts = EVAL_VERDICTS.filter((v) => s[v])
    .map((v) => `${s[v]} ${v}`)
    .join(", ");
  const where = judged ? ` on ${plural(r.inputs.length, "input")}` : "";
  const times =
    r.dir === null
      ? "merged"
      : // builds and runs summed over the records, those an earlier run wrote (--resume) too: said so (a new user's finding)
        `${r.seconds.wall.toFixed(1)} s (the records' builds ${r.seconds.build.toFixed(1)} s${judged ? ` and GPU runs ${r.seconds.run.toFixed(1)} s, summed; ${plural(r.workers, "worker")}` : ", summed"})`;
  const tail = `${plural(s.candidates, "candidate")}${where}: ${counts || "none in this run"}; ${times}`;
  const notes = reasonNotes(r);
  return [line(head), ...rows.map(line), ...(notes.length ? ["why, in full:", ...notes] : []), tail].join("\n");
}

/**
 * Refuse to read back a results file (or its .previous) that another user owns or could have
 * written (the other write bit, or a group's that is not the user's private group): its records
 * would be taken as judged (a trial's forged `match` was ranked without a run). Source: lstat.
 * @throws KerncapError E_UNSAFE_PATH naming the file, its owner or mode
 */
export function refuseSharedRecords(file: string, what = "eval --resume would take its records as judged"): void {
  for (const f of [file, `${file}.previous`]) {
    const st = lstatSync(f, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink()) continue; // not there, or a link (the writer refuses one)
    refuseNotOwn(f, what)(st);
  }
}

/** refuseSharedRecords' test of one file's stat (the fd's, for a file read: src/format/paths.ts readInputFile's check). @throws KerncapError E_UNSAFE_PATH */
const refuseNotOwn = (f: string, what: string) => (st: Stats) => {
  const why = notOwnFile(st, f);
  if (why)
    throw new KerncapError("E_UNSAFE_PATH", `${f} ${why}: ${what}`, {
      hint: "Nothing was evaluated. Use a results file of your own that no one else can write (chmod go-w FILE, or copy it), or start a new one (--jsonl NEW).",
    });
};

/** The hint of a record eval --merge refuses for its authenticator. */
const MERGE_AUTH_HINT = recordAuthHint("merge", "Nothing was merged.", "run that shard again, without --resume");

/**
 * `kerncap eval --merge FILE…`: the shards' results files in one report (a candidate's records of
 * one input in one file: the last; in two files: refused), each record's authenticator verified
 * (src/format/record-auth.ts) before its schema and numbers.
 * @throws KerncapError E_USAGE (no such file), E_RESULTS (damaged, or one candidate and input in two files),
 *   E_RECORD_AUTH (a record without a valid authenticator, naming its line; no key to verify with), E_UNSAFE_PATH
 */
export function mergeEval(files: string[], o: { partial?: boolean } = {}): EvalReport {
  const byKey = new Map<string, EvalRecord>();
  const fileOf = new Map<string, string>();
  // each run's share as its records say it ("K/N"; null: a run without --shard), with the files saying it (missingShards)
  const shards = new Map<string | null, Set<string>>();
  let inputs = new Set<string>();
  const markerOf: { shard: string; runSubject: string | undefined; path: string }[] = [];
  assertMergeSize(files.map((f) => resolve(f)));
  for (const f of files) {
    const path = resolve(f);
    if (!existsSync(path) || statSync(path).isDirectory())
      throw new KerncapError("E_USAGE", `no results file ${path}`, { hint: "Give the --jsonl files the shards wrote." });
    const what = "eval --merge would rank its records as judged";
    refuseSharedRecords(path, what);
    warnSharedParent(path, "eval --merge");
    // and the file read itself (its fd's owner and mode): no file swapped in after the check above
    const text = readInputFile(path, "eval results file", "E_RESULTS", INPUT_FILE_MAX_BYTES, refuseNotOwn(path, what));
    const { records, markers, markerRuns, truncated } = parseRecords(path, text, EVAL_RECORDS, MERGE_AUTH_HINT);
    markers.forEach((k, i) => markerOf.push({ shard: k, runSubject: markerRuns[i], path }));
    // as check --merge says it (adversary 35: eval's merge left the cut record out without a word)
    if (truncated) log.warn(`${path}: its last line is not a whole record (a shard stopped while writing it): left out`);
    // a shard given no candidate writes its authenticated marker (EVAL_SHARD_MARKER); an empty file is one stopped before its first line
    for (const k of markers) {
      if (!shards.has(k)) shards.set(k, new Set());
      shards.get(k)!.add(path);
    }
    if (!records.length && !markers.length)
      log.warn(`${path} holds no eval record (a shard stopped before its first: run that one again with --resume): left out of the merge`);
    const mine = new Map<string, EvalRecord>();
    for (const r of records) {
      mine.set(recordKey(r.candidate, r.input), r); // one file's later record of a pair wins (--resume appends)
      if (!shards.has(r.shard)) shards.set(r.shard, new Set());
      shards.get(r.shard)!.add(path);
    }
    for (const [k, r] of mine) {
      // a pair in two files: which one counts would be the order of the arguments (trial 19: a mismatch became a 2.00× match)
      const other = fileOf.get(k);
      if (other !== undefined)
        throw new KerncapError(
          "E_RESULTS",
          `${path} and ${other} both hold candidate ${escapedForMessage(r.candidate)} on input ${escapedForMessage(r.input)}`,
          {
            hint: "Each shard judges its own candidates: merge each shard's --jsonl file once (kerncap eval --merge shard-*.jsonl, the files each shard's --jsonl named), not two runs of one shard.",
          },
        );
      fileOf.set(k, path);
      byKey.set(k, r);
      if (r.input !== BUILD_INPUT) inputs.add(r.input);
    }
  }
  // every shard 0..N-1 of one run (check --merge's rule: a CI gate must not pass on half the candidates, nu14 #1); a shard
  // given no candidate says so by its authenticated marker line, never by an empty file (adversary 31 #2, check's)
  const missing = missingShards(shards);
  const which = `${missing.length === 1 ? "shard" : "shards"} ${missing.join(", ")}`;
  if (missing.length && !o.partial)
    throw new KerncapError(
      "E_RESULTS",
      `the results files lack ${which} of the eval: a merge without ${missing.length === 1 ? "it" : "them"} would rank fewer candidates`,
      {
        hint: "Nothing was merged. Give every shard's --jsonl file (a shard given no candidate writes one line that says so: give it too), or merge what is there with --partial (exit 2, the missing shards in missingShards).",
      },
    );
  // the exit status 2 said where it is decided (a new user's finding: a WARN line alone, then exit 2)
  if (missing.length)
    log.error(
      `merged without ${which} (--partial): ${missing.length === 1 ? "its" : "their"} candidates are not in this report; exit 2, the merge is incomplete`,
    );
  // the shards K/N of one eval: records of another capture, input set, text of the sources or judging options are another
  // eval's, however genuine (adversary 48: capture B's shard 1/2 merged as capture A's); a file's records of an earlier
  // unsharded eval (appended: "ranks them all") are no shard's
  const runs = new Map<string, Map<string, string>>(); // shard count N → runSubject → a file holding it
  const inRun = (shard: string, runSubject: string | undefined, file: string) => {
    const n = shard.split("/")[1]!;
    const of = runs.get(n) ?? runs.set(n, new Map()).get(n)!;
    if (!of.has(runSubject ?? "none")) of.set(runSubject ?? "none", file);
  };
  for (const r of byKey.values()) if (r.shard !== null) inRun(r.shard, r.runSubject, fileOf.get(recordKey(r.candidate, r.input))!);
  // a shard given no candidate says its eval too (an empty shard of another eval stood for this one's: adversary 51)
  for (const m of markerOf) inRun(m.shard, m.runSubject, m.path);
  for (const [n, of] of runs)
    if (of.size > 1) {
      const [a, b] = [...of.values()].map(escapedForMessage);
      throw new KerncapError(
        "E_RESULTS",
        `${a} and ${b} hold shards K/${n} of two different evals (another capture or input, another text of its sources, or other judging options): they are not shards of one eval`,
        {
          hint: "Nothing was merged. Merge the --jsonl files of the shards of one eval (the same inputs, sources and options, each run with its --shard K/N); run a shard again where its file holds another eval's.",
        },
      );
    }
  refuseUnshardedOfTwoEvals([...byKey.values()], (r) => fileOf.get(recordKey(r.candidate, r.input))!);
  inputs = new Set([...inputs].sort());
  const records = [...byKey.values()];
  const report = reportOf(records, { dir: null, inputs: [...inputs], results: null, shard: null, workers: 0, wall: 0 });
  return missing.length ? { ...report, missingShards: missing, exitCode: Math.max(report.exitCode, 2) } : report;
}

/**
 * Unsharded evals merged must be of one capture set, sources and options (their candidates may
 * differ), as check --merge holds its unsharded runs (adversary 61: evals of two captures ranked
 * as one, exit 0). `fileOf`: the results file a record was read from.
 * @throws KerncapError E_RESULTS naming two files whose unsharded records share no run
 */
function refuseUnshardedOfTwoEvals(records: EvalRecord[], fileOf: (r: EvalRecord) => string): void {
  const whole = new Map<string, Set<string>>(); // a file → the runs its unsharded records name
  for (const r of records)
    if (r.shard === null) {
      const file = fileOf(r);
      (whole.get(file) ?? whole.set(file, new Set()).get(file)!).add(r.runSubject ?? "none");
    }
  const files = [...whole];
  for (let i = 1; i < files.length; i++)
    if (![...files[0]![1]].some((x) => files[i]![1].has(x)))
      throw new KerncapError(
        "E_RESULTS",
        `${escapedForMessage(files[0]![0])} and ${escapedForMessage(files[i]![0])} hold the records of two different evals (another capture or input, another text of its sources, or other judging options): they do not rank as one`,
        { hint: "Nothing was merged. Merge the --jsonl files of evals of the same captures, sources and options (their candidates may differ)." },
      );
}
