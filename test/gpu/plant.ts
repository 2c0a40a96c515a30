/**
 * Plant a wrong value in a capture's after state, as a broken kernel would have left it, and
 * re-seal the changed chunk's kc64 in kerncap.json: only the replay's judgement can then catch
 * it. Used by test/gpu/verdicts.test.ts and scripts/bench-verdicts.sh (run there as
 * `BUN_BE_BUN=1 kerncap test/gpu/plant.ts CAP REGION ELEMENT ULPS`: no package imports, the GPU
 * node has no node_modules).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { kc64 } from "../../src/format/kc64.ts";

/**
 * Move float32 element `element` of region `region` (the manifest's index; a region the launch
 * changed) `ulps` units in the last place away from zero in memory/after.bin.
 * @returns the old and new values
 * @throws Error when the region was not changed or the element lies outside its stored after chunks
 */
export function plantUlps(dir: string, region: number, element: number, ulps: number): { was: number; now: number } {
  const mf = join(dir, "kerncap.json");
  const m = JSON.parse(readFileSync(mf, "utf8"));
  const r = m.regions[region];
  if (!r?.changed) throw new Error(`region ${region} was not changed by the launch`);
  const C: number = m.memory.chunkBytes;
  const at = element * 4;
  const chunk = Math.floor(at / C);
  // the stored after chunk holding the element, and its place among the hashes (extent order)
  let hashIndex = 0;
  let fileOff = -1;
  for (const [first, count, off] of r.after.extents as [number, number, number][]) {
    if (chunk >= first && chunk < first + count) {
      hashIndex += chunk - first;
      fileOff = off + (chunk - first) * C;
      break;
    }
    hashIndex += count;
  }
  if (fileOff < 0) throw new Error(`element ${element} of region ${region} is in no stored after chunk`);
  const f = join(dir, m.memory.after);
  const bytes = readFileSync(f);
  const p = fileOff + (at - chunk * C);
  const was = bytes.readFloatLE(p);
  bytes.writeUInt32LE((bytes.readUInt32LE(p) + ulps) >>> 0, p);
  writeFileSync(f, bytes);
  const len = Math.min(C, r.size - chunk * C);
  const h: string = r.after.hashes;
  r.after.hashes = h.slice(0, hashIndex * 16) + kc64(bytes.subarray(fileOff, fileOff + len)).hex + h.slice(hashIndex * 16 + 16);
  writeFileSync(mf, JSON.stringify(m, null, 1));
  return { was, now: bytes.readFloatLE(p) };
}

if (import.meta.main) {
  const [dir, region, element, ulps] = process.argv.slice(2);
  if (!dir || region === undefined || element === undefined || ulps === undefined) {
    console.error("usage: plant.ts CAPTURE REGION ELEMENT ULPS");
    process.exit(2);
  }
  console.log(JSON.stringify(plantUlps(dir, Number(region), Number(element), Number(ulps))));
}
