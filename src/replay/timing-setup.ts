/**
 * What happens on the device before each timed launch (./session.ts timeInterleaved): the restore
 * of the memory the kernel writes, the L2 state the launch starts from, the spin kernel that hides
 * the launch path, and how many warm-up launches come first. The defaults (DEFAULT_TIMING) are
 * what `replay`, `validate`, `tune` and `check` time with; KERNCAP_TIMING (src/env.ts
 * timingOverride, parsed by parseTimingSetup) selects another setup, so that
 * scripts/exp-kernel-time.sh can time the same capture under each and set them beside ncu.
 *
 * Why the warm default leaves L2 as the restore left it ("restored"). The restore between timed
 * launches copies the app's changed chunks back from a device backup (cuMemcpyDtoD): the kernel's
 * output, in its before state, is then in L2 as dirty lines, up to the whole L2 (50 MiB on an
 * H200), which a launch writes back while it runs (ncu on the replay of PyTorch's a*2.0 on 2²⁴
 * floats: 64.9 MB of DRAM writes against 47.1 MB in the app). Writing L2 back first ("evicted")
 * or also reading the launch's ranges again ("reread") removes that, but also the data a small
 * kernel found in L2 in the app. Measured on the H200 against ncu in the app (CUDA events,
 * scripts/exp-kernel-time.sh, docs/benchmarks.md): restored +28.6% / +7.2% / +3.9% / +1.5% on a
 * 2²⁰-float mul, a 2²⁴-float mul, a softmax and a Triton add+relu; evicted +65.7% / -0.1% / -4.2%
 * / -7.4%. No setup is within 3% for every class (the app's own L2 state depends on its previous
 * kernel, which no replay has); "restored" is the closest overall. The exported repro.c follows
 * DEFAULT_TIMING (templates/export/repro.c L2_WRITE_BACK), so its times stay comparable with the
 * replay's.
 */
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import type { Manifest } from "../format/manifest.ts";
import type { DeviceScanner, ReplayBackend } from "./backends/interface.ts";

/** The L2 state a warm (not --flush-l2) timed launch starts from. */
export type WarmL2 = "reread" | "restored" | "evicted";

export interface TimingSetup {
  /** µs of the spin kernel queued before each timed launch's start event (CUDA), hiding the launch path. */
  spinUs: number;
  /** Untimed launches before the timed ones (none when `iters` is 0). */
  warmup: number;
  /**
   * Before each timed launch: "device", the app's changed chunks copied back from their device
   * backup (cuMemcpyDtoD); "host", the changed regions copied from memory/before.bin; "none",
   * nothing (back to back: the kernel runs on its own previous output; right only for a kernel
   * that does not read what it writes).
   */
  restore: "device" | "host" | "none";
  /**
   * Warm L2: "reread" (written back by a read of twice the L2, then the launch's parameter ranges
   * read: rewarmRanges), "evicted" (written back only: as --flush-l2), "restored" (as the restore
   * left it: the default, see DEFAULT_TIMING).
   */
  l2: WarmL2;
  /**
   * What times a launch: "events", a CUDA event pair around it (the default: ~1.4 µs more than the
   * kernel on the H200, see ./backends/cuda-kernel-clock.ts); "cupti", the GPU's own start and end
   * of the kernel from CUPTI's activity records (the events where CUPTI is not to be had: another
   * CUPTI client such as ncu, no libcupti).
   */
  clock: "events" | "cupti";
}

/** What every timing uses unless KERNCAP_TIMING says otherwise (the module's doc says why). */
// clock stays "events": on the H200 CUPTI's kernel records read an empty kernel at 0.61-0.67 µs where ncu
// gives 1.50 µs and events 2.62-2.94 µs, so neither clock is within 0.5 µs of ncu on tiny kernels (docs/benchmarks.md)
export const DEFAULT_TIMING: Readonly<TimingSetup> = Object.freeze({ spinUs: 30, warmup: 2, restore: "device", l2: "restored", clock: "events" });

const GRAMMAR = "comma-separated key=value: spin=µs (0-100000), warmup=N (0-1000), restore=device|host|none, l2=reread|restored|evicted, clock=events|cupti";

/**
 * KERNCAP_TIMING's value over DEFAULT_TIMING: `spin=30,warmup=2,restore=device,l2=restored,clock=events` (any
 * subset, any order); undefined or empty: the defaults.
 * @throws KerncapError E_USAGE naming the word that is not understood
 */
export function parseTimingSetup(text: string | undefined): TimingSetup {
  const s: TimingSetup = { ...DEFAULT_TIMING };
  for (const word of (text ?? "")
    .split(",")
    .map((w) => w.trim())
    .filter(Boolean)) {
    const bad = () => new KerncapError("E_USAGE", `KERNCAP_TIMING: "${word}" is not understood`, { hint: `Give ${GRAMMAR}; or unset it.` });
    const m = /^([a-z0-9]+)=(.+)$/.exec(word);
    if (!m) throw bad();
    const [, key, value] = m as unknown as [string, string, string];
    const int = (max: number) => {
      if (!/^\d+$/.test(value) || Number(value) > max) throw bad();
      return Number(value);
    };
    if (key === "spin") s.spinUs = int(100_000);
    else if (key === "warmup") s.warmup = int(1000);
    else if (key === "restore" && (value === "device" || value === "host" || value === "none")) s.restore = value;
    else if (key === "l2" && (value === "reread" || value === "restored" || value === "evicted")) s.l2 = value;
    else if (key === "clock" && (value === "events" || value === "cupti")) s.clock = value;
    else throw bad();
  }
  return s;
}

/** The setup in KERNCAP_TIMING's words (what the timing's method names when it is not the default). */
export function describeSetup(s: TimingSetup): string {
  return `spin=${s.spinUs},warmup=${s.warmup},restore=${s.restore},l2=${s.l2},clock=${s.clock}`;
}

/**
 * KERNCAP_TIMING clock=cupti: the backend's kernel clock started (ReplayBackend.useKernelClock).
 * @returns undefined when the launches are timed as asked; else the note that says why they are
 *   timed by the backend's timers around the launch instead (also logged)
 */
export function kernelClock(be: Pick<ReplayBackend, "vendor" | "useKernelClock">, setup: TimingSetup): string | undefined {
  if (setup.clock !== "cupti") return undefined;
  const why = be.useKernelClock ? be.useKernelClock() : `the ${be.vendor} backend has no kernel clock`;
  if (why === undefined) return undefined;
  log.warn(`KERNCAP_TIMING clock=cupti: ${why}; timing with ${be.vendor === "nvidia" ? "CUDA events" : "the backend's timers"} around each launch instead`);
  return `clock=cupti not used: ${why}`;
}

/** A device range read before a warm timed launch. */
export interface DeviceRange {
  va: bigint;
  bytes: number;
}

/**
 * The ranges a "reread" warm launch reads again after L2 is written back: for every 8-byte word
 * of the parameter bytes that points into a captured region (a pointer parameter, or one inside a
 * struct passed by value, as PyTorch's TensorIterator passes its data pointers), the region from
 * that address on. Ranges that overlap are merged. Order: the regions the app changed (the
 * kernel's outputs) first, the others (its inputs) last, each group in parameter order, so that
 * where they do not all fit, L2 ends up holding the inputs, as after the kernel that produced
 * them. At most `capBytes` in all (twice the L2: more only evicts what was read first): the
 * ranges read last are kept, the first one kept cut to its start.
 * Shapes: `params` the captured parameter buffer; regions as the manifest's (va hex, size bytes).
 */
export function rewarmRanges(regions: Pick<Manifest["regions"][number], "va" | "size" | "changed">[], params: Uint8Array, capBytes: number): DeviceRange[] {
  const rs = regions.map((r) => ({ va: BigInt(r.va), end: BigInt(r.va) + BigInt(r.size), changed: r.changed }));
  const dv = new DataView(params.buffer, params.byteOffset, params.byteLength);
  const found: { va: bigint; end: bigint; changed: boolean }[] = [];
  for (let off = 0; off + 8 <= params.byteLength; off += 8) {
    const p = dv.getBigUint64(off, true);
    const r = rs.find((x) => p >= x.va && p < x.end);
    if (!r) continue;
    const same = found.find((f) => p < f.end && r.end > f.va);
    if (same) {
      if (p < same.va) same.va = p;
      if (r.end > same.end) same.end = r.end;
    } else found.push({ va: p, end: r.end, changed: r.changed });
  }
  const ordered = [...found.filter((f) => f.changed), ...found.filter((f) => !f.changed)];
  const out: DeviceRange[] = [];
  let left = capBytes;
  for (let i = ordered.length - 1; i >= 0 && left > 0; i--) {
    const bytes = Math.min(left, Number(ordered[i]!.end - ordered[i]!.va));
    out.unshift({ va: ordered[i]!.va, bytes });
    left -= bytes;
  }
  return out;
}

/** How the L2 is prepared before one timed launch, as the session resolved it (Session.timeInterleaved). */
export type L2Step =
  /** --flush-l2, or a warm "evicted" launch: a read of `flush` (a memset where the backend cannot read; --flush-l2 only). */
  | { kind: "flush"; flush: DeviceRange; memsetFill?: number }
  /** A warm "reread" launch: `flush` read, then the kernel's own ranges. */
  | { kind: "reread"; flush: DeviceRange }
  /** Nothing: L2 as the restore left it. */
  | { kind: "none" };

/** One kernel ready to be timed: its launch, the restore of what it writes, the ranges a "reread" launch reads. */
export interface TimedKernel {
  launch: () => void;
  restoreChanged: () => void;
  rewarm: DeviceRange[];
}

/**
 * One timed launch (µs) with its preparation, in this order on the device: the restore (unless
 * setup.restore is "none"), the L2 step, the backend's spin, the start event, the launch, the end
 * event (ReplayBackend.timedLaunch).
 */
export function timeOneLaunch(
  be: Pick<ReplayBackend, "timedLaunch" | "memset">,
  scanner: Pick<DeviceScanner, "evict">,
  k: TimedKernel,
  setup: Pick<TimingSetup, "restore" | "spinUs">,
  l2: L2Step,
): number {
  if (setup.restore !== "none") k.restoreChanged();
  if (l2.kind !== "none") {
    // a read leaves L2 holding clean lines: the restore's dirty ones are written back before the launch, not during it
    const read = scanner.evict?.(l2.flush.va, l2.flush.bytes) ?? false;
    if (!read && l2.kind === "flush" && l2.memsetFill !== undefined) be.memset(l2.flush.va, l2.memsetFill, l2.flush.bytes);
    if (read && l2.kind === "reread") for (const r of k.rewarm) scanner.evict?.(r.va, r.bytes);
  }
  return be.timedLaunch(k.launch, setup.spinUs);
}
