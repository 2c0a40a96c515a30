/**
 * `kerncap validate DIR`: rebuild the reproducer's (edited) kernel with DIR/build.sh (CUDA: or the
 * pruned TU's device-only build once it was checked against build.sh's: src/rebuild/rebuilder.ts),
 * replay the rebuilt module on the captured memory, compare with the app's after state; the build
 * runs beside the replay's restore; the workflow and its gates: src/ops/validate.ts.
 * Exit 0 match, 1 mismatch, 2 build or runtime error.
 *
 * A received capture (unpacked, or made on another host: src/format/trust.ts) has its build.sh
 * printed and refused until --trust. --confine (kerncap mcp): src/frontends/confine.ts.
 *
 * --watch: one process keeps the memory resident and rebuilds + replays at each save under
 * DIR/src/, one line per save (--json: JSON Lines, kerncap.validate-watch/1, an error that ends
 * the watch, at startup too, being one record of it: src/cli/main.ts); src/rebuild/watch.ts.
 * Exit 130 at Ctrl-C (143 at SIGTERM).
 *
 * --build-only: the rebuild alone (no replay, no GPU): kerncap.validate-build/1, exit 0 when the
 * kernel compiles, 2 on a build error; with --watch, a `built` line at each save.
 */
import { defineCommand, type ArgsDef, type ParsedArgs } from "citty";
import { openCapture } from "../../format/capture-dir.ts";
import { describeResources, validate, type BuildOnlyResult, type ValidateOptions } from "../../ops/validate.ts";
import { KerncapError } from "../../errors.ts";
import { WATCH_COMPARE_SECONDS, watchLine } from "../../rebuild/watch.ts";
import { blockOf, COMPARE_SECONDS, MAX_ROUNDS, MIN_PAIRS } from "../../replay/stats.ts";
import {
  dirArg,
  trustArg,
  intArg,
  jsonArg,
  printJson,
  printJsonLine,
  toleranceArgs,
  toleranceOptions,
  verboseArg,
  keepStdoutForData,
  dataStdio,
  printText,
  allowVersionMismatchArg,
  flushL2Arg,
  verifyArg,
} from "../args.ts";
import { describeComparison, describeReplay, oneLine } from "../format.ts";

/** validate's --iters by default: the rounds of the comparison's first batch. */
export const VALIDATE_ITERS = 10;

/** validate's options (exported for validateOptions' type and the tests). */
export const VALIDATE_ARGS = {
  ...dirArg,
  iters: {
    type: "string",
    // what runCompared does with it (src/replay/session.ts, src/replay/stats.ts adaptiveCompare): the first batch of an adaptive comparison
    description: `Rounds timed first, each the rebuilt and the captured kernel interleaved (rounded up to whole blocks of ${blockOf(4)}), then more, doubling, until the comparison is decided or ${COMPARE_SECONDS} s more has passed (${WATCH_COMPARE_SECONDS} s a --watch save; ${MAX_ROUNDS} rounds at most); under ${MIN_PAIRS}: that many timed launches, no comparison; 0: none`,
    default: String(VALIDATE_ITERS),
  },
  runs: {
    type: "string",
    description:
      "Checked launches of the rebuilt kernel from the before state (default 3, 8 once they differ; at least 1): tells nondeterministic kernels and the run-to-run envelope",
  },
  ...flushL2Arg,
  ...verifyArg(true),
  ...toleranceArgs,
  ...allowVersionMismatchArg(),
  watch: {
    type: "boolean",
    description: "Keep the memory on the GPU; rebuild, replay and print one line at each save under DIR/src/ (Ctrl-C ends)",
    default: false,
  },
  "build-only": {
    type: "boolean",
    description:
      "Rebuild only, no replay and no GPU: say whether the kernel compiles (the kernel and what it uses: a CUDA slice leaves out the TU's code after the kernel, which kerncap eval's candidates compile), with its registers, stack frame and spills beside the captured module's, and the nvcc that built it (exit 0); with --watch, at each save. A CUDA build.sh takes NVCC (another toolkit's nvcc) and EXTRA_FLAGS (more nvcc flags: -maxrregcount=24, -DX=1) from the environment",
    default: false,
  },
  arch: {
    type: "string",
    description:
      "With --build-only: build for this GPU architecture instead of the captured one (sm_80), its registers and spills that architecture's; judging an edit needs a GPU of the captured architecture (check --rebuild rebuilds for another one and replays there)",
    valueHint: "SM",
  },
  trust: {
    type: "boolean",
    description:
      "Run the build of a received capture (unpacked, made on another machine, copied, or not yours alone: docs/security.md) after you read what it runs; --trust=DIGEST runs it only if the files are still the ones the refusal showed (needed for a folder another user can write); remembered for that folder and those files (docs/security.md)",
    default: false,
  },
  confine: {
    type: "boolean",
    description:
      "What kerncap mcp's validate uses: refuse a build that reads files outside the capture, its source root and the toolchain, and show only the capture's own compiler diagnostics (implies --full-build)",
    default: false,
  },
  "full-build": {
    type: "boolean",
    description:
      "CUDA: rebuild with build.sh only (by default, once the first build showed that a device-only TU pruned to what the kernel needs gives the same machine code, later builds compile that)",
    default: false,
  },
  ...jsonArg,
  ...verboseArg,
} as const satisfies ArgsDef;

/**
 * The options of `kerncap validate` as its workflow takes them (src/ops/validate.ts): timed
 * launches, checked runs, --flush-l2, tolerances in `run`; --no-verify; the toolchain override.
 * @throws KerncapError E_USAGE (a bad --iters, --runs, tolerance)
 */
export function validateOptions(args: ParsedArgs<typeof VALIDATE_ARGS>, rawArgs: string[]): Pick<ValidateOptions, "run" | "verify" | "force" | "fullBuild"> {
  const iters = intArg("iters", args.iters, VALIDATE_ITERS, 100_000);
  const runs = args.runs === undefined ? undefined : intArg("runs", args.runs, 3, 1000, 1);
  return {
    run: { iters, ...(runs !== undefined ? { runs } : {}), ...(args["flush-l2"] ? { flushL2: true } : {}), ...toleranceOptions(args, rawArgs) },
    verify: args.verify !== false,
    force: Boolean(args["allow-version-mismatch"]),
    fullBuild: Boolean(args["full-build"]),
  };
}

/** The options that judge or time a replay, which --build-only runs none of. */
const REPLAY_ONLY = ["--iters", "--runs", "--flush-l2", "--no-verify", "--atol", "--rtol", "--dtype", "--multiset"];

/**
 * --build-only with an option of the replay it does not run: refused rather than ignored.
 * @throws KerncapError E_USAGE naming the option
 */
function refuseReplayOptions(rawArgs: string[]): void {
  const given = REPLAY_ONLY.filter((o) => rawArgs.some((a) => a === o || a.startsWith(`${o}=`)));
  if (given.length)
    throw new KerncapError("E_USAGE", `--build-only runs no replay: ${given.join(", ")} would judge or time one`, {
      hint: "Leave them out with --build-only, or leave --build-only out to replay the rebuilt kernel (that needs a GPU).",
    });
}

/** --build-only's lines: the kernel compiles, its registers, stack frame and spills beside the captured module's; the build's time and builder, the nvcc and toolkit that built it. */
export function describeBuilt(r: BuildOnlyResult): string {
  const b = r.rebuild;
  const res = describeResources(b);
  const by = [b.nvcc, b.toolkit !== null ? `CUDA ${b.toolkit}` : null].filter(Boolean).join(", ");
  return [
    `BUILT ${r.demangled}: the kernel compiles${b.targetArch ? ` for ${b.targetArch} (--arch)` : ""}${res ? `: ${res}` : ""}`,
    `  rebuild ${b.seconds.toFixed(2)} s${b.builder === "pruned" ? " (pruned TU)" : ""}${by ? ` by ${by}` : ""}: ${b.module} (no replay: --build-only)`,
  ]
    .map(oneLine) // each line one line, whatever the manifest's names hold
    .join("\n");
}

export default defineCommand({
  meta: { name: "validate", description: "Rebuild the edited reproducer, replay it on the captured memory, compare with the app" },
  args: VALIDATE_ARGS,
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData(); // device printf goes to stderr (escaped), the document to stdout; a replay sets it aside in text mode too (src/replay/backends/factory.ts)
    const capture = openCapture(String(args.dir));
    const options = validateOptions(args, rawArgs); // options first: no rebuild for a typo
    if (args["build-only"]) refuseReplayOptions(rawArgs);
    const targetArch = args.arch !== undefined ? archArg(String(args.arch), Boolean(args["build-only"]), Boolean(args.watch)) : undefined;
    const request = {
      ...options,
      trust: trustArg(args.trust, rawArgs),
      confine: Boolean(args.confine),
      watch: Boolean(args.watch),
      buildOnly: Boolean(args["build-only"]),
      ...(targetArch ? { targetArch } : {}),
      quiet: !args.verbose,
      stdout: dataStdio(),
    };
    return validate(capture, request, {
      emit: args.json ? (e) => printJsonLine("validate-watch", e) : (e) => printText(watchLine(e) + "\n"),
      built: (res) => {
        if (args.json) printJson("validate-build", res);
        else printText(`${describeBuilt(res)}\n`);
        return 0;
      },
      report: (res) => {
        const b = res.rebuild;
        if (args.json) printJson("validate", res);
        else {
          printText(describeReplay(res) + "\n");
          printText(`  against the captured module: ${describeComparison(res.compare)}\n`);
          printText(
            `  rebuild ${b.seconds.toFixed(2)} s${b.builder === "pruned" ? " (pruned TU)" : ""}${describeResources(b) ? `: ${describeResources(b)}` : ""}, then replay ${res.replaySeconds.toFixed(2)} s (context, restore and checksums ran during the build)\n`,
          );
        }
        return res.verdict === "match" ? 0 : 1;
      },
    });
  },
});

/**
 * --arch's value, checked: sm_NN (an optional a/f suffix), with --build-only and without --watch.
 * @throws KerncapError E_USAGE
 */
function archArg(arch: string, buildOnly: boolean, watch: boolean): string {
  if (!buildOnly || watch)
    throw new KerncapError(
      "E_USAGE",
      `--arch ${arch} goes with --build-only${watch ? " alone, not with --watch" : ""}: a replay judges the kernel on the captured architecture's GPU`,
      {
        hint: "kerncap validate DIR --build-only --arch sm_80 says whether the edit compiles there, with its registers; kerncap check DIR --rebuild on a GPU of another architecture rebuilds for it and replays.",
      },
    );
  if (!/^sm_\d{2,3}[af]?$/.test(arch))
    throw new KerncapError("E_USAGE", `--arch ${JSON.stringify(arch)} is no GPU architecture nvcc takes as -arch`, {
      hint: "For example --arch sm_80 (A100), sm_89 (L40), sm_90 (H100).",
    });
  return arch;
}
