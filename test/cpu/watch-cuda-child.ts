/**
 * Child process of test/cpu/watch.test.ts: `kerncap validate --watch`'s loop (watchReproducer)
 * on a real CUDA reproducer (test/heavy-fixture.ts, built with the local nvcc) in the
 * synthetic capture of ./fixtures.ts, with a replay session that needs no GPU: its run compares
 * the rebuilt module's kernel machine code with the first build's (match when equal). The
 * manifest's kernel, parameter layout and arch are those of that first build, so the CUDA checks
 * (the parameter layout of every rebuilt module) run as on a real capture.
 * Usage: bun watch-cuda-child.ts CAPTURE_DIR KERNEL FIRST_CUBIN
 */
import { readFileSync } from "node:fs";
import { printJsonLine } from "../../src/cli/args.ts";
import { cubinParamLayout } from "../../src/codeobj/cubin.ts";
import { parseElf } from "../../src/codeobj/elf.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import type { RunOptions } from "../../src/replay/engine.ts";
import { noGpuResult, noGpuSession } from "./fixtures.ts";
import { sameKernelCode } from "../../src/frontends/cuda/fast-build.ts";
import { watchReproducer } from "../../src/rebuild/watch.ts";

const [dir, kernel, firstPath] = process.argv.slice(2) as [string, string, string];
const first = new Uint8Array(readFileSync(firstPath));
const m0 = readManifest(dir);
const layout = cubinParamLayout(parseElf(first), kernel);
const m = {
  ...m0,
  kernel: { ...m0.kernel, name: kernel, frontend: "cuda" as const },
  params: { ...m0.params, layout },
  device: { ...m0.device, arch: "sm_90" },
};
const session = noGpuSession(dir, m, async (o: RunOptions) =>
  noGpuResult(kernel, sameKernelCode(first, new Uint8Array(readFileSync(await o.modulePath!)), kernel) !== null),
);
process.exitCode = await watchReproducer(
  { dir, manifest: m as typeof m0 },
  { run: { iters: 1 }, force: false, quiet: true, emit: (e) => printJsonLine("validate-watch", e), open: async () => session },
);
