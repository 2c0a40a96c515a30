/**
 * bun:ffi bindings to libhsa-runtime64 (AMD) for the HSA replay backend (src/replay/backends/hsa.ts):
 * runtime and agent discovery, memory pools, the virtual memory API, copies, code objects,
 * queues, signals and AQL dispatch.
 *
 * This module alone owns the dlopen of libhsa-runtime64 (lazily, on first use). Every
 * hsa_status_t is checked; a failure throws KerncapError with the runtime's own string
 * (hsa_status_string). Raw pointers stay inside this module.
 *
 * VA-faithful restore needs the virtual memory API (hsa_amd_vmem_address_reserve & co.), which
 * ROCm 6.0 added; ROCm 5.x runtimes (Debian 12 ships 5.2) are refused with a clear error.
 *
 * Run on AMD hardware: NEVER (written without an AMD GPU; the library lookup, the "no HSA GPU
 * agent found" path and the whole replay against the fake runtime test/apps/hip/fake_libhsa.c ran).
 */
import { CString, dlopen, FFIType, JSCallback, ptr, read, toArrayBuffer, type Pointer } from "bun:ffi";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { hsaOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { bareLibraryNames } from "./libcuda.ts";
import { encodeDispatchPacket, type DispatchPacket } from "./hsa-packet.ts";

// ---- constants (hsa.h / hsa_ext_amd.h, ROCm 5.2 and 6.x agree) ----
const HSA_STATUS_SUCCESS = 0;
const HSA_STATUS_INFO_BREAK = 1;
const HSA_AGENT_INFO_NAME = 0;
const HSA_AGENT_INFO_DEVICE = 17;
const HSA_DEVICE_TYPE_GPU = 1;
const HSA_AMD_AGENT_INFO_PRODUCT_NAME = 0xa009;
const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE = 9;
const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS = 21;
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
const U32_MAX = 0xffffffff;

/** Where libhsa-runtime64 is looked for, in order (KERNCAP_HSA_PATH first when set). */
export function hsaLibraryCandidates(env: Record<string, string | undefined> = process.env): string[] {
  const c: string[] = [];
  const own = hsaOverride(env);
  // an explicit path is authoritative, as KERNCAP_LIBCUDA's: a typo must not fall back to the system's runtime
  if (own && own.includes("/") && !existsSync(own)) return [own];
  if (own) c.push(own);
  for (const root of [env.ROCM_PATH, "/opt/rocm"].filter(Boolean) as string[]) c.push(join(root, "lib", "libhsa-runtime64.so.1"));
  c.push(
    "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1",
    "/usr/lib64/libhsa-runtime64.so.1",
    ...bareLibraryNames(["libhsa-runtime64.so.1"], process.cwd(), env),
  );
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
export class Hsa {
  constructor(
    readonly lib: Lib,
    readonly vmem: VmemLib | null,
    readonly path: string,
  ) {}

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
    return this.agents()
      .filter((a) => a.type === HSA_DEVICE_TYPE_GPU)
      .map(({ handle }) => ({
        handle,
        name: this.agentString(handle, HSA_AGENT_INFO_NAME, 64),
        product: this.agentString(handle, HSA_AMD_AGENT_INFO_PRODUCT_NAME, 64),
      }));
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

  /** Every agent's handle and device type (0 CPU, 1 GPU). */
  agents(): { handle: bigint; type: number }[] {
    const out: { handle: bigint; type: number }[] = [];
    const cb = new JSCallback(
      (a: bigint | number) => {
        const dev = new Uint32Array(1);
        this.lib.hsa_agent_get_info(big(a), HSA_AGENT_INFO_DEVICE, ptr(dev));
        out.push({ handle: big(a), type: dev[0]! });
        return HSA_STATUS_SUCCESS;
      },
      { args: [FFIType.u64, FFIType.ptr], returns: FFIType.u32 },
    );
    try {
      this.check(this.lib.hsa_iterate_agents(cb.ptr!, null), "hsa_iterate_agents");
    } finally {
      cb.close();
    }
    return out;
  }

  /** A pool allocation (device memory of a GPU pool, kernarg memory of a CPU pool). */
  poolAllocate(pool: bigint, size: number, what: string): bigint {
    const p = u64();
    this.check(this.lib.hsa_amd_memory_pool_allocate(pool, BigInt(Math.max(1, size)), 0, ptr(p)), `hsa_amd_memory_pool_allocate(${what}, ${size} bytes)`);
    return p[0]!;
  }

  poolFree(p: bigint): void {
    this.check(this.lib.hsa_amd_memory_pool_free(Number(p) as Pointer), "hsa_amd_memory_pool_free");
  }

  allowAccess(agent: bigint, p: bigint, what: string): void {
    const agents = new BigUint64Array([agent]);
    this.check(this.lib.hsa_amd_agents_allow_access(1, ptr(agents), null, Number(p) as Pointer), `hsa_amd_agents_allow_access(${what})`);
  }

  /** A host view of `size` bytes at host address p (kernarg memory). */
  hostView(p: bigint, size: number): Uint8Array {
    return new Uint8Array(toArrayBuffer(Number(p) as Pointer, 0, size));
  }

  /**
   * Copy between host memory and device address `va` through a page-locked view of the host
   * bytes (hsa_amd_memory_lock for `agent`, hsa_memory_copy, unlock). Synchronous.
   */
  copyHost(agent: bigint, host: Uint8Array, va: bigint, toDevice: boolean): void {
    if (host.byteLength === 0) return;
    const agents = new BigUint64Array([agent]);
    const locked = u64();
    this.check(this.lib.hsa_amd_memory_lock(ptr(host), BigInt(host.byteLength), ptr(agents), 1, ptr(locked)), "hsa_amd_memory_lock");
    try {
      const n = BigInt(host.byteLength);
      if (toDevice) this.check(this.lib.hsa_memory_copy(va, locked[0]!, n), `hsa_memory_copy to 0x${va.toString(16)}`);
      else this.check(this.lib.hsa_memory_copy(locked[0]!, va, n), `hsa_memory_copy from 0x${va.toString(16)}`);
    } finally {
      this.lib.hsa_amd_memory_unlock(ptr(host));
    }
  }

  /** Device-to-device copy (hsa_memory_copy, synchronous). */
  copyDevice(dst: bigint, src: bigint, size: number): void {
    if (size > 0) this.check(this.lib.hsa_memory_copy(dst, src, BigInt(size)), `hsa_memory_copy 0x${src.toString(16)} → 0x${dst.toString(16)}`);
  }

  /**
   * Reserve [va, va + size) at exactly va (hsa_amd_vmem_address_reserve), back it with memory of
   * `pool` (handle_create + map) and grant `agent` read/write. Pushes the undo steps on `cleanup`.
   * @throws KerncapError E_HSA_VMEM (no vmem API), E_VA_TAKEN (another mapping holds the range)
   */
  mapAt(va: bigint, size: number, pool: bigint, agent: bigint, cleanup: (() => void)[]): void {
    const vm = this.vmem;
    if (!vm)
      throw new KerncapError(
        "E_HSA_VMEM",
        `${this.path} lacks hsa_amd_vmem_address_reserve: VA-faithful replay needs ROCm 6.0 or newer (this looks like ROCm 5.x)`,
        { hint: "Install ROCm 6.0+ on the replay machine." },
      );
    const s = BigInt(size);
    const out = u64();
    const st = vm.hsa_amd_vmem_address_reserve(ptr(out), s, va, 0n);
    if (st !== 0 || out[0] !== va) {
      if (st === 0) vm.hsa_amd_vmem_address_free(out[0]!, s);
      throw new KerncapError(
        "E_VA_TAKEN",
        `cannot reserve the captured span 0x${va.toString(16)}+${size} at its address (${st ? this.statusString(st) : `got 0x${out[0]!.toString(16)}`})`,
        {
          hint: "Another mapping holds that range; run kerncap replay in a fresh process with nothing else on the GPU.",
        },
      );
    }
    cleanup.push(() => vm.hsa_amd_vmem_address_free(va, s));
    const handle = u64();
    this.check(vm.hsa_amd_vmem_handle_create(pool, s, 0, 0n, ptr(handle)), "hsa_amd_vmem_handle_create");
    cleanup.push(() => vm.hsa_amd_vmem_handle_release(handle[0]!));
    this.check(vm.hsa_amd_vmem_map(va, s, 0n, handle[0]!, 0n), "hsa_amd_vmem_map");
    cleanup.push(() => vm.hsa_amd_vmem_unmap(va, s));
    const access = new Uint8Array(16);
    new DataView(access.buffer).setUint32(0, HSA_ACCESS_PERMISSION_RW, true);
    new DataView(access.buffer).setBigUint64(8, agent, true);
    this.check(vm.hsa_amd_vmem_set_access(va, s, ptr(access), 1n), "hsa_amd_vmem_set_access");
  }

  /** Load one code object for `agent` into a frozen executable; returns it and its destroy step. */
  loadExecutable(agent: bigint, image: Uint8Array): { exec: bigint; destroy: () => void } {
    const reader = u64();
    this.check(this.lib.hsa_code_object_reader_create_from_memory(ptr(image), BigInt(image.length), ptr(reader)), "hsa_code_object_reader_create_from_memory");
    const exec = u64();
    const undo = [() => this.lib.hsa_code_object_reader_destroy(reader[0]!)];
    const destroy = () => {
      for (const f of undo.reverse()) f();
      undo.length = 0;
    };
    try {
      this.check(this.lib.hsa_executable_create_alt(0 /* BASE */, 0 /* DEFAULT rounding */, null, ptr(exec)), "hsa_executable_create_alt");
      undo.push(() => this.lib.hsa_executable_destroy(exec[0]!));
      this.check(this.lib.hsa_executable_load_agent_code_object(exec[0]!, agent, reader[0]!, null, null), "hsa_executable_load_agent_code_object");
      this.check(this.lib.hsa_executable_freeze(exec[0]!, null), "hsa_executable_freeze");
    } catch (e) {
      destroy();
      throw e;
    }
    return { exec: exec[0]!, destroy };
  }

  /** A symbol of a frozen executable by name, or undefined when it has none. */
  private symbol(exec: bigint, agent: bigint, name: string): bigint | undefined {
    const agents = new BigUint64Array([agent]);
    const sym = u64();
    const st = this.lib.hsa_executable_get_symbol_by_name(exec, ptr(Buffer.from(`${name}\0`)), ptr(agents), ptr(sym));
    return st === HSA_STATUS_SUCCESS ? sym[0]! : undefined;
  }

  /** The kernel object (code handle of a dispatch packet) of kernel descriptor symbol `symbol` (`<name>.kd`). */
  kernelObject(exec: bigint, agent: bigint, symbol: string): bigint | undefined {
    const sym = this.symbol(exec, agent, symbol);
    if (sym === undefined) return undefined;
    const kobj = u64();
    this.check(
      this.lib.hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, ptr(kobj)),
      "hsa_executable_symbol_get_info(KERNEL_OBJECT)",
    );
    return kobj[0]!;
  }

  /** A module-scope variable's address and size in a frozen executable, or undefined. */
  variable(exec: bigint, agent: bigint, name: string): { va: bigint; size: number } | undefined {
    const sym = this.symbol(exec, agent, name);
    if (sym === undefined) return undefined;
    const va = u64();
    const size = new Uint32Array(1);
    this.check(
      this.lib.hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, ptr(va)),
      "hsa_executable_symbol_get_info(VARIABLE_ADDRESS)",
    );
    this.check(
      this.lib.hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, ptr(size)),
      "hsa_executable_symbol_get_info(VARIABLE_SIZE)",
    );
    return { va: va[0]!, size: size[0]! };
  }

  /** A single-producer queue of 1024 packets on `agent` and a completion signal. */
  queue(agent: bigint): HsaQueue {
    const q = u64();
    this.check(this.lib.hsa_queue_create(agent, 1024, HSA_QUEUE_TYPE_SINGLE, null, null, U32_MAX, U32_MAX, ptr(q)), "hsa_queue_create");
    const sig = u64();
    const st = this.lib.hsa_signal_create(1n, 0, null, ptr(sig));
    if (st !== HSA_STATUS_SUCCESS) {
      this.lib.hsa_queue_destroy(q[0]!);
      this.check(st, "hsa_signal_create");
    }
    return new HsaQueue(this, q[0]!, sig[0]!);
  }
}

/** A queue with its completion signal: one AQL kernel dispatch at a time, waited for. */
export class HsaQueue {
  private readonly base: bigint;
  private readonly doorbell: bigint;
  private readonly size: number;

  constructor(
    private readonly h: Hsa,
    private readonly queue: bigint,
    readonly signal: bigint,
  ) {
    const qp = Number(queue) as Pointer;
    this.base = BigInt(read.u64(qp, 8));
    this.doorbell = BigInt(read.u64(qp, 16));
    this.size = read.u32(qp, 24);
  }

  /**
   * Write one kernel dispatch packet (the header word last, atomically), ring the doorbell and
   * wait for the completion signal. @throws KerncapError E_HSA when the signal does not reach 0.
   */
  dispatch(p: Omit<DispatchPacket, "completionSignal">): void {
    const L = this.h.lib;
    const pkt = encodeDispatchPacket({ ...p, completionSignal: this.signal });
    L.hsa_signal_store_relaxed(this.signal, 1n);
    const idx = BigInt(L.hsa_queue_add_write_index_relaxed(this.queue, 1n));
    const slot = Number(this.base + (idx % BigInt(this.size)) * 64n);
    const view = new Uint8Array(toArrayBuffer(slot as Pointer, 0, 64));
    view.set(pkt.bytes.subarray(4), 4);
    Atomics.store(new Int32Array(view.buffer, view.byteOffset, 1), 0, pkt.headerWord | 0);
    L.hsa_signal_store_screlease(this.doorbell, idx);
    const v = L.hsa_signal_wait_scacquire(this.signal, HSA_SIGNAL_CONDITION_LT, 1n, 0xffffffffffffffffn, HSA_WAIT_STATE_BLOCKED);
    if (BigInt(v) !== 0n) throw new KerncapError("E_HSA", `dispatch completion signal ended at ${v}, expected 0 (queue error?)`);
  }

  destroy(): void {
    this.h.lib.hsa_signal_destroy(this.signal);
    this.h.lib.hsa_queue_destroy(this.queue);
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

export { FLAG_COARSE_GRAINED, FLAG_KERNARG_INIT };
