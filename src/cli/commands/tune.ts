/**
 * `kerncap tune DIR`: sweep a Triton kernel's configs on the captured memory (src/tune/triton.ts):
 * each compiled, judged against the app's after state and timed interleaved with the app's own
 * choice; a table, and the winner as a line for @triton.autotune. Exit 0 when some config
 * matched, 1 when none did, 2 on error.
 */
import { defineCommand } from "citty";
import { autotuneLine, configLabel, tuneTable } from "../../tune/space.ts";
import { tuneTriton } from "../../tune/triton.ts";
import { floatArg } from "../../replay/tolerance-plan.ts";
import { withAslrRetry } from "../../replay/aslr.ts";
import { MIN_PAIRS } from "../../replay/stats.ts";
import { dataStdio, dirArg, intArg, jsonArg, keepStdoutForData, printJson, repeatedOption, verboseArg } from "../args.ts";
import { printable } from "../format.ts";

export default defineCommand({
  meta: { name: "tune", description: "Sweep a Triton kernel's configs on the captured memory: compile, check, time interleaved; print the winner for @triton.autotune" },
  args: {
    ...dirArg,
    config: { type: "string", description: "Config space: NAME=V1,V2 … (constexprs, num_warps, num_stages, maxnreg), expanded as a product; repeat for a union (default: the autotuner's configs recorded at capture)", valueHint: "SPACE" },
    grid: { type: "string", description: "Launch grid of a config, e.g. 'cdiv(M,BLOCK_M)*cdiv(N,BLOCK_N),1,1' (the kernel's integer arguments and the config's values; default: the captured grid)", valueHint: "EXPR" },
    iters: { type: "string", description: "Timed rounds, one launch of every config each", default: "20" },
    jobs: { type: "string", description: "Parallel compiles (default: the CPU count)" },
    "flush-l2": { type: "boolean", description: "Flush L2 before each timed launch", default: false },
    trust: { type: "boolean", description: "Tune a received capture (unpacked, or made on another host): its kernel's Python runs, as validate --trust runs its build (docs/security.md)", default: false },
    atol: { type: "string", description: "Absolute tolerance per element against the app's after state", default: "0" },
    rtol: { type: "string", description: "Relative tolerance per element", default: "0" },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData();
    const iters = intArg("iters", args.iters, 20, 10_000, MIN_PAIRS);
    const jobs = args.jobs === undefined ? undefined : intArg("jobs", args.jobs, 1, 1024, 1);
    const o = { configs: repeatedOption(rawArgs, ["config"]), grid: args.grid === undefined ? undefined : String(args.grid), iters, jobs, flushL2: Boolean(args["flush-l2"]), atol: floatArg("atol", args.atol), rtol: floatArg("rtol", args.rtol), trust: Boolean(args.trust) };
    return withAslrRetry(async () => {
      const r = await tuneTriton(String(args.dir), o);
      if (args.json) printJson("tune", r);
      else {
        const w = r.winner;
        const lines = [tuneTable(r.rows), "", w ? `winner: ${configLabel(w.config)}${w.captured ? " (the app's own choice)" : w.speedup ? `, ${w.speedup.toFixed(2)}× the app's choice` : ""}` : "no config matched the app's after state", ...(w ? [`  ${autotuneLine(w.config)}`] : [])];
        lines.push(`  ${r.rows.length} configs: compiled in ${r.seconds.compile.toFixed(1)} s, checked and timed in ${r.seconds.replay.toFixed(1)} s`);
        process.stdout.write(printable(lines.join("\n")) + "\n");
      }
      return r.winner ? 0 : 1;
    }, dataStdio());
  },
});
