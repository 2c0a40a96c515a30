/**
 * `kerncap check DIR…` as library code: captures found (src/check/discover.ts), taken by shard
 * (src/check/shard.ts), replayed — rebuilt first with --rebuild — by workers (src/check/pool.ts,
 * src/ops/check.ts checkCapture), each outcome timed against the baseline (src/check/timing.ts,
 * src/check/baseline.ts) and written to the results file as it comes (src/check/results.ts);
 * then the baseline and the JUnit XML. `kerncap check --merge` joins results files (./merge.ts).
 *
 * Files, in the results folder (--results DIR, default ./kerncap-check): results.jsonl (this
 * run's; the previous run's moved to results.previous.jsonl unless --resume), baseline.json (the
 * default baseline: read, and each capture's first check recorded in it). --baseline FILE reads
 * another baseline and never writes it; --write-baseline FILE writes this run's timings of every
 * matching capture over that baseline's. A run that finds no capture (a usage error), or whose
 * shard holds none, writes nothing there; a results folder it made is removed again when no
 * record went into it (interrupted before the first capture finished).
 */
import { existsSync, lstatSync, mkdirSync, realpathSync, rmdirSync, rmSync, statSync, type Stats } from "node:fs";
import { join, resolve } from "node:path";
import { checkOutputFile, refuseLink, writeFileAtomic } from "../util/write-file.ts";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { assertMergeSize, INPUT_FILE_MAX_BYTES, readInputFile } from "../format/paths.ts";
import { notOwnFile } from "../user-group.ts";
import { RECEIVED_MARK } from "../format/file-names.ts";
import { shellPath } from "../util/shell-quote.ts";
import { log } from "../log.ts";
import { escapeForTerminal } from "../escape.ts";
import { plural } from "../util/format.ts";
import { StopSignals, signalExitCode } from "../process-group.ts";
import { BASELINE_FILE, baselineEntry, readBaseline, requireBaselineFile, withTimings, writeBaseline, writeRunBaseline, type Baseline } from "./baseline.ts";
import { discoverCaptures, type CaptureRef } from "./discover.ts";
import { junitXml } from "./junit.ts";
import { drain, type OpenRunner } from "./pool.ts";
import { CheckProgress } from "./progress.ts";
import { CheckRecord, recordProblem, statusOf, type Outcome, type TimeJudgement } from "../format/check-record.ts";
import { lockResultsFolder, parseResults, PREVIOUS_RESULTS_FILE, ResultsLog, RESULTS_FILE } from "./results.ts";
import { ordered, summarize, exitCodeOf, type Summary } from "./report.ts";
import type { CheckSettings } from "./runner.ts";
import { shardClaimAuth, shardOf, type Shard } from "./shard.ts";
import { judgeTime } from "./timing.ts";
import { privateTempFolder, warnSharedParent } from "../cache.ts";
import { documentId } from "../format/documents.ts";
import { keyForReading, keyForWriting, recordAuthHint, recordAuthProblem, sealRecord, type ResultsKey } from "../format/record-auth.ts";
import { checkRunSubject, checkSubject, staleWhy } from "../format/subject.ts";

export const DEFAULT_RESULTS_DIR = "kerncap-check";

export interface CheckOptions {
  paths: string[];
  settings: CheckSettings;
  /** The results folder. */
  results: string;
  resume: boolean;
  /** --baseline (read only); undefined: RESULTS/baseline.json, read and added to. */
  baseline?: string;
  writeBaseline?: string;
  slowerPct: number;
  shard?: Shard;
  /** One entry per worker: its CUDA_VISIBLE_DEVICES (null: this process's). */
  gpus: (string | null)[];
  junit?: string;
  /** Draw the status line in place (stderr is a terminal). */
  live: boolean;
  /** How workers are started (src/check/pool.ts workerProcesses; the CPU tests give their own), given where their log lines go and the folder of the GPUs' timing windows (several workers). */
  open: (say: (line: string) => void, timingWindows?: string) => OpenRunner;
}

export interface CheckReport {
  /** The results file, the baseline read. */
  results: string | null;
  baseline: string | null;
  shard: Shard | null;
  workers: number;
  rebuild: boolean;
  /** --build-only: every capture's reproducer built, none replayed or timed (baseline null); absent otherwise. */
  buildOnly?: true;
  slowerPct: number;
  /** Regressions first. */
  captures: CheckRecord[];
  summary: Summary;
  exitCode: number;
  seconds: number;
  /** --merge --partial: the shards ("K/N") the files lacked. */
  missingShards?: string[];
  /** A sharded run's: the authenticator of its claim to be that shard of exactly these captures (shardClaimAuth), what --merge takes a document's shard from. */
  shardAuth?: string;
  /** The run's subject (src/format/subject.ts checkRunSubject), which its records carry too; covered by shardAuth. */
  runSubject?: string;
}

/** `report` with its shard's claim authenticated (a sharded run's, where there is a key to write with). */
function withShardAuth(report: CheckReport): CheckReport {
  if (!report.shard) return report;
  const auth = shardClaimAuth(
    `${report.shard.index}/${report.shard.count}`,
    report.captures.map((r) => r.id),
    keyForWriting(),
    report.runSubject,
  );
  return auth ? { ...report, shardAuth: auth } : report;
}

/** A judgement that makes no claim: the baseline's times and this run's were not taken alike (`reason` says how). */
function notComparable(baselineMedianUs: number, slowerPct: number, reason: string): TimeJudgement {
  return { verdict: "not-comparable", ratio: null, low: null, high: null, baselineMedianUs, slowerPct, reason };
}

/** The timing judgement of an outcome against the baseline (null when it did not match or has no times). */
export function judge(x: Outcome, baseline: Baseline, slowerPct: number): TimeJudgement | null {
  if (x.outcome !== "done" || x.verdict !== "match" || !x.timing) return null;
  const b = baselineEntry(baseline, x.id);
  if (b && x.device && (b.device.name !== x.device.name || b.device.arch !== x.device.arch)) {
    return notComparable(
      b.medianUs,
      slowerPct,
      `the baseline was timed on ${b.device.name} (${b.device.arch}), this run on ${x.device.name} (${x.device.arch})`,
    );
  }
  const l2 = (t: { l2?: string }) => (t.l2 === "flushed" ? "flushed (--flush-l2)" : "warm");
  if (b && l2(b) !== l2(x.timing)) {
    return notComparable(
      b.medianUs,
      slowerPct,
      `the baseline was timed with L2 ${l2(b)}, this run with L2 ${l2(x.timing)}: compare with a baseline timed the same way (--baseline FILE, or another --results folder)`,
    );
  }
  return judgeTime(x.timing.samplesUs, b?.samplesUs, slowerPct);
}

/** A finished record from a worker's outcome (or a record judged again: its `auth` left out, as its time judgement is new). */
export function recordOf(x: Outcome, baseline: Baseline, slowerPct: number, worker: number, gpu: string | null): CheckRecord {
  const time = judge(x, baseline, slowerPct);
  const { auth: _, ...outcome } = x as Outcome & { auth?: string };
  return { ...outcome, status: statusOf(outcome, time), time, worker, gpu };
}

/** A file the run writes at its end, checked before any capture is (src/util/write-file.ts). */
export { checkOutputFile };

/**
 * Refuse, before any capture is checked, a results folder another local user could have written:
 * the folder `dir` (when it exists), its results.jsonl, results.previous.jsonl and baseline.json,
 * and a --baseline file (`baseline`), each owned by another user or writable by group or others.
 * Their records would be taken as checked on --resume, their baseline would judge the timings,
 * and this run's results would land in their folder. Source: stat owner and mode bits (the folder
 * through a link to it, as mkdir and the writers would use it; the files as they lie).
 * @throws KerncapError E_UNSAFE_PATH (exit 2) naming the path, its owner or mode, and another --results
 */
export function refuseSharedResults(dir: string, baseline?: string): void {
  // a folder unpacked from an archive (its root named kerncap-check, unpacked where check writes by default) holds the sender's records
  if (existsSync(join(dir, RECEIVED_MARK)))
    throw new KerncapError(
      "E_UNSAFE_PATH",
      `${dir} was unpacked from an archive (${RECEIVED_MARK}): its records and baseline are the sender's, which check would take as its own`,
      {
        hint: "Nothing was checked. Give a results folder of your own: --results DIR (a new one is made).",
      },
    );
  const uid = process.geteuid?.() ?? process.getuid?.();
  if (uid === undefined) return; // no users to tell apart (not POSIX)
  // the folder's name as a link another user made (in a sticky /tmp: ./kerncap-check pointing at another results folder of yours)
  const named = lstatSync(dir, { throwIfNoEntry: false });
  if (named?.isSymbolicLink() && named.uid !== uid)
    throw new KerncapError("E_UNSAFE_PATH", `${dir} (the results folder) is a symbolic link another user made (uid ${named.uid})`, {
      hint: "Nothing was checked. Give a results folder of your own: --results DIR.",
    });
  const paths: [string, string, boolean][] = [
    [dir, "the results folder", true],
    ...[RESULTS_FILE, PREVIOUS_RESULTS_FILE, BASELINE_FILE].map((f): [string, string, boolean] => [
      join(dir, f),
      f === BASELINE_FILE ? "the results folder's baseline" : "the results file",
      false,
    ]),
  ];
  if (baseline) paths.push([baseline, "the --baseline file", false]);
  for (const [path, what, follow] of paths) {
    let st;
    try {
      st = follow ? statSync(path) : lstatSync(path);
    } catch {
      continue; // not there: this run makes it, its own
    }
    if (st.isSymbolicLink()) continue; // a link's own mode says nothing: the writers refuse a link (E_UNSAFE_PATH, src/util/write-file.ts)
    const mode = (st.mode & 0o7777).toString(8);
    const why =
      st.uid !== uid
        ? `belongs to another user (uid ${st.uid}; you are uid ${uid})`
        : st.mode & 0o022
          ? `can be written by ${st.mode & 0o002 ? "every user" : "every member of its group"} (mode ${mode})`
          : undefined;
    if (!why) continue;
    const label = what === "the --baseline file" ? "--baseline" : "--results";
    throw new KerncapError(
      "E_UNSAFE_PATH",
      `${path} (${what}) ${why}: another user could have written its records or baseline, which check would take as its own`,
      {
        hint:
          label === "--results"
            ? `Nothing was checked. Give a folder of your own that no one else can write: --results DIR (a new one is made, mode 0755)${st.uid === uid ? `, or close it: chmod go-w ${shellPath(path)}` : ""}.`
            : `Nothing was checked. Copy the baseline into a file of your own (cp ${shellPath(path)} mine.json; chmod go-w mine.json) and give --baseline mine.json.`,
      },
    );
  }
}

/**
 * Run a check.
 * @throws KerncapError E_BASELINE (no --baseline file: before anything runs; one that is not a
 *   baseline), E_NOT_CAPTURE (a path that does not exist, no captures under the paths, as clean says it), E_USAGE (two with one identity), E_UNSAFE_PATH
 *   (a results folder, results file or baseline another user could write: refuseSharedResults), E_RESULTS
 *   (a damaged results file on --resume), E_WORKER (every worker died),
 *   E_INTERRUPTED (exit 130/143: what finished is in the results file; --resume continues)
 */
export async function runCheck(o: CheckOptions): Promise<CheckReport> {
  if (o.baseline) requireBaselineFile(resolve(o.baseline));
  if (o.junit) checkOutputFile("junit", o.junit);
  if (o.writeBaseline) checkOutputFile("write-baseline", o.writeBaseline);
  const { mine, corpus } = await capturesOfShard(o);
  // the run every shard of it names (a shard of another run, or another corpus' content, is refused by --merge)
  const runSubject = checkRunSubject(corpus, o.settings);
  const dir = resolve(o.results);
  if (!mine.length) {
    // nothing to check: the results folder is neither made nor touched (a previous run's results stay where they are)
    log.warn(`this shard holds no capture (more shards than captures?): nothing checked, nothing written to ${dir}`);
    const report = reportOf([], {
      results: null,
      baseline: o.baseline ? resolve(o.baseline) : null,
      shard: o.shard ?? null,
      workers: o.gpus.length,
      rebuild: o.settings.rebuild,
      ...(o.settings.buildOnly ? { buildOnly: true as const } : {}),
      slowerPct: o.slowerPct,
      seconds: 0,
    });
    if (o.junit) writeJunit(o.junit, report);
    return withShardAuth({ ...report, runSubject });
  }
  // what each record's verdict is judged on (src/format/subject.ts), taken before any capture is checked
  const subjects = new Map(mine.map((c) => [c.id, checkSubject(c, o.settings)]));
  const run = openResults(o, dir, subjects);
  run.runSubject = runSubject;
  try {
    return await checkRun(o, run, mine, dir);
  } finally {
    run.unlock();
  }
}

/** A run with its results folder open and locked (openResults): the captures checked, the baselines and JUnit written. @throws as runCheck */
async function checkRun(o: CheckOptions, run: OpenedRun, mine: CaptureRef[], dir: string): Promise<CheckReport> {
  const { kept } = run;
  const tasks = mine.filter((c) => !run.done.has(c.id));
  const stops = new StopSignals().install();
  const fresh = await checkAll(o, tasks, run, stops);
  const mineIds = new Set(mine.map((c) => c.id));
  const records = [...kept.filter((r) => mineIds.has(r.id)), ...fresh];
  const reportOfRun = () =>
    reportOf(records, {
      results: join(dir, RESULTS_FILE),
      // --build-only times nothing: no baseline was read against or written (nu16 #5: the report named a baseline.json never made)
      baseline: o.settings.buildOnly ? null : run.baselinePath,
      shard: o.shard ?? null,
      workers: o.gpus.length,
      rebuild: o.settings.rebuild,
      ...(o.settings.buildOnly ? { buildOnly: true as const } : {}),
      slowerPct: o.slowerPct,
      seconds: records.reduce((a, r) => a + r.seconds, 0),
    });
  if (stops.signal) {
    const none = !kept.length && !fresh.length;
    // the JUnit file still says what was checked, and every capture left as an error (a CI job's timeout must not read as a short green run)
    if (o.junit) {
      const checked = new Set(records.map((r) => r.id));
      writeJunit(o.junit, reportOfRun(), {
        ids: mine.filter((c) => !checked.has(c.id)).map((c) => c.id),
        code: "E_INTERRUPTED",
        why: `not checked: the run was interrupted (${stops.signal}); kerncap check --resume continues`,
      });
    }
    throw new KerncapError(
      "E_INTERRUPTED",
      none
        ? `interrupted before any of ${mine.length} captures was checked: nothing written`
        : `interrupted: ${kept.length + fresh.length} of ${mine.length} captures checked, their results in ${join(dir, RESULTS_FILE)}`,
      {
        hint: none ? "Run the same command again." : "Run the same command with --resume to check the rest.",
        exitCode: signalExitCode(stops.signal),
      },
    );
  }
  if (!o.baseline && !o.settings.buildOnly) {
    const added = withTimings(run.baseline, records, { replace: false });
    if (Object.keys(added.captures).length !== Object.keys(run.baseline.captures).length) writeBaseline(run.baselinePath, added);
  }
  if (o.writeBaseline) writeRunBaseline(resolve(o.writeBaseline), run.baseline, records, log);
  const report = { ...reportOfRun(), runSubject: run.runSubject };
  if (o.junit) writeJunit(o.junit, report);
  return withShardAuth(report);
}

/**
 * The captures under `o.paths` (those passed over said), and of them this shard's (--shard K/N).
 * @throws KerncapError E_NOT_CAPTURE (no captures under the paths), E_USAGE (two with one identity)
 */
async function capturesOfShard(o: CheckOptions): Promise<{ mine: CaptureRef[]; corpus: CaptureRef[] }> {
  const found = await discoverCaptures(o.paths);
  for (const p of found.passedOver) {
    // a folder's name is another user's text: one line on the terminal, whatever it holds (adversary 46: a newline in it)
    const where = escapeForTerminal(p.path, { oneLine: true });
    const why = escapeForTerminal(p.reason, { oneLine: true });
    if (p.warn) log.warn(`passed over ${where}: ${why}`);
    else log.info(`passed over ${where}: ${why}`);
  }
  if (!found.captures.length)
    throw new KerncapError("E_NOT_CAPTURE", `no captures under ${o.paths.join(", ")}`, {
      hint: "Give capture folders (kerncap.json inside), archives from `kerncap pack`, or folders holding them.",
    });
  const mine = o.shard ? found.captures.filter((c) => shardOf(c.id, o.shard!.count) === o.shard!.index) : found.captures;
  if (o.shard) log.info(`shard ${o.shard.index}/${o.shard.count}: ${mine.length} of ${found.captures.length} captures`);
  return { mine, corpus: found.captures };
}

/** A run's results folder opened (openResults): the baseline, the results file and what an earlier run left in it. */
interface OpenedRun {
  dir: string;
  /** Whether this run made the results folder (removed again when no record went into it). */
  made: boolean;
  baselinePath: string;
  baseline: Baseline;
  results: ResultsLog;
  /** Every record the results file held (--resume), and those kept: all but errors, checked again. */
  keptAll: CheckRecord[];
  kept: CheckRecord[];
  /** The identities of the captures kept. */
  done: Set<string>;
  /** Each capture's subject now (src/format/subject.ts), by identity: written into its record. */
  subjects: Map<string, string>;
  /** The run's subject (checkRunSubject) its records carry. */
  runSubject?: string;
  /** This run's share, as its records carry it ("K/N"), null without --shard. */
  shard: string | null;
  /** Give the results folder's lock back (lockResultsFolder); safe to call more than once. */
  unlock: () => void;
}

/**
 * The results folder made (refused when another user could write it), locked for this run (another
 * live check in it refused: lockResultsFolder) and opened: the baseline read, the results file
 * opened (--resume: continued, only with the --shard it began with).
 * @throws KerncapError E_UNSAFE_PATH (refuseSharedResults), E_RESULTS (another check running in it; a damaged results file), E_BASELINE, E_USAGE (--resume of another shard's run)
 */
function openResults(o: CheckOptions, dir: string, subjects: Map<string, string>): OpenedRun {
  refuseSharedResults(dir, o.baseline ? resolve(o.baseline) : undefined);
  const made = !existsSync(dir);
  mkdirSync(dir, { recursive: true, mode: 0o755 }); // no group write whatever the umask: the next run would refuse it
  // a folder another user made under that name between the check above and mkdir (which takes an
  // existing folder as made): checked again as it now is (adversary 73)
  refuseSharedResults(dir, o.baseline ? resolve(o.baseline) : undefined);
  const unlock = lockResultsFolder(dir); // before the results file is moved or read: another run's is not touched
  try {
    return { ...openLocked(o, dir, subjects, made), unlock };
  } catch (e) {
    unlock();
    if (made) rmEmpty(dir);
    throw e;
  }
}

/** A folder removed when it is empty (one this run made and put nothing into); anything in it: left as it is. */
function rmEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    /* something else was put there meanwhile: left as it is */
  }
}

/** openResults once the folder is locked. */
function openLocked(o: CheckOptions, dir: string, subjects: Map<string, string>, made: boolean): Omit<OpenedRun, "unlock"> {
  const baselinePath = resolve(o.baseline ?? join(dir, BASELINE_FILE));
  if (!o.baseline) refuseLink(baselinePath, "the baseline this check writes"); // before the run, not after it
  const baseline = readBaseline(baselinePath);
  // --write-baseline FILE writes over FILE at the end: it must be a baseline already, or nothing (a file of something
  // else was replaced without a word: adversary 28), refused before anything runs
  if (o.writeBaseline) readBaseline(resolve(o.writeBaseline), refuseNotOwn(resolve(o.writeBaseline), "--write-baseline file"));
  const { log: results, kept: keptAll, truncated } = ResultsLog.open(join(dir, RESULTS_FILE), { resume: o.resume, previous: join(dir, PREVIOUS_RESULTS_FILE) });
  // --resume continues the same run: the same share of the corpus (a resume without the --shard it began with would widen it silently)
  const shard = o.shard ? `${o.shard.index}/${o.shard.count}` : null;
  const began = keptAll.find((r) => r.shard !== undefined)?.shard;
  if (o.resume && began !== undefined && began !== shard) {
    results.close();
    const what = (s: string | null) => (s ? `--shard ${s}` : "the whole corpus (no --shard)");
    throw new KerncapError("E_USAGE", `${join(dir, RESULTS_FILE)} holds a run of ${what(began)}; this one is of ${what(shard)}`, {
      hint: `Resume with ${began ? `--shard ${began}` : "no --shard"}, or give this run another --results folder.`,
    });
  }
  // an error is no finding about the capture (a worker's death, no GPU, a driver that failed): checked again;
  // and a record of another subject (the capture changed, another capture under its id, other options; none written) is no finding about it now
  const stale = keptAll.filter((r) => r.status !== "error" && subjects.has(r.id) && r.subject !== subjects.get(r.id));
  for (const r of stale) log.info(`${r.id}: ${staleWhy(r.subject, "the capture, its reproducer or the run's options")}: checked again`);
  const kept = keptAll.filter((r) => r.status !== "error" && !stale.includes(r));
  const done = new Set(kept.map((r) => r.id));
  // captures, not records: a capture that ended in an error at each of several runs has a record of each (trial 7: "11 … checked again" of 5 captures)
  const retried = new Set(keptAll.filter((r) => r.status === "error" && !done.has(r.id)).map((r) => r.id)).size;
  if (o.resume)
    log.info(
      `resuming ${join(dir, RESULTS_FILE)}: ${plural(done.size, "capture")} already checked${retried ? `, ${plural(retried, "capture")} that ended in an error checked again` : ""}${truncated ? " (a last record cut short by the interruption dropped)" : ""}`,
    );
  return { dir, made, baselinePath, baseline, results, keptAll, kept, done, shard, subjects };
}

/**
 * Check `tasks` on the workers, each record appended to the results file as it comes; then the
 * stop signals uninstalled and the results file closed (a folder this run made and wrote no
 * record into removed).
 * @returns the records of this run
 */
async function checkAll(o: CheckOptions, tasks: CaptureRef[], run: OpenedRun, stops: StopSignals): Promise<CheckRecord[]> {
  const { dir, results } = run;
  const fresh: CheckRecord[] = [];
  const progress = new CheckProgress(tasks.length, { live: o.live, write: (s) => void process.stderr.write(s) });
  // several workers: each replay's timed launches have their GPU alone (src/util/timing-window.ts); a baseline's times were
  // taken so too, and a time-sliced GPU would make a kernel "slower" than its baseline
  const windows = o.gpus.length > 1 && !o.settings.buildOnly ? privateTempFolder("kerncap-timing-") : undefined;
  try {
    await drain(
      tasks,
      o.gpus,
      o.open((l) => progress.line(l), windows),
      {
        onStart: (t, slot) => progress.started(t.id, slot),
        onOutcome: (x, slot) => {
          const r = results.append({
            ...recordOf(x, run.baseline, o.slowerPct, slot, o.gpus[slot] ?? null),
            shard: run.shard,
            subject: run.subjects.get(x.id),
            runSubject: run.runSubject,
          });
          fresh.push(r);
          progress.finished(r, slot);
        },
        stopped: () => stops.signal !== null,
        onStop: (stop) => {
          stops.onStop = stop;
          stops.onKill = stop;
        },
      },
    );
  } finally {
    if (windows) rmSync(windows, { recursive: true, force: true });
    stops.dispose();
    progress.stop();
    results.close();
    // a folder this run made and wrote no record into (interrupted, or failed, before the first capture finished): not left behind
    if (run.made && !run.keptAll.length && !fresh.length) {
      rmSync(join(dir, RESULTS_FILE), { force: true });
      run.unlock();
      rmEmpty(dir);
    }
  }
  return fresh;
}

export function reportOf(records: CheckRecord[], o: Omit<CheckReport, "captures" | "summary" | "exitCode">): CheckReport {
  return { ...o, captures: ordered(records), summary: summarize(records), exitCode: exitCodeOf(records) };
}

/**
 * Write the JUnit XML of `r` to `path`. `notChecked`: testcases that are each one <error> (captures an
 * interruption left, property `interrupted`; shards a --merge --partial lacks, property `missingShards`).
 */
export function writeJunit(path: string, r: CheckReport, notChecked?: { ids: string[]; code: string; why: string }, property = "interrupted"): void {
  const properties: Record<string, string> = { rebuild: String(r.rebuild), slowerPct: String(r.slowerPct), workers: String(r.workers) };
  if (r.baseline) properties.baseline = r.baseline;
  if (r.buildOnly) properties.buildOnly = "true";
  if (r.shard) properties.shard = `${r.shard.index}/${r.shard.count}`;
  if (notChecked) properties[property] = String(notChecked.ids.length);
  writeFileAtomic(resolve(path), junitXml(r.captures, { seconds: r.seconds, properties, ...(notChecked ? { notChecked } : {}) }));
}

/**
 * Refuse, as it is read (the fd's fstat: src/format/paths.ts readInputFile), a file of a --merge
 * that another local user owns or could write (src/user-group.ts notOwnFile, as eval --merge
 * refuses its inputs): their records would be taken as checked (a trial's forged shard file turned a
 * failing capture "ok"), their baseline would judge the timings. `what`: the file's part in the merge.
 * @throws KerncapError E_UNSAFE_PATH (exit 2) naming the file and its owner or mode
 */
export function refuseNotOwn(path: string, what: "results file" | "--baseline file" | "--write-baseline file") {
  return (st: Stats): void => {
    const why = notOwnFile(st, path);
    if (!why) return;
    throw new KerncapError(
      "E_UNSAFE_PATH",
      `${path} (a ${what} of --merge) ${why}: another user could have written its ${what === "results file" ? "records" : "baseline"}, which check would take as its own`,
      {
        hint: `Nothing was merged. Copy it into a file of your own that no one else can write (cp ${shellPath(path)} mine; chmod go-w mine) after reading it, and give that${what === "results file" ? "" : ` as ${what.replace(" file", "")}`}.`,
      },
    );
  };
}
