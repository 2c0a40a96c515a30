/**
 * `kerncap eval DIR… CANDIDATE…`: many candidate versions of a captured kernel (edited src/
 * folders, patches, replacement files, Triton configs), each built in a private copy of the
 * reproducer and judged on every input against the app's after state, timed against the captured
 * module (src/eval/). One line per result on stderr, then the ranked table on stdout; --json: each
 * record as a JSON Lines document as it finishes, then the kerncap.eval document (one line).
 * Exit 0 when every candidate was judged (whatever its verdict), 2 when one could not be.
 *
 * `--worker` is the eval's own: a GPU worker process, stdin/stdout its protocol (src/eval/worker.ts).
 */
import { setBuildTimeout } from "../../env.ts";
import { defineCommand } from "citty";
import { availableParallelism } from "node:os";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { parseShard } from "../../check/shard.ts";
import { lines, serveProtocol } from "../../check/worker.ts";
import { evalWorkers } from "../../eval/eval.ts";
import { mergeEval, rankedTable, unjudgedLine, type EvalReport } from "../../eval/report.ts";
import { runEval } from "../../ops/eval.ts";
import { listedCandidates } from "../../eval/candidates.ts";
import { EVAL_PROTOCOL, EvalJudge, type EvalSettings } from "../../eval/worker.ts";
import {
  allowVersionMismatchArg,
  flushL2Arg,
  intArg,
  jsonArg,
  keepStdoutForData,
  printJsonLine,
  printText,
  toleranceArgs,
  toleranceOptions,
  trustArg,
  verboseArg,
  writeDataLine,
} from "../args.ts";
import { printable } from "../format.ts";
import { MIN_PAIRS } from "../../eval/timing.ts";
import { parseGpus } from "./check.ts";
import { existsSync, lstatSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { startsWithZipSignature } from "../../format/capture-dir.ts";
import { shellPath } from "../../util/shell-quote.ts";

/**
 * The positionals split into inputs and candidates: the leading capture folders (kerncap.json
 * inside) and capture sets (kerncap-captures.json), then the candidates. An input after the first
 * whose src/ differs from the first's (an edited copy of the capture, meant as a candidate) is
 * said, with the DIR/src that would make it one.
 * With `listed` (--candidate-list: the candidates are the list's), every positional is an input.
 * @throws KerncapError E_USAGE when the first is no capture, or no candidate follows (naming the
 *   captures after the first, each taken as an input), or, `listed`, one is not a capture
 */
export function splitPositionals(args: string[], listed = false): { dirs: string[]; candidates: string[]; warnings: string[] } {
  let n = 0;
  const isInput = (p: string) =>
    existsSync(p) && statSync(p).isDirectory() && (existsSync(join(p, "kerncap.json")) || existsSync(join(p, "kerncap-captures.json")));
  while (n < args.length && isInput(args[n]!)) n++;
  if (n === 0) {
    // a capture archive (kerncap pack's): said as inspect says it, with the unpack that makes it a folder (nu7 #21)
    const zip = args.length > 0 && lstatSync(args[0]!, { throwIfNoEntry: false })?.isFile() === true && startsWithZipSignature(args[0]!);
    // a first argument that is no capture is E_NOT_CAPTURE, as every verb says it (nu10 #18a); none at all, a usage error
    throw new KerncapError(
      args.length ? "E_NOT_CAPTURE" : "E_USAGE",
      args.length
        ? `${printable(args[0]!)} is ${zip ? "a capture archive, not a capture folder" : "not a capture folder or a capture set"}`
        : "no capture given",
      {
        hint: zip
          ? `Unpack it first: kerncap unpack ${shellPath(args[0]!)} -o DIR, then kerncap eval DIR CANDIDATE….`
          : "kerncap eval DIR [DIR…] CANDIDATE… (DIR: a capture folder or a capture set from run -c N).",
      },
    );
  }
  const more = args.slice(1, n);
  if (listed) {
    // the candidates are the list's (kerncap mcp's evaluate): every positional is an input
    if (n < args.length)
      throw new KerncapError(
        "E_USAGE",
        `${printable(args[n]!)} is not a capture folder or a capture set; with --candidate-list the candidates are the list's`,
        {
          hint: "Give the candidates in the list, or leave --candidate-list out and give them after the captures.",
        },
      );
    return { dirs: args, candidates: [], warnings: [] };
  }
  if (n === args.length) {
    const shown = more.map((d) => printable(d)).join(", ");
    throw new KerncapError(
      "E_USAGE",
      more.length
        ? `no candidates given: ${shown} ${more.length > 1 ? "are capture folders, taken as inputs" : "is a capture folder, taken as an input"} (the leading capture folders are the inputs)`
        : "no candidates given",
      {
        hint: more.length
          ? `To evaluate the sources of an edited copy of the capture, give its src/ folder: kerncap eval ${printable(args[0]!)} ${more.map((d) => printable(join(d, "src"))).join(" ")}`
          : "kerncap eval DIR CANDIDATE… (edited src/ folders, .patch/.diff files, replacement files, Triton configs such as 'BLOCK_M=64 num_warps=4').",
      },
    );
  }
  // said on stderr, and in the eval document's `warnings` (a script or an agent reads that, not stderr: a new user's finding)
  const warnings = more
    .filter((d) => srcDiffers(args[0]!, d))
    .map(
      (d) =>
        `${printable(d)} is a capture folder, taken as an input, and its src/ differs from ${printable(args[0]!)}'s: to evaluate its sources give ${printable(join(d, "src"))}`,
    );
  for (const w of warnings) log.warn(w);
  return { dirs: args.slice(0, n), candidates: args.slice(n), warnings };
}

/** Whether two capture folders' src/ differ (a file of one missing in the other, or other bytes; links and other kinds compared by name only); false where either has none. */
function srcDiffers(a: string, b: string): boolean {
  const files = (root: string): Map<string, string> => {
    const out = new Map<string, string>();
    const walk = (rel: string) => {
      for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
        const r = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) walk(r);
        else out.set(r, e.isFile() ? join(root, r) : "");
      }
    };
    walk("");
    return out;
  };
  const [sa, sb] = [join(a, "src"), join(b, "src")];
  if (!lstatSync(sa, { throwIfNoEntry: false })?.isDirectory() || !lstatSync(sb, { throwIfNoEntry: false })?.isDirectory()) return false;
  try {
    const [fa, fb] = [files(sa), files(sb)];
    if (fa.size !== fb.size) return true;
    for (const [r, p] of fa) {
      const q = fb.get(r);
      if (q === undefined) return true;
      if (p && q && (statSync(p).size !== statSync(q).size || !readFileSync(p).equals(readFileSync(q)))) return true;
    }
    return false;
  } catch {
    return false; // unreadable: the eval itself says so
  }
}

/**
 * What every candidate of `kerncap eval` is judged and timed with (its GPU workers' settings:
 * src/eval/worker.ts EvalSettings): timed launches, checked runs, verify, --flush-l2, tolerances.
 * @throws KerncapError E_USAGE (a bad --iters, --runs, tolerance)
 */
export function evalSettings(
  args: Parameters<typeof toleranceOptions>[0] & { iters?: unknown; runs?: unknown; verify?: unknown; "flush-l2"?: unknown },
  rawArgs: string[],
): EvalSettings {
  const iters = intArg("iters", args.iters, 20, 100_000, 1);
  // too few timed launches for a comparison: said, not left to a record without one (a new user's finding)
  if (iters < MIN_PAIRS)
    log.warn(`--iters ${iters}: fewer than ${MIN_PAIRS} timed launches, so no candidate is compared with the captured module (no speedup, no ranking by time)`);
  return {
    iters,
    // at least two checked runs, each from the before state: a candidate that keeps a result in device memory and skips the work when it finds it fails the second
    ...(args.runs !== undefined ? { runs: intArg("runs", args.runs, 3, 1000, 2) } : {}),
    verify: args.verify !== false,
    tolerance: toleranceOptions(args, rawArgs),
    ...(args["flush-l2"] ? { flushL2: true } : {}),
  };
}

export default defineCommand({
  meta: {
    name: "eval",
    description:
      "Evaluate many candidate versions of a captured kernel: each built in a private copy, judged on every input against the app's after state, timed against the captured module; ranked",
  },
  args: {
    dir: {
      type: "positional",
      description:
        "Capture folders or capture sets (the inputs), then the candidates: edited src/ folders, .patch/.diff files, replacement files, Triton configs ('BLOCK_M=64 num_warps=4'); with --merge, results files",
      required: false,
    },
    iters: {
      type: "string",
      description: `Timed launches of each candidate and of the captured module, interleaved (at least ${MIN_PAIRS} for a comparison)`,
      default: "20",
    },
    runs: {
      type: "string",
      description:
        "Checked launches of each candidate, each from the before state (default 3, 8 once they differ; at least 2: a candidate that keeps its result and skips the work fails the second)",
    },
    verify: { type: "boolean", description: "Check each input's checksums when it is restored", negativeDescription: "Skip the checksums", default: true },
    ...flushL2Arg,
    ...toleranceArgs,
    gpus: {
      type: "string",
      description: "GPUs for the workers, each as CUDA_VISIBLE_DEVICES takes it: 0,1,2,3 (default: the GPUs this process sees, one worker)",
      valueHint: "LIST",
    },
    "workers-per-gpu": { type: "string", description: "Worker processes per GPU (small kernels leave room for several)", default: "1", valueHint: "N" },
    jobs: { type: "string", description: "Builds at once (default: the CPU count)", valueHint: "N" },
    "shared-timing": {
      type: "boolean",
      description:
        "Several workers on one GPU time their comparisons at once, time-slicing the GPU (more candidates a minute on long kernels, wider intervals); by default the timed rounds take turns",
      default: false,
    },
    "full-build": {
      type: "boolean",
      description: "Build every candidate by the capture's build.sh (the default: kept for scripts that say it)",
      default: false,
    },
    pruned: {
      type: "boolean",
      description:
        "A CUDA candidate's device code from the pruned TU, once a check of the capture's own source found it gives the kernel build.sh's machine code (faster; checked once, not for each candidate: for candidates you wrote, not a generator's)",
      default: false,
    },
    "build-only": {
      type: "boolean",
      description:
        "Build every candidate and judge none (no GPU needed): each that builds is a record of verdict built (registers, module digest); exit 0 when every build ended, a compile error included. With --jsonl FILE, the same command without --build-only and with --resume on a GPU machine judges the kept builds",
      default: false,
    },
    "require-gpu": {
      type: "boolean",
      description:
        "Stop at once, E_NO_GPU, before any build, when there is no usable GPU here (without it: every candidate is built, and each that builds is an E_NO_GPU record)",
    },
    "build-timeout": {
      type: "string",
      description:
        "Each candidate's build stops after S seconds, its processes killed: a compile-error with build.timedOut (KERNCAP_BUILD_TIMEOUT for one command; default none, 600 s for a confined build)",
      valueHint: "S",
    },
    timeout: {
      type: "string",
      description: `The watchdog's floor (s): a candidate's launches are killed past 100× the captured kernel time per launch, never sooner than this (its first launch alone past 100× that time, never sooner than 1 s)`,
      default: "10",
      valueHint: "S",
    },
    grid: {
      type: "string",
      description: "Triton configs: the launch grid, e.g. 'cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)' (default: the captured grid)",
      valueHint: "EXPR",
    },
    ...allowVersionMismatchArg(),
    trust: {
      type: "boolean",
      description:
        "Build a received capture's reproducer too (its build runs with your rights) after you read what it runs; --trust=DIGEST only if the files are still the ones the refusal showed (docs/security.md)",
      default: false,
    },
    confine: {
      type: "boolean",
      description:
        "What kerncap mcp's evaluate uses: a Triton capture's candidates (whose build runs their Python) only with --trust; CUDA builds are confined always",
      default: false,
    },
    "candidate-list": {
      type: "string",
      description:
        'What kerncap mcp\'s evaluate uses: the candidates as a JSON file {"candidates": [{"label", and one of "spec" (a path, as on the command line), "overlay" (a folder holding src/… with only the files that replace or add files of src/), "config" (a Triton config) or "refused": {"kind" (tree, overlay, patch, file or config), "code" (E_PATCH, E_CANDIDATE, E_NOT_SOURCE or E_PACK_NAME), "reason"}}]}, each labelled as given (letters, digits, . _ -); a refused one is never built, its record an error with that code',
      valueHint: "FILE",
    },
    jsonl: {
      type: "string",
      description:
        "Append each record to FILE as it finishes (JSON Lines; fsync'd; the records of earlier evals in FILE stay): what --resume continues and --merge joins",
      valueHint: "FILE",
    },
    resume: {
      type: "boolean",
      description:
        "Continue the interrupted eval whose --jsonl FILE is given: candidates it holds a record of are not evaluated again, but those whose record is an error (no GPU, a worker that died) or built (--build-only) are judged again, on the module their kept copy holds where it is unchanged (else built again)",
      default: false,
    },
    shard: {
      type: "string",
      description: "Evaluate only shard K of N of the candidates (0 ≤ K < N; a stable share by the candidate's identity)",
      valueHint: "K/N",
    },
    merge: {
      type: "boolean",
      description: "Join --jsonl files of shards into one ranked report; every shard K/N of the eval must be given",
      default: false,
    },
    partial: {
      type: "boolean",
      description: "With --merge: merge the files given even when shards are missing (each said; missingShards; exit 2)",
      default: false,
    },
    worker: { type: "boolean", description: "Internal: a GPU worker process of an eval (stdin/stdout carry its protocol)", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json || args.worker) keepStdoutForData(); // device printf goes to stderr (escaped), the data (the protocol) to stdout
    if (args.worker) {
      const judge = new EvalJudge(
        () => writeDataLine({ started: true }),
        undefined,
        () => writeDataLine({ waiting: true }),
        (what) => writeDataLine({ launch: what }),
      );
      await serveProtocol(
        lines(Bun.stdin.stream()),
        EVAL_PROTOCOL,
        (t, s) => judge.judge(t, s),
        (o, retire) => writeDataLine({ outcome: o, ...(retire ? { retire } : {}) }),
        () => judge.lost(),
        (s) => judge.prepare(s),
      );
      judge.close();
      return 0;
    }
    const positionals = (args._ as string[]).map(String);
    let report: EvalReport;
    let warnings: string[] = [];
    if (args.merge) {
      if (!positionals.length) throw new KerncapError("E_USAGE", "--merge needs results files", { hint: "kerncap eval --merge shard-*.jsonl" });
      report = mergeEval(positionals, { partial: Boolean(args.partial) });
    } else {
      if (args.partial) throw new KerncapError("E_USAGE", "--partial applies to --merge only", { hint: "Add --merge FILE…, or leave --partial out." });
      // the builds (in this process, and build.sh's children) read the limit from the environment (src/frontends/build.ts buildTimeout)
      if (args["build-timeout"] !== undefined) setBuildTimeout(intArg("build-timeout", args["build-timeout"], 600, 1_000_000, 1));
      if (args["build-only"] && args["require-gpu"])
        throw new KerncapError("E_USAGE", "--build-only judges nothing, so it needs no GPU: --require-gpu does not go with it", {
          hint: "Give one of them: --build-only to compile every candidate here, --require-gpu to judge them and stop at once where there is no GPU.",
        });
      const list = args["candidate-list"] !== undefined ? String(args["candidate-list"]) : undefined;
      const split = splitPositionals(positionals, list !== undefined);
      const { dirs, candidates } = split;
      warnings = split.warnings;
      // the GPU workers' options with --build-only (no worker): said, as the document's warnings too (a new user's finding)
      const unused = ["gpus", "workers-per-gpu", "shared-timing", "timeout"].filter((k) => rawArgs.some((a) => a === `--${k}` || a.startsWith(`--${k}=`)));
      if (args["build-only"] && unused.length) {
        const w = `${unused.map((k) => `--${k}`).join(", ")}: the GPU workers' ${unused.length > 1 ? "options do" : "option does"} nothing with --build-only, which starts none`;
        log.warn(w);
        warnings = [...warnings, w];
      }
      const settings = evalSettings(args, rawArgs);
      const perGpu = intArg("workers-per-gpu", args["workers-per-gpu"], 1, 64, 1);
      const gpus: (string | null)[] = args.gpus !== undefined ? parseGpus(String(args.gpus)) : [null];
      const slots = gpus.flatMap((g) => Array.from({ length: perGpu }, () => g));
      if (slots.length > 256)
        throw new KerncapError("E_USAGE", `--gpus and --workers-per-gpu ask for ${slots.length} GPU workers; at most 256`, {
          hint: "One or a few workers per GPU is enough: --gpus lists each GPU once, --workers-per-gpu N runs N on each.",
        });
      const verbose = log.level >= 4;
      report = await runEval({
        dirs,
        candidates: list !== undefined ? listedCandidates(list) : candidates,
        settings,
        build: {
          force: Boolean(args["allow-version-mismatch"]),
          ...(args.grid !== undefined ? { grid: String(args.grid) } : {}),
          ...(args["full-build"] ? { fullBuild: true } : {}),
          ...(args.pruned ? { fromPruned: true } : {}),
        },
        ...(args.jsonl !== undefined ? { jsonl: String(args.jsonl) } : {}),
        resume: Boolean(args.resume),
        buildOnly: Boolean(args["build-only"]),
        ...(args.shard !== undefined ? { shard: parseShard(String(args.shard)) } : {}),
        slots,
        ...(args["shared-timing"] ? { sharedTiming: true } : {}),
        jobs: args.jobs !== undefined ? intArg("jobs", args.jobs, availableParallelism(), 1024, 1) : availableParallelism(),
        timeoutS: intArg("timeout", args.timeout, 10, 86_400, 1),
        trust: trustArg(args.trust, rawArgs),
        confine: Boolean(args.confine),
        requireGpu: Boolean(args["require-gpu"]),
        live: Boolean(process.stderr.isTTY),
        open: evalWorkers(settings, verbose, printable),
        ...(args.json ? { onRecord: (r) => printJsonLine("eval-record", r) } : {}),
      });
    }
    if (args.json) printJsonLine("eval", warnings.length ? { ...report, warnings } : report);
    else printText(rankedTable(report) + "\n");
    if (report.exitCode === 2 && report.summary.error)
      log.error(unjudgedLine(report, args.merge ? "merge" : args.jsonl !== undefined ? "jsonl" : "none", Boolean(args["build-only"])));
    return report.exitCode;
  },
});
