/** `kerncap replay DIR`: same VAs, launch, bit-exact check, timing (the workflow: src/ops/replay.ts). Exit 0 match, 1 mismatch, 2 error. */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { againstKernel, checkModuleFile } from "../../replay/against.ts";
import { replayCapture } from "../../ops/replay.ts";
import { MIN_PAIRS } from "../../replay/stats.ts";
import { openCapture } from "../../format/capture-dir.ts";
import {
  dirArg,
  intArg,
  jsonArg,
  printJson,
  toleranceArgs,
  toleranceOptions,
  verboseArg,
  keepStdoutForData,
  dataStdio,
  printText,
  verifyArg,
  flushL2Arg,
} from "../args.ts";
import { describeAgainst, describeRepeats, describeReplay } from "../format.ts";

/** --module FILE: the module to launch (its kernel looked up by the captured name). @throws KerncapError E_USAGE when there is no such file */
function moduleOption(v: unknown): { modulePath?: string } {
  if (v === undefined || v === "") return {};
  const file = resolve(String(v));
  if (!existsSync(file))
    throw new KerncapError("E_USAGE", `--module ${file}: no such file`, { hint: "Give the cubin a reproducer build wrote (build.sh prints its path last)." });
  checkModuleFile(file, "--module"); // a file that is no module image: said before any GPU work
  return { modulePath: file };
}

/** replay --against's --iters by default: the rounds of the comparison's first batch. */
export const AGAINST_ITERS = 50;

export default defineCommand({
  meta: { name: "replay", description: "Replay a capture at its captured VAs, compare bit for bit, time it" },
  args: {
    ...dirArg,
    iters: {
      type: "string",
      description: `Timed launches after the checked runs and 2 warm-up launches (median, p10, p90, min): 10 by default, ${AGAINST_ITERS} rounds of the two kernels to start with --against (then more until the comparison is decided); 0: none, no warm-up either`,
    },
    runs: {
      type: "string",
      description:
        "Checked launches from the before state (default 3, 8 once they differ; at least 1): tells nondeterministic kernels and the run-to-run envelope",
    },
    against: {
      type: "string",
      description:
        "Time another kernel against this one on the same memory, interleaved: another capture folder of the same launch, or a module built from the reproducer (both are checked)",
      valueHint: "OTHER",
    },
    repeat: {
      type: "string",
      description:
        "With --against: make the whole comparison this many times on the one restored memory and say how often each verdict came (is a difference stable?); default 1",
      valueHint: "N",
    },
    module: {
      type: "string",
      description: "Launch the kernel of this module image (a reproducer build's cubin) instead of the captured module",
      valueHint: "FILE",
    },
    ...flushL2Arg,
    ...verifyArg(true),
    ...toleranceArgs,
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData(); // device printf goes to stderr (escaped), the document to stdout; a replay sets it aside in text mode too (src/replay/backends/factory.ts)
    const dir = String(args.dir);
    const iters = intArg("iters", args.iters, 10, 100_000);
    const runs = args.runs === undefined ? undefined : intArg("runs", args.runs, 3, 1000, 1);
    const tol = toleranceOptions(args, rawArgs);
    const module = moduleOption(args.module);
    const capture = openCapture(dir);
    const other = args.against === undefined ? undefined : againstKernel(capture.manifest, String(args.against));
    if (other && module.modulePath)
      throw new KerncapError("E_USAGE", "--against and --module together: give one", {
        hint: "--module replays one module; --against times another kernel against the captured one (or put the module in --against).",
      });
    // a comparison needs pairs: AGAINST_ITERS by default to start with (more are taken until it is decided), at least MIN_PAIRS
    const pairs = other ? intArg("iters", args.iters, AGAINST_ITERS, 100_000, MIN_PAIRS) : iters;
    const repeat = intArg("repeat", args.repeat, 1, 100_000, 1);
    if (repeat > 1 && !other)
      throw new KerncapError("E_USAGE", "--repeat needs --against", { hint: "Repeat a comparison: kerncap replay DIR --against OTHER --repeat 20." });
    const run = {
      iters: pairs,
      verify: args.verify !== false,
      ...tol,
      ...(runs !== undefined ? { runs: Math.max(1, runs) } : {}),
      flushL2: Boolean(args["flush-l2"]),
      ...module,
    };
    return replayCapture(
      capture,
      { run, ...(other ? { against: other } : {}), repeat, stdout: dataStdio() },
      {
        compared: (c, other) => {
          const doc = {
            ...(c.baseline ?? c.candidate),
            against: { kind: other.kind, path: other.path, ...c.candidate },
            compare: c.compare,
            ...(c.repeats ? { repeats: c.repeats } : {}),
          };
          if (args.json) printJson("replay", doc);
          else
            printText(
              [
                describeReplay(c.baseline ?? c.candidate),
                describeAgainst(other.path, c.candidate, c.compare),
                ...(c.repeats ? [describeRepeats(c.repeats)] : []),
              ].join("\n") + "\n",
            );
          if (c.candidate.verdict !== "match") log.error(`the other kernel (${other.path}) does not match the app's after state`);
          return c.baseline?.verdict === "match" && c.candidate.verdict === "match" ? 0 : 1;
        },
        replayed: (r) => {
          if (args.json) printJson("replay", r);
          else printText(describeReplay(r) + "\n");
          if (r.fault) {
            if (!r.fault.reproduced)
              log.error(
                `the capture faulted in the app (${r.fault.expected.name}) but the replay ${r.fault.observed ? `faulted with ${r.fault.observed.name}` : "did not fault"}`,
              );
          } else if (r.verdict !== "match")
            log.error(
              `replay does not match the app's after state in ${r.numerics.regions.filter((x) => x.verdict === "mismatch").length} of ${r.regionsChecked} regions and module globals`,
            );
          return r.verdict === "match" ? 0 : 1;
        },
      },
    );
  },
});
