/**
 * 5. The checked runs of one kernel: launches from the same before state, each followed by a kc64
 * scan of every range (the regions and the module globals) on the device. Chunks whose kc64
 * differs from the app's after state are copied back (only those) for the judging
 * (./judging.ts); chunks that differ between runs make the kernel nondeterministic. 3 runs by
 * default; when they differ, 8, then 8 more while the last ones still changed the run-to-run
 * envelope (up to MAX_CHECKED_RUNS or CHECKED_RUNS_SECONDS).
 */
import { chunkBytesOf, chunkExpectation, chunkLen, type Range } from "../format/chunks.ts";
import type { FileImage } from "../format/file-image.ts";
import type { Manifest } from "../format/manifest.ts";
import type { ChunkScan, DeviceScanner, ReplayBackend } from "./backends/interface.ts";
import { maxSpread } from "./envelope.ts";
import type { LoadedGlobal } from "./restore.ts";
import type { RunOptions } from "./result.ts";
import { multisetRegions, regionNumericsPlan } from "./tolerance-plan.ts";
import type { ElementType, RegionNumerics, Tolerance } from "./tolerance.ts";

/**
 * Checked runs of a nondeterministic kernel: 8, then 8 more while the last 8 still changed the
 * run-to-run envelope, up to MAX_CHECKED_RUNS or CHECKED_RUNS_SECONDS of checking (ReplayOptions.runs fixes the count).
 */
export const MAX_CHECKED_RUNS = 32;
export const CHECKED_RUNS_SECONDS = 2;

/** One device range a checked run scans: a region or a module global, with the element type it is judged as. */
export interface CheckedRange {
  r: Range;
  /** Its address on the device (a global's is the loaded module's). */
  base: bigint;
  kind: string;
  dtype: ElementType;
  source: RegionNumerics["dtypeSource"];
}

/** What the checked runs saw, for the judging (./judging.ts). */
export interface CheckedRuns {
  /** scans[run][range]: the kc64 scan of each range after each run. */
  scans: ChunkScan[][];
  /** "range:chunk" → the chunk's bytes per run (a run's entry undefined: it matched the app). */
  copies: Map<string, Uint8Array[]>;
  runs: number;
  bytesCopiedBack: number;
}

/** The app's before and after memory images (memory/before.bin, memory/after.bin). */
export interface AppImages {
  before: FileImage;
  after: FileImage;
}

/** Copies back stop past this many bytes (2 GiB): the judging then sees the remaining differing chunks by their hashes only. */
const COPY_LIMIT = 2 ** 31;

/**
 * The ranges a checked run scans, in order: every region of the manifest with its element type
 * (src/replay/tolerance-plan.ts regionNumericsPlan: the frontend's signature, --dtype, float32),
 * then the module globals as bytes; the tolerance; the regions judged as multisets (--multiset).
 * @throws KerncapError E_USAGE (a bad tolerance, element type or region name)
 */
export function checkedRanges(
  m: Manifest,
  params: Uint8Array,
  o: RunOptions,
  globals: LoadedGlobal[],
  { before, after }: AppImages,
): { ranges: CheckedRange[]; tol: Tolerance; asMultiset: Set<number> } {
  const C = m.memory.chunkBytes;
  // written: the 64 bytes at `off` differ between the app's before and after state (byte-precise,
  // not chunk-granular: a caching allocator's segment holds inputs and outputs in one chunk)
  const planExp = new Map<number, ReturnType<typeof chunkExpectation>>();
  const plan = regionNumericsPlan(m, params, o, (ri, off) => {
    const r = m.regions[ri]!;
    const c = Math.floor(off / C);
    if (!r.after.extents.some(([first, count]) => c >= first && c < first + count)) return false;
    if (!planExp.has(ri)) planExp.set(ri, chunkExpectation(r, C));
    const e = planExp.get(ri)!;
    const len = chunkLen(r.size, c, C);
    const at = off - c * C;
    const n = Math.min(64, len - at);
    const a = chunkBytesOf(e, c, len, "after", before, after).subarray(at, at + n);
    const b = chunkBytesOf(e, c, len, "before", before, after).subarray(at, at + n);
    return !Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  });
  const ranges: CheckedRange[] = m.regions.map((r, ri) => ({ r, base: BigInt(r.va), kind: r.kind, dtype: plan[ri]!.dtype, source: plan[ri]!.source }));
  for (const g of globals) ranges.push({ r: g, base: g.dva, kind: `global ${g.name}`, dtype: "u8", source: "default" });
  const asMultiset = new Set(o.multiset?.length ? multisetRegions(m, params, o.multiset) : []);
  return { ranges, tol: plan.tol, asMultiset };
}

/** Each range's name in messages: "region 2" for a region, "global NAME" for a module global. */
export function rangeNames(m: Pick<Manifest, "regions">, ranges: CheckedRange[]): string[] {
  return ranges.map((x, i) => (i < m.regions.length ? `region ${i}` : x.kind));
}

/** Whether any run after the first scanned a chunk other than the first run did. */
export function anyVaried(scans: ChunkScan[][]): boolean {
  return scans.slice(1).some((sr) => sr.some((sc, i) => sc.hash.some((h, c) => h !== scans[0]![i]!.hash[c])));
}

/**
 * The checked runs: `launch` from the before state (`restoreChanged` before every run but the
 * first), each range scanned on the device, the chunks that differ from the app's after state
 * (`expect[i]`, chunkExpectation) copied back. The count: o.runs; else 3 (8 with
 * o.nondeterministic), 8 when the 3 differ, 8 more while the envelope still changes.
 */
export function checkedRuns(
  be: ReplayBackend,
  scanner: DeviceScanner,
  ranges: CheckedRange[],
  expect: ReturnType<typeof chunkExpectation>[],
  o: RunOptions,
  run1: { launch: () => void; restoreChanged: () => void },
  C: number,
  images: AppImages,
): CheckedRuns {
  let nRuns = Math.max(1, o.runs ?? (o.nondeterministic ? 8 : 3));
  const tc = performance.now();
  const scans: ChunkScan[][] = [];
  const copies = new Map<string, Uint8Array[]>();
  let bytesCopiedBack = 0;
  let lastSignature = "";
  for (let run = 0; run < nRuns; run++) {
    if (run > 0) run1.restoreChanged();
    if (run === 0) o.firstLaunch?.begin();
    run1.launch();
    be.sync();
    if (run === 0) o.firstLaunch?.end();
    scans.push(
      ranges.map((x, i) => {
        const s = scanner.scan(x.base, x.r.size, C);
        const e = expect[i]!;
        for (let c = 0; c < s.hash.length; c++) {
          const want = e.state[c] === "zero" ? undefined : e.hash[c];
          if (want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want) continue;
          if (bytesCopiedBack > COPY_LIMIT) continue;
          const len = chunkLen(x.r.size, c, C);
          const got = new Uint8Array(len);
          be.dtoh(got, x.base + BigInt(c * C));
          bytesCopiedBack += len;
          const k = `${i}:${c}`;
          if (!copies.has(k)) copies.set(k, []);
          copies.get(k)![run] = got;
        }
        return s;
      }),
    );
    if (run === nRuns - 1 && o.runs === undefined && nRuns === 3 && anyVaried(scans)) nRuns = 8;
    else if (
      run === nRuns - 1 &&
      o.runs === undefined &&
      nRuns >= 8 &&
      nRuns < MAX_CHECKED_RUNS &&
      anyVaried(scans) &&
      (performance.now() - tc) / 1000 < CHECKED_RUNS_SECONDS
    ) {
      // 8 more runs while the last ones still changed the envelope (which chunks vary, and by how much)
      const sig = envelopeSignature(ranges, expect, scans, copies, C, images);
      if (sig !== lastSignature) nRuns += 8;
      lastSignature = sig;
    }
  }
  return { scans, copies, runs: nRuns, bytesCopiedBack };
}

/**
 * One timed launch checked (ReplaySession: a round drawn at random, right after that launch): every
 * range scanned again and compared with the first checked run's kc64 per chunk. Only for a kernel
 * whose checked runs were bit-identical: its timed launches, each from the same before state,
 * must write the same bytes. A kernel that tells checked from timed launches (a launch counter
 * kept in memory the restore does not cover, the time) and skips its work when timed is caught.
 * @returns check (call right after the timed launch of round `round`) and its outcome: the round,
 *   and the first range and chunk that differ ("region 2 chunk 0")
 */
export function timedLaunchCheck(
  be: Pick<ReplayBackend, "sync">,
  scanner: DeviceScanner,
  ranges: CheckedRange[],
  first: ChunkScan[],
  C: number,
  names: string[],
): { check: (round: number) => void; outcome?: { round: number; differs?: string } } {
  const out: ReturnType<typeof timedLaunchCheck> = {
    check: (round) => {
      be.sync();
      for (const [i, x] of ranges.entries()) {
        const s = scanner.scan(x.base, x.r.size, C);
        const c = s.hash.findIndex((h, k) => h !== first[i]!.hash[k]);
        if (c >= 0) {
          out.outcome = { round, differs: `${names[i]} chunk ${c}` };
          return;
        }
      }
      out.outcome = { round };
    },
  };
  return out;
}

/**
 * Whether a kernel wrote the memory the replay maps around the regions (compare.ts spanPadding:
 * no allocation of the app's, zero since the session opened): a kernel that keeps its result
 * there between launches (computes once, then copies) writes it. Scans each range, and puts back
 * zeros where it finds a write (the next kernel starts clean).
 * @returns the first written address and the bytes of the chunks written ("0x7f… (4096 bytes…)"), or undefined
 */
export function paddingWritten(
  be: Pick<ReplayBackend, "memset" | "sync">,
  scanner: DeviceScanner,
  padding: { va: bigint; size: number }[],
  C: number,
): string | undefined {
  let first: string | undefined;
  let bytes = 0;
  for (const p of padding) {
    const s = scanner.scan(p.va, p.size, C);
    const c = s.nonzero.findIndex((x) => x !== 0);
    if (c < 0) continue;
    first ??= `0x${(p.va + BigInt(c * C)).toString(16)}`;
    bytes += s.nonzero.reduce((a, x, k) => a + (x ? chunkLen(p.size, k, C) : 0), 0);
    be.memset(p.va, 0, p.size);
  }
  if (first === undefined) return undefined;
  be.sync();
  return `${first} (${bytes} bytes in chunks written, mapped around the regions: no allocation of the app's)`;
}

/** The envelope's shape so far: per range, its varying chunks and their largest spread (src/replay/envelope.ts maxSpread). */
function envelopeSignature(
  ranges: CheckedRange[],
  expect: ReturnType<typeof chunkExpectation>[],
  scans: ChunkScan[][],
  copies: Map<string, Uint8Array[]>,
  C: number,
  { before, after }: AppImages,
): string {
  return ranges
    .map((x, i) => {
      let n = 0;
      let spread = 0;
      for (let c = 0; c < scans[0]![i]!.hash.length; c++) {
        if (!scans.some((sr) => sr[i]!.hash[c] !== scans[0]![i]!.hash[c])) continue;
        n++;
        const got = copies.get(`${i}:${c}`);
        if (got) {
          const app = chunkBytesOf(expect[i]!, c, chunkLen(x.r.size, c, C), "after", before, after);
          spread = Math.max(
            spread,
            maxSpread(
              x.dtype,
              scans.map((_, run) => got[run] ?? app),
            ),
          );
        }
      }
      return `${n}:${spread}`;
    })
    .join(",");
}
