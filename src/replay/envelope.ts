/**
 * Verdicts for nondeterministic kernels (float atomics, racy reductions): the replay runs the
 * kernel n times from the same before state; elements that differ among those runs span an
 * envelope, and the app's after state is judged against it. Pure functions, no GPU.
 *
 * Rule (documented in the README): for each element, lo/hi = min/max over the replay runs and
 * spread = hi − lo; the app's value passes when lo − m ≤ app ≤ hi + m, with the margin
 * m = max(2·spread, A) + 8 ulp(|app|), where A is the largest spread seen anywhere in the region
 * (the region's run-to-run noise floor). The app's own run is one more sample of the same
 * distribution, and with a few replayed runs an element may happen not to vary among them while
 * it varies in the app: seen on the H200 with torch index_add_ (3 runs: 4443 of 524288 elements
 * of a varying region fell outside a per-element envelope, none outside this one). Regions whose
 * runs never differ keep the bit-exact contract. NaN passes only where a run gave NaN. A planted
 * wrong value fails whenever it lies farther than that margin.
 */
import { decode, ELEMENT_BYTES, type ElementType } from "./tolerance.ts";

export interface Envelope {
  /** Elements whose value differed between replay runs. */
  elementsVarying: number;
  /** Largest hi − lo over the varying elements, absolute and relative to |hi|. */
  maxAbsSpread: number;
  maxRelSpread: number;
  /** Largest spread in units in the last place of the element type (floats; 0 for integers). */
  maxUlpSpread: number;
  /** App elements outside the envelope, and the byte offset (within the chunk) of the first. */
  outside: number;
  firstOutsideOffset: number;
}

/** Spacing of floats of type t at magnitude |x| (the ulp). */
export function ulp(x: number, t: ElementType): number {
  const bits = t === "fp64" ? 52 : t === "fp32" ? 23 : t === "fp16" ? 10 : t === "bf16" ? 7 : -1;
  if (bits < 0) return 0;
  const minExp = t === "fp64" ? -1022 : t === "fp32" ? -126 : t === "fp16" ? -14 : -126;
  const a = Math.abs(x);
  const e = a > 0 && Number.isFinite(a) ? Math.max(Math.floor(Math.log2(a)), minExp) : minExp;
  return 2 ** (e - bits);
}

/**
 * Judge one chunk: `app` = the app's after bytes, `runs` = the same bytes from each replay run
 * (≥ 2, equal lengths, whole elements of type t); regionSpread = A, the largest element spread
 * over the region's varying chunks (regionSpreadOf), 0 to judge the chunk alone.
 */
export function judgeEnvelope(t: ElementType, app: Uint8Array, runs: Uint8Array[], regionSpread = 0): Envelope {
  const a = decode(app, t);
  const rs = runs.map((r) => decode(r, t));
  const isFloat = t === "fp64" || t === "fp32" || t === "fp16" || t === "bf16";
  const out: Envelope = { elementsVarying: 0, maxAbsSpread: 0, maxRelSpread: 0, maxUlpSpread: 0, outside: 0, firstOutsideOffset: -1 };
  const eb = ELEMENT_BYTES[t];
  for (let i = 0; i < a.length; i++) {
    let lo = Infinity;
    let hi = -Infinity;
    let nan = false;
    for (const r of rs) {
      const v = r[i]!;
      if (Number.isNaN(v)) nan = true;
      else {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    const x = a[i]!;
    const varied = nan ? rs.some((r) => !Number.isNaN(r[i]!)) : hi !== lo || rs.some((r) => !Object.is(r[i], rs[0]![i]));
    let ok: boolean;
    if (Number.isNaN(x)) ok = nan;
    else if (lo === Infinity) ok = false; // every run NaN, the app a number
    else {
      const m = Math.max(2 * (hi - lo), regionSpread) + (isFloat ? 8 * ulp(x, t) : 0);
      ok = m === 0 ? x === lo : x >= lo - m && x <= hi + m;
    }
    if (varied) {
      out.elementsVarying++;
      const spread = lo === Infinity ? 0 : hi - lo;
      if (spread > out.maxAbsSpread) out.maxAbsSpread = spread;
      const rel = spread === 0 ? 0 : spread / Math.max(Math.abs(hi), Math.abs(lo));
      if (rel > out.maxRelSpread) out.maxRelSpread = rel;
      if (isFloat && spread > 0) {
        const u = spread / ulp(Math.max(Math.abs(hi), Math.abs(lo)), t);
        if (u > out.maxUlpSpread) out.maxUlpSpread = u;
      }
    }
    if (!ok) {
      out.outside++;
      if (out.firstOutsideOffset < 0) out.firstOutsideOffset = i * eb;
    }
  }
  return out;
}

/** Largest element spread (hi − lo over the runs) in one chunk: the input to A. */
export function maxSpread(t: ElementType, runs: Uint8Array[]): number {
  const rs = runs.map((r) => decode(r, t));
  let a = 0;
  for (let i = 0; i < rs[0]!.length; i++) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const r of rs) {
      const v = r[i]!;
      if (Number.isFinite(v)) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    if (hi > lo && hi - lo > a) a = hi - lo;
  }
  return a;
}

/** Merge chunk envelopes of one region (offsets are made region-relative by the caller). */
export function mergeEnvelopes(parts: { offset: number; env: Envelope }[]): Envelope {
  const out: Envelope = { elementsVarying: 0, maxAbsSpread: 0, maxRelSpread: 0, maxUlpSpread: 0, outside: 0, firstOutsideOffset: -1 };
  for (const { offset, env } of parts) {
    out.elementsVarying += env.elementsVarying;
    out.maxAbsSpread = Math.max(out.maxAbsSpread, env.maxAbsSpread);
    out.maxRelSpread = Math.max(out.maxRelSpread, env.maxRelSpread);
    out.maxUlpSpread = Math.max(out.maxUlpSpread, env.maxUlpSpread);
    out.outside += env.outside;
    if (out.firstOutsideOffset < 0 && env.firstOutsideOffset >= 0) out.firstOutsideOffset = offset + env.firstOutsideOffset;
  }
  return out;
}

/**
 * Order-independent comparison (an atomic append or compaction writes the same elements in any
 * order): the multisets of elements of type t are equal. Returns the number of elements that
 * have no partner (0 = equal as multisets).
 */
export function multisetDifference(t: ElementType, a: Uint8Array, b: Uint8Array): number {
  const x = Array.from(decode(a, t)).sort((p, q) => p - q);
  const y = Array.from(decode(b, t)).sort((p, q) => p - q);
  let i = 0;
  let j = 0;
  let unmatched = 0;
  while (i < x.length && j < y.length) {
    if (Object.is(x[i], y[j]) || x[i] === y[j]) {
      i++;
      j++;
    } else if (x[i]! < y[j]! || Number.isNaN(y[j]!)) {
      unmatched++;
      i++;
    } else {
      unmatched++;
      j++;
    }
  }
  return unmatched + (x.length - i) + (y.length - j);
}
