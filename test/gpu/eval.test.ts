/**
 * `kerncap eval` on the GPU: fma_loop of test/apps/verdicts.cu captured at both of its launches
 * (`-c 2`: a capture set, two inputs), its source found by --source-root; candidates as edited
 * copies of src/: the source as captured and an unrolled loop (match on both inputs, timed),
 * a changed constant (mismatch), a loop that never ends (timeout: the watchdog kills the worker),
 * a store far outside any allocation (fault), a syntax error (compile-error, the compiler's message
 * once). Each verdict equals validate's of the same edit; the capture folder is unchanged.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, BIN, kerncap, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("eval tests");
const WORK = workDir("kerncap-eval-");
const kc = (args: string[]) => kerncap(WORK, args);
let app = "";
let set = "";
let member = "";
let tu = "";

beforeAll(() => {
  if (SKIP) return;
  app = join(WORK, "verdicts");
  const p = run(["nvcc", "-O2", "-arch=sm_90", "-o", app, join(APPS, "verdicts.cu")], { cwd: WORK });
  if (p.code !== 0) throw new Error(p.stderr);
  set = join(WORK, "fma");
  const r = kc(["run", "--kernel", "^fma_loop", "--dispatch", "0", "--launch-count", "2", "--source-root", APPS, "--out", set, "--", app, "fma"]);
  if (r.code !== 0) throw new Error(r.stderr);
  const index = JSON.parse(readFileSync(join(set, "kerncap-captures.json"), "utf8"));
  member = join(set, index.captures[0].dir);
  tu = readdirSync(join(member, "src")).find((f) => f === "verdicts.cu") ?? "verdicts.cu";
});

/** An edited copy of src/ named `name`, with `from` replaced by `to` in the kernel's TU. */
function candidate(name: string, from: string, to: string): string {
  const d = join(WORK, "cands", name);
  rmSync(d, { recursive: true, force: true });
  cpSync(join(member, "src"), d, { recursive: true });
  const text = readFileSync(join(d, tu), "utf8");
  if (from && !text.includes(from)) throw new Error(`${from} is not in src/${tu}`);
  writeFileSync(join(d, tu), text.replace(from, to));
  return d;
}

const LOOP = "  for (int k = 0; k < iters; k++) a = fmaf(a, b, 0.5f);";

describe.skipIf(SKIP)("kerncap eval", () => {
  test("six candidates on the two launches of fma_loop: match, mismatch, timeout, fault, compile-error; each as validate says", () => {
    const cands = {
      same: candidate("same", "", ""),
      unroll4: candidate("unroll4", LOOP, `  #pragma unroll 4\n${LOOP}`),
      wrong: candidate("wrong", "fmaf(a, b, 0.5f)", "fmaf(a, b, 0.25f)"),
      hang: candidate("hang", LOOP, "  for (int k = 0; ; k++) { a = fmaf(a, b, 0.5f); if (clock64() < 0) break; }"),
      fault: candidate("fault", "  y[i] = a;\n}", "  if (i == 0) *(volatile float *)(y + (1ll << 40)) = a;\n  y[i] = a;\n}"),
      broken: candidate("broken", LOOP, LOOP.replace("0.5f);", "0.5f) not_cuda;")),
    };
    const before = readFileSync(join(member, "src", tu), "utf8");
    const jsonl = join(WORK, "eval.jsonl");
    const t0 = performance.now();
    const r = run([BIN, "eval", set, ...Object.values(cands), "--gpus", "0", "--workers-per-gpu", "2", "--timeout", "3", "--jsonl", jsonl, "--json"], {
      cwd: WORK,
      timeoutMs: 300_000,
    });
    const seconds = (performance.now() - t0) / 1000;
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const doc = lines.at(-1);
    expect(doc.schema, r.stderr).toBe("kerncap.eval/1");
    const by = Object.fromEntries(doc.candidates.map((c: any) => [c.label, c]));
    expect(doc.inputs.length).toBe(2);
    expect(by.same.verdict, r.stderr).toBe("match");
    expect(by.same.inputs.map((i: any) => i.verdict)).toEqual(["match", "match"]);
    expect(by.same.speedup).toBeGreaterThan(0.5);
    expect(by.unroll4.verdict).toBe("match");
    expect(by.unroll4.registers).toBeGreaterThan(0);
    expect(by.wrong.verdict).toBe("mismatch");
    expect(by.hang.verdict).toBe("timeout");
    // the hang is known at its first launch (1 s: 100× the captured kernel time is less), not at --timeout's 3 s
    expect(by.hang.reason).toContain(": its first launch ran past 1.0 s");
    // two workers on GPU 0 take turns for their timed rounds (src/util/timing-window.ts): each timed record says how long it waited
    const timed = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((x) => x.timing);
    expect(timed.length).toBeGreaterThan(0);
    for (const x of timed) expect(x.timing.waitSeconds).toBeGreaterThanOrEqual(0);
    expect(by.fault.verdict).toBe("fault");
    expect(by.broken.verdict).toBe("compile-error");
    // the compiler's own first error, on the capture's file (nvcc names the line, not always the token)
    expect(by.broken.reason).toMatch(/src\/verdicts\.cu:\d+: error/);
    expect(readFileSync(join(member, "src", tu), "utf8")).toBe(before);
    // validate of the same edits (the hang stopped by `timeout`): the same verdicts
    const val = join(WORK, "val");
    cpSync(member, val, { recursive: true });
    const vres: Record<string, string> = {};
    for (const [name, dir] of Object.entries(cands)) {
      rmSync(join(val, "src"), { recursive: true, force: true });
      cpSync(dir, join(val, "src"), { recursive: true });
      const v = run(["timeout", "-k", "5", "20", BIN, "validate", val, "--json", "--trust"], { cwd: WORK, timeoutMs: 60_000 }); // a copy: --trust (src/format/made-here.ts)
      let d: any = {};
      try {
        d = JSON.parse(v.stdout);
      } catch {
        /* a killed validate prints nothing */
      }
      vres[name] =
        v.code === 124 || v.code === 137
          ? "timeout"
          : v.code <= 1
            ? d.verdict
            : d.error?.code === "E_BUILD"
              ? "compile-error"
              : d.error?.code === "E_CUDA"
                ? "fault"
                : `error:${d.error?.code}`;
    }
    for (const name of Object.keys(cands)) expect(`${name}: ${by[name].verdict}`).toBe(`${name}: ${vres[name]}`);
    const out = process.env.KERNCAP_GPU_OUT;
    if (out && existsSync(out)) writeFileSync(join(out, "eval-figures.json"), JSON.stringify({ seconds, candidates: doc.candidates, validate: vres }, null, 2));
  }, 400_000);

  test("--build-only builds with no GPU worker (verdict built); --resume without it judges the kept modules on the GPU, none built again", () => {
    const cands = [candidate("bo-same", "", ""), candidate("bo-unroll2", LOOP, `  #pragma unroll 2\n${LOOP}`)];
    const jsonl = join(WORK, "build-only.jsonl");
    rmSync(jsonl, { force: true });
    const last = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!);
    const b = run([BIN, "eval", set, ...cands, "--build-only", "--jsonl", jsonl, "--json"], { cwd: WORK, timeoutMs: 300_000 });
    expect(b.code, b.stderr).toBe(0);
    expect(last(b.stdout).candidates.map((c: any) => c.verdict)).toEqual(["built", "built"]);
    const r = run([BIN, "eval", set, ...cands, "--resume", "--jsonl", jsonl, "--json"], { cwd: WORK, timeoutMs: 300_000 });
    expect(r.code, r.stderr).toBe(0);
    const rd = last(r.stdout);
    expect(rd.candidates.map((c: any) => c.verdict)).toEqual(["match", "match"]);
    expect(rd.candidates[0].inputs.map((i: any) => i.verdict)).toEqual(["match", "match"]);
    expect(r.stderr).toContain("the module its earlier build kept is judged");
    expect(r.stderr).not.toContain("built again");
  }, 400_000);
});

/** The fma_loop kernel of the capture's TU with its body replaced: `decl` before it, `body` as its code. */
function rewritten(name: string, decl: string, body: string): string {
  const d = join(WORK, "cands", name);
  rmSync(d, { recursive: true, force: true });
  cpSync(join(member, "src"), d, { recursive: true });
  const text = readFileSync(join(d, tu), "utf8");
  const start = text.indexOf("__global__ void fma_loop(");
  const end = text.indexOf("\n}\n", start) + 3;
  if (start < 0 || end < 3) throw new Error(`fma_loop is not in src/${tu}`);
  writeFileSync(join(d, tu), `${text.slice(0, start)}${decl}\n__global__ void fma_loop(float *y, int n, int iters) {\n${body}\n}\n${text.slice(end)}`);
  return d;
}

/** kerncap validate --json of a copy of the first input (folder `name`) whose src/ is `src`: the process and its document. */
function validateCopy(name: string, src: string): { v: ReturnType<typeof run>; vd: any } {
  const val = join(WORK, name);
  rmSync(val, { recursive: true, force: true });
  cpSync(member, val, { recursive: true });
  rmSync(join(val, "src"), { recursive: true, force: true });
  cpSync(src, join(val, "src"), { recursive: true });
  // a copy of the user's capture is not the folder kerncap sealed as made here (src/format/made-here.ts): its stock build.sh runs with --trust
  const v = run([BIN, "validate", val, "--json", "--trust"], { cwd: WORK, timeoutMs: 120_000 });
  return { v, vd: JSON.parse(v.stdout) };
}

const COMPUTE = "  float a = y[i], b = 1.0001f;\n  for (int k = 0; k < iters; k++) a = fmaf(a, b, 0.5f);";

describe.skipIf(SKIP)("candidates that game the judging (eval and validate)", () => {
  test("output that differs from run to run on purpose: a mismatch (the envelope is the captured kernel's, not the candidate's own)", () => {
    const d = rewritten(
      "selfwiden",
      "",
      `  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n${COMPUTE}\n  y[i] = ((clock64() >> 4) & 1) ? 1e30f : (a == 12345.f ? a : -1e30f);`,
    );
    const r = run([BIN, "eval", set, d, "--gpus", "0", "--json"], { cwd: WORK, timeoutMs: 200_000 });
    const doc = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    const c = doc.candidates[0];
    console.log(`[eval] self-widening candidate: ${c.verdict}${c.reason ? `: ${c.reason}` : ""}${c.speedup ? `, speedup ${c.speedup}` : ""}`);
    expect(c.verdict, r.stderr).toBe("mismatch");
    expect(JSON.stringify(c)).toContain("nondeterminism the edit brought in");
  }, 300_000);

  test("a result kept in the candidate's own __device__ memory and copied out on later launches: put back before every launch, so no speedup", () => {
    const d = rewritten(
      "cache",
      "__device__ float kc_cache[1 << 22];\n__device__ unsigned kc_blocks;",
      [
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "  if (i >= n) return;",
        "  if (*(volatile unsigned *)&kc_blocks >= gridDim.x) { y[i] = kc_cache[i]; return; }",
        COMPUTE,
        "  kc_cache[i] = a;",
        "  y[i] = a;",
        "  __syncthreads();",
        "  if (threadIdx.x == 0) { __threadfence(); atomicAdd(&kc_blocks, 1u); }",
      ].join("\n"),
    );
    const r = run([BIN, "eval", set, d, "--gpus", "0", "--json"], { cwd: WORK, timeoutMs: 200_000 });
    const doc = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    const c = doc.candidates[0];
    console.log(`[eval] cache candidate: ${c.verdict}, speedup ${c.speedup}`);
    expect(c.verdict, r.stderr).toBe("match");
    expect(c.speedup).toBeGreaterThan(0.6);
    expect(c.speedup).toBeLessThan(1.5); // it computes at every launch; kept, it would time a 16 MiB copy
    // validate says what it put back
    const { v, vd } = validateCopy("val-cache", d);
    expect(vd.verdict, v.stderr).toBe("match");
    expect(vd.determinism.moduleState.names.sort()).toEqual(["kc_blocks", "kc_cache"]);
    expect(vd.determinism.moduleState.bytes).toBe((1 << 22) * 4 + 4);
  }, 300_000);

  test("a kernel that counts its launches in memory outside every region and skips its work once timed: its writes there are found, a mismatch", () => {
    const m = JSON.parse(readFileSync(join(member, "kerncap.json"), "utf8"));
    const y = m.regions.find((x: any) => x.size === (1 << 22) * 4) ?? m.regions[0];
    const va = BigInt(y.va);
    const SPAN = 32n << 20n; // the replay maps 32 MiB-aligned spans (src/replay/backends/cuda.ts RESERVE_ALIGN)
    const end = va + BigInt(y.size);
    // a word inside the mapped span but outside the region: after its end, or before its start
    const at = end % SPAN !== 0n && SPAN - (end % SPAN) >= 65536n ? "(unsigned *)(y + n) + 4096" : "(unsigned *)y - 4096";
    const d = rewritten(
      "skip",
      "",
      [
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "  if (i >= n) return;",
        `  unsigned *ctr = ${at};`,
        "  unsigned c = *(volatile unsigned *)ctr;",
        "  if (i == 0) atomicAdd(ctr, 1u);",
        "  if (c >= 6) return; // 3 checked runs, 1 more of the second load, 2 warm-ups: then skip",
        COMPUTE,
        "  y[i] = a;",
      ].join("\n"),
    );
    const { v, vd } = validateCopy("val-skip", d);
    console.log(`[eval] skip candidate: ${vd.verdict} ${JSON.stringify(vd.check?.outsideRegions)} ${JSON.stringify(vd.check?.timedLaunch)}`);
    expect(vd.verdict, v.stderr).toBe("mismatch");
    // its counter lies in the memory mapped around the region: found after the checked runs (and the
    // timed launch checked may see the skipped work too, by the round drawn)
    expect(vd.check.outsideRegions).toContain("mapped around the regions: no allocation of the app's");
    expect(v.code).toBe(1);
  }, 300_000);
});

const HAS_TRITON = !SKIP && Bun.spawnSync(["python3", "-c", "import torch, triton"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
if (!SKIP && !HAS_TRITON) console.warn("[eval tests] Triton part skipped: python3 cannot import torch and triton");

describe.skipIf(!HAS_TRITON)("kerncap eval, Triton configs", () => {
  test("fused_add_relu: configs of num_warps and num_stages match and are timed; a tile size without --grid is refused", () => {
    const env = { TRITON_CACHE_DIR: join(WORK, "triton-cache") };
    const cap = join(WORK, "fused_add_relu");
    const c = kerncap(WORK, ["run", "--kernel", "^fused_add_relu$", "--dispatch", "1", "--out", cap, "--", "python3", join(APPS, "triton_app.py"), "3"], env);
    expect(c.code, c.stderr).toBe(0);
    const r = kerncap(WORK, ["eval", cap, "num_warps=2", "num_warps=8 num_stages=2", "num_warps=1", "--gpus", "0", "--workers-per-gpu", "2", "--json"], env);
    const doc = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    expect(doc.schema, r.stderr).toBe("kerncap.eval/1");
    for (const x of doc.candidates) {
      expect(`${x.label}: ${x.verdict}`, r.stderr).toBe(`${x.label}: match`);
      expect(x.speedup).toBeGreaterThan(0);
    }
    expect(doc.candidates.map((x: any) => x.rank).sort()).toEqual([1, 2, 3]);
    const tiles = kerncap(WORK, ["eval", cap, "BLOCK=512"], env);
    expect(tiles.code).toBe(2);
    expect(tiles.stderr).toContain("--grid");
  }, 300_000);
});
