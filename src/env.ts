/**
 * Every `KERNCAP_*` environment variable of kerncap's core, in one table: its meaning, who sets it
 * and who reads it (kerncap itself, the C capture libraries c/cuda/kerncap_cuda.c and
 * c/hsa/kerncap_hsa.c with their units, a frontend's capture-time code, a reproducer's
 * build.sh, or the test and benchmark scripts). A frontend's own variables sit in its folder
 * (src/frontends/<name>/env.ts, Frontend.env); src/frontends/index.ts envVars() is the whole
 * list. kerncap's TypeScript reads and writes them only through the typed getters and builders of
 * these env.ts modules (test/cpu/env.test.ts checks that, and that docs/environment.md lists
 * exactly these).
 *
 * Getters take an optional environment (default process.env) so tests can pass their own.
 * Flags are on only when the value is exactly "1" (what the C libraries test with strcmp).
 */
import { posix } from "node:path";
import { walkPhysically } from "./path-walk.ts";

export type Env = Record<string, string | undefined>;

/** Who reads a variable: kerncap, a capture library, the tests, or a frontend's readers (its shim, its reproducer: "Triton shim"). */
export type Reader = "kerncap" | "CUDA library" | "HSA library" | "tests" | `${string} shim` | `${string} reproducer`;

export interface EnvVarDoc {
  /** Who reads it. */
  readers: readonly Reader[];
  /** "user": you may set it; "kerncap": kerncap sets it for a child process (your own value is overridden); "build.sh": a reproducer's build script sets it. */
  setBy: "user" | "kerncap" | "build.sh";
  /** One line, README style. */
  meaning: string;
}

export const ENV_VARS = {
  // ---- set by you, read by kerncap ----
  KERNCAP_CACHE: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "folder for the files kerncap writes out of its executable (capture library, Triton shim, reproducer templates), each in a content-hashed subfolder, and the system headers' facts a CUDA slice's check read (`cuda-system-headers-<16 hex>.json`, one per toolchain environment: used only in a folder no other user can write, and only while every path it names is as it was); default `$XDG_CACHE_HOME/kerncap`, else `~/.cache/kerncap` (an absolute path: a relative one is refused, a relative `XDG_CACHE_HOME` ignored); when that cannot be written, `$TMPDIR/kerncap-cache-<uid>` is used and said once",
  },
  KERNCAP_CUDA_LIB: { readers: ["kerncap"], setBy: "user", meaning: "path of a libkerncap_cuda.so to inject instead of the embedded one" },
  KERNCAP_SANDBOX: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "`0`: a confined build runs without the sandbox (src/frontends/sandbox.ts), judged by its source scan and dependency list alone, which leaves an agent one bit per build (whether a path exists); for a toolchain the sandbox does not hold (kerncap doctor: confined-build)",
  },
  KERNCAP_BUILD_TIMEOUT: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "seconds (a whole number, 1 or more) a reproducer's build.sh may run, in every verb that rebuilds (validate, eval, tune, profile, kerncap mcp's build/validate/evaluate): past it the build's process group is killed and the build is a compile error, `E_BUILD` \"build.sh timed out after N s\" (an eval candidate's `compile-error`); default: no limit on the command line, 600 s for a confined build (--confine, kerncap mcp, eval's CUDA candidates) and a received capture's; another value is refused (`E_USAGE`)",
  },
  KERNCAP_CUPTI_PATH: {
    readers: ["kerncap", "CUDA library"],
    setBy: "user",
    meaning: "libcupti.so to use (an explicit path that does not exist is an error); kerncap passes the one it found to the CUDA library",
  },
  KERNCAP_LIBCUDA: {
    readers: ["kerncap"],
    setBy: "user",
    meaning: "libcuda.so.1 for replay and the GPU probe, searched first (a path to no file is an error, not a fallback)",
  },
  KERNCAP_HSA_PATH: { readers: ["kerncap"], setBy: "user", meaning: "libhsa-runtime64.so.1 for AMD replay, searched first" },
  KERNCAP_VERBOSE: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "debug logs from the start, as `--verbose`: any value but an off word (empty, 0, false, no, off); validate's phases among them as `t+N ms: …` (ms since the process started: the compiler's start, the replay's preparation, the build's end …)",
  },
  KERNCAP_NO_ASLR_RETRY: { readers: ["kerncap"], setBy: "user", meaning: "`1`: replay/validate do not retry without ASLR when a captured VA range is taken" },
  KERNCAP_NO_PRELOAD: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "`1`: kerncap leaves LD_PRELOAD alone (the CUDA library is then only on CUDA_INJECTION64_PATH: the application's cuptiSubscribe calls go unreported)",
  },
  KERNCAP_CHUNK_BYTES: {
    readers: ["CUDA library", "HSA library"],
    setBy: "user",
    meaning: "snapshot chunk size in bytes, a power of two from 64 KiB to 64 MiB (default 1 MiB; another value is ignored)",
  },
  KERNCAP_TIMING: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "how timed launches are prepared, for experiments (scripts/exp-kernel-time.sh): comma-separated `spin=µs` (default 30), `warmup=N` (2), `restore=` `device`, `host` or `none` (device), `l2=` `restored`, `reread` or `evicted` (restored: L2 as the restore leaves it, dirty lines of the kernel's output included), `clock=` `events` or `cupti` (events; cupti: the GPU's own kernel timestamps from CUPTI's activity records, events under another CUPTI client); docs/performance.md",
  },
  KERNCAP_FAULT_VA_TAKEN: {
    readers: ["kerncap"],
    setBy: "user",
    meaning: "`1` (tests): replay maps the first captured span itself first, to exercise the VA-taken path",
  },
  KERNCAP_RESULTS_KEY: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "the secret (hex, at least 32 digits: `openssl rand -hex 32`) that `check` and `eval` authenticate their results records with and `--merge`/`--resume` verify them with (HMAC-SHA256); give every run of a CI matrix or Slurm array the same one to merge their shards elsewhere. Unset: a key kerncap makes once in your state folder (`results-key`, mode 0600); a weaker value is refused",
  },
  KERNCAP_RECEIVED: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "`1` (or true, yes, on; 0, false, no, off or empty: off; any other value is refused, E_USAGE): every capture counts as received, whoever's files they are and whatever machine they name (a CI job over a pull request's checkout, whose files are the runner user's whoever wrote them): a build runs only after --trust (--trust=DIGEST pinned in reviewed configuration), a CUDA build in the sandbox",
  },
  KERNCAP_FORCE: {
    readers: ["Triton reproducer"],
    setBy: "user",
    meaning: "`1`: a Triton reproducer builds with another Triton version than the capture's; `kerncap validate --allow-version-mismatch` sets it for build.sh",
  },
  // ---- set by kerncap for the application (the capture library contract, docs/raw-capture.md) ----
  KERNCAP_OUT: {
    readers: ["CUDA library", "HSA library", "Triton shim"],
    setBy: "kerncap",
    meaning: "folder the capture library and the Triton shim write into (`DIR.tmp-<pid>-<token>`)",
  },
  KERNCAP_MODE: { readers: ["CUDA library", "HSA library"], setBy: "kerncap", meaning: "`list` (count launches) or `capture`" },
  KERNCAP_KERNEL: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--kernel`: POSIX extended regex on the mangled and the demangled name; several (`--kernel A --kernel B`): one per line, one capture each",
  },
  KERNCAP_DISPATCH: { readers: ["CUDA library", "HSA library"], setBy: "kerncap", meaning: "`--dispatch`: 0-based index among the matching launches" },
  KERNCAP_CAPTURE_ALL: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--capture-all`: `1` captures the Nth launch of every distinct kernel that matches, each into captures/<n>/",
  },
  KERNCAP_MAX_CAPTURES: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--max-captures`: at most this many captures with `--capture-all` (default 64)",
  },
  KERNCAP_LAUNCH_COUNT: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--launch-count`: the N consecutive matching launches from `--dispatch` on, each into captures/<n>/ (default 1)",
  },
  KERNCAP_COUNT_BENCHMARKS: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--count-benchmarks`: `1` counts autotuner benchmark launches toward `--dispatch`",
  },
  KERNCAP_EXIT_AFTER_CAPTURE: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--exit-after-capture`: `1` ends the application (`_exit(0)`) once the capture is written",
  },
  KERNCAP_LOG: {
    readers: ["CUDA library", "HSA library", "Triton shim"],
    setBy: "kerncap",
    meaning: "`--verbose`: `1` makes the library and the shim log to stderr (`[kerncap]`)",
  },
  KERNCAP_RANK: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--rank N`: only the process of that rank captures (first of RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)",
  },
  KERNCAP_PROCESS: {
    readers: ["CUDA library", "HSA library"],
    setBy: "kerncap",
    meaning: "`--process N`: only the Nth process (0-based) of the job that initializes CUDA/HSA captures",
  },
  KERNCAP_NVTX_INCLUDE: {
    readers: ["CUDA library"],
    setBy: "kerncap",
    meaning:
      "`--nvtx-include`: NVTX range expressions (ncu's syntax), one per line; only launches inside one of them count (kerncap also sets NVTX_INJECTION64_PATH to the library)",
  },
  KERNCAP_NVTX_EXCLUDE: {
    readers: ["CUDA library"],
    setBy: "kerncap",
    meaning: "`--nvtx-exclude`: NVTX range expressions, one per line; launches inside any of them do not count",
  },
  KERNCAP_NVTX_SUMMARY: {
    readers: ["CUDA library"],
    setBy: "kerncap",
    meaning: "`list --print-summary per-nvtx`: `1` counts each launch by the NVTX ranges open in its thread (the census's `nvtx.ranges`)",
  },
  // ---- set by kerncap (or its reproducer's build.sh) for its own children ----
  KERNCAP_ASLR_RETRY: { readers: ["kerncap"], setBy: "kerncap", meaning: "`1` in the replay child started without ASLR (setarch -R): no second retry" },
  // ---- tests and benchmark scripts (test/gpu, scripts/) ----
  KERNCAP_BIN: { readers: ["tests"], setBy: "user", meaning: "the kerncap executable the GPU tests and benchmarks drive (default dist/kerncap)" },
  KERNCAP_GPU_OUT: { readers: ["tests"], setBy: "user", meaning: "folder where the GPU tests write measurements and commands.log" },
  KERNCAP_GGML_TAR: {
    readers: ["tests"],
    setBy: "user",
    meaning: "ggml source tarball for the ggml GPU test and bench-edit-loop.sh (default .carry/ggml-src.tar.xz)",
  },
  KERNCAP_LLAMA_TAR: { readers: ["tests"], setBy: "user", meaning: "older name of KERNCAP_GGML_TAR, still read" },
  KERNCAP_GGML_WORK: { readers: ["tests"], setBy: "user", meaning: "where the ggml GPU test keeps its build (default $TMPDIR/kerncap-ggml)" },
  KERNCAP_LLMC_TAR: {
    readers: ["tests"],
    setBy: "user",
    meaning:
      "llm.c source tarball for test/gpu/llmc.test.ts and bench-edit-loop-llmc.sh (default .carry/llmc-src.tar.xz, made by scripts/make-llmc-tarball.sh)",
  },
  KERNCAP_LLMC_WORK: {
    readers: ["tests"],
    setBy: "user",
    meaning: "where the llm.c GPU test and benchmark keep its build, token shards and make dry run (default $TMPDIR/kerncap-llmc)",
  },
} as const satisfies Record<`KERNCAP_${string}`, EnvVarDoc>;

export type EnvName = keyof typeof ENV_VARS;

/** The value, or undefined when unset or empty. */
export function readEnv(name: EnvName, env: Env = process.env): string | undefined {
  const v = env[name];
  return v === undefined || v === "" ? undefined : v;
}

const flag = (name: EnvName, env: Env = process.env): boolean => env[name] === "1";

// ---- typed getters (what kerncap reads) ----
/** $KERNCAP_CACHE: the cache folder chosen by the user (src/cache.ts). */
export const cacheOverride = (env?: Env) => readEnv("KERNCAP_CACHE", env);
/** $KERNCAP_CUDA_LIB: a capture library to inject instead of the embedded one. */
export const cudaLibOverride = (env?: Env) => readEnv("KERNCAP_CUDA_LIB", env);
/** $KERNCAP_BUILD_TIMEOUT: the wall-clock limit of a reproducer's build.sh as set (seconds; checked by src/frontends/build.ts buildTimeout). */
export const buildTimeoutSetting = (env?: Env) => readEnv("KERNCAP_BUILD_TIMEOUT", env);
/** Set $KERNCAP_BUILD_TIMEOUT for this process and the builds it starts (eval --build-timeout S: seconds). */
export function setBuildTimeout(seconds: number): void {
  process.env.KERNCAP_BUILD_TIMEOUT = String(seconds);
}
/**
 * $KERNCAP_RECEIVED: on (1, true, yes, on: any case, spaces around), off (unset, empty, 0, false,
 * no, off), or the value as given when it is neither (src/format/received.ts refuses it: adversary
 * 31, a CI file's `KERNCAP_RECEIVED: true` was silently off).
 */
export function receivedSetting(env?: Env): { on: boolean } | { invalid: string } {
  const raw = readEnv("KERNCAP_RECEIVED", env);
  const v = (raw ?? "").trim().toLowerCase();
  if (["", "0", "false", "no", "off"].includes(v)) return { on: false };
  if (["1", "true", "yes", "on"].includes(v)) return { on: true };
  return { invalid: raw ?? "" };
}
/** $KERNCAP_SANDBOX=0: confined builds without the sandbox (src/frontends/sandbox.ts). */
export const sandboxOff = (env?: Env) => readEnv("KERNCAP_SANDBOX", env) === "0";
/** $KERNCAP_CUPTI_PATH: the libcupti to use (authoritative: src/native/libcupti-search.ts). */
export const cuptiOverride = (env?: Env) => readEnv("KERNCAP_CUPTI_PATH", env);
/** $KERNCAP_LIBCUDA: libcuda searched first. */
export const libcudaOverride = (env?: Env) => readEnv("KERNCAP_LIBCUDA", env);
/** $KERNCAP_HSA_PATH: libhsa-runtime64 searched first. */
export const hsaOverride = (env?: Env) => readEnv("KERNCAP_HSA_PATH", env);
/** $KERNCAP_RESULTS_KEY: the shared results key, as given (src/format/record-auth.ts checks it). */
export const resultsKeyOverride = (env?: Env) => readEnv("KERNCAP_RESULTS_KEY", env);
/** KERNCAP_VERBOSE set to anything but an off word (empty, 0, false, no, off: any case, as KERNCAP_RECEIVED reads them): debug logs from the start. */
export const verboseFromEnv = (env?: Env) => !["", "0", "false", "no", "off"].includes((readEnv("KERNCAP_VERBOSE", env) ?? "").trim().toLowerCase());
/** This process is the no-ASLR replay child (KERNCAP_ASLR_RETRY=1). */
export const isAslrRetryChild = (env?: Env) => flag("KERNCAP_ASLR_RETRY", env);
/** KERNCAP_NO_ASLR_RETRY=1: never retry without ASLR. */
export const aslrRetryDisabled = (env?: Env) => flag("KERNCAP_NO_ASLR_RETRY", env);
/** KERNCAP_NO_PRELOAD=1: the CUDA library is not put on the application's LD_PRELOAD (src/capture/coexist.ts). */
export const preloadDisabled = (env?: Env) => flag("KERNCAP_NO_PRELOAD", env);
/** $KERNCAP_TIMING: the timed launches' setup (src/replay/timing-setup.ts parseTimingSetup). */
export const timingOverride = (env?: Env) => readEnv("KERNCAP_TIMING", env);
/** KERNCAP_FAULT_VA_TAKEN=1: test hook, take the first captured span before the replay does. */
export const faultVaTaken = (env?: Env) => flag("KERNCAP_FAULT_VA_TAKEN", env);

// ---- builders (what kerncap sets for a child process) ----

/** What the capture library is told (docs/raw-capture.md, "Environment read by every capture library"). */
export interface CaptureLibrarySettings {
  /** Folder the library writes into (absolute). */
  out: string;
  mode: "list" | "capture";
  /** POSIX ERE; "" matches every kernel. */
  kernel?: string;
  /** Capture the Nth launch of every distinct matching kernel (KERNCAP_CAPTURE_ALL). */
  captureAll?: boolean;
  maxCaptures?: number;
  /** This many consecutive matching launches from `dispatch` on, one capture each (KERNCAP_LAUNCH_COUNT; default 1). */
  launchCount?: number;
  /** 0-based index among the matching launches. */
  dispatch?: number;
  /** Only the process of this rank captures (c/common/kc_process.h). */
  rank?: number;
  /** Only the Nth process (0-based) that initializes CUDA captures. */
  process?: number;
  countBenchmarks?: boolean;
  exitAfterCapture?: boolean;
  /** libcupti path (CUDA library). */
  cuptiPath?: string;
  log?: boolean;
}

/** The KERNCAP_* part of the application's environment for a capture library (and the Triton shim's KERNCAP_OUT). */
export function captureLibraryEnv(s: CaptureLibrarySettings): Record<string, string> {
  const e: Partial<Record<EnvName, string>> = { KERNCAP_OUT: s.out, KERNCAP_MODE: s.mode };
  if (s.mode === "capture") {
    e.KERNCAP_KERNEL = s.kernel ?? "";
    e.KERNCAP_DISPATCH = String(s.dispatch ?? 0);
    if (s.rank !== undefined) e.KERNCAP_RANK = String(s.rank);
    if (s.process !== undefined) e.KERNCAP_PROCESS = String(s.process);
  }
  if (s.captureAll) e.KERNCAP_CAPTURE_ALL = "1";
  if (s.maxCaptures !== undefined) e.KERNCAP_MAX_CAPTURES = String(s.maxCaptures);
  if (s.launchCount !== undefined && s.launchCount > 1) e.KERNCAP_LAUNCH_COUNT = String(s.launchCount);
  if (s.countBenchmarks) e.KERNCAP_COUNT_BENCHMARKS = "1";
  if (s.exitAfterCapture) e.KERNCAP_EXIT_AFTER_CAPTURE = "1";
  if (s.cuptiPath) e.KERNCAP_CUPTI_PATH = s.cuptiPath;
  if (s.log) e.KERNCAP_LOG = "1";
  return e as Record<string, string>;
}

/** The variables captureLibraryEnv sets for one run: none may come from the caller's environment (a stale `KERNCAP_RANK=3`, an outer kerncap's settings). */
const CAPTURE_SETTINGS: EnvName[] = [
  "KERNCAP_OUT",
  "KERNCAP_MODE",
  "KERNCAP_KERNEL",
  "KERNCAP_DISPATCH",
  "KERNCAP_RANK",
  "KERNCAP_PROCESS",
  "KERNCAP_CAPTURE_ALL",
  "KERNCAP_MAX_CAPTURES",
  "KERNCAP_LAUNCH_COUNT",
  "KERNCAP_COUNT_BENCHMARKS",
  "KERNCAP_EXIT_AFTER_CAPTURE",
  "KERNCAP_LOG",
  "KERNCAP_NVTX_INCLUDE",
  "KERNCAP_NVTX_EXCLUDE",
  "KERNCAP_NVTX_SUMMARY",
];

/** `env` without the capture library's per-run settings (CAPTURE_SETTINGS): the base of an application's environment. */
export function withoutCaptureSettings(env: Env = process.env): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = { ...env };
  for (const k of CAPTURE_SETTINGS) delete out[k];
  return out;
}

/**
 * Environment of a reproducer's build.sh: `force` (validate --allow-version-mismatch) sets KERNCAP_FORCE=1
 * (templates/triton/repro.py); `targetArch` (check --rebuild on a GPU of another architecture,
 * CUDA) appends `-arch=<targetArch>` to EXTRA_FLAGS, which a CUDA build.sh puts after its own
 * -arch (templates/cuda/build.sh.hbs): nvcc takes the last -arch given (nvcc 13: a warning,
 * "incompatible redefinition for option 'gpu-architecture', the last value of this option was used").
 */
export function reproducerBuildEnv(o: { force: boolean; targetArch?: string }, env: Env = process.env): Record<string, string | undefined> {
  const extra = o.targetArch ? { EXTRA_FLAGS: [env.EXTRA_FLAGS, `-arch=${o.targetArch}`].filter(Boolean).join(" ") } : {};
  return { ...env, ...(o.force ? { KERNCAP_FORCE: "1" } : {}), ...extra };
}

/**
 * The variables that name where a build's programs come from or load code from: the programs'
 * search path (a relative entry such as `.` or `node_modules/.bin` is the build's folder, where a
 * received capture's src/ lies: a trial's git and python3 came from there), a library path list,
 * libraries preloaded, Python's module path and home.
 */
const LOAD_PATH_VARS = ["PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "PYTHONPATH", "PYTHONHOME"] as const;
/** How each of LOAD_PATH_VARS is split into entries by the program that reads it (ld.so(8), glibc's _dl_init_paths, Python, the shell). */
const SEPARATORS: Record<(typeof LOAD_PATH_VARS)[number], RegExp> = {
  PATH: /:/,
  LD_LIBRARY_PATH: /[:;]/,
  LD_PRELOAD: /[:\s]/,
  LD_AUDIT: /:/,
  PYTHONPATH: /:/,
  PYTHONHOME: /:/,
};

/**
 * `env` for a program of a reproducer's build (build.sh, the compiler, Triton's repro.py): in
 * PATH, LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT, PYTHONPATH and PYTHONHOME (each split as its reader splits it:
 * LD_LIBRARY_PATH on `;` too), every entry that is empty, relative, holds a `$` (a loader token),
 * under /proc, /dev or /sys (resolved per process: /proc/self/cwd is the working folder) or
 * inside one of `capture` (the capture folder's path and real path) is dropped (a variable left
 * empty is removed), and PYTHONSAFEPATH=1 (Python 3.11+: neither the script's folder nor the
 * working folder goes first on sys.path). An empty entry means the working folder to the dynamic
 * loader, and nvcc itself appends `<cuda>/lib:` to LD_LIBRARY_PATH for its steps: the build's
 * working folder must hold nothing the capture controls, and no entry may name the capture.
 * KERNCAP_RESULTS_KEY is left out: a build (a received capture's build.sh) that read it could
 * write results records that --merge takes (src/format/record-auth.ts).
 */
export function buildChildEnv(env: Record<string, string | undefined>, capture: string[]): Record<string, string | undefined> {
  const roots = capture.filter(Boolean).map((c) => posix.normalize(c).replace(/\/+$/, ""));
  const inside = (p: string) => roots.some((r) => p === r || p.startsWith(r + "/"));
  const out: Record<string, string | undefined> = { ...env, PYTHONSAFEPATH: "1" };
  for (const k of LOAD_PATH_VARS) {
    const v = out[k];
    if (v === undefined) continue;
    // LD_PRELOAD separates its entries by spaces or colons (ld.so(8)); LD_LIBRARY_PATH by colons or semicolons
    // (glibc's loader: `/usr/lib;` is /usr/lib and the working folder, adversary 84 #01); the others by colons.
    // An entry with `$` is expanded by the loader ($ORIGIN, $LIB, $PLATFORM: into a name not judged here, adversary 84 #08): dropped
    const kept = v.split(SEPARATORS[k]).filter((e) => e !== "" && e.startsWith("/") && !e.includes("$") && !namesWorkingOrCapture(e, inside));
    if (kept.length) out[k] = kept.join(k === "LD_PRELOAD" ? " " : ":");
    else delete out[k];
  }
  delete out.KERNCAP_RESULTS_KEY;
  return out;
}

/** A folder whose name means another folder in every process: /proc/self/cwd is the working folder (adversary 82 #08). */
const PER_PROCESS = /^\/(proc|dev|sys)(\/|$)/;

/**
 * Whether the absolute load-path entry `e` leads, as the kernel resolves it, into /proc, /dev or
 * /sys or to a path that `inside` says is the capture's: each component resolved in turn, a link
 * followed where it points and `..` taken from where the links led (physically), so that
 * `/./proc/self/cwd`, `/usr/../proc/…`, `//proc/…` and a link to /proc/self/cwd count as what they
 * name (adversary 83 #01: a text test let them through). A name that does not exist is judged by
 * the rest of its text; more than 40 links (the kernel's own bound) counts as leading there.
 */
function namesWorkingOrCapture(e: string, inside: (p: string) => boolean): boolean {
  const there = (p: string) => PER_PROCESS.test(p) || inside(p);
  for (const s of walkPhysically(e)) {
    if (s.kind === "loop") return true;
    // missing or unreadable: the rest as written
    if (s.kind === "missing") return s.code === "ENAMETOOLONG" || there(posix.normalize([s.path, ...s.rest].join("/"))); // one that cannot be judged: dropped
    if (there(s.at)) return true;
  }
  return there("/");
}

/** Environment of the no-ASLR replay child (src/replay/aslr.ts). */
export function aslrRetryChildEnv(env: Env): Record<string, string | undefined> {
  return { ...env, KERNCAP_ASLR_RETRY: "1" };
}

/**
 * The program `name` found on PATH's absolute entries only (absolutePathList), or null: every tool
 * kerncap runs by name (ncu, nvcc, python3, ninja, setarch, nvidia-smi, realpath, git …) is looked
 * up this way, since a relative entry (`.`, `node_modules/.bin`) names the working folder, which
 * may be a folder another user can write (adversary round 70: a planted `node_modules/.bin/ncu`
 * ran as the user). The application `kerncap run` starts is the user's own word, found as a
 * shell would (src/capture/run.ts).
 */
export function whichAbsolute(name: string, path: string | undefined = process.env.PATH): string | null {
  return Bun.which(name, { PATH: absolutePathList(path) });
}

/** `path` (a PATH value) without its empty and relative entries (they name the working folder, which a child's may be a capture's copy). */
export function absolutePathList(path: string | undefined): string {
  return (path ?? "")
    .split(":")
    .filter((e) => e.startsWith("/"))
    .join(":");
}
