/** `kerncap list -- <app>`: every kernel the application launches, with count, grid, block, module. */
import { defineCommand } from "citty";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findCupti } from "../../capture/cupti.ts";
import { processLabel, type ProcessCensus } from "../../capture/census.ts";
import { cuptiNotes, injectionEnv } from "../../capture/coexist.ts";
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
      const inj = injectionEnv(lib);
      for (const w of inj.warnings) log.warn(w);
      const r = await runApp({
        argv,
        outDir: dir,
        mode: "list",
        env: { ...inj.env, KERNCAP_OUT: dir, KERNCAP_MODE: "list", KERNCAP_CUPTI_PATH: cupti, ...(await tritonEnv()), ...(args.verbose ? { KERNCAP_LOG: "1" } : {}) },
        stdoutToStderr: args.json,
      });
      if (r.libraryErrors.length) log.warn(`capture library: ${r.libraryErrors.join("; ")}`);
      if (r.interrupted) throw new KerncapError("E_INTERRUPTED", "interrupted", { exitCode: 130 });
      const notes = cuptiNotes(r.census);
      for (const w of notes.warnings) log.warn(w);
      const kernels = [...r.kernels].sort((a, b) => b.count - a.count);
      if (!kernels.length) {
        throw new KerncapError("E_NO_KERNELS", `the application launched no CUDA kernel (exit code ${r.exitCode})`, {
          hint: r.libraryErrors.length ? "The capture library failed; see the message above." : "Does it use the GPU? Check that it runs on its own, and that CUDA_VISIBLE_DEVICES is not empty.",
        });
      }
      if (args.json) {
        printJson({ app: argv, exitCode: r.exitCode, launches: r.launches, kernels, processes: r.census.processes.map(processSummary) });
      } else {
        // "bench": launches an autotuner made while timing configs; --dispatch does not count them
        const bench = kernels.some((k) => k.benchmark);
        // several processes: each kernel's count per process, as pid:count (rank shown in the process table)
        const many = r.census.processes.length > 1;
        const per = (k: (typeof kernels)[number]) => (k.perProcess ?? []).map((p) => `${p.pid}:${p.count}`).join(" ");
        const rows = kernels.map((k) => [String(k.count), ...(bench ? [String(k.benchmark ?? 0)] : []), ...(many ? [per(k)] : []), k.grid.join("x"), k.block.join("x"), k.module, k.demangled || k.name]);
        const head = ["count", ...(bench ? ["bench"] : []), ...(many ? ["pid:count"] : []), "grid", "block", "module", "kernel"];
        const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
        const line = (r: string[]) => r.map((c, i) => (i < head.length - 1 ? c.padStart(w[i]!) : c)).join("  ");
        process.stdout.write([line(head), ...rows.map(line)].join("\n") + "\n");
        const procs = r.census.processes;
        if (procs.length > 1) process.stdout.write("\n" + processTable(procs) + "\n");
        log.info(`${kernels.length} kernels, ${r.launches} launches in ${procs.length} process${procs.length === 1 ? "" : "es"}; app exit code ${r.exitCode}`);
      }
      return 0;
    } finally {
      removeTemp(dir);
    }
  },
});

/** One process of the job for `list --json`: identity, its launches, its kernels' counts. */
function processSummary(p: ProcessCensus) {
  return {
    pid: p.process.pid,
    rank: p.process.rank,
    rankVariable: p.process.rankVariable,
    number: p.process.number,
    hostname: p.process.hostname,
    command: p.process.cmdline,
    visibleDevices: p.process.visibleDevices,
    launches: p.launches,
    complete: p.final && p.counting === true,
    ...(p.counting !== true ? { stoppedCounting: p.counting } : {}),
    kernels: p.kernels.map((k) => ({ name: k.name, count: k.count })),
    errors: p.errors,
  };
}

/** The per-process table of `list`: pid, rank, process number, launches, kernels, command. */
export function processTable(procs: ProcessCensus[]): string {
  const head = ["process", "pid", "rank", "launches", "kernels", "command"];
  const rows = procs.map((p) => [
    p.process.number >= 0 ? String(p.process.number) : "?",
    String(p.process.pid),
    p.process.rank === null ? "-" : `${p.process.rank}${p.process.rankVariable && p.process.rankVariable !== "RANK" ? ` (${p.process.rankVariable})` : ""}`,
    `${p.launches}${p.final ? "" : "+"}`, // "+": the process ended without exit handlers; counts up to its last periodic write
    String(p.kernels.length),
    p.process.cmdline.join(" ").slice(0, 100) || processLabel(p.process),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i < head.length - 1 ? c.padStart(w[i]!) : c)).join("  ");
  return [line(head), ...rows.map(line)].join("\n");
}
