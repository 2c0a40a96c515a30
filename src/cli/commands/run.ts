/**
 * `kerncap run [--kernel RE] [--dispatch N] [--out DIR] -- <app> [args…]`: run the app with the
 * capture library injected; capture the Nth launch of a matching kernel into DIR (written as
 * DIR.tmp-<pid>, renamed when complete). The session (src/capture/session.ts) does the work.
 * ncu's spellings are accepted where the meaning is the same: -k/--kernel-name (with `regex:`),
 * -s/--launch-skip, -c/--launch-count, -o, -f.
 * Exit: 0 captured; the application's own code (non-zero, said on stderr) when it failed after
 * the capture was written; 2 error; 130/143 interrupted.
 */
import { defineCommand } from "citty";
import { processLabel } from "../../capture/census.ts";
import { applicationExitCode, captureKernel } from "../../capture/session.ts";
import { KerncapError } from "../../errors.ts";
import { captureArgs } from "../../frontends/index.ts";
import { log } from "../../log.ts";
import { appArgv, intArg, jsonArg, kernelPattern, nvtxArgs, nvtxOption, optionAsTyped, printJson, repeatedOption, runtimeArg, verboseArg } from "../args.ts";
import { formatBytes, plural } from "../../util/format.ts";
import { shellPath } from "../../util/shell-quote.ts";
import { progressMode } from "../../util/progress.ts";

export default defineCommand({
  meta: { name: "run", description: "Run an application and capture one kernel launch (code object, parameters, all device memory)" },
  // each frontend's options (CUDA: --source-root, --compile-commands, --slice, --overlay) come from the registry when the verb is resolved
  args: () => ({
    kernel: {
      type: "string",
      alias: ["k", "kernel-name"],
      description:
        "POSIX extended regex (regcomp) matched against the mangled and the demangled kernel name (default: any); ncu's `regex:RE` is the same as RE; given several times, each one's launch is captured into a folder of its own inside --out",
    },
    dispatch: {
      type: "string",
      alias: ["s", "launch-skip"],
      description: "0-based index among the application's matching launches (launches an autotuner runs while benchmarking configs are not counted)",
      default: "0",
    },
    "launch-count": {
      type: "string",
      alias: ["c"],
      description:
        "Capture this many consecutive matching launches from --dispatch on (ncu's -c), one capture folder each inside --out (default 1; eager launches only)",
    },
    "capture-all": {
      type: "boolean",
      default: false,
      description:
        "Capture the --dispatch'th launch of every distinct kernel that --kernel matches (all kernels without it), one capture folder each inside --out",
    },
    "max-captures": { type: "string", description: "With --capture-all or several --kernel: at most this many captures (default 64; 1 to 10000)" },
    "count-benchmarks": { type: "boolean", default: false, description: "Triton: let --dispatch count (and take) the autotuner's benchmark launches too" },
    rank: {
      type: "string",
      description: "Multi-process jobs: capture only in the process of this rank (first of RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)",
    },
    process: { type: "string", description: "Multi-process jobs: capture only in the Nth process (0-based) that initializes CUDA" },
    out: { type: "string", alias: ["o"], description: "Capture folder to write (Default: kerncap-capture)", valueHint: "DIR" },
    force: { type: "boolean", alias: ["f"], description: "Replace a previous capture at --out (never any other folder)", default: false },
    "exit-after-capture": { type: "boolean", description: "End the application right after the capture", default: false },
    ...nvtxArgs,
    ...captureArgs(),
    ...runtimeArg,
    ...jsonArg,
    ...verboseArg,
  }),
  async run({ args, rawArgs }) {
    const kernels = repeatedOption(rawArgs, ["kernel", "kernel-name", "k"]).map(kernelPattern);
    const maxCaptures = args["max-captures"] === undefined ? undefined : intArg("max-captures", args["max-captures"], 64, 10_000, 1);
    if (maxCaptures !== undefined && !args["capture-all"] && kernels.length < 2) {
      throw new KerncapError("E_USAGE", "--max-captures bounds several captures in one run: give it with --capture-all (or several --kernel)", {
        hint: "One --kernel makes one capture; drop --max-captures, or add --capture-all.",
      });
    }
    const launchCount =
      args["launch-count"] === undefined
        ? undefined
        : intArg("launch-count", args["launch-count"], 1, 10_000, 1, optionAsTyped(rawArgs, ["launch-count", "c"]));
    const nvtx = nvtxOption(args, rawArgs);
    const {
      dir,
      manifest: m,
      app,
      census,
      captures,
    } = await captureKernel({
      argv: appArgv(rawArgs),
      runtime: args.runtime === undefined ? undefined : String(args.runtime),
      moreKernels: kernels.slice(1),
      captureAll: Boolean(args["capture-all"]),
      maxCaptures,
      launchCount,
      out: args.out === undefined ? "kerncap-capture" : String(args.out),
      force: Boolean(args.force),
      kernel: kernels[0] ?? kernelPattern(args.kernel),
      dispatch: intArg("dispatch", args.dispatch, 0, 2 ** 31 - 1, 0, optionAsTyped(rawArgs, ["dispatch", "s", "launch-skip"])),
      rank: args.rank === undefined ? undefined : intArg("rank", args.rank, 0, 2 ** 31 - 1),
      process: args.process === undefined ? undefined : intArg("process", args.process, 0, 2 ** 31 - 1),
      countBenchmarks: Boolean(args["count-benchmarks"]),
      exitAfterCapture: Boolean(args["exit-after-capture"]),
      verbose: Boolean(args.verbose),
      stdoutToStderr: Boolean(args.json),
      progress: progressMode({ json: Boolean(args.json), isTTY: process.stderr.isTTY }),
      frontendArgs: Object.fromEntries(Object.keys(captureArgs()).map((k) => [k, (args as Record<string, unknown>)[k]])),
      ...(nvtx ? { nvtx } : {}),
    });
    const code = applicationExitCode(app);
    const procs = census.processes.length;
    if (args.json) {
      printJson("run", {
        dir,
        kernel: m.kernel.demangled,
        symbol: m.kernel.name,
        launchIndex: m.kernel.launchIndex,
        regions: m.regions.length,
        globals: m.globals.length,
        beforeBytes: m.memory.beforeBytes,
        afterBytes: m.memory.afterBytes,
        appSeconds: app.seconds,
        appExitCode: app.exitCode,
        appSignal: app.signal,
        timing: m.timing,
        process: m.process ?? null,
        processes: procs,
        ...(captures
          ? {
              captures: captures.map((c) => ({
                dir: c.dir,
                kernel: c.manifest.kernel.demangled,
                launchIndex: c.manifest.kernel.launchIndex,
                beforeBytes: c.manifest.memory.beforeBytes,
              })),
            }
          : {}),
      });
    } else if (captures) {
      log.success(`captured ${plural(captures.length, "launch", "launches")} into ${dir} (one capture folder each):`);
      for (const c of captures)
        log.info(`  ${c.dir}: ${c.manifest.kernel.demangled} (launch ${c.manifest.kernel.launchIndex}), ${formatBytes(c.manifest.memory.beforeBytes)} live`);
      log.info(`next: kerncap replay ${shellPath(captures[0]!.dir)}`);
    } else {
      const byWhom = m.process ? ` of ${processLabel(m.process)}${procs > 1 ? `, process ${m.process.number} of the ${procs} that ran CUDA` : ""}` : "";
      const where = m.graph
        ? `, kernel node ${m.graph.kernelNode} of CUDA graph ${m.graph.id}: its ancestors were run by kerncap, then the app's memory put back`
        : "";
      log.success(`captured ${m.kernel.demangled} (launch ${m.kernel.launchIndex}${byWhom}${where}) into ${dir}`);
      if (m.fault)
        log.warn(
          `the captured launch faulted in the app: ${m.fault.name} (${m.fault.message}); the capture holds its before state, and \`kerncap replay ${shellPath(dir)}\` reproduces the fault`,
        );
      log.info(
        `${plural(m.regions.length, "region")}${m.globals.length ? ` + ${plural(m.globals.length, "module global")}` : ""}, ${formatBytes(m.memory.beforeBytes)} before, ${formatBytes(m.memory.afterBytes)} changed; app ran ${app.seconds.toFixed(2)} s`,
      );
      log.info(`next: kerncap inspect ${shellPath(dir)} ; kerncap replay ${shellPath(dir)}`);
    }
    if (code)
      log.warn(
        `the application failed (${app.signal ? `ended by ${app.signal}` : `exit code ${app.exitCode}`}) after the capture was written; kerncap run exits with ${code}, the application's code`,
      );
    return code;
  },
});
