/**
 * The lines of `kerncap validate --watch` (./watch.ts): each event's JSON shape (WatchEvent, the
 * `kerncap.validate-watch/1` document less its schema id) and its human line (watchLine).
 */
import { oneLine } from "../escape.ts";
import type { RegionMismatch, ReplayResult } from "../replay/engine.ts";
import { mismatchReason } from "../replay/run-result.ts";
import type { TimingComparison } from "../replay/stats.ts";
import type { FastBuildSteps } from "../frontends/frontend.ts";
import type { Diagnostic } from "../frontends/confine.ts";
import type { Builder } from "./rebuilder.ts";
import { describeResources, type ModuleFigures } from "./resources.ts";

/** What started a cycle: the watch's start (the unchanged or already edited reproducer) or a save. */
export type Trigger = "start" | "save";

/** What a reset put back (ResetStats of src/replay/engine.ts, less the regions scanned). */
export type ResetLine = { chunks: number; bytes: number; seconds: number };

/** One line of the watch (the JSON document, less its schema id, with --json). */
export type WatchEvent =
  | {
      event: "verdict";
      trigger: Trigger;
      /** Files saved (relative to src/) since the previous cycle; empty at start. */
      files: string[];
      /** Wall-clock time of the line (ISO 8601). */
      at: string;
      kernel: string;
      verdict: ReplayResult["verdict"];
      /** bit-exact | within-tolerance | multiset-equal | within-spread | mismatch (ReplayResult.numerics.verdict). */
      numerics: ReplayResult["numerics"]["verdict"];
      /** The first differing region (null on a match) and how many differ. */
      firstMismatch: RegionMismatch | null;
      mismatches: number;
      /** A mismatch with no differing region: why (src/replay/run-result.ts mismatchReason: runs that differ beyond the captured kernel's). */
      reason?: string;
      nondeterministic: boolean;
      /** Median of the timed launches (µs, CUDA events); null without timed launches (--iters 0). */
      kernelMedianUs: number | null;
      /** The rebuilt kernel's time against the captured module's, interleaved on the same memory (src/replay/stats.ts); null with fewer than MIN_PAIRS timed launches. */
      compare: TimingComparison | null;
      /** The rebuild's wall time (s). */
      buildSeconds: number;
      /** How it was rebuilt: build.sh, or the device-only build of the pruned TU (src/frontends/cuda/fast-build.ts). */
      builder: Builder;
      /** The pruned build's steps (ms; BuildSteps of src/frontends/cuda/fast-build.ts). */
      buildSteps?: FastBuildSteps;
      /** From the save (the burst's last file event; at start: the command's start) to this line (s). */
      saveToVerdictSeconds: number;
      /** saveToVerdictSeconds − buildSeconds: debounce, slice refresh, checks, module load, launches, compare (s). */
      overheadSeconds: number;
      /**
       * Where the time went (s): from the save to the build's start (a cycle in flight; the build starts at the burst's first
       * event), the build's wall time as the watch saw it (slice refresh, the wait for the burst's quiet and checks included),
       * the run after the build (the rebuilt module's load, launches, compare; the captured module's part of it begins beside the compiler).
       */
      phases?: { waitSeconds: number; buildWallSeconds: number; runSeconds: number };
      /** What the previous runs wrote, put back before this run (null: nothing ran before). */
      reset: ResetLine | null;
    }
  | {
      /** --build-only: the save compiled (no replay, no GPU); the rebuilt kernel's resources beside the captured module's. */
      event: "built";
      trigger: Trigger;
      files: string[];
      at: string;
      kernel: string;
      /** The kernel's symbol (its mangled name, the manifest's kernel.name): the same in every document. */
      symbol: string;
      buildSeconds: number;
      builder: Builder;
      buildSteps?: FastBuildSteps;
      /** Registers per thread, stack frame bytes per thread, spill store and load bytes and the toolkit of the rebuilt kernel (its module: src/rebuild/resources.ts), and of the captured module; null where a module does not say. */
      registers: number | null;
      stackFrameBytes: number | null;
      spillStoreBytes: number | null;
      spillLoadBytes: number | null;
      toolkit: string | null;
      captured: ModuleFigures;
      /** From the save (the burst's last file event; at start: the command's start) to this line (s). */
      saveToVerdictSeconds: number;
    }
  | {
      event: "build-error" | "error";
      trigger: Trigger;
      files: string[];
      at: string;
      code: string;
      /** The compiler's message (build-error: build.sh's last lines) or the refusal's. */
      message: string;
      hint: string | null;
      buildSeconds: number | null;
      builder?: Builder;
      saveToVerdictSeconds: number;
      /** error: a kernel fault made the CUDA context unusable and the memory was restored again in a new one. */
      reopened?: boolean;
      /** build-error: the compiler's diagnostics (E_BUILD's error.details.diagnostics), where it gave any. */
      diagnostics?: Diagnostic[];
    };

function verdictWord(e: Extract<WatchEvent, { event: "verdict" }>): string {
  if (e.verdict === "mismatch") return "MISMATCH";
  return e.numerics === "within-spread"
    ? "MATCH within the run-to-run spread"
    : e.numerics === "within-tolerance"
      ? "MATCH within tolerance"
      : e.numerics === "multiset-equal"
        ? "MATCH as multisets"
        : "MATCH";
}

const clock = (iso: string) => iso.slice(11, 19);
const sec = (s: number) => `${s.toFixed(2)} s`;
// the saved files' names as one line each (a name under src/ may hold a newline: adversary 80 #03)
const where = (files: string[]) => (files.length ? `  (${files.slice(0, 3).map(oneLine).join(", ")}${files.length > 3 ? ", …" : ""})` : "");

/**
 * The human line of an event: time, verdict (with the first differing region), kernel median,
 * build and save-to-verdict seconds, the files saved. A build error or a refusal is followed by
 * its message, indented (the compiler's lines).
 */
export function watchLine(e: WatchEvent): string {
  if (e.event === "built") {
    const res = describeResources(e);
    return `[${clock(e.at)}] BUILT${res ? `  ${res}` : ""}  build ${sec(e.buildSeconds)}${e.builder === "pruned" ? " (pruned TU)" : ""}  ${e.trigger === "start" ? "(the first build, before any save)" : `save→built ${sec(e.saveToVerdictSeconds)}`}${where(e.files)}`;
  }
  if (e.event === "verdict") {
    const mm = e.firstMismatch;
    const region = mm
      ? ` region ${mm.va} (${mm.kind}, ${mm.size} B) from byte ${mm.firstDiffOffset}, ${mm.bytesDiffering} bytes differ${e.mismatches > 1 ? `; ${e.mismatches} regions differ` : ""}`
      : e.reason
        ? `: ${e.reason}`
        : "";
    const us =
      e.kernelMedianUs !== null ? `${e.kernelMedianUs.toFixed(2)} µs${e.compare ? ` (${e.compare.text} against the captured module)` : ""}` : "no timed launch";
    return `[${clock(e.at)}] ${verdictWord(e)}${region}  kernel ${us}  build ${sec(e.buildSeconds)}${e.builder === "pruned" ? " (pruned TU)" : ""}  ${e.trigger === "start" ? "(the first build, before any save)" : `save→verdict ${sec(e.saveToVerdictSeconds)}`}${e.nondeterministic ? "  (nondeterministic)" : ""}${where(e.files)}`;
  }
  const head = e.event === "build-error" ? "BUILD ERROR" : `ERROR ${e.code}`;
  const build = e.buildSeconds === null ? "" : `  build ${sec(e.buildSeconds)}`;
  const body = e.message
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n");
  // what the save came to is an error here, said as such (nu16 #12: "save→verdict" on a build error, "save→built" on a build)
  return `[${clock(e.at)}] ${head}${build}  save→error ${sec(e.saveToVerdictSeconds)}${e.reopened ? "  (kernel fault: memory restored in a new context)" : ""}${where(e.files)}\n${body}${e.hint ? `\n  ${e.hint}` : ""}`;
}

/** The verdict event of a replay result. */
export function verdictEvent(
  r: ReplayResult,
  x: {
    trigger: Trigger;
    files: string[];
    at: Date;
    buildSeconds: number;
    builder?: Builder;
    saveToVerdictSeconds: number;
    reset: ResetLine | null;
    compare?: TimingComparison | null;
  },
): WatchEvent {
  return {
    event: "verdict",
    trigger: x.trigger,
    files: x.files,
    at: x.at.toISOString(),
    kernel: r.kernel,
    verdict: r.verdict,
    numerics: r.numerics.verdict,
    firstMismatch: r.mismatches[0] ?? null,
    mismatches: r.mismatches.length,
    ...(r.verdict === "mismatch" && !r.mismatches.length ? { reason: mismatchReason(r) } : {}),
    nondeterministic: r.determinism.nondeterministic,
    kernelMedianUs: Number.isFinite(r.timing.medianUs) ? r.timing.medianUs : null,
    compare: x.compare ?? null,
    buildSeconds: x.buildSeconds,
    builder: x.builder ?? "build.sh",
    saveToVerdictSeconds: x.saveToVerdictSeconds,
    overheadSeconds: x.saveToVerdictSeconds - x.buildSeconds,
    reset: x.reset,
  };
}
