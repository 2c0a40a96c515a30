/**
 * `kerncap check DIR…`: the captures under the given folders (capture folders, `kerncap pack`
 * archives, folders holding them) as a kernel regression suite: each replayed (--rebuild: rebuilt
 * from its reproducer with the toolchain installed now, as `kerncap validate` builds), judged
 * against its captured after state, and timed against a baseline (src/check/). One line per
 * capture on stderr, the summary table on stdout (--json: the kerncap.check/1 document), JUnit XML
 * with --junit. Spread: --gpus (one worker process per entry), --shard K/N (a CI matrix, a Slurm
 * array); --resume continues an interrupted run; --merge joins the shards' results.
 * Exit 1: a capture mismatches or is slower beyond its interval; 2: none did, but one could not be
 * checked, or a usage error; 0 otherwise.
 *
 * `--worker` is the check's own: a worker process, stdin/stdout its protocol (src/check/worker.ts),
 * each capture checked by the per-capture workflow (src/ops/check.ts checkWorker).
 */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { checkOutputFile, DEFAULT_RESULTS_DIR, runCheck, type CheckReport } from "../../check/check.ts";
import { RESULTS_FILE } from "../../check/results.ts";
import { mergeResults } from "../../check/merge.ts";
import { checkCsv, checkHtml } from "../../check/html.ts";
import { writeFileAtomic } from "../../util/write-file.ts";
import { workerProcesses } from "../../check/pool.ts";
import { CHECK_SUMMARIES, type CheckSummary, errorSummary, summaryTable } from "../../check/report.ts";
import { plural } from "../../util/format.ts";
import type { CheckSettings } from "../../check/runner.ts";
import { checkWorker } from "../../ops/check.ts";
import { parseShard } from "../../check/shard.ts";
import { floatArg } from "../../replay/tolerance-plan.ts";
import {
  intArg,
  jsonArg,
  printSummaryArg,
  keepStdoutForData,
  printJson,
  toleranceArgs,
  toleranceOptions,
  verboseArg,
  writeDataLine,
  printText,
  allowVersionMismatchArg,
  verifyArg,
  flushL2Arg,
} from "../args.ts";
import { printable } from "../format.ts";

/**
 * --gpus "0,1,1": one worker per entry, each entry a CUDA_VISIBLE_DEVICES value: a device index
 * (a non-negative integer) or a UUID as nvidia-smi -L prints it (GPU-…, MIG-…). Anything else
 * would reach each worker's driver as a device it cannot find, a failure per capture.
 * @throws KerncapError E_USAGE
 */
export function parseGpus(text: string): string[] {
  const gpus = text.split(",").map((g) => g.trim());
  const bad = gpus.find((g) => !/^(?:\d{1,9}|(?:GPU|MIG)-[A-Za-z0-9/-]+)$/.test(g));
  if (bad !== undefined) {
    throw new KerncapError(
      "E_USAGE",
      `--gpus ${JSON.stringify(text)} is not a comma-separated list of GPUs (${bad === "" ? "an empty entry" : `${JSON.stringify(bad)} is neither a device index nor a GPU-/MIG- UUID`})`,
      {
        hint: "Give device indices (0, 1, …) or UUIDs as nvidia-smi -L prints them, one worker each: --gpus 0,1,2,3 (--gpus 0,0 runs two workers on GPU 0).",
      },
    );
  }
  if (gpus.length > 256)
    throw new KerncapError("E_USAGE", `--gpus lists ${gpus.length} workers; at most 256`, { hint: "One or a few workers per GPU is enough." });
  // one spelling per device index: 00 is CUDA's device 0, as 0 is (eval's timing windows are per GPU: adversary 75)
  return gpus.map((g) => (/^\d+$/.test(g) ? String(Number(g)) : g));
}

/**
 * What every capture of `kerncap check` is replayed with (its workers' settings: src/check/runner.ts
 * CheckSettings): timed launches, checked runs, verify, --flush-l2, --rebuild and its
 * --allow-version-mismatch and --trust, tolerances.
 * @throws KerncapError E_USAGE (a bad --iters, --runs, tolerance)
 */
export function checkSettings(
  args: Parameters<typeof toleranceOptions>[0] & {
    iters?: unknown;
    runs?: unknown;
    verify?: unknown;
    "flush-l2"?: unknown;
    rebuild?: unknown;
    "build-only"?: unknown;
    "allow-version-mismatch"?: unknown;
    trust?: unknown;
  },
  rawArgs: string[],
): CheckSettings {
  return {
    iters: intArg("iters", args.iters, 20, 100_000, 1),
    ...(args.runs !== undefined ? { runs: intArg("runs", args.runs, 3, 1000, 1) } : {}),
    verify: args.verify !== false,
    ...(args["flush-l2"] ? { flushL2: true } : {}),
    rebuild: Boolean(args.rebuild),
    ...(args["build-only"] ? { buildOnly: true } : {}),
    force: Boolean(args["allow-version-mismatch"]),
    trust: Boolean(args.trust),
    tolerance: toleranceOptions(args, rawArgs),
  };
}

/**
 * The workers of a check: one per --gpus entry (its CUDA_VISIBLE_DEVICES), else one on the GPUs this
 * process sees; under --build-only, --jobs N workers with no GPU (default: the CPU count, at most 8:
 * nvcc is about one core a build).
 * @throws KerncapError E_USAGE: --jobs without --build-only, or beside --gpus; a bad --gpus or --jobs
 */
function workerSlots(gpusArg: unknown, jobsArg: unknown, buildOnly: boolean): (string | null)[] {
  if (jobsArg !== undefined && !buildOnly)
    throw new KerncapError("E_USAGE", "--jobs applies to --rebuild --build-only: a replay's workers are --gpus", {
      hint: "kerncap check --rebuild --build-only --jobs N DIR…, or --gpus 0,0 for two replay workers on GPU 0.",
    });
  if (jobsArg !== undefined && gpusArg !== undefined)
    throw new KerncapError("E_USAGE", "--build-only with --jobs runs no GPU: --gpus does not apply", { hint: "Give --jobs N alone." });
  if (gpusArg !== undefined) return parseGpus(String(gpusArg));
  return buildOnly ? Array<null>(intArg("jobs", jobsArg, Math.min(availableParallelism(), 8), 256, 1)).fill(null) : [null];
}

export default defineCommand({
  meta: {
    name: "check",
    description: "Check a corpus of captures as a kernel regression suite: replay (or rebuild) each, compare with its after state, time against a baseline",
  },
  args: {
    dir: {
      type: "positional",
      description: "Capture folders, archives from `kerncap pack`, or folders holding them (searched at any depth); with --merge, results files",
      required: false,
    },
    rebuild: {
      type: "boolean",
      description:
        "Rebuild each capture from its reproducer with the toolchain installed now (runs its build.sh: for captures you trust), as `kerncap validate` does; on a GPU of another architecture, for this one (CUDA)",
      default: false,
    },
    "build-only": {
      type: "boolean",
      description:
        "With --rebuild: rebuild each capture and replay none, no GPU needed (a CI runner without one): exit 0 when every capture built, 2 when one did not",
      default: false,
    },
    ...allowVersionMismatchArg("With --rebuild: "),
    trust: {
      type: "boolean",
      description:
        "With --rebuild: run the build.sh of received captures too (archives, and captures unpacked, made on another machine, copied, or not yours alone), as validate --trust does (docs/security.md)",
      default: false,
    },
    iters: {
      type: "string",
      description: "Timed launches per capture: the median and its confidence interval come from them (at least 6 for an interval)",
      default: "20",
    },
    runs: { type: "string", description: "Checked launches per capture (default 3, 8 once they differ: the run-to-run envelope; at least 1)" },
    ...verifyArg(true),
    ...flushL2Arg,
    ...toleranceArgs,
    slower: {
      type: "string",
      description: "A capture is slower when its time ratio's 99% interval lies wholly above 1 + PCT/100",
      valueHint: "PCT",
      default: "10",
    },
    results: {
      type: "string",
      description: `Results folder: results.jsonl (one record per capture, written as each finishes) and the default baseline.json (Default: ./${DEFAULT_RESULTS_DIR})`,
      valueHint: "DIR",
    },
    resume: {
      type: "boolean",
      description: "Continue the interrupted check whose results.jsonl is in the results folder (the captures it holds are not checked again)",
      default: false,
    },
    baseline: {
      type: "string",
      description: "Time against this baseline (read only; default: the results folder's baseline.json, where each capture's first check is recorded)",
      valueHint: "FILE",
    },
    "write-baseline": { type: "string", description: "Write this run's timings of every matching capture, over the baseline's, to FILE", valueHint: "FILE" },
    gpus: {
      type: "string",
      description:
        "One worker process per entry, each with that CUDA_VISIBLE_DEVICES: 0,1,2,3 (0,0: two workers on GPU 0); default one worker on the GPUs this process sees",
      valueHint: "LIST",
    },
    jobs: {
      type: "string",
      description:
        "With --rebuild --build-only: captures built at once, each in a worker process of its own (default: the CPU count, at most 8; a replay's workers are --gpus)",
      valueHint: "N",
    },
    shard: {
      type: "string",
      description:
        "Check only shard K of N (0 ≤ K < N; a stable share by the capture's identity): a CI matrix, or $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT",
      valueHint: "K/N",
    },
    merge: {
      type: "boolean",
      description: "Join results files (the shards' results.jsonl or --json documents) into one report; every shard K/N of the run must be given",
      default: false,
    },
    partial: {
      type: "boolean",
      description: "With --merge: merge the files given even when shards are missing (each said, and an error in the JUnit; exit at least 2)",
      default: false,
    },
    junit: { type: "string", description: "Write JUnit XML to FILE (failure: mismatch or slower; error; skipped)", valueHint: "FILE" },
    report: {
      type: "string",
      description:
        "Write an HTML report to FILE: each capture's time ratio against the baseline with its interval as a chart, the table, each failed capture's first differing region (one self-contained file)",
      valueHint: "FILE",
    },
    csv: {
      type: "string",
      description: "Write the table to FILE as CSV (one row per capture: status, ratio and its interval, medians µs, identity, reason)",
      valueHint: "FILE",
    },
    "print-summary": {
      type: "string",
      description:
        "What the text summary shows (ncu's option): per-capture (one line each, the default), per-kernel or per-gpu (one row per kernel or GPU: captures, statuses, geometric mean time ratio), none (the count line only)",
      valueHint: CHECK_SUMMARIES.join("|"),
    },
    worker: { type: "boolean", description: "Internal: a worker process of a check (stdin/stdout carry its protocol)", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json || args.worker) keepStdoutForData(); // device printf goes to stderr (escaped), the document (the protocol) to stdout
    const paths = (args._ as string[]).map(String);
    if (args.worker) {
      await checkWorker(Bun.stdin.stream(), (o, retire) => writeDataLine({ outcome: o, ...(retire ? { retire } : {}) }));
      return 0;
    }
    const summary = printSummaryArg(args["print-summary"], CHECK_SUMMARIES, "per-capture");
    const slowerPct =
      floatArg(
        "slower",
        args.slower,
        "For example --slower 10 (percent; 10 is the default): a capture is slower when its time's interval lies wholly above 1.10× the baseline.",
      ) ?? 10;
    if (!(slowerPct >= 0 && slowerPct < 1000))
      throw new KerncapError("E_USAGE", `--slower ${args.slower}: a percentage from 0 to 1000`, { hint: "For example --slower 10 (10%)." });
    if (!paths.length)
      throw new KerncapError("E_USAGE", args.merge ? "--merge needs results files" : "no captures given", {
        hint: args.merge
          ? "kerncap check --merge shard-*/results.jsonl [--junit all.xml]"
          : "kerncap check DIR… (capture folders, archives, or folders holding them)",
      });
    // the report files' folders checked before any capture is (as --junit's)
    for (const k of ["report", "csv"] as const) if (args[k] !== undefined) checkOutputFile(k, String(args[k]));
    let report: CheckReport;
    // an option given on the command line (several have defaults): those a merge or a build runs none of are refused, never silently ignored
    const given = (o: string) => rawArgs.some((a, i) => (a === `--${o}` || a.startsWith(`--${o}=`)) && !rawArgs.slice(0, i).includes("--"));
    if (args.merge) {
      // the options of a replay judge or time captures, which a merge runs none of
      // trial 8: --rtol 0.5 --iters 50 --no-verify changed nothing, said nowhere
      const stray =
        (["rebuild", "build-only", "trust", "resume", "gpus", "jobs", "shard", "results", "flush-l2"] as const).find(
          (k) => args[k] !== undefined && args[k] !== false,
        ) ?? ["iters", "runs", "atol", "rtol", "dtype", "multiset", "verify", "no-verify", "allow-version-mismatch"].find(given);
      if (stray)
        throw new KerncapError("E_USAGE", `--merge joins results files: --${stray} does not apply`, {
          hint: "Merge with --merge FILE… [--partial] [--baseline FILE] [--write-baseline FILE] [--junit FILE] [--report FILE] [--csv FILE] [--json].",
        });
      report = mergeResults(paths, {
        baseline: args.baseline,
        writeBaseline: args["write-baseline"],
        slowerPct,
        junit: args.junit,
        partial: Boolean(args.partial),
      });
    } else {
      if (args.partial) throw new KerncapError("E_USAGE", "--partial applies to --merge only", { hint: "Add --merge FILE…, or leave --partial out." });
      const settings = checkSettings(args, rawArgs);
      // one digest names one capture's files: check's --trust is plain (each capture's build is read once, hashed and run from a private copy)
      if (rawArgs.some((x, i) => x.startsWith("--trust=") && !rawArgs.slice(0, i).includes("--")))
        throw new KerncapError("E_USAGE", "check takes plain --trust: a digest names the files of one capture", {
          hint: "Trust each capture with kerncap validate DIR --trust=DIGEST, or pass plain --trust to check.",
        });
      if (settings.buildOnly) {
        if (!settings.rebuild)
          throw new KerncapError("E_USAGE", "--build-only applies to --rebuild only", { hint: "kerncap check --rebuild --build-only DIR…" });
        // the options of a replay (its judging, its timing, the baselines it is timed against): a build runs none of them
        const replayOption = ["baseline", "write-baseline", "iters", "runs", "slower", "flush-l2", "atol", "rtol", "dtype", "multiset"].find(given);
        if (replayOption)
          throw new KerncapError("E_USAGE", `--build-only replays nothing: --${replayOption} does not apply`, {
            hint: "Leave it out, or run without --build-only on a machine with the captures' GPU.",
          });
      }
      for (const [k, flag] of [
        ["force", "allow-version-mismatch"],
        ["trust", "trust"],
      ] as const)
        if (settings[k] && !settings.rebuild)
          throw new KerncapError("E_USAGE", `--${flag} applies to --rebuild only`, { hint: `Add --rebuild, or leave --${flag} out.` });
      const gpus = workerSlots(args.gpus, args.jobs, Boolean(settings.buildOnly));
      report = await runCheck({
        paths,
        settings,
        results: args.results ?? DEFAULT_RESULTS_DIR,
        resume: Boolean(args.resume),
        baseline: args.baseline,
        writeBaseline: args["write-baseline"],
        slowerPct,
        shard: args.shard !== undefined ? parseShard(String(args.shard)) : undefined,
        gpus,
        junit: args.junit,
        live: Boolean(process.stderr.isTTY) && !args.json, // under --json no redrawn line: a log of plain lines beside the document
        open: (say, timingWindows) => workerProcesses(timingWindows ? { ...settings, timingWindows } : settings, (l) => say(printable(l))),
      });
    }
    return reportCheck(report, args, paths, summary);
  },
});

/** The check's outputs once it ran: the report files, the document or table, where the records went, the regressions and errors said; its exit code. */
function reportCheck(report: CheckReport, args: Record<string, any>, paths: string[], summary: CheckSummary): number {
  if (args.report !== undefined) writeFileAtomic(resolve(String(args.report)), checkHtml(report, paths.join(" ")));
  if (args.csv !== undefined) writeFileAtomic(resolve(String(args.csv)), checkCsv(report));
  if (args.json) printJson("check", report);
  else printText(summaryTable(report.captures, report.seconds, summary) + "\n");
  // where the records went (a new user found ./kerncap-check/ made without a word)
  if (!args.merge)
    log.info(
      `results: ${printable(join(resolve(String(args.results ?? DEFAULT_RESULTS_DIR)), RESULTS_FILE))} (--resume reads them; --merge joins shards' files)`,
    );
  if (report.exitCode === 1)
    log.error(`${report.summary.mismatch + report.summary.slower} of ${plural(report.summary.captures, "capture")} regressed (mismatch or slower)`);
  if (report.summary.error) {
    // by code, each with what to do (as eval's unjudgedLine): a warning beside a regression, the error when there is none
    const { line, steps } = errorSummary(report.captures, args.merge ? "merge" : "run");
    (report.exitCode === 2 ? log.error : log.warn)(line);
    for (const s of steps) log.info(s);
  }
  return report.exitCode;
}
