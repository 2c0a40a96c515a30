/**
 * The CUDA capture library's counting path (c/cuda/kerncap_cuda.c), what keeps `list` and `run`
 * with no match cheap, checked without a GPU: the library (c/build/libkerncap_cuda.so) driven by
 * c/test/launch_main.c over the stand-in libcuda and libcupti (c/test/fake_cuda.c).
 *  - The callbacks it enables, per mode, read back from the stand-in cuptiEnableCallback: CUPTI
 *    runs for every call of an enabled API, so `list` enables the launches, the stream captures,
 *    the unloads and the graph calls, and `run` adds only the allocations, module loads and graph
 *    node updates a capture needs; neither enables an API an application calls around each launch
 *    (cuCtxGetCurrent, cuStreamSynchronize, cuEventRecord, …). The set is the X-macro lists of
 *    kerncap_cuda.c (names resolved through CUDA's cupti_driver_cbid.h), so subscription and
 *    dispatch cannot drift apart.
 *  - The kernel-name regexes run once per kernel name, not once per launch (regexec counted by
 *    launch_main), from one thread or several; every launch is still counted in the census.
 * Skips without gcc, the CUDA headers or the built library (scripts/build-c.sh).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const LIB = join(ROOT, "c/build/libkerncap_cuda.so");
const CUDA_HOME = process.env.CUDA_HOME ?? "/usr/local/cuda";

/** The CUDA include folders scripts/build-c.sh uses, when cupti.h is among them. */
function cudaIncludes(): string[] {
  const dirs = [join(CUDA_HOME, "include"), join(CUDA_HOME, "extras/CUPTI/include")];
  const targets = join(CUDA_HOME, "targets");
  if (existsSync(targets)) for (const t of readdirSync(targets)) dirs.push(join(targets, t, "include"));
  const found = dirs.filter((d) => existsSync(d));
  return found.some((d) => existsSync(join(d, "cupti.h"))) ? found : [];
}
const INC = cudaIncludes();
const ready = !!Bun.which("gcc") && INC.length > 0 && existsSync(LIB);

const DRIVER = 1; // CUPTI_CB_DOMAIN_DRIVER_API
const RESOURCE = 3; // CUPTI_CB_DOMAIN_RESOURCE
const MODULE_LOADED = 6; // CUPTI_CBID_RESOURCE_MODULE_LOADED

/** CUPTI_DRIVER_TRACE_CBID_<name> = <id> of the CUDA headers, by id. */
function driverCbidNames(): Map<number, string> {
  const header = INC.map((d) => join(d, "cupti_driver_cbid.h")).find((f) => existsSync(f));
  const names = new Map<number, string>();
  if (!header) return names;
  for (const m of readFileSync(header, "utf8").matchAll(/CUPTI_DRIVER_TRACE_CBID_(\w+)\s*=\s*(\d+)/g)) names.set(Number(m[2]), m[1]!);
  return names;
}

/** The entries X(name, handler) of one X-macro list of c/cuda/kc_callbacks.h. */
function xList(list: string): string[] {
  const src = readFileSync(join(ROOT, "c/cuda/kc_callbacks.h"), "utf8");
  const at = src.indexOf(`#define ${list}(X)`);
  if (at < 0) throw new Error(`${list} not in c/cuda/kc_callbacks.h`);
  const body = src.slice(at).split("\n");
  const lines: string[] = [];
  for (const l of body) {
    lines.push(l);
    if (!l.trimEnd().endsWith("\\")) break;
  }
  return [...lines.join("\n").matchAll(/X\((\w+),\s*\w+\)/g)].map((m) => m[1]!);
}

// The launches: two PyTorch kernels (mangled C++, over 100 bytes) and a Triton kernel.
const NAMES = [
  "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_",
  "_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_EEvS4_RKT_EUliE_EEviT1_",
  "triton_poi_fused_add_mul_0",
];

let tmp = "";
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "kerncap-c-launch-path-"));
  if (!ready) return;
  const gcc = (args: string[]) => {
    const cc = Bun.spawnSync(["gcc", "-std=gnu11", "-O1", ...args], { stderr: "pipe" });
    if (cc.exitCode !== 0) throw new Error(cc.stderr.toString());
  };
  const fake = join(ROOT, "c/test/fake_cuda.c");
  gcc(["-shared", "-fPIC", "-DFAKE_LIBCUDA", "-o", join(tmp, "libcuda.so.1"), fake]);
  gcc(["-shared", "-fPIC", "-DFAKE_LIBCUPTI", "-o", join(tmp, "libcupti.so"), fake]);
  // -rdynamic: the regexec launch_main defines is the one the library's calls reach
  gcc([
    ...INC.map((d) => `-I${d}`),
    "-rdynamic",
    "-o",
    join(tmp, "launch_main"),
    join(ROOT, "c/test/launch_main.c"),
    `-L${tmp}`,
    "-l:libcupti.so",
    `-Wl,-rpath,${tmp}`,
    "-ldl",
    "-lpthread",
  ]);
}, 60_000);
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

let outs = 0;
/** launch_main under the library in `mode` (list, or run whose --kernel matches nothing). */
function drive(mode: "list" | "run", args: string[]): { out: string; stdout: string; stderr: string } {
  const out = join(tmp, `out-${outs++}`);
  mkdirSync(join(out, "kernel"), { recursive: true });
  mkdirSync(join(out, "memory"));
  const sel = mode === "list" ? { KERNCAP_MODE: "list" } : { KERNCAP_MODE: "capture", KERNCAP_KERNEL: "^kerncap_never_matches$", KERNCAP_DISPATCH: "0" };
  const env = {
    PATH: process.env.PATH ?? "",
    LD_LIBRARY_PATH: tmp,
    KERNCAP_OUT: out,
    KERNCAP_CUPTI_PATH: join(tmp, "libcupti.so"),
    KC_COUNT_REGEXEC: "1",
    ...sel,
  };
  const p = Bun.spawnSync([join(tmp, "launch_main"), LIB, ...args], { env, stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  const stderr = p.stderr.toString();
  expect(p.exitCode, stderr).toBe(0);
  expect(
    readdirSync(out).filter((f) => f.startsWith("error.")),
    stderr,
  ).toEqual([]);
  return { out, stdout: p.stdout.toString(), stderr };
}

/** The callbacks enabled in `mode`: driver API callbacks by name, resource callbacks by id. */
function enabled(mode: "list" | "run"): { driver: Set<string>; resource: Set<number> } {
  return enabledIn(drive(mode, ["cbids", "-"]).stdout);
}

/** launch_main's `cbids` lines ("DOMAIN CBID"), driver callbacks by name and resource callbacks by id. */
function enabledIn(stdout: string): { driver: Set<string>; resource: Set<number> } {
  const names = driverCbidNames();
  const driver = new Set<string>();
  const resource = new Set<number>();
  for (const l of stdout.split("\n").filter(Boolean)) {
    const [dom, id] = l.split(" ").map(Number) as [number, number];
    if (dom === DRIVER) driver.add(names.get(id) ?? `cbid ${id}`);
    else if (dom === RESOURCE) resource.add(id);
    else throw new Error(`a callback of domain ${dom} enabled (cbid ${id})`);
  }
  return { driver, resource };
}

function regexecCalls(stderr: string): number {
  const m = /regexec (\d+)/.exec(stderr);
  if (!m) throw new Error(`launch_main printed no regexec count: ${stderr}`);
  return Number(m[1]);
}

/** Launches per kernel name in the census the library wrote (kernels.<pid>.json). */
function censusCounts(out: string): Map<string, number> {
  const f = readdirSync(out).find((x) => /^kernels\.\d+\.json$/.test(x));
  if (!f) throw new Error(`no census in ${out}`);
  const doc = JSON.parse(readFileSync(join(out, f), "utf8"));
  return new Map((doc.kernels as { name: string; count: number }[]).map((k) => [k.name, k.count]));
}

describe.skipIf(!ready)("the capture library's counting path", () => {
  test("each mode enables the callbacks of kerncap_cuda.c's lists for it, and no API called around every launch", () => {
    const list = enabled("list");
    const run = enabled("run");
    const counting = [...xList("KC_LAUNCH_CALLBACKS"), ...xList("KC_DRIVER_CALLBACKS")];
    const capture = xList("KC_CAPTURE_CALLBACKS");
    expect([...list.driver].sort()).toEqual([...new Set(counting)].sort());
    expect([...run.driver].sort()).toEqual([...new Set([...counting, ...capture])].sort());
    // what each list must hold: every launch entry point in both modes, the capture's needs in run only
    const launches = [
      "cuLaunchKernel",
      "cuLaunchKernel_ptsz",
      "cuLaunchKernelEx",
      "cuLaunchKernelEx_ptsz",
      "cuLaunchCooperativeKernel",
      "cuLaunchCooperativeKernel_ptsz",
      "cuGraphLaunch",
      "cuGraphLaunch_ptsz",
    ];
    for (const n of launches) {
      expect(list.driver.has(n), `list enables ${n}`).toBe(true);
      expect(run.driver.has(n), `run enables ${n}`).toBe(true);
    }
    for (const n of ["cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync", "cuModuleLoadData", "cuLibraryLoadData"]) {
      expect(run.driver.has(n), `run enables ${n}`).toBe(true);
      expect(list.driver.has(n), `list does not enable ${n}`).toBe(false);
    }
    expect([...list.driver].filter((n) => /^cu(Mem|ModuleLoad|LibraryLoad)/.test(n))).toEqual([]);
    expect(run.resource.has(MODULE_LOADED)).toBe(true);
    expect(list.resource.has(MODULE_LOADED)).toBe(false);
    // the calls an application (the CUDA runtime, PyTorch, Triton's launcher) makes around its launches
    const neighbours = [
      "cuCtxGetCurrent",
      "cuCtxSetCurrent",
      "cuCtxPushCurrent_v2",
      "cuCtxPopCurrent_v2",
      "cuCtxGetDevice",
      "cuCtxSynchronize",
      "cuDevicePrimaryCtxRetain",
      "cuStreamSynchronize",
      "cuStreamSynchronize_ptsz",
      "cuStreamQuery",
      "cuStreamWaitEvent",
      "cuEventRecord",
      "cuEventRecord_ptsz",
      "cuEventQuery",
      "cuEventSynchronize",
      "cuStreamIsCapturing",
      "cuStreamGetCaptureInfo",
      "cuStreamGetCaptureInfo_v2",
      "cuPointerGetAttribute",
      "cuPointerGetAttributes",
      "cuFuncGetAttribute",
      "cuFuncSetAttribute",
      "cuKernelGetFunction",
      "cuLibraryGetKernel",
      "cuMemcpyAsync",
      "cuMemcpyHtoDAsync_v2",
      "cuMemcpyDtoHAsync_v2",
      "cuMemsetD32Async",
      "cuGetProcAddress",
    ];
    for (const n of neighbours) expect(run.driver.has(n) || list.driver.has(n), `${n} enabled`).toBe(false);
  });

  test("CUPTI's floor in `list` and `run` enables exactly the library's callbacks of that mode", () => {
    // scripts/bench-launch-overhead.sh subtracts these floors from the library's figures: a floor with
    // a shorter list would charge the library for CUPTI's work
    const floor = join(tmp, "libcupti_floor.so");
    const cc = Bun.spawnSync(
      ["gcc", "-O1", "-shared", "-fPIC", `-I${join(ROOT, "c/cuda")}`, ...INC.map((d) => `-I${d}`), "-o", floor, join(ROOT, "c/test/cupti_floor.c"), "-ldl"],
      {
        stderr: "pipe",
      },
    );
    expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    for (const mode of ["list", "run"] as const) {
      const p = Bun.spawnSync([join(tmp, "launch_main"), floor, "cbids", "-"], {
        env: { PATH: process.env.PATH ?? "", LD_LIBRARY_PATH: tmp, KERNCAP_CUPTI_PATH: join(tmp, "libcupti.so"), KC_FLOOR: mode },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      const got = enabledIn(p.stdout.toString());
      const lib = enabled(mode);
      expect([...got.driver].sort(), mode).toEqual([...lib.driver].sort());
      expect([...got.resource].sort(), mode).toEqual([...lib.resource].sort());
      expect(got.driver.size).toBeGreaterThan(10);
    }
  });

  test("the kernel-name regexes run once per kernel name, not per launch; every launch is counted", () => {
    const few = drive("run", ["bench", "30", ...NAMES]);
    const many = drive("run", ["bench", "30000", ...NAMES]);
    const calls = regexecCalls(many.stderr);
    expect(calls).toBeGreaterThan(0); // the counter sees the library's matcher
    expect(calls).toBeLessThanOrEqual(2 * NAMES.length); // the mangled and the demangled name, once each
    expect(calls).toBe(regexecCalls(few.stderr));
    // bench: a warm-up of 1000 launches, then N, cycling over the names
    const counts = censusCounts(many.out);
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(31_000);
    for (const n of NAMES) expect(counts.get(n)).toBeGreaterThanOrEqual(Math.floor(31_000 / NAMES.length));
  }, 60_000);

  test("from several threads too: once per name, and no launch lost (list and run)", () => {
    for (const mode of ["list", "run"] as const) {
      const r = drive(mode, ["threads", "4", "5000", ...NAMES]);
      // list has no --kernel: nothing to match
      const [least, most] = mode === "list" ? [0, 0] : [1, 2 * NAMES.length];
      expect(regexecCalls(r.stderr)).toBeGreaterThanOrEqual(least);
      expect(regexecCalls(r.stderr)).toBeLessThanOrEqual(most);
      const counts = censusCounts(r.out);
      expect([...counts.values()].reduce((a, b) => a + b, 0)).toBe(20_000);
      for (const n of NAMES) expect(counts.has(n)).toBe(true);
    }
  }, 60_000);
});
