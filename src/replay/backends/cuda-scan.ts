/**
 * The snapshot scan kernel (c/cuda/kc_scan.cu, shipped as c/cuda/kc_scan.fatbin and embedded in the
 * executable) run by the replay engine: kc64 and a non-zero flag for every chunk of a device
 * range, so restored memory is checked and replayed results are compared on the GPU without
 * copying unchanged memory back.
 */
import scanFatbin from "../../../c/cuda/kc_scan.fatbin" with { type: "file" };
import { KerncapError } from "../../errors.ts";
import type { Cuda } from "../../native/libcuda.ts";
import type { ChunkScan } from "./interface.ts";

/** Bytes per block of an evicting read (DeviceScanner.evict): 256 MiB in 256 blocks. */
const EVICT_CHUNK = 1 << 20;

export class Scanner {
  private fn: bigint;
  private spinFn: bigint | undefined;
  private dHash = 0n;
  private dNz = 0n;
  private cap = 0;

  private constructor(
    private readonly cu: Cuda,
    private readonly module: bigint,
    fn: bigint,
  ) {
    this.fn = fn;
  }

  /** Free the scan buffers and unload the module; never throws (cleanup paths, after a kernel fault too). */
  unload(): void {
    for (const p of this.cap ? [this.dHash, this.dNz] : []) {
      try {
        this.cu.memFree(p);
      } catch {
        /* the context is gone with a fault: its reset frees them */
      }
    }
    this.cap = 0;
    this.cu.moduleUnload(this.module);
  }

  /** Load the scan module into the current context. @throws KerncapError E_CUDA */
  static async load(cu: Cuda): Promise<Scanner> {
    const image = new Uint8Array(await Bun.file(scanFatbin).arrayBuffer());
    const r = cu.moduleLoad(image);
    if (r.module === undefined)
      throw new KerncapError("E_CUDA", `cannot load kerncap's scan kernel: ${r.text}`, {
        hint: "Pass --no-verify to replay without the GPU checks, and report this with `nvidia-smi` output.",
      });
    const fn = cu.moduleGetFunction(r.module, "kc_scan");
    if (fn === undefined) throw new KerncapError("E_CUDA", "kerncap's scan module has no kc_scan kernel", { hint: "Rebuild kerncap (bash scripts/build.sh)." });
    const sc = new Scanner(cu, r.module, fn);
    sc.spinFn = cu.moduleGetFunction(r.module, "kc_spin");
    return sc;
  }

  /**
   * Queue kc_spin (one thread waiting `us` µs of GPU time, no memory touched) on the null stream:
   * the stream stays busy while the next launch is submitted, so an event pair around that launch
   * times the kernel alone. No-op when the module has no kc_spin.
   */
  spin(us: number): void {
    if (this.spinFn === undefined) return;
    const p = new BigUint64Array([BigInt(Math.round(us * 1000))]);
    this.cu.launch(this.spinFn, [1, 1, 1], [1, 1, 1], 0, new Uint8Array(p.buffer), []);
  }

  /**
   * Read [va, va + size) with kc_scan, queued on the null stream, nothing read back (DeviceScanner.evict):
   * every L2 line the range maps to ends up clean. size/EVICT_CHUNK blocks; the hashes are discarded.
   */
  evict(va: bigint, size: number): boolean {
    this.launchScan(va, size, EVICT_CHUNK);
    return true;
  }

  /** Queue kc_scan over [va, va + size) into the device hash buffers (grown as needed). @returns the chunk count */
  private launchScan(va: bigint, size: number, chunkBytes: number): number {
    const n = Math.ceil(size / chunkBytes);
    if (n > this.cap) {
      if (this.cap) {
        this.cu.memFree(this.dHash);
        this.cu.memFree(this.dNz);
      }
      this.cap = Math.max(n, 1024);
      this.dHash = this.cu.memAlloc(this.cap * 8);
      this.dNz = this.cu.memAlloc(this.cap * 4);
    }
    const p = new Uint8Array(40);
    const dv = new DataView(p.buffer);
    dv.setBigUint64(0, va, true);
    dv.setBigUint64(8, BigInt(size), true);
    dv.setUint32(16, chunkBytes, true);
    dv.setBigUint64(24, this.dHash, true);
    dv.setBigUint64(32, this.dNz, true);
    this.cu.launch(this.fn, [n, 1, 1], [256, 1, 1], 0, p, []);
    return n;
  }

  /**
   * Scan [va, va + size) in chunks of `chunkBytes` (synchronous).
   * Shapes: arrays of ceil(size / chunkBytes) entries.
   */
  scan(va: bigint, size: number, chunkBytes: number): ChunkScan {
    const n = Math.ceil(size / chunkBytes);
    if (n === 0) return { hash: [], nonzero: new Uint32Array(0) };
    this.launchScan(va, size, chunkBytes);
    const h = new BigUint64Array(n);
    const z = new Uint32Array(n);
    this.cu.dtoh(new Uint8Array(h.buffer), this.dHash);
    this.cu.dtoh(new Uint8Array(z.buffer), this.dNz);
    const hash = new Array<string>(n);
    for (let i = 0; i < n; i++) hash[i] = h[i]!.toString(16).padStart(16, "0");
    return { hash, nonzero: z };
  }
}
