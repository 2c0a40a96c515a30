/**
 * Verdicts for nondeterministic kernels (float atomics, racy reductions): the replay runs the
 * kernel n times from the same before state; elements that differ among those runs span an
 * envelope, and the app's after state is judged against it. Pure functions, no GPU.
 *
 * Rule (documented in the README): for each element, lo/hi = min/max over the replay runs and
 * spread = hi − lo; the app's value passes when lo − m ≤ app ≤ hi + m, with the margin
 * m = spread + 4 ulp(|app|) — the app's own run is one more sample of the same distribution, so
 * it may fall a spread outside the few replayed ones. Elements that did not vary among the runs
 * keep the bit-exact contract (equal to every run, else outside). NaN passes only where a run
 * gave NaN. A planted wrong value lies outside whenever it is farther than a spread away.
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
 * (≥ 2, equal lengths, whole elements of type t).
 */
export function judgeEnvelope(t: ElementType, app: Uint8Array, runs: Uint8Array[]): Envelope {
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
    else if (!varied) ok = Object.is(x, lo) || x === lo;
    else {
      const spread = hi - lo;
      const m = spread + (isFloat ? 4 * ulp(x, t) : 0);
      ok = x >= lo - m && x <= hi + m;
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
