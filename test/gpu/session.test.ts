/**
 * The capture session on a GPU, with the real capture library injected: the application's exit
 * code passed through after a complete capture, ncu's spellings, SIGTERM of `kerncap run` during a
 * CUDA application (its process group ends, nothing is left), no files in the working folder, and
 * the snapshot progress on stderr (needs PyTorch).
 * Skipped (and counted as skipped) where no NVIDIA GPU is present.
 *
 * Needs: KERNCAP_BIN (default dist/kerncap), nvcc.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { APPS, BIN, json, kerncap, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("gpu session tests", [[!Bun.which("nvcc"), "no nvcc"]]);
const WORK = workDir("kerncap-gpu-session-");
let structsBin = "";

beforeAll(() => {
  if (SKIP) return;
  structsBin = join(WORK, "structs");
  const p = Bun.spawnSync(["nvcc", "-O2", "-lineinfo", "-arch=sm_90", "-o", structsBin, join(APPS, "structs.cu")], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`nvcc failed: ${p.stderr}`);
});

function emptyDir(name: string): string {
  const d = join(WORK, name);
  mkdirSync(d);
  return d;
}

describe.skipIf(SKIP)("capture session", () => {
  test("the library's snapshot progress shows on stderr, one line per phase (stderr is not a terminal here)", () => {
    const out = join(WORK, "progress");
    // 4 GiB of random data: the before state takes about a second to write (README, bench-snapshot)
    const r = kerncap(WORK, ["run", "--kernel", "MulFunctor", "--dispatch", "1", "--out", out, "--", "python3", join(APPS, "torch_bigmem.py"), "4"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/writing the before state \([0-9.]+ GiB\)/);
    // one phase line; under load (the suites in parallel lanes) a periodic done/total line may follow it ("writing the before state: 1.5 GiB of 4.0 GiB …")
    expect(r.stderr.match(/writing the before state \(/g)?.length).toBe(1);
    expect(r.stderr).not.toContain("\r");
    rmSync(out, { recursive: true, force: true }); // 4 GiB
  });

  test("ncu spellings, and the app's exit code passed through after a complete capture (which replays)", () => {
    const cwd = emptyDir("cwd-exit");
    const out = join(WORK, "exit3");
    // the application: structs (3 rounds), then a failure of its own
    const r = kerncap(cwd, ["run", "-k", "regex:scale_jobs", "--launch-skip", "1", "-o", out, "--json", "--", "bash", "-c", '"$0" 3 && exit 3', structsBin]);
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toContain("the application failed (exit code 3) after the capture was written");
    const c = json(r);
    expect(c.appExitCode).toBe(3);
    expect(c.kernel).toContain("scale_jobs");
    expect(JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8")).kernel.matchIndex).toBe(1);
    expect(readdirSync(cwd)).toEqual([]);
    const rep = kerncap(WORK, ["replay", out, "--iters", "3"]);
    expect(rep.code, rep.stderr + rep.stdout).toBe(0);
  });

  test("SIGTERM of kerncap run during a CUDA application: exit 143, its process group ends, no DIR.tmp-<pid>-<token>, nothing in the working folder", async () => {
    const cwd = emptyDir("cwd-term");
    const out = join(WORK, "term");
    const marks = emptyDir("marks-term");
    const { BUN_BE_BUN: _, ...env } = process.env;
    // CUDA work first (the library is live in the process), then a wait; no kernel matches, so no capture
    const p = Bun.spawn(
      [BIN, "run", "--kernel", "no_such_kernel", "--out", out, "--", "bash", "-c", `"$0" 2; echo $$ > ${marks}/app.pid; sleep 120`, structsBin],
      {
        cwd,
        env,
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const t0 = performance.now();
    while (!existsSync(join(marks, "app.pid")) && performance.now() - t0 < 60_000) await Bun.sleep(50);
    // the capture is written as DIR.tmp-<pid>-<token> (src/leftovers.ts tempFor: an unguessable name)
    expect(readdirSync(WORK).some((n) => n.startsWith(`term.tmp-${p.pid}-`))).toBe(true);
    p.kill("SIGTERM");
    const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
    expect(code, err).toBe(143);
    expect(err).toContain("process group was ended");
    const appPid = Number(readFileSync(join(marks, "app.pid"), "utf8"));
    await Bun.sleep(200);
    let alive = true;
    try {
      process.kill(appPid, 0);
      alive = !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${appPid}/stat`, "utf8"));
    } catch {
      alive = false;
    }
    expect(alive).toBe(false);
    expect(readdirSync(WORK).filter((n) => n.startsWith("term"))).toEqual([]);
    expect(readdirSync(cwd)).toEqual([]);
  }, 90_000);

  test("list leaves nothing in the working folder", () => {
    const cwd = emptyDir("cwd-list");
    const r = kerncap(cwd, ["list", "--json", "--", structsBin, "1"]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).kernels.length).toBeGreaterThan(0);
    expect(readdirSync(cwd)).toEqual([]);
  });
});
