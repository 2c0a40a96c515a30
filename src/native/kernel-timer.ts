/**
 * The one owner of the kernel clock library (c/build/libkerncap_timer.so, c/cuda/kc_timer.c) in the
 * kerncap process: the GPU's own start and end timestamps of each kernel, from CUPTI's kernel
 * activity records (what nsys reports), for the replay's `clock=cupti` timing
 * (src/replay/backends/cuda-kernel-clock.ts). The library is embedded in the executable and
 * written once to the cache (src/cache.ts); it dlopens libcupti at the path the capture's search
 * finds (./libcupti-search.ts findCupti). One per process: CUPTI's state is the process's.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import timerLibFile from "../../c/build/libkerncap_timer.so" with { type: "file" };
import { cachedFolder } from "../cache.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const { i32, u64, ptr: P } = FFIType;

const SYMBOLS = {
  kc_timer_start: { args: [P, P, u64], returns: i32 },
  kc_timer_mark: { args: [u64], returns: FFIType.void },
  kc_timer_flush: { args: [i32], returns: i32 },
  kc_timer_read: { args: [P, i32], returns: i32 },
  kc_timer_lost: { args: [], returns: u64 },
  kc_timer_stop: { args: [], returns: FFIType.void },
} as const;

/** Why kc_timer_start failed (c/cuda/kc_timer.c KC_TIMER_E_*). */
export const TIMER_FAILURE = { 1: "dlopen", 2: "symbol", 3: "another CUPTI client", 4: "subscribe", 5: "activity", 6: "started" } as const;
/** kc_timer_start's code when another client holds CUPTI (ncu, nsys, a profiler in the process). */
export const TIMER_E_SUBSCRIBERS = 3;

/** One kernel's activity record as kc_timer_read copies it out (kc_timer_record_t, 32 bytes). */
export interface TimerRecord {
  /** The kc_timer_mark value when the launch was queued; 0n for an unmarked launch (a spin, a scan). */
  tag: bigint;
  /** ns, the GPU's timestamps (CUpti_ActivityKernel.start / .end). */
  startNs: bigint;
  endNs: bigint;
  /** CUPTI's correlation id of the launch. */
  correlation: number;
}

export const RECORD_BYTES = 32;

/** The records in `bytes` (kc_timer_record_t laid end to end, little-endian), the first `n`. */
export function decodeTimerRecords(bytes: Uint8Array, n: number): TimerRecord[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: TimerRecord[] = [];
  for (let i = 0; i < n && (i + 1) * RECORD_BYTES <= bytes.byteLength; i++) {
    const o = i * RECORD_BYTES;
    out.push({
      tag: dv.getBigUint64(o, true),
      startNs: dv.getBigUint64(o + 8, true),
      endNs: dv.getBigUint64(o + 16, true),
      correlation: dv.getUint32(o + 24, true),
    });
  }
  return out;
}

/** The started kernel clock: mark launches, flush and read their records, stop. */
export interface KernelTimer {
  /** Launches queued from now on carry `tag` (0: none) until the next mark. */
  mark(tag: number): void;
  /** cuptiActivityFlushAll (forced: incomplete buffers too). @returns the CUptiResult (0: success) */
  flush(forced: boolean): number;
  /** The kernel records gathered since the last read, oldest first. */
  read(): TimerRecord[];
  /** Records lost so far (CUPTI's dropped ones, those past the library's table). */
  lost(): number;
  /** Disable the activity kind, flush, unsubscribe (the library stays loaded). */
  stop(): void;
}

let started: KernelTimer | undefined;

/** The library's real path: the embedded file written to the cache once (the FFI needs a file). */
function timerLibrary(): string {
  const bytes = new Uint8Array(readFileSync(timerLibFile));
  return join(cachedFolder("timer-lib", [{ path: "libkerncap_timer.so", bytes, mode: 0o755 }]), "libkerncap_timer.so");
}

/**
 * Start the kernel clock on libcupti at `cuptiPath` (findCupti's answer). `libPath` names the
 * library (tests; default: the embedded one). Never throws for CUPTI's refusals: they are the
 * caller's reason to time with events instead.
 * @returns the timer, or `{ code, why }`: code 3 (TIMER_E_SUBSCRIBERS) when another CUPTI client
 *   holds this process (ncu, nsys), others when libcupti does not load or refuses (the message
 *   holds CUPTI's own result string); code 0 when the library itself does not load.
 */
export function startKernelTimer(cuptiPath: string, libPath?: string): { timer: KernelTimer } | { code: number; why: string } {
  if (started) return { timer: started };
  let lib: ReturnType<typeof dlopen<typeof SYMBOLS>>;
  try {
    lib = dlopen(libPath ?? timerLibrary(), SYMBOLS);
  } catch (e) {
    return { code: 0, why: `the kernel clock library does not load: ${e instanceof Error ? e.message : String(e)}` };
  }
  const s = lib.symbols;
  const err = new Uint8Array(1024);
  const path = new TextEncoder().encode(`${cuptiPath}\0`);
  const rc = s.kc_timer_start(ptr(path), ptr(err), err.byteLength);
  if (rc !== 0) {
    const end = err.indexOf(0);
    const why = new TextDecoder().decode(err.subarray(0, end < 0 ? err.byteLength : end)) || `kc_timer_start returned ${rc}`;
    return { code: rc, why };
  }
  const buf = new Uint8Array(RECORD_BYTES * 512);
  const timer: KernelTimer = {
    mark: (tag) => s.kc_timer_mark(tag),
    flush: (forced) => s.kc_timer_flush(forced ? 1 : 0),
    read: () => {
      const out: TimerRecord[] = [];
      for (;;) {
        const n = s.kc_timer_read(ptr(buf), buf.byteLength / RECORD_BYTES);
        out.push(...decodeTimerRecords(buf, n));
        if (n < buf.byteLength / RECORD_BYTES) return out;
      }
    },
    lost: () => Number(s.kc_timer_lost()),
    stop: () => {
      s.kc_timer_stop();
      started = undefined;
    },
  };
  started = timer;
  return { timer };
}
