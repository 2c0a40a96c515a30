/**
 * The state a rebuilt module keeps between its own launches: the `__device__` variables it
 * declares beyond the captured module's (those are restored from the capture). A kernel may keep
 * its result there on the first launch and only copy it out on the next ones: every checked run
 * would be right and the timed launches would time a copy (a speedup that is not real). So the
 * engine keeps those variables as the module was loaded and puts them back before every launch,
 * checked or timed, as it puts back the regions.
 */
import { log } from "../log.ts";
import type { DeviceMemory, ReplayModule } from "./backends/interface.ts";

/** Put back a device copy when the variables hold more than this (bytes); less: host copies. */
const DEVICE_COPY_BYTES = 64 << 10;

export interface KeptState {
  /** The variables, by name, sizes in bytes. */
  globals: { name: string; va: bigint; size: number }[];
  bytes: number;
  /** Write the variables' state as loaded back (queued on the stream before the next launch). */
  putBack(): void;
  /** Free the device copy (never throws: cleanup paths). */
  free(): void;
}

/**
 * Keep the writable variables of a loaded module (ReplayModule.writableGlobals) other than
 * `restored` (the captured globals the engine restores itself), as loaded: call before its first
 * launch. Larger than 64 KiB in all: one device copy, put back device to device; else (or without
 * device memory for the copy) a host copy.
 * @returns undefined when the module has no such variable, or the backend cannot list them (HSA)
 */
export function keepModuleState(be: DeviceMemory, mod: ReplayModule, restored: Set<string>): KeptState | undefined {
  const globals = (mod.writableGlobals?.() ?? []).filter((g) => !restored.has(g.name));
  if (!globals.length) return undefined;
  const bytes = globals.reduce((a, g) => a + g.size, 0);
  let copy: bigint | undefined;
  if (bytes > DEVICE_COPY_BYTES) {
    try {
      copy = be.memAlloc(bytes);
    } catch {
      log.debug(`no device memory for a ${bytes}-byte copy of the module's variables: putting them back from the host`);
    }
  }
  const offsets: number[] = [];
  let at = 0;
  for (const g of globals) {
    offsets.push(at);
    at += g.size;
  }
  if (copy !== undefined) {
    const dev = copy;
    globals.forEach((g, i) => be.dtod(dev + BigInt(offsets[i]!), g.va, g.size));
    return {
      globals,
      bytes,
      putBack: () => globals.forEach((g, i) => be.dtod(g.va, dev + BigInt(offsets[i]!), g.size)),
      free: () => {
        try {
          be.memFree(dev);
        } catch {
          /* the context is gone with a fault */
        }
      },
    };
  }
  const host = globals.map((g) => {
    const b = new Uint8Array(g.size);
    be.dtoh(b, g.va);
    return b;
  });
  return { globals, bytes, putBack: () => globals.forEach((g, i) => be.htod(g.va, host[i]!)), free: () => {} };
}
