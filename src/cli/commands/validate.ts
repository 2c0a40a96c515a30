/**
 * `kerncap validate DIR`: rebuild the reproducer's (edited) kernel with DIR/build.sh (CUDA: or the
 * pruned TU's device-only build once it was checked against build.sh's: src/rebuild/rebuilder.ts),
 * replay the rebuilt module on the captured memory, compare with the app's after state; the build
 * runs beside the replay's restore (src/rebuild/validate.ts validateOnce).
 * Exit 0 match, 1 mismatch, 2 build or runtime error.
 *
 * A received capture (unpacked, or made on another host: src/format/trust.ts) has its build.sh
 * printed and refused until --trust. --confine (kerncap mcp): src/frontends/confine.ts.
 *
 * --watch: one process keeps the memory resident and rebuilds + replays at each save under
 * DIR/src/, one line per save (--json: JSON Lines, kerncap.validate-watch/1, an error that ends
 * the watch, at startup too, being one record of it: src/cli/main.ts); src/rebuild/watch.ts.
 * Exit 130 at Ctrl-C (143 at SIGTERM).
 */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { openCapture } from "../../format/capture-dir.ts";
import { frontendOf } from "../../frontends/index.ts";
import { requireTrustedBuild, runsTrustedCopy } from "../../format/trust.ts";
import { requireRenderedBuild, trustChangedBuild } from "../../format/rendered.ts";
import { validateOnce } from "../../rebuild/validate.ts";
import { checkWatchable, watchLine, watchReproducer } from "../../rebuild/watch.ts";
import { withAslrRetry } from "../../replay/aslr.ts";
import { checkMultiset } from "../../replay/tolerance-plan.ts";
import { assertRebuildWritable } from "../../frontends/build.ts";
import { dirArg, trustArg, intArg, jsonArg, printJson, printJsonLine, toleranceArgs, toleranceOptions, verboseArg, keepStdoutForData, dataStdio, printText, allowVersionMismatchArg } from "../args.ts";
import { describeComparison, describeReplay } from "../format.ts";

export default defineCommand({
  meta: { name: "validate", description: "Rebuild the edited reproducer, replay it on the captured memory, compare with the app" },
  args: {
    ...dirArg,
    iters: { type: "string", description: "Timed launches after the checked one", default: "10" },
    ...toleranceArgs,
    ...allowVersionMismatchArg(),
    watch: { type: "boolean", description: "Keep the memory on the GPU; rebuild, replay and print one line at each save under DIR/src/ (Ctrl-C ends)", default: false },
    trust: { type: "boolean", description: "Run the build of a received capture (unpacked, made on another host, or another user's folder) after you read what it runs; --trust=DIGEST runs it only if the files are still the ones the refusal showed (needed for a folder another user can write); remembered for that folder and those files (docs/security.md)", default: false },
    confine: { type: "boolean", description: "What kerncap mcp's validate uses: refuse a build that reads files outside the capture, its source root and the toolchain, and show only the capture's own compiler diagnostics (implies --full-build)", default: false },
    "full-build": { type: "boolean", description: "CUDA: rebuild with build.sh only (by default, once the first build showed that a device-only TU pruned to what the kernel needs gives the same machine code, later builds compile that)", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData(); // device printf goes to stderr, the document to stdout
    const dir = String(args.dir);
    const capture = openCapture(dir);
    const m = capture.manifest;
    const iters = intArg("iters", args.iters, 10, 100_000); // options first: no rebuild for a typo
    const tol = toleranceOptions(args, rawArgs);
    checkMultiset(dir, m, tol.multiset); // a region the capture lacks: a usage error before the rebuild and the GPU
    const confine = Boolean(args.confine);
    const trust = trustArg(args.trust, rawArgs);
    if (confine && args.watch) throw new KerncapError("E_USAGE", "--confine and --watch do not go together", { hint: "--confine is for kerncap mcp's one-shot validate; leave it out with --watch." });
    if (confine && frontendOf(m).buildRunsSource && !trust) {
      throw new KerncapError("E_UNTRUSTED", `${dir} is a ${m.kernel.frontend} capture: its build imports the edited source under src/, which runs as code with your rights, so a confined validate (kerncap mcp) runs it only with --trust`, {
        hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton edits run, or validate on the command line.",
      });
    }
    // confined (kerncap mcp): only the build kerncap wrote, or one the user trusted on the command line, before anything runs
    if (confine) requireRenderedBuild(dir, m);
    // a received capture's build.sh: shown and refused without --trust (confined, kerncap mcp: in the error itself, which is what its agent reads)
    assertRebuildWritable(dir); // a folder this user may not write: said before the trust question
    requireTrustedBuild(dir, m, trust, { inMessage: confine });
    // --trust on the command line of a build.sh kerncap did not write: remembered, so that kerncap mcp runs it too
    // (a received capture's was recorded above, with the digest the user approved, not read again)
    if (!confine && trust && !runsTrustedCopy(dir)) trustChangedBuild(dir, m);
    const build = { quiet: !args.verbose, force: Boolean(args["allow-version-mismatch"]), fullBuild: Boolean(args["full-build"]) };
    if (args.watch) {
      checkWatchable(dir, m); // AMD, a faulting launch, no reproducer: refused before any GPU work
      const emit = args.json ? (e: object) => printJsonLine("validate-watch", e) : (e: Parameters<typeof watchLine>[0]) => printText(watchLine(e) + "\n");
      return withAslrRetry(() => watchReproducer(capture, { run: { iters, ...tol }, force: build.force, quiet: build.quiet, emit, fastBuild: !build.fullBuild }), dataStdio());
    }
    // a captured VA range taken by this process's own mappings: once more without ASLR (src/replay/aslr.ts)
    return withAslrRetry(async () => {
      // confined: build.sh alone, with the compiler's dependency list (the pruned build's steps write none)
      const res = await validateOnce(capture, { run: { iters, ...tol }, ...build, confine });
      const b = res.rebuild;
      if (args.json) printJson("validate", res);
      else {
        printText(describeReplay(res) + "\n");
        printText(`  against the captured module: ${describeComparison(res.compare)}\n`);
        printText(`  rebuild ${b.seconds.toFixed(2)} s${b.builder === "pruned" ? " (pruned TU)" : ""}, then replay ${res.replaySeconds.toFixed(2)} s (context, restore and checksums ran during the build)\n`);
      }
      return res.verdict === "match" ? 0 : 1;
    }, dataStdio());
  },
});
