/**
 * Whether a vendor runtime is on this machine, by loading it (bun:ffi dlopen, here with the other
 * native libraries' loaders): the capture's injector chooses its runtime by it
 * (src/capture/injector.ts).
 */
import { dlopen } from "bun:ffi";

/**
 * Whether one of `names` loads with `symbol` (a function taking a u32, returning an i32) found in it.
 * Bun's dlopen refuses an empty symbol table, so the symbol is required (an empty table made every
 * libcuda look absent on the H200, and the HSA injector was chosen there).
 */
export function libraryLoads(names: string[], symbol: string): boolean {
  for (const n of names) {
    try {
      dlopen(n, { [symbol]: { args: ["u32"], returns: "i32" } }).close();
      return true;
    } catch {
      // next candidate
    }
  }
  return false;
}
