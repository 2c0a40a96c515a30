/**
 * Child process of test/cpu/watch.test.ts: `kerncap validate --watch`'s loop (watchReproducer)
 * on the synthetic capture of ./fixtures.ts, with a replay session that needs no GPU: its run
 * reads the module build.sh made and says mismatch when it holds "WRONG". JSON Lines on stdout,
 * as the verb prints them. Usage: bun watch-child.ts CAPTURE_DIR
 */
import { printJsonLine } from "../../src/cli/args.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import type { ReplayResult, ReplaySession, RunOptions } from "../../src/replay/engine.ts";
import { watchReproducer } from "../../src/repro/watch.ts";

const dir = process.argv[2]!;
const m = readManifest(dir);
let runs = 0;
let dirty = false;
const session: ReplaySession = {
  dir,
  manifest: m,
  opened: { restore: { bytes: 0, storedBytes: 0, seconds: 0, gbPerS: 0, hostRegistered: false }, reserve: { spans: 0, bytes: 0, seconds: 0 }, verifySeconds: 0 },
  lastReset: null,
  async run(o: RunOptions): Promise<ReplayResult> {
    if (runs++ && dirty) throw new Error("run without a reset of the previous run's writes");
    dirty = true;
    const text = await Bun.file(await o.modulePath!).text();
    const bad = text.includes("WRONG");
    const mm = { va: "0x7f0000000000", kind: "device", size: 4096, changedInApp: true, firstDiffOffset: 8, bytesDiffering: 4088 };
    return { kernel: "scale(float*, int)", verdict: bad ? "mismatch" : "match", mismatches: bad ? [mm] : [], numerics: { verdict: bad ? "mismatch" : "bit-exact" }, determinism: { nondeterministic: false }, timing: { medianUs: 3.5 } } as unknown as ReplayResult;
  },
  reset() {
    const was = dirty;
    dirty = false;
    return was ? { chunks: 1, bytes: 4096, regionsScanned: 2, seconds: 0.001 } : undefined;
  },
  close() {},
};
// the fixture's module is no cubin: skip the CUDA parameter-layout check, as for a Triton capture
const code = await watchReproducer(dir, { ...m, kernel: { ...m.kernel, frontend: "triton" } }, { run: { iters: 1 }, force: false, quiet: true, emit: (e) => printJsonLine("validate-watch", e), open: async () => session });
process.exitCode = code;
