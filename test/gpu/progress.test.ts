/**
 * The progress of a real capture: `kerncap run` on a PyTorch app holding 12 GiB of random device
 * memory (test/apps/torch_bigmem.py; its snapshot takes seconds: 48 GiB took 29 s,
 * docs/benchmarks.md), with stderr a pipe (not a terminal): a line when the before state starts,
 * then periodic lines with done/total, the percentage and the time left; under --json none of
 * them (stdout the document alone). Skips without torch.
 */
import { describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

const TORCH = !skipReason("progress tests") && run(["python3", "-c", "import torch; assert torch.cuda.is_available()"], { cwd: "/" }).code === 0;
const WORK = workDir("kerncap-progress-");
const GIB = "12";
const APP = ["python3", join(APPS, "torch_bigmem.py"), GIB];

describe.skipIf(!TORCH)("progress of a real capture", () => {
  test("stderr not a terminal: the phase's line, then periodic done/total lines with the time left", () => {
    const out = join(WORK, "cap");
    const r = kerncap(WORK, ["run", "--kernel", "MulFunctor", "--dispatch", "1", "--out", out, "--", ...APP]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/writing the before state \((1[0-9](\.\d)?) GiB\)/);
    const periodic = r.stderr.split("\n").filter((l) => /writing the before state: [\d.]+ [KMG]?i?B of [\d.]+ GiB \(\d+%\)/.test(l));
    expect(periodic.length, r.stderr).toBeGreaterThanOrEqual(1);
    expect(
      periodic.some((l) => /about \d+ (s|min)/.test(l)),
      periodic.join("\n"),
    ).toBe(true);
    const pct = periodic.map((l) => Number(/\((\d+)%\)/.exec(l)![1]));
    expect(pct.every((p, i) => i === 0 || p >= pct[i - 1]!)).toBe(true); // never backwards
    expect(r.stderr).not.toContain("\r"); // nothing redrawn in a pipe
    rmSync(out, { recursive: true, force: true });
  }, 300_000);

  test("--json: no progress line, the document alone on stdout", () => {
    const out = join(WORK, "cap-json");
    const r = kerncap(WORK, ["run", "--kernel", "MulFunctor", "--dispatch", "1", "--out", out, "--json", "--", ...APP]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).dir).toBe(out);
    expect(r.stderr).not.toMatch(/writing the (before|after) state/);
    rmSync(out, { recursive: true, force: true });
  }, 300_000);
});
