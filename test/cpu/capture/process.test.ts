/**
 * Multi-process jobs without a GPU: c/common/kc_process.h through its C test driver (numbering, rank
 * selection, the O_EXCL claim raced by forked processes, the identity JSON), the TS merge of
 * per-process censuses (src/capture/census.ts), and the manifest's optional `process` field.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import * as v from "valibot";
import { describeManifest } from "../../../src/cli/commands/inspect.ts";
import { processTable } from "../../../src/cli/format.ts";
import { selectionProblem } from "../../../src/capture/session.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { ProcessIdentity } from "../../../src/format/manifest.ts";
import { makeCapture } from "../fixtures.ts";
import { identityFromRaw, readCensus } from "../../../src/capture/census.ts";
import { cuptiNotes, injectionEnv, launchingTool } from "../../../src/capture/coexist.ts";

const GCC = Bun.which("gcc");
const dir = mkdtempSync(join(tmpdir(), "kerncap-process-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const exe = join(dir, "process_main");
let built = false;
function build(): void {
  if (built) return;
  const cc = Bun.spawnSync(
    [
      GCC!,
      "-O2",
      "-Wall",
      "-Wextra",
      "-Werror",
      "-o",
      exe,
      resolve(import.meta.dir, "../../../c/test/process_main.c"),
      resolve(import.meta.dir, "../../../c/common/kc_process.c"),
    ],
    { stderr: "pipe" },
  );
  expect(cc.exitCode, cc.stderr.toString()).toBe(0);
  built = true;
}
/** Run the driver with exactly the given environment (no inherited RANK etc.). */
function drive(args: string[], env: Record<string, string> = {}): any {
  build();
  const r = Bun.spawnSync([exe, ...args], { env: { PATH: process.env.PATH ?? "", ...env }, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  return JSON.parse(r.stdout.toString());
}
let n = 0;
const fresh = () => {
  const d = join(dir, `out${n++}`);
  mkdirSync(d);
  return d;
};

test.skipIf(!GCC)("24 forked processes racing for the claim: exactly one wins, and all get distinct numbers 0..23", () => {
  for (let round = 0; round < 5; round++) {
    const d = fresh();
    const r = drive(["race", d, "24"]);
    expect(r.winners).toBe(1);
    expect([...r.numbers].sort((a: number, b: number) => a - b)).toEqual(Array.from({ length: 24 }, (_, i) => i));
    const claim = JSON.parse(readFileSync(join(d, "claim"), "utf8"));
    expect(claim.pid).toBe(r.claimed_by);
  }
});

test.skipIf(!GCC)("--rank: the rank comes from the first of RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID", () => {
  const a = drive(["ident", fresh()], { KERNCAP_RANK: "1", RANK: "1", LOCAL_RANK: "0", SLURM_PROCID: "7" });
  expect(a.admitted).toBe(true);
  expect(a.claim).toBe(1);
  expect(a.identity.rank).toBe(1);
  expect(a.identity.rank_variable).toBe("RANK");
  expect(a.identity.job_env).toEqual({ RANK: "1", LOCAL_RANK: "0", SLURM_PROCID: "7" });
  // an outer srun task id loses to the MPI rank
  const b = drive(["ident", fresh()], { KERNCAP_RANK: "1", OMPI_COMM_WORLD_RANK: "3", SLURM_PROCID: "1" });
  expect(b.identity.rank_variable).toBe("OMPI_COMM_WORLD_RANK");
  expect(b.admitted).toBe(false);
  expect(b.claim).toBe(0);
  expect(b.why).toBe("--rank 1: this process is rank 3 (OMPI_COMM_WORLD_RANK)");
  // not a whole number: skipped for the next variable
  const c = drive(["ident", fresh()], { RANK: "x", PMI_RANK: "2" });
  expect([c.identity.rank, c.identity.rank_variable]).toEqual([2, "PMI_RANK"]);
  const none = drive(["ident", fresh()], { KERNCAP_RANK: "0" });
  expect(none.admitted).toBe(false);
  expect(none.why).toBe("--rank 0: this process has no rank variable");
  const bad = drive(["ident", fresh()], { KERNCAP_RANK: "-1" });
  expect(bad.init).toBe(-1);
  expect(bad.error).toBe("KERNCAP_RANK is not a whole number: -1");
});

test.skipIf(!GCC)("--process N admits only the Nth process to initialize; the identity names pid, host, command, devices", () => {
  const d = fresh();
  const p0 = drive(["ident", d], { KERNCAP_PROCESS: "1", CUDA_VISIBLE_DEVICES: "0" });
  const p1 = drive(["ident", d], { KERNCAP_PROCESS: "1", CUDA_VISIBLE_DEVICES: "0" });
  expect([p0.identity.number, p0.admitted, p0.why]).toEqual([0, false, "--process 1: this is process 0 of the job"]);
  expect([p1.identity.number, p1.admitted, p1.claim]).toEqual([1, true, 1]);
  expect(p1.identity.cmdline).toEqual([exe, "ident", d]);
  expect(p1.identity.visible_devices).toEqual({ CUDA_VISIBLE_DEVICES: "0" });
  expect(p1.identity.selection).toEqual({ by: "process", value: 1, admitted: true });
  expect(p1.identity.hostname).toBe(hostname());
  // the manifest schema accepts what the C writer writes
  const id = identityFromRaw(p1.identity);
  expect(v.parse(ProcessIdentity, id)).toEqual(id);
  expect(id.deviceUuid).toBe("GPU-test");
});

test.skipIf(!GCC)("the device UUID is formatted as nvidia-smi prints it", () => {
  build();
  expect(Bun.spawnSync([exe, "uuid"]).stdout.toString().trim()).toBe("GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
});

/** A census file as c/cuda/kerncap_cuda.c writes it. */
function census(d: string, pid: number, number: number, rank: number | null, kernels: [string, number][], extra: Record<string, unknown> = {}) {
  const process = {
    pid,
    ppid: 1,
    number,
    hostname: "node1",
    cmdline: ["python", "w.py"],
    job_env: rank === null ? {} : { RANK: String(rank) },
    rank,
    rank_variable: rank === null ? null : "RANK",
    selection: { by: "rank", value: 1, admitted: rank === 1 },
    visible_devices: { CUDA_VISIBLE_DEVICES: "0" },
  };
  const ks = kernels.map(([name, count]) => ({ name, demangled: name, count, benchmark: 0, grid: [1, 1, 1], block: [128, 1, 1], module: "0x1" }));
  writeFileSync(
    join(d, `kernels.${pid}.json`),
    JSON.stringify({ final: true, mode: "capture", counting: true, process, launches: kernels.reduce((s, k) => s + k[1], 0), kernels: ks, ...extra }),
  );
}

test("per-process censuses merge: counts summed per kernel with each process's share, errors labelled, claim read", () => {
  const d = fresh();
  census(
    d,
    200,
    1,
    1,
    [
      ["_Z3addv", 3],
      ["_Z3mulv", 1],
    ],
    {
      cupti: {
        api: "cuptiSubscribe_v2",
        subscribed: true,
        holder: "",
        released: true,
        released_why: "capture written; CUPTI handed back",
        app_calls: [{ call: "cuptiSubscribe", caller: "/x/libtorch_cuda.so", result: 0, kerncap_held: false, handed_back: true, t_s: 2.5 }],
      },
    },
  );
  census(d, 100, 0, 0, [["_Z3addv", 2]], {
    final: false,
    cupti: {
      api: "cuptiSubscribe_v2",
      subscribed: true,
      holder: "",
      released: false,
      app_calls: [{ call: "cuptiSubscribe", caller: "/x/libtorch_cuda.so", result: 39, kerncap_held: true, handed_back: false, t_s: 0.5 }],
    },
  });
  writeFileSync(join(d, "error.200.txt"), "cuMemcpyDtoH_v2 failed\n");
  writeFileSync(join(d, "error.300.txt"), 'CUPTI is already held by "Nsight Systems"\n'); // failed before its census
  writeFileSync(join(d, "kernels.400.json.part"), "{"); // a census being written: not read
  writeFileSync(join(d, "claim"), JSON.stringify({ pid: 200, number: 1, rank: 1 }));
  const c = readCensus(d);
  expect(c.processes.map((p) => p.process.pid)).toEqual([100, 200, 300]); // by process number, unnumbered last
  expect(c.launches).toBe(6);
  const add = c.kernels.find((k) => k.name === "_Z3addv")!;
  expect(add.count).toBe(5);
  expect(add.perProcess).toEqual([
    { pid: 100, rank: 0, count: 2 },
    { pid: 200, rank: 1, count: 3 },
  ]);
  expect(c.errors).toEqual(["pid 200 (rank 1): cuMemcpyDtoH_v2 failed", 'pid 300: CUPTI is already held by "Nsight Systems"']);
  expect(c.claim).toEqual({ pid: 200, number: 1, rank: 1 });
  expect(c.processes[0]!.final).toBe(false);
  const table = processTable(c.processes);
  expect(table.split("\n")[1]).toMatch(/^\s+0\s+100\s+0\s+2\+\s+1\s+python w\.py$/); // "+": not a final census
  const notes = cuptiNotes(c);
  expect(notes.warnings).toHaveLength(1);
  expect(notes.warnings[0]).toContain(
    "pid 100 (rank 0): the application's cuptiSubscribe (from libtorch_cuda.so, 0.50 s after CUDA initialized) was refused because kerncap held CUPTI",
  );
  expect(notes.infos[0]).toContain("pid 200 (rank 1): the application's cuptiSubscribe");
  expect(notes.infos[0]).toContain("handed CUPTI over");
  expect(selectionProblem(c, 1, undefined)).toBeUndefined(); // pid 200 (rank 1) was admitted: the selection is not why
  const d2 = fresh();
  census(d2, 100, 0, 0, [["_Z3addv", 2]]);
  census(d2, 101, 1, null, [["_Z3addv", 2]]);
  expect(selectionProblem(readCensus(d2), 1, undefined)).toBe(
    "no process of the application has rank 1 (processes that ran CUDA: pid 100 (rank 0) = process 0, pid 101 (no rank variable) = process 1)",
  );
});

test("a folder written by an older single-process library (kernels.json, error.txt) still reads", () => {
  const d = fresh();
  writeFileSync(
    join(d, "kernels.json"),
    JSON.stringify({ launches: 4, kernels: [{ name: "k", demangled: "k", count: 4, grid: [1, 1, 1], block: [1, 1, 1], module: "m" }] }),
  );
  writeFileSync(join(d, "error.txt"), "boom\n");
  const c = readCensus(d);
  expect(c.processes).toHaveLength(1);
  expect(c.launches).toBe(4);
  expect(c.errors).toEqual(["boom"]);
});

test("injection env: LD_PRELOAD gets the library first, a tool's CUDA_INJECTION64_PATH is replaced with a warning", () => {
  const e = injectionEnv("/c/libkerncap_cuda.so", {
    LD_PRELOAD: "/opt/a.so /c/libkerncap_cuda.so",
    CUDA_INJECTION64_PATH: "/opt/nvidia/nsight-systems/2025.1/target-linux-x64/libToolsInjection64.so",
  });
  expect(e.env).toEqual({ CUDA_INJECTION64_PATH: "/c/libkerncap_cuda.so", LD_PRELOAD: "/c/libkerncap_cuda.so:/opt/a.so" });
  expect(e.warnings).toHaveLength(1);
  expect(e.warnings[0]).toContain("Nsight Systems (nsys)");
  expect(injectionEnv("/c/l.so", { KERNCAP_NO_PRELOAD: "1" })).toEqual({ env: { CUDA_INJECTION64_PATH: "/c/l.so" }, warnings: [] });
});

test("the manifest's process field: recorded by finalize, shown by inspect, optional for older captures", async () => {
  const withP = join(dir, "cap-with-process");
  const raw = drive(["ident", fresh()], { RANK: "1", KERNCAP_RANK: "1", CUDA_VISIBLE_DEVICES: "0" }).identity;
  const m = await makeCapture(withP, { process: raw });
  expect(m.process?.rank).toBe(1);
  expect(readManifest(withP).process).toEqual(m.process!);
  const text = describeManifest(m);
  expect(text).toContain(`process    pid ${raw.pid} (parent ${raw.ppid}) on ${raw.hostname}, rank 1 (RANK), process 0 of the job; chosen as --rank 1`);
  expect(text).toContain("  env      CUDA_VISIBLE_DEVICES=0 RANK=1");
  expect(text).toContain("device     NVIDIA H200 sm_90, driver 13000, GPU-test at PCI 0000:01:00.0");
  const old = join(dir, "cap-old");
  const mo = await makeCapture(old);
  expect(mo.process).toBeUndefined();
  expect(describeManifest(readManifest(old))).not.toContain("process ");
});

test("running under Nsight Compute (its launcher's variables, as seen on the H200) is told apart from a plain environment", () => {
  expect(
    launchingTool({
      NV_TPS_LAUNCH_TOKEN: "Interactive Profile",
      NV_NSIGHT_INJECTION_TRANSPORT_TYPE: "uds",
      NV_COMPUTE_PROFILER_PERFWORKS_DIR: "/opt/nvidia/nsight-compute/x",
    }),
  ).toBe("Nsight Compute (ncu)");
  expect(launchingTool({ NV_NSIGHT_INJECTION_TRANSPORT_TYPE: "uds" })).toBe("an Nsight tool (nsys or ncu)");
  expect(launchingTool({ NV_CUDNN_VERSION: "9", PATH: "/usr/bin" })).toBeUndefined();
});
