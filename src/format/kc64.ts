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

/**
 * kc64 of `bytes` (any length): 16 lowercase hex digits, and whether any byte is non-zero.
 * Cost: ~1 GB/s on one core (32-bit multiplies through Math.imul).
 */
export function kc64(bytes: Uint8Array): { hex: string; nonzero: boolean } {
  const len = bytes.byteLength;
  const full = len >>> 2;
  const aligned = (bytes.byteOffset & 3) === 0;
  const words = aligned ? new Uint32Array(bytes.buffer, bytes.byteOffset, full) : undefined;
  let A = 0;
  let B = 0;
  let any = 0;
  let k = 0x7f4a7c15;
  for (let j = 0; j < full; j++) {
    const w = words ? words[j]! : (bytes[4 * j]! | (bytes[4 * j + 1]! << 8) | (bytes[4 * j + 2]! << 16) | (bytes[4 * j + 3]! << 24)) >>> 0;
    any |= w;
    const t = fmix32((w ^ k) >>> 0);
    A = (A + t) | 0;
    B = (B + Math.imul(t, 2 * j + 1)) | 0;
    k = (k + 0x9e3779b1) | 0;
  }
  if (len & 3) {
    let w = 0;
    for (let i = full * 4; i < len; i++) w |= bytes[i]! << (8 * (i - full * 4));
    w >>>= 0;
    any |= w;
    const t = fmix32((w ^ k) >>> 0);
    A = (A + t) | 0;
    B = (B + Math.imul(t, 2 * full + 1)) | 0;
  }
  const hi = fmix32((A ^ len) >>> 0);
  const lo = fmix32((B + Math.imul(len, 0x85ebca6b)) >>> 0);
  return { hex: hi.toString(16).padStart(8, "0") + lo.toString(16).padStart(8, "0"), nonzero: any !== 0 };
}
