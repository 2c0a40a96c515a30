/**
 * docs/check.md's Slurm job array on a real Slurm (scripts/slurm-one-node.sh: a one-node cluster
 * of Debian's slurmctld + slurmd with munge, private to the run), over a corpus of three demo
 * captures in two array tasks: every capture in the merged JUnit report once. On this CPU machine
 * each record is E_NO_GPU. Runs only where slurm-wlm and munge are installed (the script exits 77
 * otherwise); kerncap is this checkout's, through a wrapper. And the three documents that speak of
 * it say the same (a new user found one saying Slurm was never tried).
 */
import { expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { tempDir } from "./fixtures.ts";

const ROOT = resolve(import.meta.dir, "../..");
const HAS_SLURM = ["/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged"].every(existsSync) && !!Bun.which("sbatch");
if (!HAS_SLURM) console.warn("[slurm] skipped: needs Debian's slurm-wlm and munge (apt-get install slurm-wlm munge)");

test.skipIf(!HAS_SLURM)(
  "the doc's array job under sbatch on a one-node Slurm: the shards merge into one JUnit report holding every capture once",
  () => {
    const d = tempDir("kerncap-slurm-test-");
    const kerncap = join(d, "kerncap");
    writeFileSync(kerncap, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "src/cli/main.ts"))} "$@"\n`);
    chmodSync(kerncap, 0o755);
    mkdirSync(join(d, "corpus"));
    for (const n of ["d1", "d2", "d3"]) expect(Bun.spawnSync([kerncap, "demo", join(d, "corpus", n)], { stderr: "pipe" }).exitCode).toBe(0);
    const r = Bun.spawnSync(["bash", join(ROOT, "scripts/slurm-one-node.sh"), join(d, "corpus"), "2"], {
      cwd: ROOT,
      env: { ...process.env, KERNCAP_BIN: kerncap, TMPDIR: d },
      stdout: "pipe",
      stderr: "pipe",
      timeout: 240_000,
    });
    const out = r.stdout.toString() + r.stderr.toString();
    expect(r.exitCode, out).toBe(0);
    expect(out).toMatch(/one-node cluster up on \S+/);
    expect(out).toMatch(/array job \d+ left the queue/);
    expect(out).toContain("2 shard reports of 2 tasks");
    expect(out).toContain("merged JUnit 3 test cases (3 distinct) of 3 captures");
    // no daemon of the run is left behind
    expect(
      Bun.spawnSync(["pgrep", "-f", `${d}/`], { stdout: "pipe" })
        .stdout.toString()
        .trim(),
    ).toBe("");
  },
  300_000,
);

test("check.md, support.md and benchmarks.md say the same of Slurm: a real one-node Slurm (this test's script) without a GPU, a stand-in shell on the GPU node", () => {
  const doc = (f: string) => readFileSync(join(ROOT, "docs", f), "utf8").replace(/\s+/g, " ");
  for (const f of ["check.md", "support.md", "benchmarks.md"]) {
    const t = doc(f);
    expect(t, f).toContain("scripts/slurm-one-node.sh");
    expect(t, f).toContain("test/cpu/slurm.test.ts");
    expect(t, f).not.toMatch(/Slurm itself (never|\(scheduling[^)]*\) was not tried)/);
  }
  expect(doc("benchmarks.md")).toContain("scripts/try-slurm-array.sh");
  expect(doc("check.md")).toContain("scripts/try-slurm-array.sh");
});
