/**
 * `kerncap run [--kernel RE] [--dispatch N] [--out DIR] -- <app> [args…]`: run the app with the
 * capture library injected; capture the Nth launch of a matching kernel into DIR (written as
 * DIR.tmp-<pid>, renamed when complete).
 */
import { defineCommand } from "citty";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { findCupti } from "../../capture/cupti.ts";
import { assertReplaceable, finalizeCapture, readRaw } from "../../capture/finalize.ts";
import { cudaCaptureLibrary } from "../../capture/lib.ts";
import { compileEre } from "../../capture/posix-regex.ts";
import { closestKernels, removeTemp, resolveApp, runApp } from "../../capture/run.ts";
import { tritonEnv, tritonFinalize } from "../../capture/triton/shim.ts";
import { cudaReproducerHook } from "../../repro/cuda.ts";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { probeGpu } from "../../replay/probe.ts";
import { appArgv, intArg, jsonArg, printJson, verboseArg } from "../args.ts";
import { formatBytes } from "./inspect.ts";

export default defineCommand({
  meta: { name: "run", description: "Run an application and capture one kernel launch (code object, parameters, all device memory). Usage: kerncap run [OPTIONS] -- APP [ARGS…]" },
  args: {
    kernel: { type: "string", description: "POSIX extended regex (regcomp) matched against the mangled and the demangled kernel name (default: any)" },
    dispatch: { type: "string", description: "0-based index among the application's matching launches (launches an autotuner runs while benchmarking configs are not counted)", default: "0" },
    "count-benchmarks": { type: "boolean", default: false, description: "Triton: let --dispatch count (and take) the autotuner's benchmark launches too" },
    out: { type: "string", description: "Capture folder to write (default: kerncap-capture)" },
    force: { type: "boolean", description: "Replace a previous capture at --out (never any other folder)", default: false },
    "exit-after-capture": { type: "boolean", description: "End the application right after the capture", default: false },
    "source-root": { type: "string", description: "CUDA: the app's source tree (searched for the kernel's __global__ definition and for build*/compile_commands.json)" },
    "compile-commands": { type: "string", description: "CUDA: compile_commands.json (or its folder) with the kernel TU's exact flags" },
    slice: { type: "boolean", default: true, description: "CUDA templated kernels: compile only the captured instantiation (--no-slice: whole TU)", negativeDescription: "Compile the kernel's whole translation unit in the reproducer" },
    overlay: { type: "boolean", default: false, description: "CUDA: copy only the edited files; the rest is read from the original tree" },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    const argv = appArgv(rawArgs);
    resolveApp(argv);
    const dispatch = intArg("dispatch", args.dispatch, 0, 2 ** 31 - 1);
    const pattern = args.kernel ? String(args.kernel) : "";
    const ere = pattern ? compileEre(pattern) : undefined; // the library's own matching (POSIX ERE)
    if (args.out !== undefined && !String(args.out).trim()) throw new KerncapError("E_USAGE", "--out is empty", { hint: "Give the capture folder to write, e.g. --out cap." });
    const out = resolve(String(args.out ?? "kerncap-capture"));
    if (existsSync(out)) assertReplaceable(out, Boolean(args.force));
    if (!existsSync(dirname(out))) throw new KerncapError("E_USAGE", `the folder that would hold ${out} does not exist`, { hint: `Create ${dirname(out)} first, or choose another --out.` });
    for (const [opt, p] of [["--source-root", args["source-root"]], ["--compile-commands", args["compile-commands"]]] as const) {
      if (p !== undefined && !existsSync(resolve(String(p)))) throw new KerncapError("E_USAGE", `${opt} ${p} does not exist`, { hint: `Check the path given with ${opt}.` });
    }
    probeGpu();
    const cupti = findCupti();
    const lib = await cudaCaptureLibrary();
    const tmp = `${out}.tmp-${process.pid}`;
    mkdirSync(tmp, { recursive: true });
    let ok = false;
    try {
      log.start(`running ${argv.join(" ")} (capture ${pattern ? JSON.stringify(pattern) : "any kernel"} #${dispatch})`);
      const r = await runApp({
        argv,
        outDir: tmp,
        mode: "capture",
        env: {
          CUDA_INJECTION64_PATH: lib,
          KERNCAP_OUT: tmp,
          KERNCAP_MODE: "capture",
          KERNCAP_KERNEL: pattern,
          KERNCAP_DISPATCH: String(dispatch),
          ...(args["count-benchmarks"] ? { KERNCAP_COUNT_BENCHMARKS: "1" } : {}),
          KERNCAP_CUPTI_PATH: cupti,
          ...(await tritonEnv()), // Triton: JIT metadata shim on PYTHONPATH (src/capture/triton)
          ...(args["exit-after-capture"] ? { KERNCAP_EXIT_AFTER_CAPTURE: "1" } : {}),
          ...(args.verbose ? { KERNCAP_LOG: "1" } : {}),
        },
        stdoutToStderr: args.json,
      });
      if (r.interrupted) throw new KerncapError("E_INTERRUPTED", "capture interrupted; nothing was written", { exitCode: 130 });
      const raw = readRaw(tmp);
      if (!raw) {
        if (r.libraryErrors.length) {
          throw new KerncapError("E_CAPTURE_FAILED", `the capture failed inside the application: ${r.libraryErrors.join("; ")}`, {
            hint: "The application ran on unchanged. Run with --verbose for the library's log, and report the message if it persists.",
          });
        }
        const matching = ere ? r.kernels.filter((k) => ere.test(k.name) || ere.test(k.demangled)) : r.kernels;
        // launches the library counted toward --dispatch (autotuner benchmarks are not, unless asked)
        const seen = matching.reduce((a, k) => a + k.count - (args["count-benchmarks"] ? 0 : (k.benchmark ?? 0)), 0);
        if (seen > dispatch) {
          throw new KerncapError("E_CAPTURE_FAILED", `the kernel launched ${seen} times but no capture was written (app exit code ${r.exitCode}, signal ${r.signal ?? "none"})`, {
            hint: "Launches inside CUDA graph stream capture are skipped; run with --verbose to see why.",
          });
        }
        const near = closestKernels(pattern || ".", r.kernels);
        throw new KerncapError(
          "E_NO_MATCH",
          seen
            ? `only ${seen} launches matched ${JSON.stringify(pattern)} before the app exited (code ${r.exitCode}); --dispatch ${dispatch} needs ${dispatch + 1}`
            : `no kernel matching ${JSON.stringify(pattern)} ran before the app exited (code ${r.exitCode}; ${r.launches} launches of ${r.kernels.length} kernels seen)` +
                (near.length ? `; closest names:\n  ${near.join("\n  ")}` : ""),
          { hint: "See every kernel with `kerncap list -- <app>`, then adjust --kernel/--dispatch." },
        );
      }
      const scan = (raw as { globals_scan?: { unreadable_entries?: number } }).globals_scan;
      if (scan?.unreadable_entries) {
        log.warn(`${scan.unreadable_entries} cubin entries of the kernel's module could not be read (compressed, and libzstd.so.1 or liblz4.so.1 is missing?): module globals (__device__/__constant__ variables) they define are not in the capture`);
      }
      const triton = tritonFinalize(tmp, raw, pattern, argv); // Triton: manifest.source + reproducer
      const cudaHook = cudaReproducerHook({
        sourceRoot: args["source-root"] ? resolve(String(args["source-root"])) : undefined,
        compileCommands: args["compile-commands"] ? resolve(String(args["compile-commands"])) : undefined,
        slice: args.slice !== false,
        overlay: Boolean(args.overlay),
      });
      const m = await finalizeCapture(raw, {
        tmpDir: tmp,
        finalDir: out,
        force: Boolean(args.force),
        command: argv,
        match: pattern,
        ...triton,
        beforeRename: async (d, mm) => {
          await triton.beforeRename?.(d, mm);
          cudaHook(d, mm); // CUDA: locate the source, render the reproducer (returns at once for other frontends)
        },
      });
      ok = true;
      const summary = {
        dir: out,
        kernel: m.kernel.demangled,
        launchIndex: m.kernel.launchIndex,
        regions: m.regions.length,
        globals: m.globals.length,
        beforeBytes: m.memory.beforeBytes,
        afterBytes: m.memory.afterBytes,
        appSeconds: r.seconds,
        timing: m.timing,
      };
      if (args.json) printJson("run", summary);
      else {
        log.success(`captured ${m.kernel.demangled} (launch ${m.kernel.launchIndex}) into ${out}`);
        log.info(`${m.regions.length} regions${m.globals.length ? ` + ${m.globals.length} module globals` : ""}, ${formatBytes(m.memory.beforeBytes)} before, ${formatBytes(m.memory.afterBytes)} changed; app ran ${r.seconds.toFixed(2)} s`);
        log.info(`next: kerncap inspect ${out} ; kerncap replay ${out}`);
      }
      return 0;
    } finally {
      if (!ok) removeTemp(tmp);
    }
  },
});
