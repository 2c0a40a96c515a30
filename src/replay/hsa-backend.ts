/**
 * HSA replay backend (AMD): bun:ffi bindings to libhsa-runtime64 and `replayHsa`, which restores a
 * hip capture at its captured virtual addresses, dispatches the kernel once per iteration through
 * an AQL kernel dispatch packet, and compares every region with the captured after state.
 *
 * This module alone owns the dlopen of libhsa-runtime64 (lazily, on first use). Every
 * hsa_status_t is checked; a failure throws KerncapError with the runtime's own string
 * (hsa_status_string). Raw pointers stay inside this module.
 *
 * VA-faithful restore needs the virtual memory API (hsa_amd_vmem_address_reserve & co.), which
 * ROCm 6.0 added; ROCm 5.x runtimes (Debian 12 ships 5.2) are refused with a clear error.
 *
 * Run on AMD hardware: NEVER (written and tested without an AMD GPU; only the library lookup,
 * the "no HSA GPU agent found" path and the pure helpers ran).
 */
import { FileImage, pieces } from "../format/file-image.ts";
import { chunkBytesOf, chunkExpectation } from "../format/chunks.ts";
import { CString, dlopen, FFIType, JSCallback, ptr, read, toArrayBuffer, type Pointer } from "bun:ffi";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { amdgpuCodeObjects, findKernel, isOffloadBundle, parseAmdgpuCodeObject } from "../codeobj/amdgpu.ts";
import { hsaOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { bareLibraryNames } from "./cuda.ts";
import type { Manifest, Region } from "../format/manifest.ts";

// ---- constants (hsa.h / hsa_ext_amd.h, ROCm 5.2 and 6.x agree) ----
const HSA_STATUS_SUCCESS = 0;
const HSA_STATUS_INFO_BREAK = 1;
const HSA_AGENT_INFO_NAME = 0;
const HSA_AGENT_INFO_DEVICE = 17;
const HSA_DEVICE_TYPE_GPU = 1;
const HSA_AMD_AGENT_INFO_PRODUCT_NAME = 0xa009;
const HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT = 22;
const HSA_AMD_MEMORY_POOL_INFO_SEGMENT = 0;
const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS = 1;
const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE = 6;
const HSA_AMD_SEGMENT_GLOBAL = 0;
const FLAG_KERNARG_INIT = 1;
const FLAG_COARSE_GRAINED = 4;
const HSA_ACCESS_PERMISSION_RW = 3;
const HSA_SIGNAL_CONDITION_LT = 2;
const HSA_WAIT_STATE_BLOCKED = 0;
const HSA_QUEUE_TYPE_SINGLE = 0;
const HSA_PACKET_TYPE_KERNEL_DISPATCH = 2;
const HSA_FENCE_SCOPE_SYSTEM = 2;
const U32_MAX = 0xffffffff;

/** Where libhsa-runtime64 is looked for, in order (KERNCAP_HSA_PATH first when set). */
export function hsaLibraryCandidates(env: Record<string, string | undefined> = process.env): string[] {
  const c: string[] = [];
  const own = hsaOverride(env);
  if (own) c.push(own);
  for (const root of [env.ROCM_PATH, "/opt/rocm"].filter(Boolean) as string[]) c.push(join(root, "lib", "libhsa-runtime64.so.1"));
  c.push("/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1", "/usr/lib64/libhsa-runtime64.so.1", ...bareLibraryNames(["libhsa-runtime64.so.1"]));
  return c;
}

const SYMBOLS = {
  hsa_init: { args: [], returns: FFIType.u32 },
  hsa_shut_down: { args: [], returns: FFIType.u32 },
  hsa_status_string: { args: [FFIType.u32, FFIType.ptr], returns: FFIType.u32 },
  hsa_system_get_info: { args: [FFIType.u32, FFIType.ptr], returns: FFIType.u32 },
  hsa_iterate_agents: { args: [FFIType.function, FFIType.ptr], returns: FFIType.u32 },
  hsa_agent_get_info: { args: [FFIType.u64, FFIType.u32, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_agent_iterate_memory_pools: { args: [FFIType.u64, FFIType.function, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_memory_pool_get_info: { args: [FFIType.u64, FFIType.u32, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_memory_pool_allocate: { args: [FFIType.u64, FFIType.u64, FFIType.u32, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_memory_pool_free: { args: [FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_agents_allow_access: { args: [FFIType.u32, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_memory_lock: { args: [FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.i32, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_memory_unlock: { args: [FFIType.ptr], returns: FFIType.u32 },
  hsa_memory_copy: { args: [FFIType.u64, FFIType.u64, FFIType.u64], returns: FFIType.u32 },
  hsa_code_object_reader_create_from_memory: { args: [FFIType.ptr, FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
  hsa_code_object_reader_destroy: { args: [FFIType.u64], returns: FFIType.u32 },
  hsa_executable_create_alt: { args: [FFIType.u32, FFIType.u32, FFIType.ptr, FFIType.ptr], returns: FFIType.u32 },
  hsa_executable_load_agent_code_object: { args: [FFIType.u64, FFIType.u64, FFIType.u64, FFIType.ptr, FFIType.ptr], returns: FFIType.u32 },
  hsa_executable_freeze: { args: [FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
  hsa_executable_destroy: { args: [FFIType.u64], returns: FFIType.u32 },
  hsa_executable_get_symbol_by_name: { args: [FFIType.u64, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.u32 },
  hsa_executable_symbol_get_info: { args: [FFIType.u64, FFIType.u32, FFIType.ptr], returns: FFIType.u32 },
  hsa_queue_create: {
    args: [FFIType.u64, FFIType.u32, FFIType.u32, FFIType.ptr, FFIType.ptr, FFIType.u32, FFIType.u32, FFIType.ptr],
    returns: FFIType.u32,
  },
  hsa_queue_destroy: { args: [FFIType.u64], returns: FFIType.u32 },
  hsa_queue_add_write_index_relaxed: { args: [FFIType.u64, FFIType.u64], returns: FFIType.u64 },
  hsa_signal_create: { args: [FFIType.i64, FFIType.u32, FFIType.ptr, FFIType.ptr], returns: FFIType.u32 },
  hsa_signal_destroy: { args: [FFIType.u64], returns: FFIType.u32 },
  hsa_signal_store_relaxed: { args: [FFIType.u64, FFIType.i64], returns: FFIType.void },
  hsa_signal_store_screlease: { args: [FFIType.u64, FFIType.i64], returns: FFIType.void },
  hsa_signal_wait_scacquire: { args: [FFIType.u64, FFIType.u32, FFIType.i64, FFIType.u64, FFIType.u32], returns: FFIType.i64 },
} as const;

/** ROCm 6.0+ virtual memory API; absent from ROCm 5.x. */
const VMEM_SYMBOLS = {
  hsa_amd_vmem_address_reserve: { args: [FFIType.ptr, FFIType.u64, FFIType.u64, FFIType.u64], returns: FFIType.u32 },
  hsa_amd_vmem_address_free: { args: [FFIType.u64, FFIType.u64], returns: FFIType.u32 },
  hsa_amd_vmem_handle_create: { args: [FFIType.u64, FFIType.u64, FFIType.u32, FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
  hsa_amd_vmem_handle_release: { args: [FFIType.u64], returns: FFIType.u32 },
  hsa_amd_vmem_map: { args: [FFIType.u64, FFIType.u64, FFIType.u64, FFIType.u64, FFIType.u64], returns: FFIType.u32 },
  hsa_amd_vmem_unmap: { args: [FFIType.u64, FFIType.u64], returns: FFIType.u32 },
  hsa_amd_vmem_set_access: { args: [FFIType.u64, FFIType.u64, FFIType.ptr, FFIType.u64], returns: FFIType.u32 },
} as const;

type Lib = ReturnType<typeof dlopen<typeof SYMBOLS>>["symbols"];
type VmemLib = ReturnType<typeof dlopen<typeof VMEM_SYMBOLS>>["symbols"];

let loaded: { path: string; lib: Lib; vmem: VmemLib | null } | null = null;

/**
 * dlopen libhsa-runtime64 once.
 * @throws KerncapError E_HSA_NOT_FOUND listing every path tried.
 */
export function loadHsa(candidates?: string[]): { path: string; lib: Lib; vmem: VmemLib | null } {
  if (loaded && !candidates) return loaded;
  const errors: string[] = [];
  for (const path of candidates ?? hsaLibraryCandidates()) {
    if (path.includes("/") && !existsSync(path)) {
      errors.push(`${path} (absent)`);
      continue;
    }
    try {
      const lib = dlopen(path, SYMBOLS).symbols;
      let vmem: VmemLib | null = null;
      try {
        vmem = dlopen(path, VMEM_SYMBOLS).symbols;
      } catch {
        vmem = null; // ROCm < 6.0
      }
      const l = { path, lib, vmem };
      if (!candidates) loaded = l;
      return l;
    } catch (e) {
      errors.push(`${path} (${(e as Error).message.split("\n")[0]})`);
    }
  }
  throw new KerncapError("E_HSA_NOT_FOUND", `libhsa-runtime64 not found: looked in ${errors.join(", ")}`, {
    hint: "Install ROCm (the HSA runtime) or set KERNCAP_HSA_PATH to libhsa-runtime64.so.1.",
  });
}

const u64 = () => new BigUint64Array(1);
const big = (p: bigint | number) => BigInt(p);

/** A typed wrapper: every call checked, errors carry hsa_status_string. */
class Hsa {
  constructor(readonly lib: Lib, readonly vmem: VmemLib | null, readonly path: string) {}

  statusString(status: number): string {
    const out = u64();
    if (this.lib.hsa_status_string(status, ptr(out)) !== HSA_STATUS_SUCCESS || out[0] === 0n) return `status 0x${status.toString(16)}`;
    return new CString(Number(out[0]) as Pointer).toString();
  }

  check(status: number, call: string): void {
    if (status !== HSA_STATUS_SUCCESS && status !== HSA_STATUS_INFO_BREAK) {
      throw new KerncapError("E_HSA", `${call} failed: ${this.statusString(status)}`);
    }
  }

  /** GPU agents in enumeration order (the ordinal the capture library records). */
  gpuAgents(): { handle: bigint; name: string; product: string }[] {
    const handles: bigint[] = [];
    const cb = new JSCallback(
      (agent: bigint | number) => {
        const dev = new Uint32Array(1);
        if (this.lib.hsa_agent_get_info(big(agent), HSA_AGENT_INFO_DEVICE, ptr(dev)) === HSA_STATUS_SUCCESS && dev[0] === HSA_DEVICE_TYPE_GPU) {
          handles.push(big(agent));
        }
        return HSA_STATUS_SUCCESS;
      },
      { args: [FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
    );
    try {
      this.check(this.lib.hsa_iterate_agents(cb.ptr!, null), "hsa_iterate_agents");
    } finally {
      cb.close();
    }
    return handles.map((handle) => ({ handle, name: this.agentString(handle, HSA_AGENT_INFO_NAME, 64), product: this.agentString(handle, HSA_AMD_AGENT_INFO_PRODUCT_NAME, 64) }));
  }

  agentString(agent: bigint, attr: number, len: number): string {
    const buf = new Uint8Array(len);
    this.check(this.lib.hsa_agent_get_info(agent, attr, ptr(buf)), "hsa_agent_get_info");
    return new TextDecoder().decode(buf.subarray(0, buf.indexOf(0) < 0 ? len : buf.indexOf(0)));
  }

  /** Global-segment pools of an agent with their flags and allocation granule. */
  pools(agent: bigint): { handle: bigint; flags: number; granule: number }[] {
    const out: { handle: bigint; flags: number; granule: number }[] = [];
    const cb = new JSCallback(
      (pool: bigint | number) => {
        const seg = new Uint32Array(1);
        const flags = new Uint32Array(1);
        const granule = u64();
        const p = big(pool);
        if (this.lib.hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, ptr(seg)) !== 0 || seg[0] !== HSA_AMD_SEGMENT_GLOBAL) return 0;
        this.lib.hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, ptr(flags));
        this.lib.hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, ptr(granule));
        out.push({ handle: p, flags: flags[0]!, granule: Number(granule[0]) });
        return 0;
      },
      { args: [FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
    );
    try {
      this.check(this.lib.hsa_amd_agent_iterate_memory_pools(agent, cb.ptr!, null), "hsa_amd_agent_iterate_memory_pools");
    } finally {
      cb.close();
    }
    return out;
  }
}

let hsa: Hsa | null = null;

/**
 * Load the runtime, hsa_init, and return the GPU agents.
 * @throws KerncapError E_HSA_NOT_FOUND (no library), E_NO_GPU ("no HSA GPU agent found").
 */
export function initHsa(): { hsa: Hsa; agents: { handle: bigint; name: string; product: string }[] } {
  if (!hsa) {
    const { lib, vmem, path } = loadHsa();
    const h = new Hsa(lib, vmem, path);
    const st = lib.hsa_init();
    if (st !== HSA_STATUS_SUCCESS) {
      // ROCr's hsa_init fails (OUT_OF_RESOURCES) when the kernel driver is absent: no agent at all.
      const why = existsSync("/dev/kfd") ? "" : "/dev/kfd is absent; ";
      throw new KerncapError("E_NO_GPU", `no HSA GPU agent found (${why}hsa_init: ${h.statusString(st)})`, {
        hint: "Replay a hip capture on a machine with an AMD GPU and the amdgpu kernel driver (ROCm).",
      });
    }
    hsa = h;
  }
  const agents = hsa.gpuAgents();
  if (agents.length === 0) {
    throw new KerncapError("E_NO_GPU", `no HSA GPU agent found (${hsa.path} initialised, but lists only CPU agents)`, {
      hint: "Replay a hip capture on a machine with an AMD GPU.",
    });
  }
  return { hsa, agents };
}

// ---- pure helpers (tested without a GPU) ----

/** One VA span to reserve: regions rounded out to `granule` bytes and merged when they touch. */
export interface Span { va: bigint; size: bigint }

export function mergeSpans(regions: { va: string; size: number }[], granule: number): Span[] {
  const g = BigInt(granule);
  const spans = regions
    .filter((r) => r.size > 0)
    .map((r) => {
      const start = (BigInt(r.va) / g) * g;
      const end = ((BigInt(r.va) + BigInt(r.size) + g - 1n) / g) * g;
      return { va: start, size: end - start };
    })
    .sort((a, b) => (a.va < b.va ? -1 : a.va > b.va ? 1 : 0));
  const out: Span[] = [];
  for (const s of spans) {
    const last = out[out.length - 1];
    if (last && s.va <= last.va + last.size) {
      const end = s.va + s.size > last.va + last.size ? s.va + s.size : last.va + last.size;
      last.size = end - last.va;
    } else out.push({ ...s });
  }
  return out;
}

export interface DispatchPacket {
  grid: [number, number, number];
  block: [number, number, number];
  groupSegmentSize: number;
  privateSegmentSize: number;
  kernelObject: bigint;
  kernargAddress: bigint;
  completionSignal: bigint;
}

/**
 * The 64-byte hsa_kernel_dispatch_packet_t (hsa.h) and, separately, its first 32-bit word
 * (header | setup << 16), which must be stored last, atomically, to hand the packet to the GPU.
 */
export function encodeDispatchPacket(p: DispatchPacket): { bytes: Uint8Array; headerWord: number } {
  const b = new Uint8Array(64);
  const dv = new DataView(b.buffer);
  const dims = p.grid[2] > 1 || p.block[2] > 1 ? 3 : p.grid[1] > 1 || p.block[1] > 1 ? 2 : 1;
  dv.setUint16(4, p.block[0], true);
  dv.setUint16(6, p.block[1], true);
  dv.setUint16(8, p.block[2], true);
  dv.setUint32(12, p.grid[0], true);
  dv.setUint32(16, p.grid[1], true);
  dv.setUint32(20, p.grid[2], true);
  dv.setUint32(24, p.privateSegmentSize, true);
  dv.setUint32(28, p.groupSegmentSize, true);
  dv.setBigUint64(32, p.kernelObject, true);
  dv.setBigUint64(40, p.kernargAddress, true);
  dv.setBigUint64(56, p.completionSignal, true);
  const header =
    (HSA_PACKET_TYPE_KERNEL_DISPATCH << 0) | (1 << 8) | (HSA_FENCE_SCOPE_SYSTEM << 9) | (HSA_FENCE_SCOPE_SYSTEM << 11);
  const headerWord = (header | (dims << 16)) >>> 0;
  return { bytes: b, headerWord };
}

// ---- replay ----

export interface HsaReplayOptions {
  /** GPU agent ordinal (among GPU agents); default: the captured ordinal. */
  agent?: number;
  /** Dispatches to time (before state restored before each). Default 1. */
  iterations?: number;
  /** Code object to load instead of the captured module (kerncap validate: the rebuilt .hsaco). */
  moduleOverride?: string;
  /** Refuse when the agent's gfx arch differs from the captured one (default true). */
  strictArch?: boolean;
}

export interface HsaRegionResult {
  va: string;
  size: number;
  kind: string;
  /** The capture says the original dispatch changed this region. */
  changed: boolean;
  /** Replay result equals the captured after state (before state for unchanged regions). */
  match: boolean;
  /** Bytes that differ, and the first differing byte offset within the region. */
  diffBytes: number;
  firstDiff?: number;
}

export interface HsaReplayResult {
  backend: "hsa";
  device: { name: string; product: string; arch: string; ordinal: number };
  library: string;
  match: boolean;
  regions: HsaRegionResult[];
  /** Wall-clock µs from doorbell to completion signal, one per iteration; median of them. */
  timing: { dispatchUs: number[]; medianUs: number };
}

/**
 * Replay a hip capture on an HSA GPU agent.
 *
 * Steps: hsa_init and pick the agent; reserve each captured span at its exact VA
 * (hsa_amd_vmem_address_reserve), back it with the agent's coarse-grained pool
 * (hsa_amd_vmem_handle_create + map + set_access); copy memory/before.bin into each region; load
 * the code object (unbundled for the agent's arch when a bundle), look up `<kernel>.kd`; copy
 * params.bin into a kernarg-pool buffer; write one AQL kernel dispatch packet with the captured grid
 * (work-items), workgroup and segment sizes; wait on its completion signal; read every region back
 * and compare with memory/after.bin (changed regions) or memory/before.bin (the others).
 *
 * @param dir capture folder (kerncap.json beside kernel/ and memory/)
 * @param manifest the parsed manifest (kernel.frontend "hip", device.vendor "amd")
 * @throws KerncapError E_HSA_NOT_FOUND, E_NO_GPU, E_HSA_VMEM (runtime older than ROCm 6.0),
 *   E_VA_TAKEN (a captured address is in use), E_ARCH, E_HSA (a runtime call failed)
 */
export function replayHsa(dir: string, manifest: Manifest, opts: HsaReplayOptions = {}): HsaReplayResult {
  const { hsa: h, agents } = initHsa();
  const ordinal = opts.agent ?? manifest.device.ordinal;
  const agent = agents[ordinal];
  if (!agent) throw new KerncapError("E_NO_GPU", `HSA GPU agent ${ordinal} not found (${agents.length} present)`);
  if ((opts.strictArch ?? true) && agent.name !== manifest.device.arch) {
    throw new KerncapError("E_ARCH", `capture is for ${manifest.device.arch}, GPU agent ${ordinal} is ${agent.name}`, {
      hint: "Replay on the same GPU architecture, or rebuild the code object for this one (kerncap validate).",
    });
  }
  const vm = h.vmem;
  if (!vm) {
    throw new KerncapError(
      "E_HSA_VMEM",
      `${h.path} lacks hsa_amd_vmem_address_reserve: VA-faithful replay needs ROCm 6.0 or newer (this looks like ROCm 5.x)`,
      { hint: "Install ROCm 6.0+ on the replay machine." },
    );
  }
  const L = h.lib;
  const pools = h.pools(agent.handle);
  const devPool = pools.find((p) => p.flags & FLAG_COARSE_GRAINED);
  if (!devPool) throw new KerncapError("E_HSA", `GPU agent ${agent.name} has no coarse-grained global memory pool`);
  // Kernarg memory comes from a CPU agent's KERNARG_INIT pool.
  let kernargPool: bigint | undefined;
  const cpuAgents: bigint[] = [];
  {
    const cb = new JSCallback(
      (a: bigint | number) => {
        const dev = new Uint32Array(1);
        L.hsa_agent_get_info(big(a), HSA_AGENT_INFO_DEVICE, ptr(dev));
        if (dev[0] === 0) cpuAgents.push(big(a));
        return 0;
      },
      { args: [FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
    );
    try {
      h.check(L.hsa_iterate_agents(cb.ptr!, null), "hsa_iterate_agents");
    } finally {
      cb.close();
    }
    for (const c of cpuAgents) kernargPool ??= h.pools(c).find((p) => p.flags & FLAG_KERNARG_INIT)?.handle;
  }
  if (kernargPool === undefined) throw new KerncapError("E_HSA", "no kernarg memory pool found on any CPU agent");

  const cleanup: (() => void)[] = [];
  try {
    // 1. VA reservation and backing.
    const regions = [...manifest.regions, ...manifest.globals.map((g) => ({ ...g, kind: "global" as const }))] as (Region & { kind: string })[];
    const granule = Math.max(devPool.granule, 4096);
    const agentArr = new BigUint64Array([agent.handle]);
    const access = new Uint8Array(16);
    new DataView(access.buffer).setUint32(0, HSA_ACCESS_PERMISSION_RW, true);
    new DataView(access.buffer).setBigUint64(8, agent.handle, true);
    for (const s of mergeSpans(regions, granule)) {
      const out = u64();
      const st = vm.hsa_amd_vmem_address_reserve(ptr(out), s.size, s.va, 0n);
      if (st !== 0 || out[0] !== s.va) {
        if (st === 0) vm.hsa_amd_vmem_address_free(out[0]!, s.size);
        throw new KerncapError("E_VA_TAKEN", `cannot reserve the captured span 0x${s.va.toString(16)}+${s.size} at its address (${st ? h.statusString(st) : `got 0x${out[0]!.toString(16)}`})`, {
          hint: "Another mapping holds that range; run kerncap replay in a fresh process with nothing else on the GPU.",
        });
      }
      cleanup.push(() => vm.hsa_amd_vmem_address_free(s.va, s.size));
      const handle = u64();
      h.check(vm.hsa_amd_vmem_handle_create(devPool.handle, s.size, 0, 0n, ptr(handle)), "hsa_amd_vmem_handle_create");
      cleanup.push(() => vm.hsa_amd_vmem_handle_release(handle[0]!));
      h.check(vm.hsa_amd_vmem_map(s.va, s.size, 0n, handle[0]!, 0n), "hsa_amd_vmem_map");
      cleanup.push(() => vm.hsa_amd_vmem_unmap(s.va, s.size));
      h.check(vm.hsa_amd_vmem_set_access(s.va, s.size, ptr(access), 1n), "hsa_amd_vmem_set_access");
    }

    // 2. Restore: before.bin mapped (in windows: images of any size), each 64 MiB piece of a
    // region locked and copied host→device.
    const before = new FileImage(join(dir, manifest.memory.before));
    const after = new FileImage(join(dir, manifest.memory.after));
    const C = manifest.memory.chunkBytes;
    const copyIn = (r: Region) => {
      const e = chunkExpectation(r, C);
      pieces(r.size, (done, n) => {
        const host = chunkBytesOf(e, done / C, n, "before", before, after).slice();
        const locked = u64();
        h.check(L.hsa_amd_memory_lock(ptr(host), BigInt(n), ptr(agentArr), 1, ptr(locked)), "hsa_amd_memory_lock");
        try {
          h.check(L.hsa_memory_copy(BigInt(r.va) + BigInt(done), locked[0]!, BigInt(n)), `hsa_memory_copy to ${r.va}+${done}`);
        } finally {
          L.hsa_amd_memory_unlock(ptr(host));
        }
      }, C);
    };
    const restore = () => regions.forEach(copyIn);

    // 3. Code object and kernel object.
    let image = new Uint8Array(readFileSync(opts.moduleOverride ?? join(dir, manifest.module.file)));
    if (isOffloadBundle(image)) {
      const co = amdgpuCodeObjects(image, agent.name)[0];
      if (!co) throw new KerncapError("E_ARCH", `the module holds no code object for ${agent.name}`);
      image = new Uint8Array(co.bytes);
    }
    const meta = findKernel(parseAmdgpuCodeObject(image), manifest.kernel.name);
    const reader = u64();
    h.check(L.hsa_code_object_reader_create_from_memory(ptr(image), BigInt(image.length), ptr(reader)), "hsa_code_object_reader_create_from_memory");
    cleanup.push(() => L.hsa_code_object_reader_destroy(reader[0]!));
    const exec = u64();
    h.check(L.hsa_executable_create_alt(0 /* BASE */, 0 /* DEFAULT rounding */, null, ptr(exec)), "hsa_executable_create_alt");
    cleanup.push(() => L.hsa_executable_destroy(exec[0]!));
    h.check(L.hsa_executable_load_agent_code_object(exec[0]!, agent.handle, reader[0]!, null, null), "hsa_executable_load_agent_code_object");
    h.check(L.hsa_executable_freeze(exec[0]!, null), "hsa_executable_freeze");
    const symName = Buffer.from(`${meta.symbol || `${meta.name}.kd`}\0`);
    const sym = u64();
    h.check(L.hsa_executable_get_symbol_by_name(exec[0]!, ptr(symName), ptr(agentArr), ptr(sym)), `hsa_executable_get_symbol_by_name(${meta.symbol})`);
    const kobj = u64();
    h.check(L.hsa_executable_symbol_get_info(sym[0]!, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, ptr(kobj)), "hsa_executable_symbol_get_info(KERNEL_OBJECT)");

    // 4. Kernarg segment: the captured bytes, padded to the code object's segment size.
    const params = new Uint8Array(readFileSync(join(dir, manifest.params.file)));
    const kaSize = Math.max(params.length, meta.kernargSegmentSize, 16);
    const ka = u64();
    h.check(L.hsa_amd_memory_pool_allocate(kernargPool, BigInt(kaSize), 0, ptr(ka)), "hsa_amd_memory_pool_allocate(kernarg)");
    cleanup.push(() => L.hsa_amd_memory_pool_free(Number(ka[0]) as Pointer));
    h.check(L.hsa_amd_agents_allow_access(1, ptr(agentArr), null, Number(ka[0]) as Pointer), "hsa_amd_agents_allow_access(kernarg)");
    new Uint8Array(toArrayBuffer(Number(ka[0]) as Pointer, 0, kaSize)).set(params);

    // 5. Queue and completion signal.
    const q = u64();
    h.check(L.hsa_queue_create(agent.handle, 1024, HSA_QUEUE_TYPE_SINGLE, null, null, U32_MAX, U32_MAX, ptr(q)), "hsa_queue_create");
    const queue = q[0]!;
    cleanup.push(() => L.hsa_queue_destroy(queue));
    const qp = Number(queue) as Pointer;
    const base = read.u64(qp, 8);
    const doorbell = read.u64(qp, 16);
    const qsize = read.u32(qp, 24);
    const sig = u64();
    h.check(L.hsa_signal_create(1n, 0, null, ptr(sig)), "hsa_signal_create");
    cleanup.push(() => L.hsa_signal_destroy(sig[0]!));
    const hsaInfo = (manifest.hsa ?? {}) as Record<string, unknown>;
    const pkt = encodeDispatchPacket({
      grid: manifest.launch.grid,
      block: manifest.launch.block,
      groupSegmentSize: Number(hsaInfo.group_segment_size ?? manifest.launch.sharedMemBytes),
      privateSegmentSize: Number(hsaInfo.private_segment_size ?? meta.privateSegmentFixedSize),
      kernelObject: kobj[0]!,
      kernargAddress: ka[0]!,
      completionSignal: sig[0]!,
    });

    const dispatchUs: number[] = [];
    for (let it = 0; it < Math.max(1, opts.iterations ?? 1); it++) {
      restore();
      L.hsa_signal_store_relaxed(sig[0]!, 1n);
      const idx = L.hsa_queue_add_write_index_relaxed(queue, 1n);
      const slot = Number(base) + Number(BigInt(idx) % BigInt(qsize)) * 64;
      const view = new Uint8Array(toArrayBuffer(slot as Pointer, 0, 64));
      view.set(pkt.bytes.subarray(4), 4);
      const t0 = performance.now();
      Atomics.store(new Int32Array(view.buffer, view.byteOffset, 1), 0, pkt.headerWord | 0);
      L.hsa_signal_store_screlease(doorbell, BigInt(idx));
      const v = L.hsa_signal_wait_scacquire(sig[0]!, HSA_SIGNAL_CONDITION_LT, 1n, 0xffffffffffffffffn, HSA_WAIT_STATE_BLOCKED);
      dispatchUs.push((performance.now() - t0) * 1000);
      if (BigInt(v) !== 0n) throw new KerncapError("E_HSA", `dispatch completion signal ended at ${v}, expected 0 (queue error?)`);
    }

    // 6. Compare.
    const results: HsaRegionResult[] = [];
    const got = new Uint8Array(Math.max(1, Math.min(manifest.memory.chunkBytes, Math.max(1, ...regions.map((r) => r.size)))));
    for (const r of regions) {
      const e = chunkExpectation(r, C);
      let diff = 0;
      let first: number | undefined;
      pieces(r.size, (done, n) => {
        const buf = got.subarray(0, n);
        const locked = u64();
        h.check(L.hsa_amd_memory_lock(ptr(buf), BigInt(n), ptr(agentArr), 1, ptr(locked)), "hsa_amd_memory_lock");
        try {
          h.check(L.hsa_memory_copy(locked[0]!, BigInt(r.va) + BigInt(done), BigInt(n)), `hsa_memory_copy from ${r.va}+${done}`);
        } finally {
          L.hsa_amd_memory_unlock(ptr(buf));
        }
        const want = chunkBytesOf(e, done / C, n, "after", before, after);
        for (let i = 0; i < n; i++) {
          if (buf[i] !== want[i]) {
            diff++;
            first ??= done + i;
          }
        }
      }, C);
      results.push({ va: r.va, size: r.size, kind: r.kind, changed: r.changed, match: diff === 0, diffBytes: diff, firstDiff: first });
    }
    const sorted = [...dispatchUs].sort((a, b) => a - b);
    return {
      backend: "hsa",
      device: { name: agent.name, product: agent.product, arch: agent.name, ordinal },
      library: h.path,
      match: results.every((r) => r.match),
      regions: results,
      timing: { dispatchUs, medianUs: sorted[Math.floor(sorted.length / 2)]! },
    };
  } finally {
    for (const f of cleanup.reverse()) {
      try {
        f();
      } catch {
        /* best effort teardown */
      }
    }
  }
}
