/**
 * The CUDA backend's clocks (./interface.ts ReplayBackend.clocks), so that two timings can be told
 * comparable or not: the SM and memory clocks while the timed launches ran, the application clock (what the driver runs
 * the SMs at under load unless boost or a lock says otherwise) and the maximum, from nvidia-smi
 * (`--query-gpu=clocks.sm,clocks.mem,clocks.applications.graphics,clocks.max.sm
 * --format=csv,noheader,nounits`, MHz). The query starts with the timed launches and is read
 * after them: the clocks are those of a busy GPU, and the replay does not wait for nvidia-smi
 * longer than the launches take unless they are shorter than its start-up (~0.1 s).
 */
import { log } from "../../log.ts";
import type { ClockState } from "./interface.ts";
import { whichAbsolute } from "../../env.ts";

export const CLOCK_QUERY = ["--query-gpu=clocks.sm,clocks.mem,clocks.applications.graphics,clocks.max.sm", "--format=csv,noheader,nounits"];

/** The first line of nvidia-smi's answer to CLOCK_QUERY as a ClockState, or null when it is not four fields. */
export function parseClocks(text: string): ClockState | null {
  const line = text.split("\n").find((l) => l.trim());
  const f = line?.split(",").map((x) => x.trim());
  if (!f || f.length !== 4) return null;
  const n = (x: string) => (/^\d+(\.\d+)?$/.test(x) ? Number(x) : null);
  return { smMHz: n(f[0]!), memMHz: n(f[1]!), applicationsSmMHz: n(f[2]!), maxSmMHz: n(f[3]!), source: "nvidia-smi during the timed launches" };
}

/**
 * Start reading the clocks of the GPU at `pciBusId` (nvidia-smi -i), or of GPU 0 when unknown.
 * @returns a promise of the state, null without nvidia-smi or when it fails (logged at debug); never rejects
 */
export function queryClocks(pciBusId?: string): Promise<ClockState | null> {
  const smi = whichAbsolute("nvidia-smi");
  if (!smi) return Promise.resolve(null);
  try {
    const p = Bun.spawn([smi, ...(pciBusId ? ["-i", pciBusId] : []), ...CLOCK_QUERY], { stdout: "pipe", stderr: "pipe", timeout: 5000 });
    return Promise.all([new Response(p.stdout).text(), p.exited]).then(
      ([out, code]) => (code === 0 ? parseClocks(out) : null),
      (e) => (log.debug(`nvidia-smi: ${e}`), null),
    );
  } catch (e) {
    log.debug(`nvidia-smi: ${e}`);
    return Promise.resolve(null);
  }
}
