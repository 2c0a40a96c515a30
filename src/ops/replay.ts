/**
 * `kerncap replay`'s workflow (the verb, src/cli/commands/replay.ts, parses and prints; MCP's
 * replay tool runs that verb in a child): --multiset's regions checked against the capture before
 * the GPU is opened, then the replay (src/replay/engine.ts replay; with --against, the two
 * kernels compared interleaved on the one restored memory, replayCompared) inside the no-ASLR
 * retry (src/replay/aslr.ts).
 */
import type { OpenedCapture } from "../format/capture-dir.ts";
import { regionTypesOf } from "../frontends/index.ts";
import type { AgainstKernel } from "../replay/against.ts";
import { withAslrRetry } from "../replay/aslr.ts";
import { replay, replayCompared, type ComparedRuns, type RepeatedCompare, type ReplayOptions, type ReplayResult } from "../replay/engine.ts";
import { checkMultiset } from "../replay/tolerance-plan.ts";

/** What `kerncap replay` was asked (its options, checked by the verb). */
export interface ReplayRequest {
  /** The replay's options (timed launches, checked runs, verify, tolerances, --flush-l2); the element types the capture's frontend knows are added here. */
  run: Omit<ReplayOptions, "regionTypes">;
  /** --against OTHER, resolved (src/replay/against.ts againstKernel). */
  against?: AgainstKernel;
  /** With against: how many times the whole comparison is made on the one restored memory. */
  repeat: number;
  /** Where a retried command's stdout goes (the data channel: src/cli/args.ts dataStdio). */
  stdout: number | "inherit";
}

/** What the caller does with the results (print them; its exit status comes back). */
export interface ReplayOutput {
  replayed(r: ReplayResult): number;
  compared(c: ComparedRuns & { repeats?: RepeatedCompare[] }, other: AgainstKernel): number;
}

/**
 * Replay a capture (see the file's comment).
 * @returns the output's exit status, or the retried command's
 * @throws KerncapError E_USAGE (a --multiset region the capture lacks), the replay's
 */
export async function replayCapture(c: OpenedCapture, r: ReplayRequest, out: ReplayOutput): Promise<number> {
  checkMultiset(c.dir, c.manifest, r.run.multiset); // a region the capture lacks: a usage error before the GPU is opened
  const run = { ...r.run, regionTypes: regionTypesOf(c.manifest) }; // what the capture's frontend knows of its regions (Triton: the signature's types)
  return withAslrRetry(async () => {
    if (r.against) return out.compared(await replayCompared(c, run, { ...run, ...r.against.run }, r.repeat), r.against);
    return out.replayed(await replay(c, run));
  }, r.stdout);
}
