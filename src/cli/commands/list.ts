/** `kerncap list -- <app>`: every kernel the application launches, with count, grid, block, module. */
import { defineCommand } from "citty";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findCupti } from "../../capture/cupti.ts";
import { cudaCaptureLibrary } from "../../capture/lib.ts";
import { removeTemp, resolveApp, runApp } from "../../capture/run.ts";
import { tritonEnv } from "../../capture/triton/shim.ts";
import { KerncapError } from "../../errors.ts";
import { probeGpu } from "../../replay/probe.ts";
import { log } from "../../log.ts";
import { appArgv, jsonArg, printJson, verboseArg } from "../args.ts";

export default defineCommand({
  meta: { name: "list", description: "List the kernels an application launches (name, count, grid, block, module). Usage: kerncap list [OPTIONS] -- APP [ARGS…]" },
  args: { ...jsonArg, ...verboseArg },
  async run({ args, rawArgs }) {
    const argv = appArgv(rawArgs);
    resolveApp(argv);
    probeGpu();
    const cupti = findCupti();
    const lib = await cudaCaptureLibrary();
    const dir = mkdtempSync(join(tmpdir(), "kerncap-list-"));
    try {
      const r = await runApp({
        argv,
        outDir: dir,
        mode: "list",
        env: { CUDA_INJECTION64_PATH: lib, KERNCAP_OUT: dir, KERNCAP_MODE: "list", KERNCAP_CUPTI_PATH: cupti, ...(await tritonEnv()), ...(args.verbose ? { KERNCAP_LOG: "1" } : {}) },
        stdoutToStderr: args.json,
      });
      if (r.libraryErrors.length) log.warn(`capture library: ${r.libraryErrors.join("; ")}`);
      if (r.interrupted) throw new KerncapError("E_INTERRUPTED", "interrupted", { exitCode: 130 });
      const kernels = [...r.kernels].sort((a, b) => b.count - a.count);
      if (!kernels.length) {
        throw new KerncapError("E_NO_KERNELS", `the application launched no CUDA kernel (exit code ${r.exitCode})`, {
          hint: r.libraryErrors.length ? "The capture library failed; see the message above." : "Does it use the GPU? Check that it runs on its own, and that CUDA_VISIBLE_DEVICES is not empty.",
        });
      }
      if (args.json) {
        printJson("list", { app: argv, exitCode: r.exitCode, launches: r.launches, kernels });
      } else {
        // "bench": launches an autotuner made while timing configs; --dispatch does not count them
        const bench = kernels.some((k) => k.benchmark);
        const rows = kernels.map((k) => [String(k.count), ...(bench ? [String(k.benchmark ?? 0)] : []), k.grid.join("x"), k.block.join("x"), k.module, k.demangled || k.name]);
        const head = ["count", ...(bench ? ["bench"] : []), "grid", "block", "module", "kernel"];
        const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
        const line = (r: string[]) => r.map((c, i) => (i < head.length - 1 ? c.padStart(w[i]!) : c)).join("  ");
        process.stdout.write([line(head), ...rows.map(line)].join("\n") + "\n");
        log.info(`${kernels.length} kernels, ${r.launches} launches; app exit code ${r.exitCode}`);
      }
      return 0;
    } finally {
      removeTemp(dir);
    }
  },
});
