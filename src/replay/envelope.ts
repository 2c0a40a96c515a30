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
    else if (lo === Infinity)
      ok = false; // every run NaN, the app a number
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

/**
 * The kernel's own nondeterminism, per element type: the largest run-to-run spread (ulp at the
 * element's magnitude, Envelope.maxUlpSpread) over every region of that type whose runs varied,
 * and which regions showed it. The app's launch ran under other timing than any replay (cold
 * caches, other work on the GPU: seen on the H200), so an accumulator whose replays all agree
 * may still have come out of the app another way; its difference is judged against this noise
 * (judgeHeld) instead of bit for bit. Floats only: integer atomics are exact.
 * @param regions each varying region's index, element type and envelope
 */
export function kernelNoise(regions: { index: number; dtype: ElementType; env: Envelope }[]): Map<ElementType, { ulp: number; regions: number[] }> {
  const out = new Map<ElementType, { ulp: number; regions: number[] }>();
  for (const r of regions) {
    if (!isFloatType(r.dtype) || r.env.elementsVarying === 0 || r.env.maxUlpSpread <= 0) continue;
    const k = out.get(r.dtype) ?? { ulp: 0, regions: [] };
    k.ulp = Math.max(k.ulp, Math.ceil(r.env.maxUlpSpread - 1e-9));
    k.regions.push(r.index);
    out.set(r.dtype, k);
  }
  for (const k of out.values()) k.regions.sort((a, b) => a - b);
  return out;
}

export function isFloatType(t: ElementType): boolean {
  return t === "fp64" || t === "fp32" || t === "fp16" || t === "bf16";
}

/** What judgeHeld found in one chunk of a region whose replays did not vary. */
export interface HeldJudgement {
  /** Elements where the app's value differs from the replays' (which all agree). */
  differing: number;
  /** Largest difference, in ulp at the element's magnitude. */
  maxUlp: number;
  /** Elements farther than the kernel's noise (or NaN/infinite against a number), and the byte offset of the first. */
  outside: number;
  firstOutsideOffset: number;
}

/**
 * Judge the app's bytes against a replay's where every replay agreed but the app differs, with
 * the kernel's noise `noiseUlp` (kernelNoise): an element passes when |app − replay| ≤ noiseUlp
 * ulp at max(|app|, |replay|). No margin is added: a planted change of a few ulp beyond what the
 * kernel shows elsewhere is caught. Shapes: app and got of equal length, whole elements of type t.
 */
export function judgeHeld(t: ElementType, app: Uint8Array, got: Uint8Array, noiseUlp: number): HeldJudgement {
  const a = decode(app, t);
  const g = decode(got, t);
  const eb = ELEMENT_BYTES[t];
  const out: HeldJudgement = { differing: 0, maxUlp: 0, outside: 0, firstOutsideOffset: -1 };
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = g[i]!;
    if (Object.is(x, y)) continue;
    out.differing++;
    const finite = Number.isFinite(x) && Number.isFinite(y);
    const d = finite ? Math.abs(x - y) / ulp(Math.max(Math.abs(x), Math.abs(y)), t) : Infinity;
    if (d > out.maxUlp) out.maxUlp = d;
    // -0 against +0 is 0 ulp apart: the order of atomics gives either
    if (d > noiseUlp) {
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

/** Elements of `b` as unsigned bit patterns of `eb` bytes (1, 2, 4, 8), sorted ascending (a copy: any alignment). */
function sortedBits(b: Uint8Array, eb: number): Uint8Array | Uint16Array | Uint32Array | BigUint64Array {
  const n = Math.floor(b.byteLength / eb);
  const raw = new Uint8Array(n * eb);
  raw.set(b.subarray(0, n * eb));
  const xs = eb === 8 ? new BigUint64Array(raw.buffer) : eb === 4 ? new Uint32Array(raw.buffer) : eb === 2 ? new Uint16Array(raw.buffer) : raw;
  return xs.sort(); // typed arrays sort numerically
}

/**
 * Order-independent comparison (an atomic append or compaction writes the same elements in any
 * order): the multisets of elements of type t's size are equal. Elements are compared as bit
 * patterns (exact, as the bit-exact contract: -0 ≠ +0, a NaN equals the same NaN bits); a
 * trailing partial element is compared bytewise and counts as one element. Shapes: a and b of
 * equal length in bytes (a different length is reported by the counts, not thrown).
 * @returns elements of a without a partner in b plus elements of b without one in a (0 = equal).
 */
export function multisetDifference(t: ElementType, a: Uint8Array, b: Uint8Array): number {
  const eb = ELEMENT_BYTES[t];
  const x = sortedBits(a, eb);
  const y = sortedBits(b, eb);
  let i = 0;
  let j = 0;
  let unmatched = 0;
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) {
      i++;
      j++;
    } else if (x[i]! < y[j]!) {
      unmatched++;
      i++;
    } else {
      unmatched++;
      j++;
    }
  }
  unmatched += x.length - i + (y.length - j);
  const ta = a.subarray(x.length * eb);
  const tb = b.subarray(y.length * eb);
  if (ta.byteLength || tb.byteLength) if (ta.byteLength !== tb.byteLength || !ta.every((v, k) => v === tb[k])) unmatched += 2;
  return unmatched;
}

/** A region compared as a multiset of elements (replay/validate --multiset): the app's after state against every checked run. */
export interface MultisetJudgement {
  /** Elements of the region (region bytes / element size). */
  elements: number;
  /** Checked runs compared. */
  runs: number;
  /** Runs whose bytes differ from the app's (in order only, or in their elements too). */
  runsReordered: number;
  /** Largest multisetDifference over the runs (0: every run holds the app's elements). */
  unmatched: number;
  /** Index of the first run with unmatched elements, -1 when none. */
  firstBadRun: number;
}

/**
 * Judge one region as a multiset: `app` = the app's whole after state of the region, `runs` =
 * the region's whole bytes after each checked run (same length). Bytewise-equal runs skip the sort.
 */
export function judgeMultiset(t: ElementType, app: Uint8Array, runs: Uint8Array[]): MultisetJudgement {
  const out: MultisetJudgement = {
    elements: Math.floor(app.byteLength / ELEMENT_BYTES[t]),
    runs: runs.length,
    runsReordered: 0,
    unmatched: 0,
    firstBadRun: -1,
  };
  const A = Buffer.from(app.buffer, app.byteOffset, app.byteLength);
  for (const [k, r] of runs.entries()) {
    if (A.equals(Buffer.from(r.buffer, r.byteOffset, r.byteLength))) continue;
    out.runsReordered++;
    const d = multisetDifference(t, app, r);
    if (d > out.unmatched) out.unmatched = d;
    if (d && out.firstBadRun < 0) out.firstBadRun = k;
  }
  return out;
}
