/**
 * One table of --kernel / --dispatch / --capture-all / --launch-count settings, run through the
 * three places that decide which launch is captured, on the same sequence of launches:
 *  - the CUDA capture library (c/build/libkerncap_cuda.so) driven by c/test/launch_main.c over a
 *    stand-in libcuda and libcupti (c/test/fake_cuda.c): what it captures is read from raw.json;
 *  - the HSA capture library (c/build/libkerncap_hsa.so) under the stub HSA runtime
 *    (test/apps/hip/fake_hsa_runtime.c, one dispatch per name): raw.json again;
 *  - the common matcher alone (c/common/, through c/test/match_main.c);
 * and a model of the rules written here (c/common/kc_match.h says them), with glibc's regcomp as
 * the libraries use it (src/util/posix-regex.ts). Each settings row must give the same captures
 * (kernel, launch index, match index, target) in all four. Also: both libraries hold the code of
 * every c/common unit (c/common/units), compiled alike. Parts skip without gcc, the CUDA headers
 * (CUDA part) or the ROCm headers (HSA part: scripts/install-rocm.sh).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { compileEre } from "../../src/util/posix-regex.ts";

const ROOT = resolve(import.meta.dir, "../..");
const CUDA_LIB = join(ROOT, "c/build/libkerncap_cuda.so");
const HSA_LIB = join(ROOT, "c/build/libkerncap_hsa.so");
const CUDA_HOME = process.env.CUDA_HOME ?? "/usr/local/cuda";
const HSA_INC = process.env.HSA_INCLUDE ?? "/usr/include";
const haveGcc = !!Bun.which("gcc");

/** The CUDA include folders scripts/build-c.sh uses, when cupti.h is among them. */
function cudaIncludes(): string[] {
  const dirs = [join(CUDA_HOME, "include"), join(CUDA_HOME, "extras/CUPTI/include")];
  const targets = join(CUDA_HOME, "targets");
  if (existsSync(targets)) for (const t of readdirSync(targets)) dirs.push(join(targets, t, "include"));
  const found = dirs.filter((d) => existsSync(d));
  return found.some((d) => existsSync(join(d, "cupti.h"))) ? found : [];
}
const CUDA_INC = cudaIncludes();
const haveCuda = haveGcc && CUDA_INC.length > 0 && existsSync(CUDA_LIB);
const haveHsa = haveGcc && existsSync(join(HSA_INC, "hsa/hsa.h")) && existsSync(HSA_LIB);

// The launches, in order: C++ kernels (mangled; their demangled names as c++filt prints them), a
// Triton kernel (plain name), a collective kernel (counted, never captured).
const A = "_Z6scalarPfi";
const B = "_Z10vector_addPKfS0_Pfi";
const C = "triton_poi_fused_add_0";
const D = "_ZN4gemm6kernelILi64EEEvPf";
const N = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
const DEMANGLED: Record<string, string> = {
  [A]: "scalar(float*, int)",
  [B]: "vector_add(float const*, float const*, float*, int)",
  [C]: C,
  [D]: "void gemm::kernel<64>(float*)",
  [N]: N,
};
const LAUNCHES = [A, B, C, A, D, B, N, A, C, D, B, A, C, D];

interface Row {
  label: string;
  kernel: string[];
  dispatch: number;
  captureAll?: boolean;
  launchCount?: number;
  maxCaptures?: number;
}
const ROWS: Row[] = [
  { label: "no --kernel: the Nth launch of any kernel", kernel: [], dispatch: 3 },
  { label: "a regex only the demangled name matches", kernel: ["^scalar\\("], dispatch: 1 },
  { label: "a regex only the mangled name matches", kernel: ["^_Z6scalarPfi$"], dispatch: 2 },
  { label: "--dispatch counts across every name one regex matches", kernel: ["add"], dispatch: 2 },
  { label: "two -k: one capture each (a template's demangled name)", kernel: ["vector_add", "gemm::kernel<64>"], dispatch: 0 },
  { label: "two -k matching the same launches: each target counts them", kernel: ["vector", "add"], dispatch: 1 },
  { label: "three -k, one matching nothing", kernel: ["^scalar", "triton_", "^nothing$"], dispatch: 1 },
  { label: "-c: the Nth launch of every matching kernel", kernel: ["scalar|gemm"], dispatch: 1, captureAll: true },
  { label: "-c without -k, at most 2 captures", kernel: [], dispatch: 0, captureAll: true, maxCaptures: 2 },
  { label: "--launch-count 2: consecutive matches", kernel: ["add"], dispatch: 1, launchCount: 2 },
  { label: "a collective kernel is never a target", kernel: ["nccl|scalar"], dispatch: 0 },
  { label: "no kernel matches", kernel: ["^nomatch$"], dispatch: 0 },
];

interface Capture {
  name: string;
  launch_index: number;
  match_index: number;
  target: number;
}

function settingsEnv(r: Row): Record<string, string> {
  const e: Record<string, string> = { KERNCAP_MODE: "capture", KERNCAP_KERNEL: r.kernel.join("\n"), KERNCAP_DISPATCH: String(r.dispatch) };
  if (r.captureAll) e.KERNCAP_CAPTURE_ALL = "1";
  if (r.launchCount) e.KERNCAP_LAUNCH_COUNT = String(r.launchCount);
  if (r.maxCaptures) e.KERNCAP_MAX_CAPTURES = String(r.maxCaptures);
  return e;
}

/** The rules of c/common/kc_match.h, written out: the captures a row asks for on LAUNCHES. */
function model(r: Row): Capture[] {
  const res = r.kernel.map((p) => compileEre(p));
  try {
    const several = r.kernel.length > 1 || !!r.captureAll || (r.launchCount ?? 1) > 1;
    const lc = r.launchCount ?? 1;
    const max = r.maxCaptures ?? 64;
    const seen = new Array(Math.max(1, res.length)).fill(0);
    const done = new Array(Math.max(1, res.length)).fill(false);
    const own = new Map<string, number>();
    const taken = new Set<string>();
    const out: Capture[] = [];
    for (const [i, name] of LAUNCHES.entries()) {
      if (/ncclDevKernel|ncclKernel|nvshmemi_|nvshmemx_/.test(name)) continue;
      const mask = res.length ? res.map((re) => re.test(name) || re.test(DEMANGLED[name]!)) : [true];
      if (!mask.some(Boolean)) continue;
      let target = -1;
      let match = 0;
      if (r.captureAll) {
        match = own.get(name) ?? 0;
        own.set(name, match + 1);
        if (match !== r.dispatch || taken.has(name) || out.length >= max) continue;
        taken.add(name);
        out.push({ name, launch_index: i, match_index: match, target: -1 });
        if (out.length >= max) break;
        continue;
      }
      match = res.length > 1 ? r.dispatch : seen[0];
      for (let t = 0; t < mask.length; t++) {
        if (!mask[t]) continue;
        const n = seen[t]++;
        if (n >= r.dispatch && n < r.dispatch + lc && !done[t] && target < 0) target = t;
      }
      if (target < 0) continue;
      out.push({ name, launch_index: i, match_index: match, target: several ? target : -1 });
      if (!several) break;
      if (lc > 1) {
        if (out.length >= lc) break;
      } else {
        done[target] = true;
        if (done.slice(0, res.length).every(Boolean)) break;
      }
    }
    return out;
  } finally {
    for (const re of res) re.free();
  }
}

/** The captures a library wrote into out: raw.json, or captures/<n>/raw.json in order. */
function captured(out: string): Capture[] {
  const files = existsSync(join(out, "raw.json"))
    ? [join(out, "raw.json")]
    : existsSync(join(out, "captures"))
      ? readdirSync(join(out, "captures"))
          .sort((a, b) => Number(a) - Number(b))
          .map((n) => join(out, "captures", n, "raw.json"))
          .filter((f) => existsSync(f))
      : [];
  return files.map((f) => {
    const raw = JSON.parse(readFileSync(f, "utf8"));
    return { name: raw.kernel.name, launch_index: raw.kernel.launch_index, match_index: raw.kernel.match_index, target: raw.target ?? -1 };
  });
}

function gcc(args: string[]): void {
  const cc = Bun.spawnSync(["gcc", "-std=gnu11", "-O1", "-Wall", "-Wextra", ...args], { stderr: "pipe" });
  if (cc.exitCode !== 0) throw new Error(cc.stderr.toString());
}

let tmp = "";
const common = readFileSync(join(ROOT, "c/common/units"), "utf8").replace(/#.*/g, "").split(/\s+/).filter(Boolean);
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "kerncap-c-match-"));
  if (!haveGcc) return;
  gcc(["-o", join(tmp, "match_main"), join(ROOT, "c/test/match_main.c"), ...common.map((u) => join(ROOT, "c/common", `${u}.c`)), "-ldl"]);
  if (haveCuda) {
    gcc(["-shared", "-fPIC", "-DFAKE_LIBCUDA", "-o", join(tmp, "libcuda.so.1"), join(ROOT, "c/test/fake_cuda.c")]);
    gcc(["-shared", "-fPIC", "-DFAKE_LIBCUPTI", "-o", join(tmp, "libcupti.so"), join(ROOT, "c/test/fake_cuda.c")]);
    gcc([
      ...CUDA_INC.map((d) => `-I${d}`),
      "-o",
      join(tmp, "launch_main"),
      join(ROOT, "c/test/launch_main.c"),
      `-L${tmp}`,
      "-l:libcupti.so",
      `-Wl,-rpath,${tmp}`,
      "-ldl",
      "-lpthread",
    ]);
  }
  if (haveHsa) {
    gcc([
      `-I${HSA_INC}`,
      `-I${join(ROOT, "c/hsa")}`,
      `-I${join(ROOT, "c/common")}`,
      "-o",
      join(tmp, "fake_hsa_runtime"),
      join(ROOT, "test/apps/hip/fake_hsa_runtime.c"),
      "-ldl",
      "-Wl,--no-as-needed",
      "-lstdc++",
    ]);
    writeFileSync(join(tmp, "module.co"), new Uint8Array([0x7f, 0x45, 0x4c, 0x46, ...new TextEncoder().encode([A, B, C, D, N].join(" "))]));
  }
}, 60_000);
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

let outs = 0;
/** A fresh KERNCAP_OUT with kernel/ and memory/, as kerncap makes it. */
function freshOut(): string {
  const out = join(tmp, `out-${outs++}`);
  mkdirSync(join(out, "kernel"), { recursive: true });
  mkdirSync(join(out, "memory"));
  return out;
}

function runCuda(r: Row): Capture[] {
  const out = freshOut();
  const env = { PATH: process.env.PATH ?? "", LD_LIBRARY_PATH: tmp, KERNCAP_OUT: out, KERNCAP_CUPTI_PATH: join(tmp, "libcupti.so"), ...settingsEnv(r) };
  const p = Bun.spawnSync([join(tmp, "launch_main"), CUDA_LIB, "seq", ...LAUNCHES], { env, stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  expect(
    readdirSync(out).filter((f) => f.startsWith("error.")),
    p.stderr.toString(),
  ).toEqual([]);
  return captured(out);
}

function runHsa(r: Row): Capture[] {
  const out = freshOut();
  const env = { PATH: process.env.PATH ?? "", HSA_TOOLS_LIB: HSA_LIB, KERNCAP_OUT: out, ...settingsEnv(r) };
  const p = Bun.spawnSync([join(tmp, "fake_hsa_runtime"), join(tmp, "module.co"), ...LAUNCHES], { env, stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  expect(
    readdirSync(out).filter((f) => f.startsWith("error.")),
    p.stderr.toString(),
  ).toEqual([]);
  return captured(out);
}

function runMatcher(r: Row): Capture[] {
  const p = Bun.spawnSync([join(tmp, "match_main"), ...LAUNCHES], { env: { PATH: process.env.PATH ?? "", ...settingsEnv(r) }, stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  return p.stdout
    .toString()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Capture);
}

describe.skipIf(!haveGcc)("one matching table through the common matcher and both capture libraries", () => {
  test("the model picks what the rules say on a few rows (the table's other rows follow the same rules)", () => {
    const pick = (label: string) => model(ROWS.find((r) => r.label === label)!).map((c) => [c.name, c.launch_index]);
    expect(pick("a regex only the demangled name matches")).toEqual([[A, 3]]);
    expect(pick("--dispatch counts across every name one regex matches")).toEqual([[B, 5]]); // B, C, then B again
    expect(pick("two -k: one capture each (a template's demangled name)")).toEqual([
      [B, 1],
      [D, 4],
    ]);
    expect(pick("a collective kernel is never a target")).toEqual([[A, 0]]);
    expect(pick("no kernel matches")).toEqual([]);
  });

  for (const r of ROWS) {
    test(`common matcher: ${r.label}`, () => {
      expect(runMatcher(r)).toEqual(model(r));
    });
    test.skipIf(!haveCuda)(`CUDA library: ${r.label}`, () => {
      expect(runCuda(r)).toEqual(model(r));
    });
    test.skipIf(!haveHsa)(`HSA library: ${r.label}`, () => {
      expect(runHsa(r)).toEqual(model(r));
    });
  }

  test.skipIf(!haveCuda)(
    "CUDA library: launches from 8 threads at once are each counted once (the launch path takes no lock)",
    () => {
      for (const mode of ["list", "capture"]) {
        const out = freshOut();
        const env = {
          PATH: process.env.PATH ?? "",
          LD_LIBRARY_PATH: tmp,
          KERNCAP_OUT: out,
          KERNCAP_CUPTI_PATH: join(tmp, "libcupti.so"),
          KERNCAP_MODE: mode,
          KERNCAP_KERNEL: "^nomatch$",
        };
        const p = Bun.spawnSync([join(tmp, "launch_main"), CUDA_LIB, "threads", "8", "20000", A, B, C, D], {
          env,
          stdout: "pipe",
          stderr: "pipe",
          timeout: 60_000,
        });
        expect(p.exitCode, p.stderr.toString()).toBe(0);
        const census = JSON.parse(readFileSync(join(out, `kernels.${p.pid}.json`), "utf8"));
        expect(census.final).toBe(true);
        expect(census.launches).toBe(8 * 20000);
        expect(Object.fromEntries(census.kernels.map((k: { name: string; count: number }) => [k.name, k.count]))).toEqual({
          [A]: 40000,
          [B]: 40000,
          [C]: 40000,
          [D]: 40000,
        });
        for (const k of census.kernels) expect(k.grid[0]).toBeGreaterThanOrEqual(1); // a shape some launch had
        expect(existsSync(join(out, "raw.json"))).toBe(false);
      }
    },
    120_000,
  );

  test.skipIf(!haveCuda || !haveHsa || !Bun.which("nm"))("both libraries hold the code of every c/common unit, compiled alike", () => {
    // local (hidden) symbols with their sizes: `nm -S` reads the symbol table (the libraries are not stripped)
    const functions = (lib: string) => {
      const m = new Map<string, string>();
      for (const l of Bun.spawnSync(["nm", "-S", "--defined-only", lib]).stdout.toString().split("\n")) {
        const f = l.trim().split(/\s+/);
        if (f.length === 4 && /^[tT]$/.test(f[2]!)) m.set(f[3]!, f[1]!);
      }
      return m;
    };
    const cuda = functions(CUDA_LIB);
    const hsa = functions(HSA_LIB);
    const shared = [
      "kc_settings_read",
      "kc_census_get",
      "kc_census_write",
      "kc_census_demangled",
      "kc_match_mask",
      "kc_match_pick",
      "kc_match_captured",
      "kc_claim",
      "kc_raw_write",
      "kc_fail_at",
    ];
    expect(common).toEqual(["kc_settings", "kc_census", "kc_match", "kc_process", "kc_raw", "kc_log"]);
    for (const f of shared) {
      expect(cuda.has(f), `${f} in libkerncap_cuda.so`).toBe(true);
      expect(hsa.get(f), f).toBe(cuda.get(f)!);
    }
  });
});
