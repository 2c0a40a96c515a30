/**
 * The HSA replay backend (./interface.ts) over the libhsa-runtime64 wrapper (src/native/libhsa.ts),
 * for hip captures: the captured spans reserved at their VAs through the ROCm 6.0+ virtual memory
 * API and backed by the GPU agent's coarse-grained pool, host↔device copies through locked host
 * views, the code object loaded into a frozen executable (unbundled for the agent's arch when an
 * offload bundle), one AQL kernel dispatch packet per launch with the captured grid (work-items),
 * workgroup and segment sizes, waited for on its completion signal.
 *
 * Differences from CUDA the engine sees: the kc64 scans read memory back to the host (there is no
 * scan kernel for AMDGPU: scansOn "host"); every call is synchronous; a launch is timed by the wall
 * clock from the doorbell to the completion signal; the VA reservations are freed at close.
 *
 * Run on AMD hardware: NEVER (tested against the fake runtime test/apps/hip/fake_libhsa.c).
 */
import { amdgpuCodeObjects, findKernel, isOffloadBundle, parseAmdgpuCodeObject } from "../../codeobj/amdgpu.ts";
import { KerncapError } from "../../errors.ts";
import { kc64 } from "../../format/kc64.ts";
import type { Manifest } from "../../format/manifest.ts";
import { FLAG_COARSE_GRAINED, FLAG_KERNARG_INIT, initHsa, type Hsa, type HsaQueue } from "../../native/libhsa.ts";
import type { ChunkScan, DeviceScanner, ReplayBackend, ReplayKernel, ReplayModule } from "./interface.ts";

/** Host bytes per copy of a memset or a scan (bounded host memory for ranges of any size). */
const PIECE = 64 << 20;

/** kc64 per chunk of a device range, on the host: the range read back piece by piece. */
class HostScanner implements DeviceScanner {
  constructor(private readonly be: HsaBackend) {}

  scan(va: bigint, size: number, chunkBytes: number): ChunkScan {
    const n = Math.ceil(size / chunkBytes);
    const hash = new Array<string>(n);
    const nonzero = new Uint32Array(n);
    const per = Math.max(1, Math.floor(PIECE / chunkBytes)) * chunkBytes;
    const buf = new Uint8Array(Math.min(per, size));
    for (let done = 0; done < size; done += per) {
      const len = Math.min(per, size - done);
      const got = buf.subarray(0, len);
      this.be.dtoh(got, va + BigInt(done));
      for (let off = 0; off < len; off += chunkBytes) {
        const c = (done + off) / chunkBytes;
        const k = kc64(got.subarray(off, Math.min(len, off + chunkBytes)));
        hash[c] = k.hex;
        nonzero[c] = k.nonzero ? 1 : 0;
      }
    }
    return { hash, nonzero };
  }

  spin(): void {
    /* every dispatch is waited for: nothing to hide */
  }
}

class HsaBackend implements ReplayBackend {
  readonly vendor = "amd" as const;
  readonly scansOn = "host" as const;
  /** Undo steps of the VA reservations, kernarg buffers and queue (run in reverse at close). */
  private readonly cleanup: (() => void)[] = [];
  private q: HsaQueue | undefined;
  private readonly allocs = new Set<bigint>();

  constructor(
    readonly h: Hsa,
    readonly agent: { handle: bigint; name: string; product: string },
    private readonly devPool: { handle: bigint; granule: number },
    readonly kernargPool: bigint,
  ) {}

  deviceName = () => this.agent.product || this.agent.name;
  arch = () => this.agent.name;
  reserveAlignment = () => Math.max(this.devPool.granule, 4096);
  mapAt = (va: bigint, size: number) => this.h.mapAt(va, size, this.devPool.handle, this.agent.handle, this.cleanup);

  memAlloc(size: number): bigint {
    const p = this.h.poolAllocate(this.devPool.handle, size, "device");
    this.allocs.add(p);
    return p;
  }

  memFree(p: bigint): void {
    this.allocs.delete(p);
    this.h.poolFree(p);
  }

  hostAlloc = (size: number) => new Uint8Array(size);
  hostFree = () => {}; // heap memory: collected
  hostRegister = () => false; // the engine stages through hostAlloc; each copy locks its bytes
  hostUnregister = () => {};
  htod = (dst: bigint, src: Uint8Array) => this.h.copyHost(this.agent.handle, src, dst, true);
  htodAsync = (dst: bigint, src: Uint8Array) => this.htod(dst, src);
  dtoh = (dst: Uint8Array, src: bigint) => this.h.copyHost(this.agent.handle, dst, src, false);
  dtod = (dst: bigint, src: bigint, size: number) => this.h.copyDevice(dst, src, size);
  sync = () => {};

  /** Host bytes of `value` copied in pieces (hsa_amd_memory_fill works in 4-byte words only). */
  memset(dst: bigint, value: number, size: number): void {
    const fill = new Uint8Array(Math.min(PIECE, size)).fill(value & 0xff);
    for (let done = 0; done < size; done += fill.byteLength) this.htod(dst + BigInt(done), fill.subarray(0, Math.min(fill.byteLength, size - done)));
  }

  async scanner(): Promise<DeviceScanner> {
    return new HostScanner(this);
  }

  loadModule(image0: Uint8Array, file: string, m: Manifest): ReplayModule {
    let image = image0;
    if (isOffloadBundle(image)) {
      const co = amdgpuCodeObjects(image, this.agent.name)[0];
      if (!co)
        throw new KerncapError("E_ARCH", `${file} holds no code object for ${this.agent.name}`, {
          hint: `Captured on ${m.device.name} (${m.device.arch}); replay on that architecture or rebuild for ${this.agent.name}.`,
        });
      image = new Uint8Array(co.bytes);
    }
    const co = parseAmdgpuCodeObject(image);
    const { exec, destroy } = this.h.loadExecutable(this.agent.handle, image);
    const owned: (() => void)[] = [destroy];
    return {
      kernel: (name) => {
        let meta: ReturnType<typeof findKernel>;
        try {
          meta = findKernel(co, name);
        } catch {
          return undefined;
        }
        const kobj = this.h.kernelObject(exec, this.agent.handle, meta.symbol || `${meta.name}.kd`);
        return kobj === undefined ? undefined : new HsaKernel(this, meta, kobj, owned);
      },
      global: (name) => this.h.variable(exec, this.agent.handle, name),
      unload: () => {
        for (const f of owned.reverse()) f();
        owned.length = 0;
      },
    };
  }

  queue(): HsaQueue {
    return (this.q ??= this.h.queue(this.agent.handle));
  }

  timedLaunch(launch: () => void): number {
    const t0 = performance.now();
    launch();
    return (performance.now() - t0) * 1000;
  }

  timingMethod(o: { spinUs: number; warmup: number; l2: string }): string {
    return `wall clock from the AQL packet's doorbell to its completion signal (dispatch path included), ${o.warmup} warm-up dispatches, ${o.l2}`;
  }

  launchFault(): null {
    return null; // the HSA capture library records no faulting dispatch (raw.json has no fault)
  }

  isContextLost(): boolean {
    return false; // a failed dispatch is reported through its completion signal; the queue stays usable
  }

  reset(): void {} // close() already freed the pools and VA reservations

  close(): void {
    const steps = [...(this.q ? [() => this.q!.destroy()] : []), ...[...this.allocs].map((p) => () => this.h.poolFree(p)), ...this.cleanup.splice(0).reverse()];
    this.q = undefined;
    this.allocs.clear();
    for (const f of steps) {
      try {
        f();
      } catch {
        /* best effort teardown */
      }
    }
  }
}

class HsaKernel implements ReplayKernel {
  constructor(
    private readonly be: HsaBackend,
    private readonly meta: ReturnType<typeof findKernel>,
    private readonly kobj: bigint,
    private readonly owned: (() => void)[],
  ) {}

  applyAttributes(): void {
    /* CUDA function attributes: none on HSA (the code object's metadata fixes them) */
  }

  /** The kernarg segment (the captured bytes, padded to the code object's size) in the CPU agent's kernarg pool. */
  launcher(m: Manifest, params: Uint8Array): () => void {
    const be = this.be;
    const kaSize = Math.max(params.length, this.meta.kernargSegmentSize, 16);
    const ka = be.h.poolAllocate(be.kernargPool, kaSize, "kernarg");
    this.owned.push(() => be.h.poolFree(ka));
    be.h.allowAccess(be.agent.handle, ka, "kernarg");
    be.h.hostView(ka, kaSize).set(params);
    const info = (m.hsa ?? {}) as Record<string, unknown>;
    const packet = {
      grid: m.launch.grid,
      block: m.launch.block,
      groupSegmentSize: Number(info.group_segment_size ?? m.launch.sharedMemBytes),
      privateSegmentSize: Number(info.private_segment_size ?? this.meta.privateSegmentFixedSize),
      kernelObject: this.kobj,
      kernargAddress: ka,
    };
    const q = be.queue();
    return () => q.dispatch(packet);
  }
}

/**
 * The HSA backend on GPU agent `ordinal` (default: the capture's, the ordinal among GPU agents the
 * capture library recorded): its coarse-grained global pool for the regions, a CPU agent's kernarg pool.
 * @throws KerncapError E_HSA_NOT_FOUND, E_NO_GPU, E_ARCH (the agent's gfx arch differs from the
 *   capture's), E_HSA (no suitable pool)
 */
export function hsaBackend(m: Manifest, ordinal = m.device.ordinal): ReplayBackend {
  const { hsa: h, agents } = initHsa();
  const agent = agents[ordinal];
  if (!agent) throw new KerncapError("E_NO_GPU", `HSA GPU agent ${ordinal} not found (${agents.length} present)`);
  if (agent.name !== m.device.arch) {
    throw new KerncapError("E_ARCH", `capture is for ${m.device.arch}, GPU agent ${ordinal} is ${agent.name}`, {
      hint: "Replay on the same GPU architecture, or rebuild the code object for this one.",
    });
  }
  const devPool = h.pools(agent.handle).find((p) => p.flags & FLAG_COARSE_GRAINED);
  if (!devPool) throw new KerncapError("E_HSA", `GPU agent ${agent.name} has no coarse-grained global memory pool`);
  let kernargPool: bigint | undefined;
  for (const a of h.agents()) if (a.type === 0) kernargPool ??= h.pools(a.handle).find((p) => p.flags & FLAG_KERNARG_INIT)?.handle;
  if (kernargPool === undefined) throw new KerncapError("E_HSA", "no kernarg memory pool found on any CPU agent");
  return new HsaBackend(h, agent, devPool, kernargPool);
}
