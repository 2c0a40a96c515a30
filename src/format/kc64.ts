/**
 * kc64 ("kc64/1"), the per-chunk checksum of kerncap's memory snapshots; the definition and why it
 * is not SHA-256 are in c/common/kc_hash.h (the same function runs on the GPU in c/cuda/kc_scan.cu). Used on
 * the CPU to verify memory files (`inspect --verify`) and to hash the raw output of capture
 * libraries that do not compute it themselves (HSA).
 */
export const KC64_NAME = "kc64/1";

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** k of word j: K0 + j·KSTEP (mod 2^32), the key a word is mixed with. */
const K0 = 0x7f4a7c15;
const KSTEP = 0x9e3779b1;

/** kc64's running sums over words: A (Σ t_j), B (Σ t_j·(2j+1)), and the OR of the words (any non-zero). */
interface Sums {
  A: number;
  B: number;
  any: number;
}

/** Add the `n` whole words of `bytes` (from its start), which are words j0, j0+1, … of the hashed bytes. */
function addWords(s: Sums, bytes: Uint8Array, j0: number, n: number): void {
  const words = (bytes.byteOffset & 3) === 0 ? new Uint32Array(bytes.buffer, bytes.byteOffset, n) : undefined;
  let { A, B, any } = s;
  let k = (K0 + Math.imul(j0, KSTEP)) | 0;
  for (let i = 0; i < n; i++) {
    const w = words ? words[i]! : (bytes[4 * i]! | (bytes[4 * i + 1]! << 8) | (bytes[4 * i + 2]! << 16) | (bytes[4 * i + 3]! << 24)) >>> 0;
    any |= w;
    const t = fmix32((w ^ k) >>> 0);
    A = (A + t) | 0;
    B = (B + Math.imul(t, 2 * (j0 + i) + 1)) | 0;
    k = (k + KSTEP) | 0;
  }
  s.A = A;
  s.B = B;
  s.any = any;
}

/** Add words j0, j0+1, … < j1 whose bytes are all zero, one at a time (t_j = fmix32(k_j)). */
function addZeroWordsDirect(s: Sums, j0: number, j1: number): void {
  let k = (K0 + Math.imul(j0, KSTEP)) | 0;
  for (let j = j0; j < j1; j++) {
    const t = fmix32(k >>> 0);
    s.A = (s.A + t) | 0;
    s.B = (s.B + Math.imul(t, 2 * j + 1)) | 0;
    k = (k + KSTEP) | 0;
  }
}

/** Words per block of the zero-word tables. */
const ZERO_BLOCK = 1024;
/** ZERO_A[q], ZERO_B[q]: the sums A and B of zero words 0 … q·ZERO_BLOCK − 1 (a prefix over whole blocks), grown as far as asked. */
let ZERO_A = new Int32Array(1);
let ZERO_B = new Int32Array(1);
let zeroBlocks = 0;

/** The zero-word tables grown to block q (the first use of a block costs its words once a process: ~1 GB/s of zeros). */
function zeroPrefix(q: number): void {
  if (q <= zeroBlocks) return;
  if (q + 1 > ZERO_A.length) {
    const n = Math.max(q + 1, 2 * ZERO_A.length);
    const [a, b] = [new Int32Array(n), new Int32Array(n)];
    a.set(ZERO_A);
    b.set(ZERO_B);
    [ZERO_A, ZERO_B] = [a, b];
  }
  const s: Sums = { A: ZERO_A[zeroBlocks]!, B: ZERO_B[zeroBlocks]!, any: 0 };
  for (let b = zeroBlocks; b < q; b++) {
    addZeroWordsDirect(s, b * ZERO_BLOCK, (b + 1) * ZERO_BLOCK);
    ZERO_A[b + 1] = s.A;
    ZERO_B[b + 1] = s.B;
  }
  zeroBlocks = q;
}

/** Add words j0 … < j1 whose bytes are all zero: the whole blocks between from the prefix tables (a hole of a sparse image costs no hashing per byte). */
function addZeroWords(s: Sums, j0: number, j1: number): void {
  const q0 = Math.ceil(j0 / ZERO_BLOCK);
  const q1 = Math.floor(j1 / ZERO_BLOCK);
  if (q1 <= q0) return addZeroWordsDirect(s, j0, j1);
  addZeroWordsDirect(s, j0, q0 * ZERO_BLOCK);
  zeroPrefix(q1);
  s.A = (s.A + ZERO_A[q1]! - ZERO_A[q0]!) | 0;
  s.B = (s.B + ZERO_B[q1]! - ZERO_B[q0]!) | 0;
  addZeroWordsDirect(s, q1 * ZERO_BLOCK, j1);
}

/** The last partial word (len & 3 bytes, the rest zero) and the two 32-bit halves of the hash, as hex. */
function finish(s: Sums, tail: Uint8Array, len: number): { hex: string; nonzero: boolean } {
  const full = len >>> 2;
  if (len & 3) {
    let w = 0;
    for (let i = 0; i < (len & 3); i++) w |= tail[i]! << (8 * i);
    w >>>= 0;
    s.any |= w;
    const t = fmix32((w ^ ((K0 + Math.imul(full, KSTEP)) | 0)) >>> 0);
    s.A = (s.A + t) | 0;
    s.B = (s.B + Math.imul(t, 2 * full + 1)) | 0;
  }
  const hi = fmix32((s.A ^ len) >>> 0);
  const lo = fmix32((s.B + Math.imul(len, 0x85ebca6b)) >>> 0);
  return { hex: hi.toString(16).padStart(8, "0") + lo.toString(16).padStart(8, "0"), nonzero: s.any !== 0 };
}

/**
 * kc64 of `bytes` (any length): 16 lowercase hex digits, and whether any byte is non-zero.
 * Cost: ~1 GB/s on one core (32-bit multiplies through Math.imul).
 */
export function kc64(bytes: Uint8Array): { hex: string; nonzero: boolean } {
  const len = bytes.byteLength;
  const s: Sums = { A: 0, B: 0, any: 0 };
  addWords(s, bytes, 0, len >>> 2);
  return finish(s, bytes.subarray(len & ~3), len);
}

/**
 * kc64 of `len` bytes that are zero outside `data` (byte ranges [start, end) of them, sorted, not
 * overlapping), whose bytes `read(start, end)` gives: the words that touch data are read and
 * hashed, the zero words between are added from tables, so a chunk of a sparse memory image costs
 * about its data, not its length (adversary 65: 1 TiB of listed 64 MiB chunks holding 16 KiB of
 * data each, 257 MB on disk, took ~30 min to check). The same hash as kc64 of the whole bytes.
 */
export function kc64Sparse(len: number, data: readonly (readonly [number, number])[], read: (start: number, end: number) => Uint8Array): string {
  const full = len >>> 2;
  const s: Sums = { A: 0, B: 0, any: 0 };
  let j = 0; // the next word not yet added
  for (const [start, end] of data) {
    const j0 = Math.max(j, Math.floor(start / 4));
    const j1 = Math.min(full, Math.ceil(end / 4));
    if (j1 <= j0) continue;
    addZeroWords(s, j, j0);
    addWords(s, read(4 * j0, 4 * j1), j0, j1 - j0);
    j = j1;
  }
  addZeroWords(s, j, full);
  return finish(s, len & 3 ? read(4 * full, len) : new Uint8Array(0), len).hex;
}
