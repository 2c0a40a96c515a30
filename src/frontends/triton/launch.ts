/**
 * The launch a rebuilt Triton kernel needs. repro.py writes the compiled kernel's metadata beside
 * the cubin (CUBIN.json: {"shared": bytes, "num_warps": n, "num_ctas": n}); Triton launches a
 * kernel with num_warps × 32 threads per block and that much dynamic shared memory, so a rebuild
 * whose compile options changed (pinned.json's num_warps edited, a Triton that picks others) is
 * launched as it was compiled, not with the captured block.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { Manifest } from "../../format/manifest.ts";

/** CUBIN.json is a few dozen bytes: a larger file is not repro.py's. */
const METADATA_MAX_BYTES = 4096;

/**
 * Read `modulePath`.json and give the block and shared memory where they differ from the
 * captured launch. Shapes: block [num_warps × 32, 1, 1]; sharedMemBytes in bytes.
 * @returns undefined when there is no metadata (a repro.py of an older kerncap), it is not
 *   repro.py's shape, or the launch is the captured one
 */
export function tritonRebuiltLaunch(modulePath: string, m: Manifest): { block: [number, number, number]; sharedMemBytes: number } | undefined {
  let text: string;
  try {
    const fd = openSync(`${modulePath}.json`, "r");
    try {
      const size = fstatSync(fd).size;
      if (size > METADATA_MAX_BYTES) return undefined;
      const buf = Buffer.alloc(size);
      readSync(fd, buf, 0, size, 0);
      text = buf.toString("utf8");
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  let md: unknown;
  try {
    md = JSON.parse(text);
  } catch {
    return undefined;
  }
  const { shared, num_warps: warps } = (md ?? {}) as { shared?: unknown; num_warps?: unknown };
  if (!Number.isInteger(warps) || (warps as number) < 1 || (warps as number) > 32 || !Number.isInteger(shared) || (shared as number) < 0) return undefined;
  const block: [number, number, number] = [(warps as number) * 32, 1, 1];
  if (block.join() === m.launch.block.join() && shared === m.launch.sharedMemBytes) return undefined;
  return { block, sharedMemBytes: shared as number };
}
