/**
 * The Triton shim and the reproducer against a fake `triton` package (test/fixtures/triton/fake_triton: the
 * knobs/JITFunction/Autotuner/compile surface, "cubins" are hashes of source + config), with the
 * machine's python3; no GPU, no real Triton. Covers: chaining to the app's sitecustomize, compile
 * records (signature, constexprs, attrs, helpers, module constants), the autotuner's choice,
 * benchmark vs app launches, the cubin-hash join, and repro.py/build.sh rebuilding the identical
 * cubin, plus the bad inputs (edit, syntax error, version mismatch, --force, no Triton).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { renderTritonReproducer } from "../../../../src/frontends/triton/repro.ts";
import { accountLaunch, joinTriton, parseTritonJsonl, type TritonCompileRecord } from "../../../../src/frontends/triton/join.ts";
import { shimPythonPath, TRITON_RECORDS, TRITON_SOURCE_COPIES, tritonFinalize } from "../../../../src/frontends/triton/shim.ts";
import { foreignEntry } from "../../../../src/format/archive-common.ts";

/** The shim's folder (sitecustomize.py), put on PYTHONPATH as kerncap run does; the fake packages and apps. */
const SHIM = resolve(import.meta.dir, "../../../../src/frontends/triton");
const DATA = resolve(import.meta.dir, "../../../fixtures/triton");
const FAKE = join(DATA, "fake_triton");
const PY = Bun.which("python3");
let tmp = "";
let out = "";
let records: ReturnType<typeof parseTritonJsonl> = [];

function py(args: string[], env: Record<string, string>, cwd = tmp) {
  const p = Bun.spawnSync([PY!, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? "", TMPDIR: tmpdir(), PYTHONDONTWRITEBYTECODE: "1", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}
function sh(script: string, env: Record<string, string>) {
  const p = Bun.spawnSync(["bash", script], {
    env: { PATH: process.env.PATH ?? "", TMPDIR: tmpdir(), PYTHONDONTWRITEBYTECODE: "1", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "kerncap-triton-shim-"));
  out = join(tmp, "out");
  Bun.spawnSync(["mkdir", "-p", out]);
  if (!PY) return;
  const r = py([join(DATA, "fake_app.py")], {
    PYTHONPATH: shimPythonPath(SHIM, [FAKE, join(DATA, "app_site")].join(":")),
    KERNCAP_OUT: out,
    APP_SITE_MARKER: join(tmp, "marker"),
  });
  if (r.code !== 0) throw new Error(r.stderr);
  records = parseTritonJsonl(readFileSync(join(out, "triton.jsonl"), "utf8"));
});
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!PY)("Triton shim (fake triton, python3)", () => {
  test("chains to the application's sitecustomize and never changes the app's output", () => {
    expect(readFileSync(join(tmp, "marker"), "utf8")).toBe("chained");
  });

  test("records every compiled config with signature, constexprs, attrs, cubin hash and source", () => {
    const c = records.filter((r): r is TritonCompileRecord => r.event === "compile");
    expect(c.map((r) => r.constexprs!.find((x) => x.name === "BLOCK")!.value)).toEqual([32, 64, 128]);
    const r = c[2]!;
    expect(r.signature).toEqual({ x_ptr: "*fp32", out_ptr: "*fp32", n: "i32", BLOCK: "constexpr", DT: "constexpr" });
    expect(r.constexprs!.find((x) => x.name === "DT")!.expr).toBe("tl.dtype('fp32')");
    expect(r.attrs).toEqual([
      { path: [0], attrs: [["tt.divisibility", 16]] },
      { path: [1], attrs: [["tt.divisibility", 16]] },
    ]);
    expect(r.metadata.num_warps).toBe(8);
    expect(r.cubin_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(r.source_file).toBe(resolve(DATA, "fake_app.py"));
    expect(r.kernel_module).toContain("def helper(x, K: tl.constexpr)");
    expect(r.kernel_module).toContain("SCALE = tl.constexpr(2)");
    expect(r.kernel_module).toContain("OFFSET = 3");
    expect(r.kernel_module!.indexOf("def helper")).toBeLessThan(r.kernel_module!.indexOf("def scale_kernel"));
    expect(existsSync(join(out, "triton-src", r.source_copy!))).toBe(true);
  });

  test("autotuner: chosen config and key; benchmark launches told apart from the app's", () => {
    const a = records.find((r) => r.event === "autotune") as any;
    expect(a.config).toMatchObject({ kwargs: { BLOCK: 128 }, num_warps: 8, num_stages: 2 });
    expect(a.key[0]).toBe(1000);
    expect(accountLaunch(records, "scale_kernel", "scale", 3)).toMatchObject({ kind: "app", appLaunchIndex: 0, benchmarkLaunchesBefore: 3 });
    expect(accountLaunch(records, "scale_kernel", "scale", 5)).toMatchObject({ kind: "app", appLaunchIndex: 2 });
    expect(accountLaunch(records, "scale_kernel", "scale", 1).kind).toBe("autotune-benchmark");
    expect(accountLaunch(records, "scale_kernel", "nomatch", 0).kind).toBe("unknown");
    // a library that skipped the benchmark launches counts only the app's: its #0 is the 4th launch
    expect(accountLaunch(records, "scale_kernel", "scale", 0, false)).toMatchObject({ kind: "app", appLaunchIndex: 0, benchmarkLaunchesBefore: 3 });
    expect(accountLaunch(records, "scale_kernel", "scale", 2, false)).toMatchObject({ kind: "app", appLaunchIndex: 2, appLaunchesBefore: 2 });
  });

  test("--kernel is matched as the capture library matches it: a POSIX ERE, not a JavaScript RegExp", () => {
    // a POSIX character class: "scale_" and a letter for regcomp; for RegExp, one of "[:alph" then a literal "]"
    expect(accountLaunch(records, "scale_kernel", "^scale_[[:alpha:]]ernel$", 3)).toMatchObject({ kind: "app", appLaunchIndex: 0 });
    // JavaScript's (?:…) is no ERE (regcomp refuses it): no launch is claimed
    expect(accountLaunch(records, "scale_kernel", "(?:scale)", 3)).toMatchObject({
      kind: "unknown",
      note: "the --kernel pattern is not a POSIX extended regex",
    });
  });

  test("join by cubin hash → pinned autotuned config; the reproducer rebuilds the identical cubin", () => {
    const c = records.filter((r): r is TritonCompileRecord => r.event === "compile");
    const chosen = c[2]!;
    const s = joinTriton(records, chosen.cubin_sha256!, "scale_kernel", "scale", 3)!;
    expect(s.frontend).toBe("triton");
    expect(s.autotune!.config.kwargs).toEqual({ BLOCK: 128 });
    expect(s.launch.kind).toBe("app");
    expect(joinTriton(records, "0".repeat(64), "scale_kernel", "scale", 3)).toBeUndefined();

    const dir = join(tmp, "repro");
    const r = renderTritonReproducer({
      outDir: dir,
      source: s,
      sourceCopies: join(out, "triton-src"),
      command: ["python3", "fake_app.py"],
      match: "scale",
      matchIndex: 3,
      device: "H200 (sm_90)",
      sharedMemBytes: 0,
    });
    expect(r.files.sort()).toEqual(["README.md", "build.sh", "pinned.json", "repro.py", "src/original/fake_app.py", "src/scale_kernel.py"].sort());
    expect(readFileSync(join(dir, "README.md"), "utf8")).toContain("BLOCK=128");
    const env = { KERNCAP_PYTHON: PY!, PYTHONPATH: FAKE };
    const b = sh(r.buildScript, env);
    expect(b.code, b.stderr).toBe(0);
    const cubin = b.stdout.trim().split("\n").pop()!;
    expect(new Bun.CryptoHasher("sha256").update(readFileSync(cubin)).digest("hex")).toBe(chosen.cubin_sha256!);

    // an edit changes the module
    const k = join(dir, "src", r.kernelFile);
    const orig = readFileSync(k, "utf8");
    writeFileSync(k, orig.replace("tl.arange(0, BLOCK)", "tl.arange(1, BLOCK)"));
    const e = sh(r.buildScript, env);
    expect(e.code, e.stderr).toBe(0);
    expect(new Bun.CryptoHasher("sha256").update(readFileSync(cubin)).digest("hex")).not.toBe(chosen.cubin_sha256!);

    // syntax error: Python's message with file and line, exit 2
    writeFileSync(k, orig.replace("return helper(offs, SCALE)", "return helper(offs, SCALE"));
    const se = sh(r.buildScript, env);
    expect(se.code).toBe(2);
    expect(se.stderr).toContain("SyntaxError");
    expect(se.stderr).toContain("scale_kernel.py:");
    // Triton's own compile error is passed through, exit 2
    writeFileSync(k, orig.replace("pid = tl.program_id(0)", "pid = FAIL"));
    const ce = sh(r.buildScript, env);
    expect(ce.code).toBe(2);
    expect(ce.stderr).toContain("fake Triton compile error");
    writeFileSync(k, orig);

    // another Triton version: both named, refused unless forced
    const v = sh(r.buildScript, { ...env, FAKE_TRITON_VERSION: "3.7.0" });
    expect(v.code).toBe(3);
    expect(v.stderr).toContain("3.6.0");
    expect(v.stderr).toContain("3.7.0");
    const f = sh(r.buildScript, { ...env, FAKE_TRITON_VERSION: "3.7.0", KERNCAP_FORCE: "1" });
    expect(f.code, f.stderr).toBe(0);

    // no Triton in that Python: says which Python
    const n = sh(r.buildScript, { KERNCAP_PYTHON: PY! });
    expect(n.code).toBe(3);
    expect(n.stderr).toContain("no usable Triton in");
    const m = sh(r.buildScript, { KERNCAP_PYTHON: "/nonexistent/python3" });
    expect(m.code).toBe(3);
    expect(m.stderr).toContain("/nonexistent/python3");
  });
});

describe("joinTriton (pure)", () => {
  test("the shim's source copies (triton-src/) leave the capture folder: into src/original/ for a Triton kernel, dropped for another (pack refuses a folder no capture holds)", async () => {
    const cubin = Buffer.from("a cubin the app launched");
    const chosen = records.filter((r): r is TritonCompileRecord => r.event === "compile")[2]!;
    const folder = (name: string, sha: string) => {
      const d = join(tmp, name);
      cpSync(out, d, { recursive: true });
      mkdirSync(join(d, "kernel"), { recursive: true });
      writeFileSync(join(d, "kernel/module.cubin"), cubin);
      const lines = readFileSync(join(d, TRITON_RECORDS), "utf8").split("\n").filter(Boolean);
      writeFileSync(
        join(d, TRITON_RECORDS),
        lines.map((l) => (JSON.parse(l).cubin_sha256 === chosen.cubin_sha256 ? l.replace(chosen.cubin_sha256!, sha) : l)).join("\n") + "\n",
      );
      expect(existsSync(join(d, TRITON_SOURCE_COPIES, chosen.source_copy!))).toBe(true);
      return d;
    };
    const raw = (kind: string) =>
      ({
        frontend: "cuda",
        module: { file: "kernel/module.cubin", kind, source: "cuModuleLoadData" },
        launch: { shared_mem_bytes: 0 },
        device: { name: "H200", arch: "sm_90" },
        kernel: { name: "scale_kernel", match_index: 3, counts_benchmarks: true },
      }) as any;
    const triton = folder("cap-triton", createHash("sha256").update(cubin).digest("hex"));
    const e = tritonFinalize(triton, raw("cubin"), "scale", ["python3", "fake_app.py"]);
    expect(e.source).toBeDefined();
    await e.beforeRename!(triton, {} as any, join(tmp, "final"));
    expect(readFileSync(join(triton, "src/original/fake_app.py"), "utf8")).toContain("def scale_kernel");
    expect(existsSync(join(triton, TRITON_SOURCE_COPIES))).toBe(false);
    // every folder left is a capture's (pack's rule for what lies in a folder)
    const folders = readdirSync(triton, { withFileTypes: true }).filter((d) => d.isDirectory());
    expect(folders.map((d) => d.name).sort()).toEqual(["kernel", "src"]);
    expect(folders.filter((d) => foreignEntry(`${d.name}/x`, new Set()))).toEqual([]);
    // a kernel no record claims (a cuBLAS GEMM of a Triton app): nothing enriched, the copies gone all the same
    const other = folder("cap-other", "0".repeat(64));
    expect(tritonFinalize(other, raw("cubin"), "scale", ["python3", "fake_app.py"])).toEqual({});
    expect(existsSync(join(other, TRITON_SOURCE_COPIES))).toBe(false);
    const fatbin = folder("cap-fatbin", "0".repeat(64));
    expect(tritonFinalize(fatbin, raw("fatbin"), "scale", ["python3", "fake_app.py"])).toEqual({});
    expect(existsSync(join(fatbin, TRITON_SOURCE_COPIES))).toBe(false);
  });

  test("prefers the record with source; unknown launch kind when Triton saw no launches", () => {
    const base = {
      event: "compile",
      pid: 1,
      triton_version: "3.6.0",
      python: "/py",
      cache_hit: true,
      during_autotune: false,
      during_benchmark: false,
      name: "k",
      metadata: { num_warps: 4, target: { backend: "cuda", arch: 90, warp_size: 32 }, hash: "x" },
      cubin_path: "/c",
      cubin_sha256: "a".repeat(64),
    } as const;
    const recs = [{ ...base }, { ...base, fn: { name: "k", qualname: "k", module: "m", arg_names: [] }, kernel_module: "src" }] as any[];
    const s = joinTriton(recs, "a".repeat(64), "k", "k", 0)!;
    expect(s.kernelModule).toBe("src");
    expect(s.options).toEqual({ num_warps: 4 });
    expect(s.target).toEqual({ backend: "cuda", arch: 90, warp_size: 32 });
    expect(s.launch.kind).toBe("unknown");
    expect(s.launch.note).toContain("static launcher");
  });
});

describe.skipIf(!PY || !Bun.which("gcc"))("Triton shim: Inductor benchmarks tell the capture library (fake torch, fake library)", () => {
  test("launches inside Benchmarker.benchmark_gpu are flagged once around the outermost call", () => {
    const dir = mkdtempSync(join(tmpdir(), "kerncap-ignore-"));
    try {
      const lib = join(dir, "libfake.so");
      const cc = Bun.spawnSync(["gcc", "-shared", "-fPIC", "-o", lib, join(DATA, "fake_ignore_lib.c")], { stderr: "pipe" });
      expect(cc.exitCode, cc.stderr.toString()).toBe(0);
      const log = join(dir, "log");
      const r = py([join(DATA, "fake_inductor_app.py")], {
        PYTHONPATH: shimPythonPath(SHIM, join(DATA, "fake_torch")),
        KERNCAP_OUT: dir,
        CUDA_INJECTION64_PATH: lib,
        FAKE_IGNORE_LOG: log,
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toContain("not installed");
      // nested benchmark_gpu (Inductor → Triton → base): flag on at each entry, off after the outermost
      expect(readFileSync(log, "utf8").trim().split("\n")).toEqual(["1", "1", "1", "bench-launch", "0", "app-launch"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
