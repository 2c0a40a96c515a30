/**
 * The capture's memory on the device: every span reserved at its captured VA, the before state
 * restored from memory/before.bin (Restorer) and checked against the manifest's kc64
 * (checkRestored), the module's globals matched to the captured ones (moduleGlobals), and, between
 * runs, the chunks a run wrote put back (ChangedChunks: the device backup of the app's changed
 * chunks; putBackWritten: a scan for chunks written anywhere else). Device work goes through the
 * backend (./backends/interface.ts).
 */
import { listForTerminal } from "../escape.ts";
import { faultVaTaken } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { chunkExpectation, chunkLen, runs, type Range } from "../format/chunks.ts";
import { openImageInCapture, type FileImage } from "../format/file-image.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import type { DeviceMemory, DeviceScanner, ReplayBackend, ReplayModule } from "./backends/interface.ts";
import { spanPadding, vaSpans } from "./compare.ts";
import type { ReplayResult } from "./result.ts";

/** Host→device restore of stored chunks: pinned file mappings (DeviceMemory.hostRegister) where the runtime takes them and the file can be mapped (FileImage.mapped: a file the user cannot write cannot), else a pinned staging buffer. */
export class Restorer {
  registered = 0;
  staged = 0;
  /** memory/before.bin as restored (its descriptor: the session's images must be this file, FileImage.sameFile). */
  readonly img: FileImage;
  private pinned: Uint8Array | undefined;
  private stage: Uint8Array | undefined;
  private canRegister = true;

  /**
   * @param img memory/before.bin, opened MAP_SHARED (the only kind of window the CUDA backend's
   *   hostRegister, cuMemHostRegister, pins: FileImage's doc has the measurement); restoreBefore
   *   opens it once by the capture path rule (openImageInCapture), and dispose() closes it.
   */
  constructor(
    private readonly mem: DeviceMemory,
    img: FileImage,
  ) {
    this.img = img;
    const path = img.path;
    // a file the user cannot write (read-only capture folder): Bun.mmap needs write access, so
    // FileImage reads with pread and every copy goes through the pinned staging buffer
    this.img.onReadFallback = (e) =>
      log.info(`${path} cannot be mapped (${e.message}; a read-only capture folder?): restoring through a pinned staging buffer instead of pinning the file`);
    // Copies from a pinned window are asynchronous: the next window is registered while the DMA
    // of the previous one runs (registering costs about as much as copying: 0.14 s vs 0.12 s for
    // 4 GiB on the H200 node), and the previous one is unpinned once its copies are done.
    this.img.onWindow = (win) => {
      const old = this.pinned;
      this.pinned = undefined;
      if (this.canRegister && win.byteLength >= 1 << 20) {
        if (this.mem.hostRegister(win, true)) this.pinned = win;
        else this.canRegister = false;
      }
      if (old) {
        this.mem.sync();
        this.mem.hostUnregister(old);
      }
    };
  }

  /** Wait for the asynchronous copies and unpin the last window. */
  finish(): void {
    this.mem.sync();
    if (this.pinned) this.mem.hostUnregister(this.pinned);
    this.pinned = undefined;
  }

  /** Unpin what is pinned and free the staging buffer (64 MiB of page-locked memory); never throws. */
  dispose(): void {
    try {
      this.finish();
    } catch {
      /* after a kernel fault the sync fails: the context's reset unpins */
    }
    if (this.stage) this.mem.hostFree(this.stage);
    this.stage = undefined;
    this.img.close();
  }

  /** Zero [base, base + r.size), then copy r's stored before-chunks to base + their offsets (asynchronous until finish()). */
  restore(base: bigint, r: Range, chunkBytes: number): void {
    this.mem.memset(base, 0, r.size);
    for (const run of runs(r, r.before, chunkBytes)) this.copy(base + BigInt(run.vaOffset), run.fileOffset, run.bytes);
  }

  /**
   * Put chunks `chunks` (ascending indices) of a range of `size` bytes at `base` back to the
   * before state: zero each, then copy the stored ones (beforeOffset[c] ≥ 0: file offset in
   * before.bin, chunkExpectation(...).beforeOffset); neighbours are merged into one memset/copy.
   * @returns bytes put back (asynchronous until finish()).
   */
  restoreChunks(base: bigint, size: number, chunkBytes: number, chunks: number[], beforeOffset: number[]): number {
    let bytes = 0;
    for (let i = 0; i < chunks.length; ) {
      let j = i + 1;
      while (j < chunks.length && chunks[j] === chunks[j - 1]! + 1) j++;
      const c0 = chunks[i]!;
      const end = Math.min(size, chunks[j - 1]! * chunkBytes + chunkBytes);
      this.mem.memset(base + BigInt(c0 * chunkBytes), 0, end - c0 * chunkBytes);
      bytes += end - c0 * chunkBytes;
      // stored chunks whose file bytes follow each other: one copy
      for (let k = i; k < j; ) {
        const c = chunks[k]!;
        if (beforeOffset[c]! < 0) {
          k++;
          continue;
        }
        let l = k + 1;
        while (l < j && beforeOffset[chunks[l]!] === beforeOffset[chunks[l - 1]!]! + chunkBytes) l++;
        const last = chunks[l - 1]!;
        this.copy(base + BigInt(c * chunkBytes), beforeOffset[c]!, Math.min(size, last * chunkBytes + chunkBytes) - c * chunkBytes);
        k = l;
      }
      i = j;
    }
    return bytes;
  }

  /** Copy `bytes` of before.bin at fileOffset to dst: pinned window asynchronously, else through the staging buffer. */
  private copy(dst0: bigint, fileOffset: number, bytes: number): void {
    for (let done = 0; done < bytes; ) {
      const n = Math.min(bytes - done, 256 << 20);
      const src = this.img.view(fileOffset + done, n);
      const dst = dst0 + BigInt(done);
      if (this.pinned && src.buffer === this.pinned.buffer) {
        this.mem.htodAsync(dst, src);
        this.registered++;
      } else {
        this.stage ??= this.mem.hostAlloc(64 << 20);
        for (let k = 0; k < n; k += this.stage.byteLength) {
          const m = Math.min(this.stage.byteLength, n - k);
          this.stage.set(src.subarray(k, k + m));
          this.mem.htod(dst + BigInt(k), this.stage.subarray(0, m));
        }
        this.staged++;
      }
      done += n;
    }
  }
}

/**
 * Check restored memory on the GPU: every stored chunk's kc64 equals the manifest's, every other
 * chunk is zero. @throws KerncapError E_CHECKSUM naming the range and the chunk.
 */
export function checkRestored(scanner: DeviceScanner, base: bigint, r: Range, C: number, file: string, what: string): void {
  const s = scanner.scan(base, r.size, C);
  const e = chunkExpectation(r, C);
  for (let c = 0; c < s.hash.length; c++) {
    const want = e.beforeHash[c];
    const ok = want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want;
    if (!ok) {
      throw new KerncapError(
        "E_CHECKSUM",
        `checksum mismatch in ${file}: ${what}, chunk ${c} (bytes ${c * C}..${c * C + chunkLen(r.size, c, C)}) restored ${want === undefined ? "non-zero where the capture holds zeros" : `kc64 ${s.hash[c]}, the manifest says ${want}`}`,
        {
          hint: "The memory image was altered after capture; capture again (or, for a capture of your own, pass --no-verify to replay it anyway).",
        },
      );
    }
  }
}

/**
 * 1. Reserve every span of the manifest's regions at its exact VA (aligned as the backend needs),
 * before anything large is mapped on the host side.
 * @throws KerncapError E_VA_TAKEN (the backend's mapAt)
 */
export function reserveSpans(be: ReplayBackend, m: Manifest): ReplayResult["reserve"] {
  const t0 = performance.now();
  const spans = vaSpans(
    m.regions.map((r) => ({ va: BigInt(r.va), size: r.size })),
    be.reserveAlignment(),
  );
  // Fault injection for the test suite: occupy the first span first, as another mapping would.
  if (faultVaTaken() && spans[0]) be.mapAt(spans[0].va, spans[0].size);
  for (const s of spans) be.mapAt(s.va, s.size);
  const reserve = { spans: spans.length, bytes: spans.reduce((a, s) => a + s.size, 0), seconds: (performance.now() - t0) / 1000 };
  log.debug(`reserved ${spans.length} spans, ${reserve.bytes} bytes, at the captured VAs`);
  return reserve;
}

/**
 * 2. Restore the before state of every region: zero every range, then copy the stored chunks of
 * memory/before.bin (complete on return).
 * @returns the Restorer (kept for the resets between runs) and the restore's figures
 */
export function restoreBefore(be: ReplayBackend, dir: string, m: Manifest): { restorer: Restorer; restore: ReplayResult["restore"] } {
  const t1 = performance.now();
  const C = m.memory.chunkBytes;
  // one descriptor, opened by the capture path rule: a FIFO or link renamed over before.bin after
  // the check is never opened, and a file another user may write is read, never mapped (SIGBUS)
  const restorer = new Restorer(be, openImageInCapture(dir, m.memory.before, true));
  for (const r of m.regions) restorer.restore(BigInt(r.va), r, C);
  restorer.finish();
  const restoreSeconds = (performance.now() - t1) / 1000;
  const restore = {
    bytes: m.memory.beforeBytes,
    storedBytes: m.memory.storedBeforeBytes,
    seconds: restoreSeconds,
    gbPerS: m.memory.storedBeforeBytes / 1e9 / Math.max(restoreSeconds, 1e-9),
    hostRegistered: restorer.registered > 0,
  };
  log.debug(`restored ${m.regions.length} regions (${restorer.registered} pieces from pinned file mappings, ${restorer.staged} staged)`);
  return { restorer, restore };
}

/** A captured module global found in the loaded module: the capture's entry and its address there (dva). */
export type LoadedGlobal = Manifest["globals"][number] & { dva: bigint };

/**
 * The captured module globals (__device__/__constant__ variables) in a loaded module: the module
 * has its own copies, at addresses of the runtime's choosing, found by name. In a `rebuilt`
 * module, nvcc's string literals ($str…) and variables of the other TUs are left out.
 * @throws KerncapError E_GLOBAL when a global is missing from the captured module, or has another size
 */
export function moduleGlobals(mod: ReplayModule, m: Manifest, modFile: string, rebuilt: boolean): LoadedGlobal[] {
  const absent: string[] = [];
  const globals = m.globals.flatMap((g) => {
    // $str, $str$1…: nvcc's names for string literals (printf formats), constants of the image
    // itself and numbered per TU: a rebuilt slice numbers them anew, so they are not restored
    if (rebuilt && g.name.startsWith("$str")) return [];
    const d = mod.global(g.name);
    if (!d && rebuilt) {
      // a rebuilt slice holds only the captured kernel's TU (or instantiation): the other TUs'
      // variables are not in it, and a variable the kernel uses is (it would not link otherwise)
      absent.push(g.name);
      return [];
    }
    if (!d) {
      throw new KerncapError("E_GLOBAL", `the module ${modFile} has no global ${g.name} (${g.size} bytes), which the captured kernel's module had`, {
        hint: "A rebuilt module must keep the module-scope variables the capture restores (same names); rename it back or capture again.",
      });
    }
    if (d.size !== g.size) {
      throw new KerncapError("E_GLOBAL", `global ${g.name} is ${d.size} bytes in ${modFile}, ${g.size} bytes in the capture`, {
        hint: "Keep the variable's type and size, or capture again after the change.",
      });
    }
    return [{ ...g, dva: d.va }];
  });
  if (absent.length) log.debug(`${absent.length} captured module globals are not in the rebuilt module (not restored): ${listForTerminal(absent, 8)}`);
  return globals;
}

/**
 * The app's changed chunks of every region (the manifest's after extents) and their before state
 * kept in one device buffer (step 4), so that the timed launches restore them device to device.
 * Without device memory for it, whole changed regions come back from the host instead.
 */
export class ChangedChunks {
  private readonly changedRuns: { va: bigint; bytes: number }[];
  private backup: bigint | undefined;
  private backupMade = false;

  constructor(
    private readonly be: ReplayBackend,
    private readonly m: Manifest,
    private readonly restorer: Restorer,
  ) {
    const C = m.memory.chunkBytes;
    this.changedRuns = m.regions.flatMap((r) => runs(r, r.after, C).map((x) => ({ va: BigInt(r.va) + BigInt(x.vaOffset), bytes: x.bytes })));
  }

  /** Copy the changed chunks (in their before state: call before any launch) to the device backup, once per session. */
  keep(): void {
    if (this.backupMade) return;
    this.backupMade = true;
    const { be } = this;
    const changedBytes = this.changedRuns.reduce((a, x) => a + x.bytes, 0);
    try {
      this.backup = changedBytes ? be.memAlloc(changedBytes) : undefined;
    } catch {
      log.warn("not enough device memory for a device-side backup; restoring from the host between runs");
    }
    let off = 0n;
    for (const x of this.changedRuns) {
      if (this.backup !== undefined) be.dtod(this.backup + off, x.va, x.bytes);
      off += BigInt(x.bytes);
    }
  }

  /**
   * The regions' app-changed chunks back to the before state: from the device backup, else (or
   * with `fromHost`: KERNCAP_TIMING restore=host) whole changed regions from the host.
   */
  restore(fromHost = false): void {
    const { be, restorer } = this;
    if (this.backup === undefined || fromHost) {
      for (const r of this.m.regions) if (r.changed) restorer.restore(BigInt(r.va), r, this.m.memory.chunkBytes);
      restorer.finish();
      return;
    }
    let off = 0n;
    for (const x of this.changedRuns) {
      be.dtod(x.va, this.backup + off, x.bytes);
      off += BigInt(x.bytes);
    }
  }

  /** Free the device backup; never throws (after a kernel fault the context refuses every call, and the error to report is the fault). */
  free(): void {
    try {
      if (this.backup !== undefined) this.be.memFree(this.backup);
    } catch {
      /* the context is gone with the fault */
    }
    this.backup = undefined;
  }
}

/**
 * Put back every chunk of the manifest's regions that differs from the before state: a kc64 scan
 * of each region against the manifest's before hashes (expect[i].beforeHash, chunkExpectation),
 * the differing chunks zeroed and copied from memory/before.bin (a wrong kernel may write
 * anywhere), then checked again with `verify`.
 * @returns chunks and bytes put back
 * @throws KerncapError E_CHECKSUM when verify is on and a chunk put back does not hash as the manifest says
 */
export function putBackWritten(
  scanner: DeviceScanner,
  restorer: Restorer,
  m: Manifest,
  expect: ReturnType<typeof chunkExpectation>[],
  verify: boolean,
): { chunks: number; bytes: number } {
  const C = m.memory.chunkBytes;
  let chunks = 0;
  let bytes = 0;
  const touched: number[] = [];
  for (const [i, r] of m.regions.entries()) {
    const s = scanner.scan(BigInt(r.va), r.size, C);
    const e = expect[i]!;
    const bad: number[] = [];
    for (let c = 0; c < s.hash.length; c++) {
      const want = e.beforeHash[c];
      if (!(want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want)) bad.push(c);
    }
    if (!bad.length) continue;
    bytes += restorer.restoreChunks(BigInt(r.va), r.size, C, bad, e.beforeOffset);
    chunks += bad.length;
    touched.push(i);
  }
  restorer.finish();
  if (verify) for (const i of touched) checkRestored(scanner, BigInt(m.regions[i]!.va), m.regions[i]!, C, m.memory.before, `region ${m.regions[i]!.va}`);
  return { chunks, bytes };
}

/**
 * The memory the reserved spans map around the regions (./compare.ts spanPadding), set to zero
 * (the restore zeroes and fills the regions only): no allocation of the app's, where a rebuilt
 * kernel that writes is found out (./checked-runs.ts paddingWritten).
 */
export function zeroedPadding(be: Pick<ReplayBackend, "memset" | "reserveAlignment">, m: Manifest): { va: bigint; size: number }[] {
  const regions = m.regions.map((r) => ({ va: BigInt(r.va), size: r.size }));
  const padding = spanPadding(vaSpans(regions, be.reserveAlignment()), regions);
  for (const p of padding) be.memset(p.va, 0, p.size);
  return padding;
}
