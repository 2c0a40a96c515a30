/** `kerncap list -- <app>`: every kernel the application launches, with count, grid, block, module. */
import { defineCommand } from "citty";
import { processSummary } from "../../capture/census.ts";
import { listKernels } from "../../capture/session.ts";
import { log } from "../../log.ts";
import { appArgv, jsonArg, nvtxArgs, nvtxOption, printJson, printSummaryArg, runtimeArg, verboseArg, printText } from "../args.ts";
import { gpuTable, kernelTable, LIST_SUMMARIES, nvtxTable, processTable } from "../format.ts";

export default defineCommand({
  meta: { name: "list", description: "List the kernels an application launches (name, count, grid, block, module)" },
  args: {
    ...nvtxArgs,
    "print-summary": {
      type: "string",
      description:
        "What the text shows (ncu's option): per-kernel (the kernel table, the default), per-gpu (launches and kernels per set of visible GPUs), per-nvtx (launches per kernel and NVTX ranges open at the launch; implies --nvtx), none (the count line only)",
      valueHint: LIST_SUMMARIES.join("|"),
    },
    ...runtimeArg,
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    const argv = appArgv(rawArgs);
    const summary = printSummaryArg(args["print-summary"], LIST_SUMMARIES, "per-kernel");
    const asked = nvtxOption(args, rawArgs);
    const nvtx = summary === "per-nvtx" ? { include: [], exclude: [], ...asked, summary: true } : asked;
    const r = await listKernels({
      argv,
      runtime: args.runtime === undefined ? undefined : String(args.runtime),
      verbose: Boolean(args.verbose),
      stdoutToStderr: Boolean(args.json),
      ...(nvtx ? { nvtx } : {}),
    });
    const procs = r.census.processes;
    if (args.json) printJson("list", { app: argv, exitCode: r.app.exitCode, launches: r.launches, kernels: r.kernels, processes: procs.map(processSummary) });
    else {
      // several processes: each kernel's count per process (pid:count), then the process table
      if (summary === "per-kernel") {
        printText(kernelTable(r.kernels, procs.length > 1) + "\n");
        if (procs.length > 1) printText("\n" + processTable(procs) + "\n");
      } else if (summary === "per-gpu") printText(gpuTable(procs) + "\n");
      else if (summary === "per-nvtx") printText(nvtxTable(procs, r.kernels) + "\n");
      log.info(
        `${r.kernels.length} kernels, ${r.launches} launches in ${procs.length} process${procs.length === 1 ? "" : "es"}; app exit code ${r.app.exitCode}`,
      );
    }
    return 0;
  },
});
