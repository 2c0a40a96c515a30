/**
 * Multi-process jobs and CUPTI sharing on a GPU: which process captured is recorded,
 * exactly one process writes the capture, --rank/--process pick it, and the application's own
 * profiler is told (or served) when kerncap holds CUPTI. Skipped without an NVIDIA GPU.
 *
 * Needs: KERNCAP_BIN (default dist/kerncap), python3 with torch (torchrun on PATH for the DDP case).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { APPS, BIN, json, kerncap, manifest, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("processes", [[!Bun.which("python3"), "python3 missing"]]);
const WORK = workDir("kerncap-procs-");
const APP = join(APPS, "multiproc_app.py");
const kc = (args: string[], env: Record<string, string> = {}) => kerncap(WORK, args, env);
const ELEMENTWISE = "elementwise|vectorized|unrolled";

/** pids the app printed ("worker pid=N rank=R"), by rank. */
function workers(out: string): Map<number, number> {
  const m = new Map<number, number>();
  for (const x of out.matchAll(/worker pid=(\d+) rank=(\d+)/g)) m.set(Number(x[2]), Number(x[1]));
  return m;
}

function censusFiles(dir: string): string[] {
  return readdirSync(dir).filter((f) => /^kernels\.\d+\.json$/.test(f));
}

describe.skipIf(SKIP)("multi-process jobs", () => {
  test("multiprocessing spawn, two workers on one GPU: one capture, the manifest names its pid and rank", () => {
    const out = join(WORK, "spawn");
    const r = kc(["run", "--kernel", ELEMENTWISE, "--out", out, "--json", "--", "python3", APP, "spawn", "2"]);
    expect(r.code, r.stderr).toBe(0);
    const m = manifest(out);
    const pids = workers(r.stderr + r.stdout);
    expect(m.process).toBeDefined();
    expect([...pids.values()]).toContain(m.process.pid);
    expect(m.process.rank).toBe([...pids.entries()].find(([, p]) => p === m.process.pid)![0]);
    expect(m.process.deviceUuid).toMatch(/^GPU-[0-9a-f-]{36}$/);
    expect(m.process.pciBusId).toMatch(/^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$/i);
    expect(censusFiles(out).length).toBeGreaterThanOrEqual(2); // both workers (and the parent, if it initialized CUDA) left a census
    const rep = kc(["replay", out, "--json"]);
    expect(rep.code, rep.stderr + rep.stdout).toBe(0);
    expect(json(rep).verdict).toBe("match");
    const ins = kc(["inspect", out]);
    expect(ins.stdout).toContain(`process    pid ${m.process.pid}`);
  });

  test("list counts per process and says how many it saw", () => {
    const r = kc(["list", "--json", "--", "python3", APP, "spawn", "2"]);
    expect(r.code, r.stderr).toBe(0);
    const l = json(r);
    const ranks = l.processes
      .map((p: any) => p.rank)
      .filter((x: any) => x !== null)
      .sort();
    expect(ranks).toEqual([0, 1]);
    const k = l.kernels.find((x: any) => new RegExp(ELEMENTWISE).test(x.name));
    expect(k.perProcess.length).toBe(2);
    const human = kc(["list", "--", "python3", APP, "spawn", "2"]);
    expect(human.stderr).toMatch(/launches in [23] processes/);
    expect(human.stdout).toContain("pid:count");
  });

  test.skipIf(!Bun.which("torchrun"))("torchrun --nproc-per-node 2 (gloo, both on GPU 0) with --rank 1 captures rank 1's launch", () => {
    const out = join(WORK, "ddp");
    const r = kc(["run", "--rank", "1", "--kernel", ELEMENTWISE, "--out", out, "--json", "--", "torchrun", "--nproc-per-node", "2", APP, "ddp"], {
      CUDA_VISIBLE_DEVICES: "0",
    });
    expect(r.code, r.stderr).toBe(0);
    const m = manifest(out);
    expect(m.process.rank).toBe(1);
    expect(m.process.rankVariable).toBe("RANK");
    expect(m.process.selection).toEqual({ by: "rank", value: 1, admitted: true });
    expect(m.process.jobEnv.WORLD_SIZE).toBe("2");
    expect(m.process.visibleDevices.CUDA_VISIBLE_DEVICES).toBe("0");
    expect(workers(r.stderr + r.stdout).get(1)).toBe(m.process.pid);
    expect(r.stderr).toContain("allreduce"); // the job ran to its end: rank 0 was not disturbed
  });

  test("--rank that no process has is refused by name, listing the ranks seen", () => {
    const r = kc(["run", "--rank", "7", "--kernel", ELEMENTWISE, "--out", join(WORK, "rank7"), "--", "python3", APP, "spawn", "2"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("no process of the application has rank 7");
  });

  test("--process 1 captures in the second process that initialized CUDA", () => {
    const out = join(WORK, "proc1");
    const r = kc(["run", "--process", "1", "--kernel", ELEMENTWISE, "--out", out, "--json", "--", "python3", APP, "spawn", "2"]);
    expect(r.code, r.stderr).toBe(0);
    expect(manifest(out).process.number).toBe(1);
  });

  test("a Python parent that runs the CUDA work in a subprocess: the subprocess captures", () => {
    const out = join(WORK, "subproc");
    const r = kc(["run", "--kernel", "softmax", "--out", out, "--json", "--", "python3", APP, "subprocess"]);
    expect(r.code, r.stderr).toBe(0);
    const m = manifest(out);
    const parent = Number(/parent pid=(\d+)/.exec(r.stderr + r.stdout)![1]);
    expect(m.process.ppid).toBe(parent);
    expect(m.process.cmdline.some((a: string) => a.endsWith("torch_app.py"))).toBe(true);
  });
});

describe.skipIf(SKIP)("CUPTI sharing", () => {
  test("torch.profiler in the captured app: kerncap says the profiler was refused, and the later profiler gets CUPTI back", () => {
    const out = join(WORK, "profiler");
    const r = kc(["run", "--kernel", ELEMENTWISE, "--out", out, "--json", "--", "python3", APP, "profiler"]);
    expect(r.code, r.stderr).toBe(0);
    const all = r.stderr + r.stdout;
    const first = Number(/profiler cuda events (\d+)/.exec(all)?.[1] ?? -1);
    const second = Number(/profiler2 cuda events (\d+)/.exec(all)?.[1] ?? -1);
    // the run must report what the application's profiler got, whichever way it went
    if (first === 0) expect(all).toContain("was refused because kerncap held CUPTI");
    // Seen on the H200 (PyTorch 2.11): Kineto does not ask again after its first refusal, so a later
    // profiler region in the same process records nothing although kerncap handed CUPTI back; the
    // run says so above. Recorded, not asserted.
    console.log(`[processes] profiler events: first region ${first}, second region ${second}`);
  });

  test.skipIf(!Bun.which("ncu"))("under ncu, kerncap names the tool that holds CUPTI or the injection it replaced", () => {
    const r = run(
      [
        "ncu",
        "--target-processes",
        "all",
        "--",
        process.env.KERNCAP_BIN ?? join(APPS, "../../dist/kerncap"),
        "run",
        "--kernel",
        ELEMENTWISE,
        "--out",
        join(WORK, "ncu"),
        "--",
        "python3",
        APP,
        "spawn",
        "1",
      ],
      { cwd: WORK, timeoutMs: 300_000 },
    );
    expect(r.stderr + r.stdout).toMatch(/running under Nsight Compute|CUPTI is already held by|CUDA_INJECTION64_PATH was already set/);
    console.log(`[processes] under ncu: exit ${r.code}`);
  });
});

describe.skipIf(SKIP)("collective kernels", () => {
  test("NCCL kernels (torch.distributed nccl, one rank): refused by name with E_COLLECTIVE, the job completes", () => {
    const app = ["python3", join(APPS, "nccl_app.py")];
    const l = kerncap(WORK, ["list", "--json", "--", ...app], {});
    expect(l.code, l.stderr).toBe(0);
    expect(l.stderr + l.stdout).toContain("nccl done");
    const coll = json(l).kernels.filter((k: any) => k.collective); // list marks them (its table: "collective (NCCL)", CPU-tested)
    if (!coll.length) {
      console.warn(
        `[processes] collective test skipped: NCCL launched no kernel on one rank (kernels: ${json(l)
          .kernels.map((k: any) => k.name)
          .join(", ")})`,
      );
      return;
    }
    const out = join(WORK, "nccl");
    const r = run([BIN, "run", "--kernel", "ncclDevKernel|ncclKernel", "--out", out, "--json", "--", ...app], { cwd: WORK, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(2);
    expect(r.seconds).toBeLessThan(90);
    expect(r.stderr + r.stdout).toContain("nccl done"); // the app ran to its end (its stdout goes to stderr under --json)
    const e = json(r).error;
    expect(e.code).toBe("E_COLLECTIVE");
    expect(e.message).toContain(coll[0].demangled || coll[0].name);
    expect(e.message).toContain("cannot be captured and replayed alone");
  });
});
