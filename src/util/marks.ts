/**
 * Where a verb's wall time goes: with KERNCAP_VERBOSE=1, each mark is a debug line
 * "t+812 ms: the build ended", in ms since this process started (performance.now()'s origin,
 * Bun's process start). validate marks its phases (the compiler's start, the replay's preparation,
 * the wait for the module, the build's end, the replay's end), so that a slow edit loop says which
 * one grew (docs/benchmarks.md, "Edit loop").
 */
import { log } from "../log.ts";

/** Log `what` at debug level with the ms since the process started. */
export function mark(what: string): void {
  log.debug(`t+${performance.now().toFixed(0)} ms: ${what}`);
}
