/**
 * What a capture run's census says when it took less than asked: why no capture was written
 * (explainNoCapture: the process selection, another CUDA tool, a library error, a CUDA graph,
 * collectives, too few launches with the closest kernel names) and what a partial one left out
 * (warnMissedLaunches, warnPartialMatch). Read by ./session.ts captureKernel.
 */
import { CAPTURE_SET_FILE, CAPTURE_SET_FORMAT } from "../format/capture-set.ts";
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { signalExitCode } from "../process-group.ts";
import type { Raw } from "./raw.ts";
import { collectiveLibrary } from "./collective.ts";
import { compileEre, type PosixRegex } from "../util/posix-regex.ts";
import { closestKernels, type AppRun, type KernelSeen } from "./run.ts";
import { processLabel, type Census } from "./census.ts";
import { cuptiHeldBy } from "./coexist.ts";
import { shellQuote } from "../util/shell-quote.ts";
import type { CaptureRequest } from "./session.ts";

/**
 * Kernels that a multi-capture run (`--kernel A --kernel B`, `--capture-all`) matched and did not
 * capture because their eager launches were too few for --dispatch while their CUDA-graph
 * executions (census `graph`) would have been enough: such runs take eager launches only
 * (c/cuda/kerncap_cuda.c pick_target is not consulted for graph nodes). Collective kernels are left out
 * (never captured anyway). `patterns` empty or blank: every kernel matches.
 */
export function graphOnlyMisses(kernels: KernelSeen[], patterns: (string | undefined)[], dispatch: number, captured: ReadonlySet<string>): KernelSeen[] {
  const eres = patterns.filter((p): p is string => !!p).map((p) => compileEre(p));
  return kernels.filter((k) => {
    const graph = k.graph ?? 0;
    if (!graph || captured.has(k.name) || collectiveLibrary(k.name, k.demangled)) return false;
    if (eres.length && !eres.some((e) => e.test(k.name) || e.test(k.demangled))) return false;
    return k.count - graph <= dispatch && k.count > dispatch;
  });
}
/**
 * Launches of kernels matching `ere` (every kernel without one) that the library counted toward
 * --dispatch: autotuner benchmark launches (kernels.<pid>.json `benchmark`) only with countBenchmarks.
 * Each process counts its own: pass one process's kernels.
 */
export function countedLaunches(kernels: KernelSeen[], ere: PosixRegex | undefined, countBenchmarks: boolean): number {
  // collective kernels are never targets (c/common/kc_collective.h): the library does not count them toward --dispatch
  const matching = (ere ? kernels.filter((k) => ere.test(k.name) || ere.test(k.demangled)) : kernels).filter((k) => !collectiveLibrary(k.name, k.demangled));
  return matching.reduce((a, k) => a + k.count - (countBenchmarks ? 0 : (k.benchmark ?? 0)), 0);
}
/**
 * The refusal of a capture whose --kernel matched only collective kernels (or too few other
 * launches): which collective kernels matched, how often, and why none is captured. Undefined when
 * no collective kernel matched `ere` (every kernel without one).
 */
export function collectiveRefusal(kernels: KernelSeen[], ere: PosixRegex | undefined, pattern: string): KerncapError | undefined {
  const hit = kernels.filter((k) => collectiveLibrary(k.name, k.demangled) && (!ere || ere.test(k.name) || ere.test(k.demangled)));
  if (!hit.length) return undefined;
  const names = hit.slice(0, 4).map((k) => `${k.demangled || k.name} (${collectiveLibrary(k.name, k.demangled)}, ${k.count} launches)`);
  return new KerncapError(
    "E_COLLECTIVE",
    `${pattern ? `--kernel ${JSON.stringify(pattern)} matched` : "the launches were"} collective kernels: ${names.join(", ")}${hit.length > 4 ? `, and ${hit.length - 4} more` : ""}. A collective kernel waits on its peer ranks, so it cannot be captured and replayed alone; kerncap counted its launches and did not synchronize or snapshot around them (the job ran on unchanged)`,
    {
      hint: "Capture a kernel that does not communicate (`kerncap list -- <app>` marks collectives in its note column), or narrow --kernel so it matches no collective; capturing collectives across GPUs is not supported yet.",
    },
  );
}
/**
 * The exit code `kerncap run` passes on for the application: 0 when it exited 0, its code when
 * non-zero, 128 + N when signal N ended it.
 */
/** How the application ended, in words: "it exited with code N" or "it was ended by SIGNAME (exit 128+N)". */
export function howAppEnded(app: Pick<AppRun, "exitCode" | "signal">): string {
  return app.signal ? `it was ended by ${app.signal} (exit ${signalExitCode(app.signal)})` : `it exited with code ${app.exitCode ?? 0}`;
}
/**
 * Why no process could capture, when --rank/--process selected none of the processes that ran
 * (undefined when the selection is not the reason). Facts from the censuses' identities.
 */
export function selectionProblem(c: Census, rank: number | undefined, procN: number | undefined): string | undefined {
  if (rank === undefined && procN === undefined) return undefined;
  const admitted = c.processes.filter((p) => p.process.selection.admitted);
  if (admitted.length) return undefined;
  const seen = c.processes.map(
    (p) => `${processLabel(p.process)}${p.process.rank === null ? " (no rank variable)" : ""}${p.process.number >= 0 ? ` = process ${p.process.number}` : ""}`,
  );
  const list = seen.length ? seen.join(", ") : "none";
  if (rank !== undefined) return `no process of the application has rank ${rank} (processes that ran CUDA: ${list})`;
  return `--process ${procN} selects process number ${procN} (0-based) among those that initialize CUDA, but only ${c.numbered} did (${list})`;
}
/** Warn about what a run of several captures did not take: launches past the last one captured (--launch-count), kernels that ran only in graph executions. */
export function warnMissedLaunches(set: { manifest: { kernel: { name: string } } }[], census: Census, req: CaptureRequest, launchCount: number): void {
  if (launchCount > 1 && set.length < launchCount) {
    log.warn(
      `--launch-count ${launchCount}: ${set.length} of the ${launchCount} launches from #${req.dispatch} captured (the application made no more matching launches that could be captured; graph executions are not taken in a multi-capture run)`,
    );
  }
  const missed = graphOnlyMisses(census.kernels, [req.kernel, ...(req.moreKernels ?? [])], req.dispatch, new Set(set.map((c) => c.manifest.kernel.name)));
  if (missed.length) {
    const names = missed.slice(0, 5).map((k) => `${k.demangled || k.name} (${k.count - (k.graph ?? 0)} eager, ${k.graph} in graphs)`);
    log.warn(
      `${missed.length} matching kernel${missed.length === 1 ? "" : "s"} ran ${req.dispatch + 1} or more times only with graph executions counted, and were not captured (several captures in one run take eager launches only): ${names.join("; ")}${missed.length > 5 ? "; …" : ""}. Capture one from its graph with \`kerncap run --kernel NAME --dispatch ${req.dispatch}\`.`,
    );
  }
}
/** Warn about what a capture leaves out: collective kernels --kernel also matched (never captured), module globals in cubin entries that could not be read. */
export function warnPartialMatch(census: Census, raw: Raw, ere: PosixRegex | undefined): void {
  const collectives = census.kernels.filter((k) => k.collective && (!ere || ere.test(k.name) || ere.test(k.demangled)));
  if (collectives.length)
    log.warn(
      `--kernel also matched ${collectives.length} collective kernels (${collectives[0]!.demangled || collectives[0]!.name}${collectives.length > 1 ? ", …" : ""}): never captured, not counted toward --dispatch`,
    );
  const scan = (raw as { globals_scan?: { unreadable_entries?: number } }).globals_scan;
  if (scan?.unreadable_entries) {
    log.warn(
      `${scan.unreadable_entries} cubin entries of the kernel's module could not be read (compressed, and libzstd.so.1 or liblz4.so.1 is missing?): module globals (__device__/__constant__ variables) they define are not in the capture`,
    );
  }
}
/**
 * Why no capture was written, as the error to throw: the process selection admitted none, another
 * CUDA tool held CUPTI, the library failed, the launch was in a CUDA graph, the matching launches
 * were collectives, too few launches matched (with the closest kernel names).
 * @throws KerncapError E_NO_MATCH, E_TOOL, E_CAPTURE_FAILED, E_GRAPH, or the collective refusal; always
 */
export function explainNoCapture(census: Census, req: CaptureRequest, app: AppRun, ere: PosixRegex | undefined, pattern: string): never {
  const who = selectionProblem(census, req.rank, req.process);
  if (who)
    throw new KerncapError("E_NO_MATCH", who, {
      hint: `See each process's rank with \`kerncap list -- <app>\`, then adjust ${req.rank !== undefined ? "--rank" : "--process"}.`,
    });
  // another CUDA tool held CUPTI in the application: compute-sanitizer, ncu or nsys started by
  // the application's own command (a script that execs it): a tool conflict, said as one
  const held = cuptiHeldBy(census);
  if (held) {
    throw new KerncapError(
      "E_TOOL",
      `no capture: another CUDA tool held CUPTI in the application's ${processLabel(held.process)}${held.process.cmdline.length ? ` (${held.process.cmdline.map(shellQuote).join(" ")})` : ""}, so kerncap could not see its launches; compute-sanitizer, ncu or nsys started by the application's command (a script, a launcher)?`,
      {
        hint: "Run the application under kerncap without that tool, then point the tool at the replay: `compute-sanitizer --tool memcheck kerncap replay DIR`, `ncu kerncap replay DIR`, `nsys profile kerncap replay DIR`.",
      },
    );
  }
  if (census.errors.length) {
    throw new KerncapError("E_CAPTURE_FAILED", `the capture failed inside the application: ${census.errors.join("; ")}`, {
      hint: "The application ran on unchanged. Run with --verbose for the library's log, and report the message if it persists.",
    });
  }
  // each process counts its own launches toward --dispatch: the most any one admitted process saw is what counts
  const perProcess = census.processes.filter((p) => p.process.selection.admitted).map((p) => countedLaunches(p.kernels, ere, req.countBenchmarks));
  const seen = Math.max(0, ...perProcess);
  const inOne = census.processes.length > 1 ? ` in any one of the ${census.processes.length} processes (each counts its own launches for --dispatch)` : "";
  const inGraph = census.processes.find((p) => p.graphTarget);
  if (inGraph?.graphTarget) {
    const t = inGraph.graphTarget;
    const g = inGraph.graphs.find((x) => x.id === t.graph);
    const k = census.kernels.find((x) => x.name === t.name);
    throw new KerncapError(
      "E_GRAPH",
      `launch #${req.dispatch} of ${k?.demangled || t.name} ran inside CUDA graph ${t.graph} (kernel node ${t.kernel_node} of ${g?.kernel_nodes ?? "?"}, ${g?.nodes ?? "?"} nodes, launched ${g?.launches ?? "?"} times) and could not be captured: ${t.why ?? "not supported"}`,
      {
        hint: `${k ? `${k.count - (k.graph ?? 0)} of its ${k.count} launches ran eagerly` : "Eager launches"} can be captured (--dispatch counts graph executions too; \`kerncap list\` shows them in its graph column). Or run the app without graphs (torch.compile mode "max-autotune-no-cudagraphs", GGML_CUDA_DISABLE_GRAPHS=1, vLLM --enforce-eager).`,
      },
    );
  }
  // the launches the pattern matched that the library could count were too few because collectives were left out
  if (seen <= req.dispatch) {
    const refusal = collectiveRefusal(census.kernels, ere, pattern);
    if (refusal) throw refusal;
  }
  if (seen > req.dispatch) {
    throw new KerncapError(
      "E_CAPTURE_FAILED",
      `the kernel launched ${seen} times but no capture was written (${howAppEnded(app).replace(/^it /, "the app ")})`,
      {
        hint: "Run with --verbose to see why (the library's log).",
      },
    );
  }
  const near = closestKernels(pattern || ".", census.kernels);
  throw new KerncapError(
    "E_NO_MATCH",
    seen
      ? `only ${seen} launches matched ${JSON.stringify(pattern)}${inOne} before the app ended (${howAppEnded(app)}); --dispatch ${req.dispatch} needs ${req.dispatch + 1}`
      : `${pattern ? `no kernel matching ${JSON.stringify(pattern)}` : "no kernel"} ran before the app ended (${howAppEnded(app)}; ${census.launches} launches of ${census.kernels.length} kernels seen)` +
          (near.length ? `; closest names:\n  ${near.join("\n  ")}` : ""),
    {
      hint: req.nvtx
        ? "Only launches inside the NVTX selection count: see them with `kerncap list` and the same --nvtx-include/--nvtx-exclude, then adjust the selection or --kernel/--dispatch."
        : "See every kernel with `kerncap list -- <app>`, then adjust --kernel/--dispatch.",
    },
  );
}

/** Index of a folder holding several captures (one per kernel), written by `run --kernel A --kernel B` / `--capture-all`. */
export { CAPTURE_SET_FILE, CAPTURE_SET_FORMAT };
