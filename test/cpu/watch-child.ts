/**
 * Child process of test/cpu/watch.test.ts: `kerncap validate --watch`'s loop (watchReproducer)
 * on the synthetic capture of ./fixtures.ts, with a replay session that needs no GPU: its run
 * reads the module build.sh made and says mismatch when it holds "WRONG" (and says on stderr when it
 * began long before the module was built). JSON Lines on stdout,
 * as the verb prints them. Usage: bun watch-child.ts CAPTURE_DIR
 */
import { printJsonLine } from "../../src/cli/args.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import type { RunOptions } from "../../src/replay/engine.ts";
import { noGpuResult, noGpuSession } from "./fixtures.ts";
import { watchReproducer } from "../../src/rebuild/watch.ts";

const dir = process.argv[2]!;
const m = readManifest(dir);
let runs = 0;
let dirty = false;
const session = noGpuSession(
  dir,
  m,
  async (o: RunOptions) => {
    if (runs++ && dirty) throw new Error("run without a reset of the previous run's writes");
    dirty = true;
    const t0 = performance.now();
    const module = await o.modulePath!;
    // the run begins beside the compiler (src/rebuild/watch.ts runCycle): said when it waited for the build (the test reads it)
    if (performance.now() - t0 > 300) console.error(`the run began ${Math.round(performance.now() - t0)} ms before its module was built`);
    return noGpuResult("scale(float*, int)", (await Bun.file(module).text()).includes("WRONG"));
  },
  () => {
    const was = dirty;
    dirty = false;
    return was ? { chunks: 1, bytes: 4096, regionsScanned: 2, seconds: 0.001 } : undefined;
  },
);
// the fixture's module is no cubin: skip the CUDA parameter-layout check, as for a Triton capture
const code = await watchReproducer(
  { dir, manifest: { ...m, kernel: { ...m.kernel, frontend: "triton" } } },
  { run: { iters: 1 }, force: false, quiet: true, emit: (e) => printJsonLine("validate-watch", e), open: async () => session },
);
process.exitCode = code;
