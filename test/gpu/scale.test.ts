/**
 * Snapshots at production scale (issue 10): applications whose allocators reserve most of the GPU
 * while the kernel touches a few MiB. Targets: `kerncap run` minus the app's own time ≤ 5 s, the
 * capture folder ≤ 1 GiB on disk, `kerncap replay` ≤ 5 s, bit-exact. Each app runs once alone
 * first (its own time, same node, same run). Figures go to $KERNCAP_GPU_OUT/scale.json.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("scale tests");
const WORK = workDir("kerncap-scale-");
const figures: Record<string, unknown> = {};
afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "scale.json"), JSON.stringify(figures, null, 2));
});

function duBytes(dir: string): number {
  const r = run(["du", "-sb", dir], { cwd: WORK });
  return Number(r.stdout.split(/\s/)[0]);
}

function arena(label: string, kernel: string, app: string[], env: Record<string, string> = {}) {
  const alone = run(app, { cwd: WORK, env, timeoutMs: 300_000 });
  expect(alone.code, alone.stderr).toBe(0);
  const out = join(WORK, label);
  const cap = kerncap(WORK, ["run", "--kernel", kernel, "--out", out, "--json", "--", ...app], env);
  expect(cap.code, cap.stderr).toBe(0);
  const c = json(cap);
  const rep = kerncap(WORK, ["replay", out, "--json", "--iters", "5"]);
  const r = rep.code <= 1 ? json(rep) : undefined;
  const f = {
    appAloneSeconds: alone.seconds,
    runSeconds: cap.seconds,
    overheadSeconds: cap.seconds - alone.seconds,
    liveBytes: c.beforeBytes,
    folderBytes: duBytes(out),
    replaySeconds: rep.seconds,
    verdict: r?.verdict,
    restore: r?.restore,
    check: r?.check,
    captureTiming: c.timing,
  };
  figures[label] = f;
  console.log(`[scale] ${label}: ${JSON.stringify(f)}`);
  expect(rep.code, rep.stderr).toBe(0);
  expect(r.verdict).toBe("match");
  expect(f.liveBytes).toBeGreaterThan(50 * 2 ** 30);
  expect(f.folderBytes).toBeLessThan(2 ** 30);
  expect(f.overheadSeconds).toBeLessThan(5);
  expect(f.replaySeconds).toBeLessThan(5);
}

describe.skipIf(SKIP)("arena allocators: cost follows the data, not the allocation", () => {
  test("JAX jit program with default preallocation (75% of the GPU in one region)", () => {
    arena("jax-default", "fusion", ["python3", join(APPS, "jax_arena.py")]);
  });
  test("PyTorch holding a 100 GiB tensor, softmax over 4 MiB of it", () => {
    arena("torch-100g", "softmax", ["python3", join(APPS, "torch_arena.py"), "100"]);
  });
  test("the same with expandable segments (VMM)", () => {
    arena("torch-100g-vmm", "softmax", ["python3", join(APPS, "torch_arena.py"), "100"], { PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True" });
  });
});
