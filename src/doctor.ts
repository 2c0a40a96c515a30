/**
 * `kerncap doctor`: what this machine has for capture, replay and reproducers, each check
 * ok / warn / fail / skip with the fix. Facts come from: dlopen of libcuda (cuDriverGetVersion,
 * cuInit, cuDeviceGetCount), the CUPTI search (src/native/libcupti-search.ts), `nvcc --version`, each
 * frontend's own checks (Frontend.doctor: Triton's python3 and its packages), the cache folder
 * (src/cache.ts preferredCacheDir and its TMPDIR fallback, written to), /proc/sys/kernel/randomize_va_space, the confined
 * build's sandbox (kerncap-confine --probe: src/frontends/sandbox.ts), and with a GPU
 * a VA reservation at an address the driver just handed out (cuMemAddressReserve, as replay does)
 * and a capture + replay of a built-in kernel in child kerncap processes.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { discardTemp, openTempBeside } from "./util/write-file.ts";
import { selfCommand, selfEnv } from "./util/self-exec.ts";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { findCupti } from "./native/libcupti-search.ts";
import { privateFolderRisk, fallbackCacheDir, preferredCacheDir, privateTempFolder } from "./cache.ts";
import type { Env } from "./env.ts";
import { isKerncapError } from "./errors.ts";
import { libcudaOverride, sandboxOff, whichAbsolute } from "./env.ts";
import {
  countDevices,
  type DeviceInfo,
  describeLibcudaSearch,
  listDevices,
  driverVersion,
  libcudaCandidates,
  loaderReason,
  overrideDoesNotLoad,
  NEEDS_GPU,
  WITHOUT_GPU,
} from "./native/libcuda.ts";
import { findNsightTool } from "./profile/ncu.ts";
import { frontends } from "./frontends/index.ts";
import { machineConfinement, sandboxSupport } from "./frontends/sandbox.ts";

export type CheckStatus = "ok" | "warn" | "fail" | "skip";
export interface Check {
  id: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

export interface DoctorOptions {
  /** Run the tiny capture + replay when a GPU is present (a few seconds: nvcc, the app, replay). */
  capture?: boolean;
  env?: Record<string, string | undefined>;
}

/** "13.0" from CUDA's integer version 13000. */
export const cudaVersionText = (v: number) => `${Math.floor(v / 1000)}.${(v % 1000) / 10}`;

function sh(argv: string[], timeoutMs = 20_000, env?: Record<string, string | undefined>): { code: number; out: string; err: string } {
  try {
    const p = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe", timeout: timeoutMs, env: env as Record<string, string> | undefined });
    return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
  } catch (e) {
    return { code: -1, out: "", err: (e as Error).message };
  }
}

/** libcuda: loadable, and the driver's CUDA version (cuDriverGetVersion, no cuInit needed). */
export function checkLibcuda(): Check & { loaded?: string } {
  const tried: { name: string; reason: string }[] = [];
  let candidates: string[];
  try {
    candidates = libcudaCandidates();
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return { id: "libcuda", status: "fail", detail: e.message, fix: e.hint ?? "Unset KERNCAP_LIBCUDA." };
  }
  for (const n of candidates) {
    let d;
    try {
      d = driverVersion(n);
    } catch (e) {
      tried.push({ name: n, reason: loaderReason(e) });
      continue;
    }
    if (d.result !== 0)
      return {
        id: "libcuda",
        status: "fail",
        detail: `${n} loaded but cuDriverGetVersion returned ${d.result}`,
        fix: "Reinstall the NVIDIA driver (its libcuda.so.1 does not answer).",
      };
    // every entry point replay calls (src/native/libcuda.ts SYMBOLS): an older driver lacks some
    if (d.lacks)
      return {
        id: "libcuda",
        status: "fail",
        detail: `${n}: CUDA ${cudaVersionText(d.version)}, but it lacks ${d.lacks}, which replay calls`,
        fix: "Update the NVIDIA driver (kerncap is built against CUDA 13), or set KERNCAP_LIBCUDA to the driver's libcuda.so.1.",
      };
    // found on PATH's absolute entries only (adversary round 71: a planted node_modules/.bin/nvidia-smi ran under doctor)
    const smiPath = whichAbsolute("nvidia-smi");
    const smi = smiPath ? sh([smiPath, "--query-gpu=driver_version", "--format=csv,noheader"], 10_000) : undefined;
    const drv = smi?.code === 0 ? `driver ${smi.out.trim().split("\n")[0]}, ` : "";
    return { id: "libcuda", status: "ok", detail: `${n}: ${drv}CUDA ${cudaVersionText(d.version)}`, loaded: n };
  }
  if (libcudaOverride(process.env)) {
    const e = overrideDoesNotLoad(tried);
    return { id: "libcuda", status: "fail", detail: e.message, fix: e.hint };
  }
  return {
    id: "libcuda",
    status: "fail",
    detail: `not found; tried ${describeLibcudaSearch(tried)}`,
    fix: `Install the NVIDIA driver (or set KERNCAP_LIBCUDA to libcuda.so.1): ${NEEDS_GPU}; ${WITHOUT_GPU}.`,
  };
}

/** A GPU the driver can initialise (cuInit, cuDeviceGetCount). */
export function checkGpu(libcuda: string | undefined): Check {
  if (!libcuda) return { id: "gpu", status: "skip", detail: "no libcuda" };
  const { result: r, count } = countDevices(libcuda);
  if (r !== 0 || !count)
    return {
      id: "gpu",
      status: "fail",
      detail: `cuInit returned ${r}${r === 100 ? " (CUDA_ERROR_NO_DEVICE)" : ""}, ${count} devices`,
      fix: `Check nvidia-smi and CUDA_VISIBLE_DEVICES (an empty value hides every GPU); ${WITHOUT_GPU}.`,
    };
  return { id: "gpu", status: "ok", detail: `${count} CUDA device${count === 1 ? "" : "s"} visible` };
}

/** libcupti, and whether another tool is already injected (CUDA_INJECTION64_PATH): kerncap sets its own for the app. */
export function checkCupti(env: Record<string, string | undefined>): Check {
  try {
    const p = findCupti(env);
    const other = env.CUDA_INJECTION64_PATH;
    if (other)
      return {
        id: "cupti",
        status: "warn",
        detail: `${p}; CUDA_INJECTION64_PATH is already set (${other})`,
        fix: "kerncap run/list replace it for the application; run kerncap outside nsys/ncu, which hold the CUPTI subscriber.",
      };
    return { id: "cupti", status: "ok", detail: p };
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return { id: "cupti", status: "fail", detail: e.message.split("\n")[0]!, fix: e.hint };
  }
}

/** nvcc on PATH (or CUDA_HOME, /usr/local/cuda) and its release. */
export function checkNvcc(env: Record<string, string | undefined>): Check & { path?: string } {
  const cands = [env.NVCC, whichAbsolute("nvcc", env.PATH), env.CUDA_HOME && join(env.CUDA_HOME, "bin/nvcc"), "/usr/local/cuda/bin/nvcc"].filter(
    (x): x is string => !!x && existsSync(x),
  );
  if (!cands.length)
    return {
      id: "nvcc",
      status: "warn",
      detail: "not found (PATH, CUDA_HOME, /usr/local/cuda)",
      fix: "Install the CUDA toolkit (or set NVCC): CUDA reproducers rebuild with it (validate); capture and replay do not need it.",
    };
  const r = sh([cands[0]!, "--version"]);
  const rel = /release ([0-9.]+), V([0-9.]+)/.exec(r.out);
  if (r.code !== 0 || !rel)
    return { id: "nvcc", status: "warn", detail: `${cands[0]} --version failed (exit ${r.code})`, fix: "Check the CUDA toolkit installation." };
  return { id: "nvcc", status: "ok", detail: `${cands[0]}: CUDA ${rel[2]}`, path: cands[0] };
}

/** Nsight Compute for `kerncap profile` (src/profile/ncu.ts findNsightTool: PATH, then $CUDA_HOME/bin). */
export function checkNcu(env: Record<string, string | undefined>): Check {
  try {
    const ncu = findNsightTool("ncu", env);
    const r = sh([ncu, "--version"]);
    const ver = /Version ([0-9.]+)/.exec(r.out)?.[1];
    return { id: "ncu", status: "ok", detail: `${ncu}${ver ? `: Nsight Compute ${ver}` : ""}` };
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return {
      id: "ncu",
      status: "warn",
      detail: e.message,
      fix: "Only kerncap profile needs it: install Nsight Compute (with the CUDA toolkit or on its own) and put ncu on PATH or set CUDA_HOME.",
    };
  }
}

/** Create `dir` and write a probe file in it. @throws the file system's error. */
function probeWritable(dir: string): void {
  mkdirSync(dir, { recursive: true });
  // the one writer's temp (src/util/write-file.ts): an unguessable O_EXCL|O_NOFOLLOW name, never a planted link
  const { fd, tmp } = openTempBeside(join(dir, ".doctor"));
  discardTemp(fd, tmp);
}

/**
 * The cache folder for the embedded capture library, Triton shim and templates, chosen as
 * src/cache.ts chooses it: the preferred folder ($KERNCAP_CACHE, $XDG_CACHE_HOME/kerncap or
 * ~/.cache/kerncap) written to: ok; one that other users could write (privateFolderRisk): warn,
 * naming the folder and the fix; else its $TMPDIR/kerncap-cache-<uid> fallback written to: warn;
 * neither: fail.
 */
/**
 * TMPDIR: where a build's private copy, check's and eval's folders are made (src/cache.ts
 * privateTempFolder). One made and removed here: E_TMPDIR (another user's folder, one others can
 * write and not sticky, none writable) is this check's fail, with privateTempFolder's own words.
 */
export function checkTmpdir(): Check {
  try {
    const dir = privateTempFolder("kerncap-doctor-");
    rmSync(dir, { recursive: true, force: true });
    return { id: "tmpdir", status: "ok", detail: `${tmpdir()}: a private folder can be made there (a build's copy, check's and eval's folders)` };
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return { id: "tmpdir", status: "fail", detail: e.message, fix: e.hint ?? "Set TMPDIR to a writable folder of your own." };
  }
}

export function checkCache(env: Env = process.env): Check {
  let pref: ReturnType<typeof preferredCacheDir>;
  try {
    pref = preferredCacheDir(env);
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return { id: "cache", status: "fail", detail: e.message, fix: e.hint ?? "Set KERNCAP_CACHE to an absolute path." };
  }
  const fix = "Set KERNCAP_CACHE (or XDG_CACHE_HOME) to a writable folder: run and list write the capture library there.";
  // a cache that others can write is not used (src/cache.ts privateFolderRisk): say which folder and how to close it
  const risk = privateFolderRisk(pref.dir);
  if (risk) {
    const fallback = fallbackCacheDir(env);
    return {
      id: "cache",
      status: "warn",
      detail: `${pref.dir} (from ${pref.from}) is not used: ${risk}, so another user could plant a library that kerncap would load into your application; kerncap uses ${fallback} (or a private copy) instead`,
      fix: `chmod go-w the folder named (and make it yours: chown), or set KERNCAP_CACHE to a folder of your own, mode 0700 (mkdir -m 700 ~/.cache/kerncap).`,
    };
  }
  let why = "";
  try {
    probeWritable(pref.dir);
    return { id: "cache", status: "ok", detail: `${pref.dir} (from ${pref.from}) is writable` };
  } catch (e) {
    why = (e as Error).message.split("\n")[0]!;
  }
  const fallback = fallbackCacheDir(env);
  try {
    probeWritable(fallback);
    return { id: "cache", status: "warn", detail: `${pref.dir} (from ${pref.from}) is not writable (${why}); kerncap falls back to ${fallback}`, fix };
  } catch (e) {
    return {
      id: "cache",
      status: "fail",
      detail: `neither ${pref.dir} (from ${pref.from}; ${why}) nor the fallback ${fallback} (${(e as Error).message.split("\n")[0]}) is writable`,
      fix: `${fix} Or set TMPDIR to a writable temp folder.`,
    };
  }
}

/** Address-space randomization (/proc/sys/kernel/randomize_va_space), and setarch for the no-ASLR retry. */
export function checkAslr(procFile = "/proc/sys/kernel/randomize_va_space"): Check {
  let v: string;
  try {
    v = readFileSync(procFile, "utf8").trim();
  } catch {
    return { id: "aslr", status: "skip", detail: `${procFile} unreadable (not Linux?)` };
  }
  if (v === "0") return { id: "aslr", status: "ok", detail: "randomize_va_space = 0 (off): captured VAs never collide with the replay's own mappings" };
  if (!whichAbsolute("setarch"))
    return {
      id: "aslr",
      status: "warn",
      detail: `randomize_va_space = ${v} and no setarch`,
      fix: "Install util-linux (setarch): a replay whose captured range is taken by its own mappings retries once without ASLR.",
    };
  return { id: "aslr", status: "ok", detail: `randomize_va_space = ${v} (on); a replay that finds a captured range taken retries once under setarch -R` };
}

/**
 * The sandbox a confined CUDA build (kerncap mcp's validate, tune, profile, evaluate) runs in here
 * (src/frontends/sandbox.ts): the namespace tree (ok), Landlock alone or the source scan alone
 * (warn: a build can still learn whether a path exists, one bit per build).
 */
export function checkConfinedBuild(): Check {
  const c = machineConfinement();
  const s = sandboxSupport();
  if (sandboxOff())
    return {
      id: "confined-build",
      status: "warn",
      detail: "scan: KERNCAP_SANDBOX=0 turns the sandbox off; a confined build can learn whether a path exists (one bit per build)",
      fix: "Unset KERNCAP_SANDBOX.",
    };
  const abi = s ? `Landlock ABI ${s.abi || "none"}` : "kerncap-confine did not run";
  const fix =
    "Let unprivileged processes make user namespaces (Ubuntu 24.04: sysctl kernel.apparmor_restrict_unprivileged_userns=0; others: kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0), or run kerncap mcp where they can.";
  if (c === "namespace")
    return {
      id: "confined-build",
      status: "ok",
      detail: `namespace: a confined build sees only its sources and the toolchain (${abi}${s?.abi ? " on top" : ""})`,
    };
  if (c === "landlock")
    return {
      id: "confined-build",
      status: "warn",
      detail: `landlock (${abi}): a confined build reads nothing outside, but no user namespace can be made, so it can still learn whether a path exists (one bit per build)`,
      fix,
    };
  return {
    id: "confined-build",
    status: "warn",
    detail: `scan: neither Landlock nor a user namespace (${abi}); a confined build is judged by its source scan and dependency list alone, and can learn whether a path exists (one bit per build)`,
    fix,
  };
}

/**
 * Fixed-VA reservation, as replay does it: cuMemAlloc learns where this driver places device
 * memory, the block is freed, and cuMemAddressReserve must give exactly that address back
 * (Cuda.mapAt). The context is destroyed afterwards.
 */
export async function checkVaReservation(): Promise<Check> {
  const { cuda, resetCuda } = await import("./native/libcuda.ts");
  try {
    const c = cuda();
    const g = c.granularity();
    const size = Math.max(g, 2 << 20);
    const at = c.memAlloc(size);
    c.memFree(at);
    const va = (at + BigInt(g) - 1n) & ~(BigInt(g) - 1n);
    c.mapAt(va, size);
    return { id: "va-reservation", status: "ok", detail: `reserved and mapped ${size >> 20} MiB at 0x${va.toString(16)} (${c.deviceName()} ${c.arch()})` };
  } catch (e) {
    return {
      id: "va-reservation",
      status: "fail",
      detail: (e as Error).message,
      fix: isKerncapError(e) && e.hint ? e.hint : "Replay cannot map memory at captured addresses here; check the driver (VMM support: cuMemAddressReserve).",
    };
  } finally {
    resetCuda();
  }
}

/** The built-in kernel of the capture + replay check. */
export const DOCTOR_APP = `#include <cstdio>
#include <cstdlib>
__global__ void kerncap_doctor_axpb(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}
int main() {
  const int n = 1 << 16;
  float* h = (float*)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) h[i] = 0.5f * i;
  float* d = nullptr;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 3;
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  kerncap_doctor_axpb<<<n / 256, 256>>>(d, 3.0f, 1.0f, n);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%g\\n", h[10]);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 4;
}
`;

/** Build the built-in app with nvcc, capture its kernel with `kerncap run`, replay it with `kerncap replay` (child processes). */
export function checkCaptureReplay(nvcc: string | undefined, env: Record<string, string | undefined>): Check {
  if (!nvcc) return { id: "capture-replay", status: "skip", detail: "no nvcc to build the built-in test app" };
  let dir: string;
  try {
    dir = privateTempFolder("kerncap-doctor-");
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return { id: "capture-replay", status: "warn", detail: e.message, fix: e.hint ?? "Set TMPDIR to a writable folder of your own." };
  }
  try {
    writeFileSync(join(dir, "app.cu"), DOCTOR_APP);
    const b = sh([nvcc, "-arch=native", "-o", join(dir, "app"), join(dir, "app.cu")], 120_000, env);
    if (b.code !== 0)
      return {
        id: "capture-replay",
        status: "warn",
        detail: `nvcc could not build the test app: ${b.err.trim().split("\n").slice(-2).join(" ")}`,
        fix: "Check the CUDA toolkit (nvcc -arch=native needs a visible GPU).",
      };
    const base = selfEnv(env);
    const cap = join(dir, "cap");
    const run = sh([...selfCommand(), "run", "--kernel", "kerncap_doctor_axpb", "--out", cap, "--json", "--", join(dir, "app")], 120_000, base);
    if (run.code !== 0)
      return {
        id: "capture-replay",
        status: "fail",
        detail: `kerncap run failed (exit ${run.code}): ${lastError(run)}`,
        fix: "Run the same with --verbose: kerncap run --kernel NAME --verbose -- APP.",
      };
    const rep = sh([...selfCommand(), "replay", cap, "--iters", "3", "--json"], 120_000, base);
    let verdict = "";
    let us = NaN;
    try {
      const j = JSON.parse(rep.out);
      verdict = j.verdict;
      us = j.timing?.medianUs;
    } catch {
      /* reported below */
    }
    if (rep.code !== 0 || verdict !== "match")
      return {
        id: "capture-replay",
        status: "fail",
        detail: `kerncap replay: ${verdict || `exit ${rep.code}`}: ${lastError(rep)}`,
        fix: "Report it with the output of `kerncap replay DIR --verbose`.",
      };
    return {
      id: "capture-replay",
      status: "ok",
      detail: `captured and replayed a built-in kernel bit-exact (${Number.isFinite(us) ? us.toFixed(1) + " µs" : "timed"})`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function lastError(r: { out: string; err: string }): string {
  try {
    const j = JSON.parse(r.out);
    if (j.error) return j.error.message;
  } catch {
    /* not JSON */
  }
  return (r.err.trim().split("\n").filter(Boolean).pop() ?? "").slice(0, 300);
}

/** Every check, in order. GPU checks run only when libcuda loads and a device initialises. */
/**
 * doctor's answer: the verdict over every check, the checks, and the machine answer a scheduler
 * reads (nu10 #25): `gpus`, each CUDA device the driver sees ([] without libcuda or a device);
 * `canReplay`, a GPU initialises and a fixed-VA reservation works there (what replay, validate,
 * check, tune and eval's GPU workers need); `canCapture`, that and CUPTI found, and the built-in
 * capture + replay did not fail (skipped with --no-capture: not counted); `canBuild`, nvcc found and
 * the cache folder and TMPDIR usable (validate --build-only, eval --build-only, check --rebuild's
 * builds: a CI runner without a GPU; nu12 #5).
 */
export interface DoctorReport {
  verdict: "ok" | "warn" | "fail";
  checks: Check[];
  gpus: DeviceInfo[];
  canCapture: boolean;
  canReplay: boolean;
  canBuild: boolean;
}

export async function runDoctor(o: DoctorOptions = {}): Promise<DoctorReport> {
  const env = o.env ?? process.env;
  const checks: Check[] = [];
  const lc = checkLibcuda();
  const { loaded, ...libcuda } = lc;
  checks.push(libcuda);
  const gpu = checkGpu(loaded);
  checks.push(gpu);
  checks.push(checkCupti(env));
  const nv = checkNvcc(env);
  const { path: nvccPath, ...nvcc } = nv;
  checks.push(nvcc);
  checks.push(checkNcu(env));
  checks.push(...frontends().flatMap((f) => f.doctor?.(env) ?? [])); // each frontend's toolchain (Triton: python3, triton, torch)
  checks.push(checkCache(env));
  checks.push(checkTmpdir()); // every build and eval makes its private folders there (trial 11: doctor said ok, every build failed E_TMPDIR)
  checks.push(checkAslr());
  checks.push(checkConfinedBuild());
  if (gpu.status === "ok") {
    checks.push(await checkVaReservation());
    checks.push(o.capture === false ? { id: "capture-replay", status: "skip", detail: "--no-capture" } : checkCaptureReplay(nvccPath, env));
  } else {
    checks.push({ id: "va-reservation", status: "skip", detail: "no GPU" }, { id: "capture-replay", status: "skip", detail: "no GPU" });
  }
  const verdict = checks.some((c) => c.status === "fail") ? "fail" : checks.some((c) => c.status === "warn") ? "warn" : "ok";
  const status = (id: string) => checks.find((c) => c.id === id)?.status;
  let gpus: DeviceInfo[] = [];
  if (loaded && gpu.status === "ok")
    try {
      gpus = listDevices(loaded);
    } catch {
      gpus = []; // loaded a moment ago: a driver that no longer loads lists none
    }
  const canReplay = gpu.status === "ok" && status("va-reservation") === "ok";
  const canCapture = canReplay && status("cupti") === "ok" && status("capture-replay") !== "fail";
  const canBuild = Boolean(nvccPath) && status("cache") !== "fail" && status("tmpdir") !== "fail";
  return { verdict, checks, gpus, canCapture, canReplay, canBuild };
}
