/** `kerncap replay DIR`: same VAs, launch, bit-exact check, timing. Exit 0 match, 1 mismatch, 2 error. */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { withAslrRetry } from "../../replay/aslr.ts";
import { replay } from "../../replay/engine.ts";
import { checkMultiset } from "../../replay/tolerance-plan.ts";
import { openCapture } from "../../format/capture-dir.ts";
import { dirArg, intArg, jsonArg, printJson, toleranceArgs, toleranceOptions, verboseArg, keepStdoutForData, dataStdio } from "../args.ts";
import { describeReplay, printable } from "../format.ts";

export default defineCommand({
  meta: { name: "replay", description: "Replay a capture at its captured VAs, compare bit for bit, time it" },
  args: {
    ...dirArg,
    iters: { type: "string", description: "Timed launches after the checked runs and 2 warm-up launches (median, p10, p90, min)", default: "10" },
    runs: { type: "string", description: "Checked launches from the before state (default 3, 8 once they differ): tells nondeterministic kernels and the run-to-run envelope" },
    "flush-l2": { type: "boolean", description: "Flush L2 (256 MiB memset) before each timed launch", default: false },
    verify: { type: "boolean", description: "Check the capture's checksums (--no-verify skips it)", negativeDescription: "Skip the checksums (faster for large captures; a damaged file goes unnoticed)", default: true },
    ...toleranceArgs,
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData(); // device printf goes to stderr, the document to stdout
    const dir = String(args.dir);
    const iters = intArg("iters", args.iters, 10, 100_000);
    const runs = args.runs === undefined ? undefined : intArg("runs", args.runs, 3, 1000);
    if (runs === 0) throw new KerncapError("E_USAGE", "--runs must be at least 1", { hint: "For example --runs 5 (the default, 3, grows to 8 when the runs differ)." });
    const tol = toleranceOptions(args, rawArgs);
    const capture = openCapture(dir);
    if (tol.multiset) checkMultiset(dir, capture.manifest, tol.multiset); // a region the capture lacks: a usage error before the GPU is opened
    return withAslrRetry(async () => {
      const r = await replay(capture, { iters, verify: args.verify !== false, ...tol, ...(runs !== undefined ? { runs: Math.max(1, runs) } : {}), flushL2: Boolean(args["flush-l2"]) });
      if (args.json) printJson("replay", r);
      else process.stdout.write(printable(describeReplay(r)) + "\n");
      if (r.fault) {
        if (!r.fault.reproduced) log.error(`the capture faulted in the app (${r.fault.expected.name}) but the replay ${r.fault.observed ? `faulted with ${r.fault.observed.name}` : "did not fault"}`);
      } else if (r.verdict !== "match") log.error(`replay does not match the app's after state in ${r.numerics.regions.filter((x) => x.verdict === "mismatch").length} of ${r.regionsChecked} regions and module globals`);
      return r.verdict === "match" ? 0 : 1;
    }, dataStdio());
  },
});
