/**
 * Several kernels in one run (issue 15): `--kernel A --kernel B` and `--capture-all` write one
 * capture folder per kernel inside --out (with its index); each replays bit-exact on its own.
 * ncu's `-s N -c K` (issue 26): K consecutive launches of one kernel, one folder each.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("multi-capture tests");
const WORK = workDir("kerncap-multi-");
const kc = (args: string[]) => kerncap(WORK, args);
let app = "";
beforeAll(() => {
  if (SKIP) return;
  app = join(WORK, "structs");
  const p = run(["nvcc", "-O2", "-arch=sm_90", "-o", app, join(APPS, "structs.cu")], { cwd: WORK });
  if (p.code !== 0) throw new Error(p.stderr);
});

function replayAll(dir: string, n: number) {
  const set = JSON.parse(readFileSync(join(dir, "kerncap-captures.json"), "utf8"));
  expect(set.format).toBe("kerncap-capture-set");
  expect(set.captures.length).toBe(n);
  for (const c of set.captures) {
    const rep = kc(["replay", join(dir, c.dir), "--json", "--iters", "2"]);
    expect(rep.code, `${c.dir}: ${rep.stderr}`).toBe(0);
    expect(json(rep).verdict).toBe("match");
  }
  return set;
}

describe.skipIf(SKIP)("several captures in one run", () => {
  test("--kernel scale_jobs --kernel axpy_inplace: two capture folders, each replays bit-exact", () => {
    const out = join(WORK, "two");
    const r = kc(["run", "--kernel", "scale_jobs", "--kernel", "axpy_inplace", "--dispatch", "1", "--out", out, "--json", "--", app, "3"]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).captures.length).toBe(2);
    const set = replayAll(out, 2);
    expect(set.captures.map((c: any) => c.kernel).join(" ")).toContain("scale_jobs");
    expect(set.captures.map((c: any) => c.kernel).join(" ")).toContain("axpy_inplace");
    // the set folder itself is not a capture: replay says which ones it holds
    const bad = kc(["replay", out]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("holds 2 captures");
  });

  test("-k scale_jobs -s 1 -c 3: launches 1, 2 and 3 of one kernel, consecutive, each replays bit-exact", () => {
    const out = join(WORK, "count");
    const r = kc(["run", "-k", "scale_jobs", "-s", "1", "-c", "3", "-o", out, "--json", "--", app, "5"]);
    expect(r.code, r.stderr).toBe(0);
    const set = replayAll(out, 3);
    const idx = set.captures.map((c: any) => JSON.parse(readFileSync(join(out, c.dir, "kerncap.json"), "utf8")).kernel.matchIndex);
    expect(idx).toEqual([1, 2, 3]);
  });

  test("--capture-all: the first launch of every distinct kernel", () => {
    const out = join(WORK, "all");
    const r = kc(["run", "--capture-all", "--out", out, "--", app, "1"]);
    expect(r.code, r.stderr).toBe(0);
    const l = json(kc(["list", "--json", "--", app, "1"]));
    replayAll(out, l.kernels.length);
    expect(existsSync(join(out, "captures"))).toBe(false);
  });
});
