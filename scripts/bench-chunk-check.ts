/**
 * The CPU chunk check (src/format/chunks.ts verifyChunks: inspect --verify, check, unpack) of a
 * sparse memory image whose chunks hold little data: a folder that lists GIB GiB of CHUNK_MIB MiB
 * chunks, each holding DATA_KIB KiB of data at its start (the rest holes), checked as kerncap checks
 * it (data extents read, holes' zeros added from tables), against the two alternatives: hashing
 * every listed byte (the check before holes were skipped inside a chunk: timed on a few chunks and
 * scaled), and hashing only the data (the floor: no check can read less). No GPU.
 * Usage: bun scripts/bench-chunk-check.ts [GIB=256] [CHUNK_MIB=64] [DATA_KIB=16]
 * Prints the three times and their ratios.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { writeDemo } from "../src/capture/demo.ts";
import { verifyChunks } from "../src/format/chunks.ts";
import { FileImage } from "../src/format/file-image.ts";
import { kc64, kc64Sparse } from "../src/format/kc64.ts";
import { dataExtents } from "../src/format/sparse-extents.ts";

const gib = Number(process.argv[2] ?? 256);
const C = Number(process.argv[3] ?? 64) << 20;
const data = Number(process.argv[4] ?? 16) << 10;
const n = Math.floor((gib * 2 ** 30) / C);
const root = join(process.env.TMPDIR ?? tmpdir(), `kerncap-bench-chunk-${process.pid}`);
rmSync(root, { recursive: true, force: true });
mkdirSync(root, { recursive: true });
try {
  const { dir, manifest } = writeDemo(join(root, "cap"), false);
  const m = structuredClone(manifest);
  // one region of n chunks, each DATA_KIB of bytes then holes, in a sparse memory/before.bin of its own
  const file = "memory/bench-before.bin";
  const fd = openSync(join(dir, file), "w");
  const bytes = new Uint8Array(data);
  const hashes: string[] = [];
  for (let k = 0; k < n; k++) {
    for (let i = 0; i < data; i++) bytes[i] = (k * 131 + i * 7 + 1) & 0xff;
    writeSync(fd, bytes, 0, data, k * C);
    hashes.push(kc64Sparse(C, [[0, data]], (s, e) => bytes.subarray(s, e)));
  }
  ftruncateSync(fd, n * C);
  closeSync(fd);
  if (!dataExtents(join(dir, file)).sparse) console.log("note: this file system tells no holes: every chunk is read whole");
  m.memory.chunkBytes = C;
  m.memory.before = file;
  m.memory.storedBeforeBytes = n * C;
  m.memory.storedAfterBytes = 0;
  m.regions = [
    { ...m.regions[0]!, va: "0x7f0000000000", size: n * C, before: { extents: [[0, n, 0]], hashes: hashes.join("") }, after: { extents: [], hashes: "" } },
  ];
  m.globals = [];

  let t = performance.now();
  verifyChunks(dir, m);
  const check = (performance.now() - t) / 1000;

  // every listed byte hashed: a few chunks read and hashed whole, scaled to n
  const img = new FileImage(join(dir, file));
  const sample = Math.min(n, 4);
  t = performance.now();
  for (let k = 0; k < sample; k++) kc64(img.view(k * C, C));
  const whole = ((performance.now() - t) / 1000) * (n / sample);

  // the floor: the data alone
  const all = new Uint8Array(n * data);
  t = performance.now();
  kc64(all);
  const floor = (performance.now() - t) / 1000;

  console.log(`${gib} GiB listed in ${n} chunks of ${C >> 20} MiB, ${data >> 10} KiB of data each (${((n * data) / 2 ** 20).toFixed(0)} MiB of data):`);
  console.log(`  the check (verifyChunks):            ${check.toFixed(2)} s`);
  console.log(`  every listed byte hashed (est.):     ${whole.toFixed(1)} s  (${(whole / check).toFixed(0)}× the check)`);
  console.log(`  the data alone hashed (the floor):   ${floor.toFixed(2)} s  (the check is ${(check / floor).toFixed(2)}× it)`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
