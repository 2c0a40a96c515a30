/**
 * Triton reproducers on the GPU (issue 3): JIT metadata joined with the capture, tuning-pinned
 * rebuild, validate bit-exact, the tolerance report after an edit, a syntax error, and an
 * Inductor-generated kernel. Skipped where no NVIDIA GPU (or no kerncap binary) is present.
 *
 * Needs: KERNCAP_BIN (default dist/kerncap), python3 with torch, triton and transformers.
 * Appends timings to $KERNCAP_GPU_OUT/triton-measurements.json when that is set.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, manifest, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("triton gpu tests");
const WORK = workDir("kerncap-triton-");
const apps = APPS;
const measurements: Record<string, unknown> = {};
const kc = (args: string[], env: Record<string, string> = {}) => kerncap(WORK, args, { TRITON_CACHE_DIR: join(WORK, "triton-cache"), ...env });

afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "triton-measurements.json"), JSON.stringify(measurements, null, 2));
});

describe.skipIf(SKIP)("Triton: autotuned hand-written matmul", () => {
  const app = ["python3", join(apps, "triton_matmul_autotune.py"), "3"];
  const out = join(WORK, "matmul");
  let best: Record<string, unknown> = {};

  test("capture the app's 2nd launch: Triton metadata joined, pinned config = autotuner's choice", () => {
    // the app launches matmul_kernel 3 times itself; the autotuner's benchmark launches (4 configs x
    // 6, fixed do_bench) are counted apart and --dispatch skips them
    const l = kc(["list", "--json", "--", ...app]);
    expect(l.code, l.stderr).toBe(0);
    const k = json(l).kernels.find((x: any) => x.name === "matmul_kernel");
    expect(k, l.stdout).toBeDefined();
    expect(k.benchmark).toBe(24);
    expect(k.count - k.benchmark).toBe(3);
    const cap = kc(["run", "--kernel", "^matmul_kernel$", "--dispatch", "1", "--out", out, "--json", "--", ...app]);
    expect(cap.code, cap.stderr).toBe(0);
    best = JSON.parse((cap.stderr + cap.stdout).match(/BEST (\{.*\})/)![1]!);
    const m = manifest(out);
    expect(m.kernel.frontend).toBe("triton");
    const s = m.source;
    expect(s.frontend).toBe("triton");
    expect(s.fnName).toBe("matmul_kernel");
    const consts = Object.fromEntries(s.constexprs.map((c: any) => [c.name, c.value]));
    for (const key of ["BLOCK_M", "BLOCK_N", "BLOCK_K"]) expect(consts[key]).toBe(best[key]);
    expect(s.options.num_warps).toBe(best.num_warps);
    expect(s.options.num_stages).toBe(best.num_stages);
    expect(s.autotune.config.kwargs).toEqual({ BLOCK_M: best.BLOCK_M, BLOCK_N: best.BLOCK_N, BLOCK_K: best.BLOCK_K });
    expect(s.launch.kind).toBe("app");
    expect(s.launch.appLaunchIndex).toBe(1);
    expect(s.signature.a_ptr).toBe("*fp16");
    expect(existsSync(join(out, "build.sh"))).toBe(true);
    expect(readFileSync(join(out, "src/matmul_kernel.py"), "utf8")).toContain("def _scale(acc, ALPHA: tl.constexpr)");
    // the shim's source copies went into src/original/: the capture packs (pack refused a Triton capture that kept triton-src/)
    expect(existsSync(join(out, "triton-src"))).toBe(false);
    const packed = kc(["pack", out, "-o", `${out}.zip`, "--force"]);
    expect(packed.code, packed.stderr).toBe(0);
    measurements.matmulCapture = { seconds: cap.seconds, best, launch: s.launch };
  });

  test("validate: rebuilt from the reproducer, bit-exact", () => {
    const v = kc(["validate", out, "--json", "--iters", "5"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    const r = json(v);
    expect(r.numerics.verdict).toBe("bit-exact");
    measurements.matmulValidate = { seconds: v.seconds, rebuild: r.rebuild.seconds, kernelUs: r.timing.medianUs };
  });

  test("edit a constant: mismatch (exit 1) at zero tolerance, within tolerance with --rtol", () => {
    const f = join(out, "src/matmul_kernel.py");
    const orig = readFileSync(f, "utf8");
    expect(orig).toContain("_scale(acc, 1.0)");
    writeFileSync(f, orig.replace("_scale(acc, 1.0)", "_scale(acc, 1.0001)"));
    try {
      const v = kc(["validate", out, "--json", "--iters", "1"]);
      expect(v.code, v.stderr).toBe(1);
      const r = json(v);
      expect(r.numerics.verdict).toBe("mismatch");
      const reg = r.numerics.regions.find((x: any) => x.verdict === "mismatch");
      expect(reg.dtype).toBe("fp32");
      expect(reg.dtypeSource).toBe("signature");
      expect(reg.overTolerance).toBeGreaterThan(0);
      expect(reg.maxRelError).toBeGreaterThan(5e-5);
      expect(reg.maxRelError).toBeLessThan(2e-4);
      const t = kc(["validate", out, "--json", "--iters", "1", "--rtol", "1e-3", "--atol", "1e-3"]);
      expect(t.code, t.stderr).toBe(0);
      expect(json(t).numerics.verdict).toBe("within-tolerance");
      const h = kc(["validate", out, "--iters", "1"]);
      expect(h.stdout).toContain("over tolerance");
    } finally {
      writeFileSync(f, orig); // a failed step must not leave the edit for the next test
    }
  });

  test("syntax error in the edited source: the message, exit 2", () => {
    const f = join(out, "src/matmul_kernel.py");
    const orig = readFileSync(f, "utf8");
    writeFileSync(f, orig.replace("acc = _scale(acc, 1.0)", "acc = _scale(acc, 1.0"));
    const v = kc(["validate", out]);
    writeFileSync(f, orig);
    expect(v.code).toBe(2);
    expect(v.stderr).toContain("SyntaxError");
  });

  test("another Triton version at rebuild: refused naming both, tried with --allow-version-mismatch (-f means replace an output)", () => {
    const p = join(out, "pinned.json");
    const orig = readFileSync(p, "utf8");
    const pin = JSON.parse(orig);
    writeFileSync(p, JSON.stringify({ ...pin, tritonVersion: "0.0.1" }));
    let v: ReturnType<typeof kc>, f: ReturnType<typeof kc>;
    try {
      v = kc(["validate", out]);
      f = kc(["validate", out, "--allow-version-mismatch", "--iters", "1"]);
    } finally {
      writeFileSync(p, orig);
    }
    expect(v.code).toBe(2);
    expect(v.stderr).toContain("0.0.1");
    expect(f.code, f.stderr).toBe(0);
  });

  test("no Triton in the rebuild's Python: names that Python", () => {
    // a Python that cannot import triton: the same interpreter in isolated mode, without site-packages
    const py = join(WORK, "python-without-triton");
    writeFileSync(py, `#!/bin/sh\nexec python3 -I -S "$@"\n`, { mode: 0o755 });
    const v = kc(["validate", out], { KERNCAP_PYTHON: py });
    expect(v.code).toBe(2);
    expect(v.stderr).toContain(py);
  });
});

describe.skipIf(SKIP)("Triton: Inductor (torch.compile of a transformers block)", () => {
  const env = { TORCHINDUCTOR_CACHE_DIR: join(WORK, "inductor-cache"), TORCHINDUCTOR_COMPILE_THREADS: "1" };
  test("fused pointwise kernel: captured, rebuilt from the reproducer, bit-exact", () => {
    const app = ["python3", join(apps, "triton_inductor_app.py"), "3"];
    const l = kc(["list", "--json", "--", ...app], env);
    expect(l.code, l.stderr).toBe(0);
    const kernels = json(l).kernels.map((k: any) => k.name);
    const poi = kernels.find((n: string) => n.startsWith("triton_poi_"));
    expect(poi, kernels.join("\n")).toBeDefined();
    const out = join(WORK, "inductor-poi");
    const t0 = performance.now();
    const cap = kc(["run", "--kernel", `^${poi}$`, "--dispatch", "1", "--out", out, "--json", "--", ...app], env);
    expect(cap.code, cap.stderr).toBe(0);
    const m = manifest(out);
    expect(m.kernel.frontend, JSON.stringify(m.source ?? null)).toBe("triton");
    const v = kc(["validate", out, "--json", "--iters", "5"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    expect(json(v).numerics.verdict).toBe("bit-exact");
    const reds = kernels.filter((n: string) => n.startsWith("triton_red_") || n.startsWith("triton_per_"));
    measurements.inductorPointwise = {
      kernel: poi,
      appToKernelSeconds: cap.seconds,
      validateSeconds: v.seconds,
      rebuildSeconds: json(v).rebuild.seconds,
      reductions: reds,
      totalSeconds: (performance.now() - t0) / 1000,
    };
  });

  test("reduction kernel: captured, rebuilt, bit-exact", () => {
    const app = ["python3", join(apps, "triton_inductor_app.py"), "3"];
    const l = json(kc(["list", "--json", "--", ...app], env));
    const red = l.kernels.map((k: any) => k.name).find((n: string) => n.startsWith("triton_red_") || n.startsWith("triton_per_"));
    expect(red, l.kernels.map((k: any) => k.name).join("\n")).toBeDefined(); // RMSNorm: a reduction
    const out = join(WORK, "inductor-red");
    const cap = kc(["run", "--kernel", `^${red}$`, "--dispatch", "1", "--out", out, "--json", "--", ...app], env);
    expect(cap.code, cap.stderr).toBe(0);
    const v = kc(["validate", out, "--json", "--iters", "5"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    expect(json(v).numerics.verdict).toBe("bit-exact");
    measurements.inductorReduction = { kernel: red, validateSeconds: v.seconds, verdict: json(v).numerics.verdict };
  });

  test("max-autotune matmul template kernel: the app's 2nd launch (benchmarks skipped), rebuilt, bit-exact", () => {
    // no CUDA graphs (their replays launch nothing the library sees); Triton templates only, so a
    // template (triton_tem_*) and not cuBLAS wins the GEMM autotuning
    const app = ["python3", join(apps, "triton_inductor_app.py"), "3", "max-autotune-no-cudagraphs"];
    const envT = { ...env, TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS: "TRITON" };
    const out = join(WORK, "inductor-tem");
    const cap = kc(["run", "--kernel", "^triton_tem_", "--dispatch", "1", "--out", out, "--json", "--", ...app], envT);
    expect(cap.code, cap.stderr).toBe(0);
    const m = manifest(out);
    expect(m.kernel.name).toStartWith("triton_tem_");
    expect(m.kernel.frontend, JSON.stringify(m.source ?? null)).toBe("triton");
    expect(m.kernel.matchIndex).toBe(1);
    // Inductor's templates set their tile sizes inside the kernel body (BLOCK_M : tl.constexpr = 64)
    const src = readFileSync(join(out, "src", `${m.source.fnName}.py`), "utf8");
    const block = Object.fromEntries([...src.matchAll(/\b(BLOCK_[MNK]) *: *tl\.constexpr *= *(\d+)/g)].map((x) => [x[1], Number(x[2])]));
    expect(Object.keys(block).sort(), src.slice(0, 3000)).toEqual(["BLOCK_K", "BLOCK_M", "BLOCK_N"]);
    const v = kc(["validate", out, "--json", "--iters", "5"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    expect(json(v).numerics.verdict).toBe("bit-exact");
    measurements.inductorTemplate = {
      kernel: m.kernel.name,
      appToKernelSeconds: cap.seconds,
      validateSeconds: v.seconds,
      rebuildSeconds: json(v).rebuild.seconds,
      launch: m.source.launch,
      block,
    };
  });
});
