/** Bitwise comparison of memory images; pure functions, tested without a GPU. */

export interface ByteDiff {
  /** Byte offset of the first differing byte, -1 when equal. */
  first: number;
  /** Number of differing bytes. */
  count: number;
}

/** Compare two equally long byte arrays; fast path through Buffer.equals (memcmp). */
export function diffBytes(a: Uint8Array, b: Uint8Array): ByteDiff {
  if (a.byteLength !== b.byteLength) throw new Error(`diffBytes: lengths differ (${a.byteLength} vs ${b.byteLength})`);
  const ba = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const bb = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (ba.equals(bb)) return { first: -1, count: 0 };
  let first = -1;
  let count = 0;
  // 64 KiB blocks: memcmp skips the equal ones, bytes are counted only in differing blocks
  const B = 1 << 16;
  for (let o = 0; o < a.byteLength; o += B) {
    const e = Math.min(a.byteLength, o + B);
    if (ba.subarray(o, e).equals(bb.subarray(o, e))) continue;
    for (let i = o; i < e; i++) {
      if (a[i] !== b[i]) {
        if (first < 0) first = i;
        count++;
      }
    }
  }
  return { first, count };
}

export { median } from "../util/median.ts";

/**
 * Spans to reserve for a set of regions: each [va, va+size) rounded out to `granularity` and
 * overlapping or touching spans merged. Shapes: va as bigint, sizes in bytes.
 */
export function vaSpans(regions: { va: bigint; size: number }[], granularity: number): { va: bigint; size: number }[] {
  const g = BigInt(granularity);
  const spans = regions
    .filter((r) => r.size > 0)
    .map((r) => {
      const start = (r.va / g) * g;
      const end = ((r.va + BigInt(r.size) + g - 1n) / g) * g;
      return { start, end };
    })
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: { start: bigint; end: bigint }[] = [];
  for (const s of spans) {
    const last = out[out.length - 1];
    if (last && s.start <= last.end) {
      if (s.end > last.end) last.end = s.end;
    } else out.push({ ...s });
  }
  return out.map((s) => ({ va: s.start, size: Number(s.end - s.start) }));
}

/**
 * The bytes of the spans (vaSpans) that no region holds, sorted: mapped by the replay around the
 * regions, never memory of the app's (every live allocation is a region). Shapes: va as bigint,
 * sizes in bytes.
 */
export function spanPadding(spans: { va: bigint; size: number }[], regions: { va: bigint; size: number }[]): { va: bigint; size: number }[] {
  const rs = regions
    .filter((r) => r.size > 0)
    .map((r) => ({ start: r.va, end: r.va + BigInt(r.size) }))
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: { va: bigint; size: number }[] = [];
  for (const sp of spans) {
    let at = sp.va;
    const end = sp.va + BigInt(sp.size);
    for (const r of rs) {
      if (r.end <= at || r.start >= end) continue;
      if (r.start > at) out.push({ va: at, size: Number(r.start - at) });
      if (r.end > at) at = r.end;
    }
    if (at < end) out.push({ va: at, size: Number(end - at) });
  }
  return out;
}
