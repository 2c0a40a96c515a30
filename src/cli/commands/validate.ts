/**
 * `kerncap validate DIR`: rebuild the reproducer's (edited) kernel with DIR/build.sh (CUDA: or the
 * pruned TU's device-only build once it was checked against build.sh's: src/repro/validate-build.ts),
 * replay the rebuilt module on the captured memory, compare with the app's after state.
 * The build runs while the replay reserves the captured VAs, creates the CUDA context, verifies
 * the checksums and restores the before state; the module is loaded (after the parameter-layout
 * check, before any launch) once the build is done. So the loop costs about the build plus the
 * launch and compare, not build + context + restore.
 * Exit 0 match, 1 mismatch, 2 build or runtime error.
 *
 * A received capture (unpacked, or made on another host: src/repro/trust.ts) has its build.sh
 * printed and refused until --trust. --confine (kerncap mcp): src/repro/confine.ts.
 *
 * --watch: one process keeps the memory resident and rebuilds + replays at each save under
 * DIR/src/, one line per save (--json: JSON Lines, kerncap.validate-watch/1, an error that ends
 * the watch, at startup too, being one record of it: src/cli/main.ts); src/repro/watch.ts.
 * Exit 130 at Ctrl-C (143 at SIGTERM).
 */
import { defineCommand } from "citty";
import { isKerncapError, KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { frontendOf } from "../../frontends/index.ts";
import { requireTrustedBuild } from "../../repro/trust.ts";
import { startRebuild } from "../../repro/validate-build.ts";
import { readManifest } from "../../format/capture-dir.ts";
import { withAslrRetry } from "../../replay/aslr.ts";
import { replayCompared, type replay } from "../../replay/engine.ts";
import type { TimingComparison } from "../../replay/stats.ts";
import { checkMultiset } from "../../replay/tolerance-plan.ts";
import { checkWatchable, watchLine, watchReproducer } from "../../repro/watch.ts";
import { dirArg, intArg, jsonArg, printJson, printJsonLine, toleranceArgs, toleranceOptions, verboseArg, keepStdoutForData, dataStdio } from "../args.ts";
import { describeComparison, describeReplay, printable } from "../format.ts";

export default defineCommand({
  meta: { name: "validate", description: "Rebuild the edited reproducer, replay it on the captured memory, compare with the app" },
  args: {
    ...dirArg,
    iters: { type: "string", description: "Timed launches after the checked one", default: "10" },
    ...toleranceArgs,
    force: { type: "boolean", alias: ["f"], description: "Rebuild even when the toolchain differs from the capture's (Triton version)", default: false },
    watch: { type: "boolean", description: "Keep the memory on the GPU; rebuild, replay and print one line at each save under DIR/src/ (Ctrl-C ends)", default: false },
    trust: { type: "boolean", description: "Run the build.sh of a received capture (unpacked, or made on another host) after you read it; remembered for that folder and build.sh (docs/security.md)", default: false },
    confine: { type: "boolean", description: "What kerncap mcp's validate uses: refuse a build that reads files outside the capture, its source root and the toolchain, and show only the capture's own compiler diagnostics (implies --full-build)", default: false },
    "full-build": { type: "boolean", description: "CUDA: rebuild with build.sh only (by default, once the first build showed that a device-only TU pruned to what the kernel needs gives the same machine code, later builds compile that)", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData(); // device printf goes to stderr, the document to stdout
    const dir = String(args.dir);
    const m = readManifest(dir);
    const iters = intArg("iters", args.iters, 10, 100_000); // options first: no rebuild for a typo
    const tol = toleranceOptions(args, rawArgs);
    checkMultiset(dir, m, tol.multiset); // a region the capture lacks: a usage error before the rebuild and the GPU
    const confine = Boolean(args.confine);
    if (confine && args.watch) throw new KerncapError("E_USAGE", "--confine and --watch do not go together", { hint: "--confine is for kerncap mcp's one-shot validate; leave it out with --watch." });
    if (confine && m.kernel.frontend === "triton" && !args.trust) {
      throw new KerncapError("E_UNTRUSTED", `${dir} is a Triton capture: its validate imports the edited Python under src/, which runs as code with your rights, so a confined validate (kerncap mcp) runs it only with --trust`, {
        hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton edits run, or validate on the command line.",
      });
    }
    requireTrustedBuild(dir, m, Boolean(args.trust)); // a received capture's build.sh: printed and refused without --trust
    if (args.watch) {
      checkWatchable(dir, m); // AMD, a faulting launch, no reproducer: refused before any GPU work
      const emit = args.json ? (e: object) => printJsonLine("validate-watch", e) : (e: Parameters<typeof watchLine>[0]) => process.stdout.write(watchLine(e) + "\n");
      return withAslrRetry(() => watchReproducer(dir, m, { run: { iters, ...tol }, force: Boolean(args.force), quiet: !args.verbose, emit, fastBuild: !args["full-build"] }), dataStdio());
    }
    const fe = frontendOf(m);
    if (!fe.validates) {
      throw new KerncapError("E_FRONTEND", `${dir} is an ${m.device.vendor.toUpperCase()} capture; kerncap validate supports CUDA and Triton captures only so far`, {
        hint: "Rebuild a HIP reproducer with its build.sh and replay the capture with `kerncap replay` (the HSA backend).",
      });
    }
    // a captured VA range taken by this process's own mappings: once more without ASLR (src/replay/aslr.ts)
    return withAslrRetry(async () => {
      const t0 = performance.now();
      // --force reaches the reproducer's build as KERNCAP_FORCE=1 (templates/triton/repro.py); the
      // CUDA slice of a TU edited since is remade before build.sh runs; the parameter layout is
      // checked before anything launches (exit 2); confined: build.sh alone, with the compiler's
      // dependency list (the pruned build's steps write none)
      const { built, module: modulePath, builtAt } = startRebuild(dir, m, { quiet: !args.verbose, force: Boolean(args.force), fullBuild: Boolean(args["full-build"]) || confine, ...(confine ? { confine: m } : {}) });
      let r: Awaited<ReturnType<typeof replay>>;
      let compare: TimingComparison | null = null;
      try {
        // the rebuilt kernel judged, and timed interleaved against the captured module (checked while the build runs)
        ({ candidate: r, compare } = await replayCompared(dir, { iters, verify: true, runs: 1 }, { iters, modulePath, kernelName: m.kernel.name, ...tol }));
      } catch (e) {
        const b = await built; // a build error is the one to report (the replay may have failed only for lack of a module)
        // no GPU here: the edit still compiled, which is worth saying before the replay's error
        if (isKerncapError(e) && e.code === "E_NO_GPU") {
          // the document (--json) says it too: a script learns that the edit compiles
          throw new KerncapError("E_NO_GPU", `${e.message} (the rebuild succeeded: ${b.module}, ${b.seconds.toFixed(2)} s; the replay needs a GPU)`, { hint: e.hint, exitCode: e.exitCode });
        }
        throw e;
      }
      const b = await built;
      // replaySeconds: what the replay added after the build (module load, launches, compare)
      const replaySeconds = (performance.now() - Math.max(builtAt(), t0)) / 1000;
      const res = { ...r, compare, rebuild: { module: b.module, seconds: b.seconds, builder: b.builder, ...(b.steps ? { steps: b.steps } : {}) }, replaySeconds, wallSeconds: (performance.now() - t0) / 1000 };
      if (args.json) printJson("validate", res);
      else {
        process.stdout.write(printable(describeReplay(r)) + "\n");
        process.stdout.write(`  against the captured module: ${describeComparison(compare)}\n`);
        process.stdout.write(`  rebuild ${b.seconds.toFixed(2)} s${b.builder === "pruned" ? " (pruned TU)" : ""}, then replay ${replaySeconds.toFixed(2)} s (context, restore and checksums ran during the build)\n`);
      }
      return r.verdict === "match" ? 0 : 1;
    }, dataStdio());
  },
});
