/**
 * Child process of test/cpu/watch.test.ts: `kerncap validate --watch`'s loop (watchReproducer)
 * on the synthetic capture of ./fixtures.ts, with a replay session that needs no GPU: its run
 * reads the module build.sh made and says mismatch when it holds "WRONG". JSON Lines on stdout,
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
    return noGpuResult("scale(float*, int)", (await Bun.file(await o.modulePath!).text()).includes("WRONG"));
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
