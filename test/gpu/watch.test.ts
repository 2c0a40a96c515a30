/**
 * `kerncap validate --watch DIR --json` on a GPU: structs.cu's scale_jobs
 * captured with its reproducer (--source-root), the watch started as a child process; its first
 * line is the unchanged reproducer's MATCH; an edit that changes results gives a MISMATCH line,
 * the revert MATCH, a syntax error a build-error line with the compiler's message, the fix MATCH
 * again. Save-to-verdict minus build time (the watch's own overhead: debounce, slice refresh,
 * layout check, module load, launches, compare) is printed and must stay under 0.3 s. SIGINT
 * ends it with exit 130.
 * Triton (the same loop for a Triton reproducer: a rebuild re-JITs src/<kernel>.py with the pinned
 * config through the reproducer's build.sh/repro.py): test/apps/triton_app.py's fused_add_relu,
 * MATCH, an edit MISMATCH, the revert MATCH, SIGINT exit 130.
 *
 * Only bun:test, node:* and ./harness.ts imports; drives $KERNCAP_BIN. Skips without a GPU,
 * kerncap binary or nvcc (the Triton test: without python3 with torch and triton).
 */
import { describe, expect, test } from "bun:test";
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, BIN, kerncap, run, skipReason, workDir } from "./harness.ts";

const NVCC = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const SKIP = !!skipReason("watch gpu tests", [[!NVCC, "no nvcc"]]);
const WORK = workDir("kerncap-watch-gpu-");

/** The watch as a child process: its JSON lines as they come, each with its arrival time (performance.now(), ms). */
function startWatch(dir: string, extraEnv: Record<string, string> = {}) {
  const { BUN_BE_BUN: _, ...env } = process.env;
  const p = Bun.spawn([BIN, "validate", "--watch", dir, "--json"], { cwd: WORK, env: { ...env, ...extraEnv }, stdout: "pipe", stderr: "pipe" });
  const lines: { doc: any; at: number }[] = [];
  let stderr = "";
  const out = (async () => {
    let buf = "";
    for await (const chunk of p.stdout) {
      buf += new TextDecoder().decode(chunk);
      for (let i; (i = buf.indexOf("\n")) >= 0; buf = buf.slice(i + 1)) lines.push({ doc: JSON.parse(buf.slice(0, i)), at: performance.now() });
    }
  })();
  const err = (async () => {
    for await (const chunk of p.stderr) stderr += new TextDecoder().decode(chunk);
  })();
  /** Wait for line n (1-based), at most `ms`. */
  const line = async (n: number, ms = 60_000) => {
    const t0 = performance.now();
    while (lines.length < n) {
      if (performance.now() - t0 > ms)
        throw new Error(`no line ${n} from the watch after ${ms} ms; lines ${JSON.stringify(lines.map((l) => l.doc))}\nstderr:\n${stderr}`);
      if (p.exitCode !== null) throw new Error(`the watch exited ${p.exitCode} before line ${n}\nstderr:\n${stderr}`);
      await Bun.sleep(20);
    }
    return lines[n - 1]!;
  };
  return { p, lines, line, done: () => Promise.all([out, err]), stderr: () => stderr };
}

describe.skipIf(SKIP)("validate --watch", () => {
  test("structs.cu scale_jobs: MATCH, an edit MISMATCH, revert MATCH, a syntax error and its fix; overhead < 0.3 s; SIGINT exits 130", async () => {
    const bin = join(WORK, "structs");
    const b = run([NVCC!, "-O2", "-arch=sm_90", "-o", bin, join(APPS, "structs.cu")], { cwd: WORK });
    expect(b.code, b.stderr).toBe(0);
    const cap = join(WORK, "scale_jobs");
    const c = kerncap(WORK, ["run", "--kernel", "scale_jobs", "--dispatch", "1", "--source-root", APPS, "--out", cap, "--json", "--", bin, "3"]);
    expect(c.code, c.stderr).toBe(0);
    expect(existsSync(join(cap, "build.sh"))).toBe(true);
    const file = join(cap, "src/structs.cu");
    const original = readFileSync(file, "utf8");
    const body = "job.out[i] = job.in[i] * job.scale * c_gain[j % 4] + (float)j;";
    expect(original).toContain(body);

    const w = startWatch(cap);
    const overheads: number[] = [];
    const external: number[] = [];
    /** Write the file, wait for the next line; record the watch's overhead and the one seen from here. */
    const save = async (text: string) => {
      const n = w.lines.length + 1;
      await Bun.sleep(300); // apart from the previous save: its own debounce burst
      const t = performance.now();
      writeFileSync(file, text);
      const l = await w.line(n);
      if (l.doc.event === "verdict") {
        overheads.push(l.doc.overheadSeconds);
        external.push((l.at - t) / 1000 - l.doc.buildSeconds);
      }
      return l.doc;
    };
    try {
      const first = (await w.line(1, 120_000)).doc;
      expect(first, w.stderr()).toMatchObject({ schema: "kerncap.validate-watch/1", event: "verdict", trigger: "start", verdict: "match" });
      expect(first.kernelMedianUs).toBeGreaterThan(0);
      // the rebuilt kernel timed against the captured module, interleaved (the unedited source: no claim of a speed change beyond noise expected, but any verdict is a measurement)
      expect(first.compare, w.stderr()).toMatchObject({ verdict: expect.stringMatching(/^(faster|slower|same)$/), pairs: expect.any(Number) });
      expect(first.compare.low).toBeLessThanOrEqual(first.compare.high);
      console.log(`[watch] first verdict against the captured module: ${first.compare.text}`);
      await Bun.sleep(500); // the watcher starts right after the first line
      // the check of the pruned build beside the first build (a save meanwhile would stop it: test/cpu/watch.test.ts)
      for (let t = 0; !w.stderr().includes("saves are rebuilt") && t < 600; t++) await Bun.sleep(100);
      expect(w.stderr()).toContain("saves are rebuilt from the pruned TU"); // libstdc++ 13's headers prune (using __exception_ptr::swap)

      const bad = await save(original.replace(body, body.replace("+ (float)j;", "+ (float)j + 1.0f;")));
      expect(bad, w.stderr()).toMatchObject({ event: "verdict", trigger: "save", verdict: "mismatch", files: ["structs.cu"], builder: "pruned" });
      expect(bad.firstMismatch.kind).toBe("device");
      expect(bad.mismatches).toBeGreaterThan(0);

      const back = await save(original);
      expect(back, w.stderr()).toMatchObject({ event: "verdict", verdict: "match" });
      expect(back.reset).not.toBeNull(); // what the wrong kernel wrote was put back before this run (the MATCH shows it)

      const ce = await save(original.replace(body, body.replace("+ (float)j;", "+ not_declared;")));
      expect(ce).toMatchObject({ event: "build-error", code: "E_BUILD" });
      expect(ce.message).toContain("not_declared");

      const fixed = await save(original);
      expect(fixed, w.stderr()).toMatchObject({ event: "verdict", verdict: "match" });

      const fmt = (xs: number[]) => xs.map((x) => x.toFixed(3)).join(", ");
      console.log(
        `[watch] save-to-verdict minus build: ${fmt(overheads)} s (kerncap's measure, from the last file event); ${fmt(external)} s (from this test's write to the line); builds ${w.lines
          .filter((l) => l.doc.event === "verdict")
          .map((l) => l.doc.buildSeconds.toFixed(2))
          .join(", ")} s; kernel ${first.kernelMedianUs.toFixed(2)} µs`,
      );
      if (process.env.KERNCAP_GPU_OUT)
        appendFileSync(join(process.env.KERNCAP_GPU_OUT, "watch.log"), w.lines.map((l) => JSON.stringify(l.doc)).join("\n") + "\n" + w.stderr());
      for (const o of overheads) expect(o).toBeLessThan(0.3);

      w.p.kill("SIGINT");
      expect(await w.p.exited).toBe(130);
    } finally {
      w.p.kill("SIGKILL");
      await w.done().catch(() => {});
    }
  }, 240_000);
});

const HAS_TRITON = !SKIP && Bun.spawnSync(["python3", "-c", "import torch, triton"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
if (!SKIP && !HAS_TRITON) console.warn("[watch gpu tests] Triton part skipped: python3 cannot import torch and triton");

describe.skipIf(!HAS_TRITON)("validate --watch, Triton reproducer", () => {
  test("triton_app.py fused_add_relu: MATCH, an edit MISMATCH, revert MATCH; SIGINT exits 130", async () => {
    const env = { TRITON_CACHE_DIR: join(WORK, "triton-cache") };
    const cap = join(WORK, "fused_add_relu");
    const c = kerncap(
      WORK,
      ["run", "--kernel", "^fused_add_relu$", "--dispatch", "1", "--out", cap, "--json", "--", "python3", join(APPS, "triton_app.py"), "3"],
      env,
    );
    expect(c.code, c.stderr).toBe(0);
    const file = join(cap, "src/fused_add_relu.py");
    expect(existsSync(join(cap, "build.sh")), c.stderr).toBe(true);
    const original = readFileSync(file, "utf8");
    const body = "tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=m)";
    expect(original).toContain(body);

    const w = startWatch(cap, env);
    const save = async (text: string) => {
      const n = w.lines.length + 1;
      await Bun.sleep(300);
      writeFileSync(file, text);
      return (await w.line(n)).doc;
    };
    try {
      const first = (await w.line(1, 120_000)).doc;
      expect(first, w.stderr()).toMatchObject({ schema: "kerncap.validate-watch/1", event: "verdict", trigger: "start", verdict: "match" });
      await Bun.sleep(500); // the watcher starts right after the first line

      // relu's floor 0 → 0.5: every output below 0.5 changes
      const bad = await save(original.replace(body, body.replace("0.0)", "0.5)")));
      expect(bad, w.stderr()).toMatchObject({ event: "verdict", trigger: "save", verdict: "mismatch", files: ["fused_add_relu.py"] });
      expect(bad.mismatches).toBeGreaterThan(0);

      const back = await save(original);
      expect(back, w.stderr()).toMatchObject({ event: "verdict", verdict: "match" });
      console.log(
        `[watch triton] builds ${w.lines
          .filter((l) => l.doc.event === "verdict")
          .map((l) => l.doc.buildSeconds.toFixed(2))
          .join(", ")} s; overhead ${w.lines
          .filter((l) => l.doc.event === "verdict")
          .map((l) => l.doc.overheadSeconds.toFixed(3))
          .join(", ")} s`,
      );
      if (process.env.KERNCAP_GPU_OUT)
        appendFileSync(join(process.env.KERNCAP_GPU_OUT, "watch.log"), w.lines.map((l) => JSON.stringify(l.doc)).join("\n") + "\n" + w.stderr());

      w.p.kill("SIGINT");
      expect(await w.p.exited).toBe(130);
    } finally {
      w.p.kill("SIGKILL");
      await w.done().catch(() => {});
    }
  }, 240_000);
});
