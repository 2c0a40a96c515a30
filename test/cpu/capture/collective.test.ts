/**
 * Collective kernels (issue 13): the name classifier (src/capture/collective.ts) and the C
 * library's (c/common/kc_collective.h, through c/test/collective_main.c) agree on the same names; a
 * --kernel that matched only collectives is refused with E_COLLECTIVE naming them; they do not
 * count toward --dispatch; `list` marks them.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { kernelTable } from "../../../src/cli/format.ts";
import { mergeKernels, type KernelSeen, type ProcessCensus } from "../../../src/capture/census.ts";
import { collectiveLibrary } from "../../../src/capture/collective.ts";
import { compileEre } from "../../../src/util/posix-regex.ts";
import { collectiveRefusal, countedLaunches } from "../../../src/capture/session.ts";

const NAMES: [string, string | undefined][] = [
  ["_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", "NCCL"],
  ["ncclDevKernelDebug_AllGather_RING_LL", "NCCL"],
  ["_Z36ncclKernel_AllReduce_RING_LL_Sum_half14ncclWorkElem", "NCCL"],
  ["nvshmemi_barrier_all_on_stream_kernel", "NVSHMEM"],
  ["_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm2EEEEviT0_T1_", undefined],
  ["nccl_like_user_kernel", undefined], // not an NCCL kernel name
  ["_Z12partial_sumsPKfiPf", undefined],
];
const dir = mkdtempSync(join(tmpdir(), "kerncap-collective-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const k = (name: string, count: number): KernelSeen => ({ name, demangled: name, count, grid: [1, 1, 1], block: [32, 1, 1], module: "0x1" });

test("collective kernels by name: NCCL (and RCCL) device kernels, NVSHMEM; others are not", () => {
  for (const [n, lib] of NAMES) expect(collectiveLibrary(n), n).toBe(lib);
  expect(collectiveLibrary("_Z3foov", "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")).toBe("NCCL");
});

test.skipIf(!Bun.which("gcc"))("the C library classifies the same names (c/common/kc_collective.h)", () => {
  const exe = join(dir, "collective_main");
  const cc = Bun.spawnSync(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, resolve(import.meta.dir, "../../../c/test/collective_main.c")], {
    stderr: "pipe",
  });
  expect(cc.exitCode, cc.stderr.toString()).toBe(0);
  const r = Bun.spawnSync([exe, ...NAMES.map(([n]) => n)], { stdout: "pipe" });
  expect(r.stdout.toString().trim().split("\n")).toEqual(NAMES.map(([, lib]) => (lib ? "1" : "0")));
});

test("a --kernel that matched only collectives: E_COLLECTIVE naming the kernel; collectives do not count toward --dispatch", () => {
  const kernels = [k("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", 3), k("_Z12partial_sumsPKfiPf", 2)];
  const ere = compileEre("AllReduce|ncclDevKernel");
  expect(countedLaunches(kernels, ere, false)).toBe(0);
  expect(countedLaunches(kernels, undefined, false)).toBe(2);
  const e = collectiveRefusal(kernels, ere, "AllReduce|ncclDevKernel");
  expect(e?.code).toBe("E_COLLECTIVE");
  expect(e?.message).toContain("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  expect(e?.message).toContain("3 launches");
  expect(e?.message).toContain("cannot be captured and replayed alone");
  expect(collectiveRefusal(kernels, compileEre("partial_sums"), "partial_sums")).toBeUndefined();
});

test("list marks collective kernels in a note column (and --json's kernels[].collective)", () => {
  const proc = {
    file: "kernels.1.json",
    final: true,
    counting: true,
    process: { pid: 1, rank: null },
    launches: 5,
    kernels: [k("ncclDevKernel_AllGather_RING_LL", 3), k("_Z3foov", 2)],
    graphs: [],
    errors: [],
  } as unknown as ProcessCensus;
  const merged = mergeKernels([proc]);
  expect(merged.find((x) => x.name.startsWith("nccl"))?.collective).toBe("NCCL");
  expect(merged.find((x) => x.name === "_Z3foov")?.collective).toBeUndefined();
  const t = kernelTable(merged).split("\n");
  expect(t[0]).toContain("note");
  expect(t.find((l) => l.includes("ncclDevKernel_AllGather"))).toContain("collective (NCCL)");
  expect(kernelTable([k("_Z3foov", 2)])).not.toContain("note");
});

test("list's table: a kernel that ran only as a graph's kernel node shows - for grid, block and module (the library knows them from eager launches only)", () => {
  // seen on the H200 (test/apps/graphs.cu): such kernels were listed as 0x0x0, module 0x0
  const t = kernelTable([
    { name: "_Z5scalePffi", demangled: "scale(float*, float, int)", count: 7, graph: 6, grid: [256, 1, 1], block: [256, 1, 1], module: "0x558aa3e8b4f0" },
    { name: "_Z7add_onePfi", demangled: "add_one(float*, int)", count: 6, graph: 6, grid: [0, 0, 0], block: [0, 0, 0], module: "0x0" },
  ]);
  const lines = t.split("\n");
  expect(lines[1]).toMatch(/^\s*7\s+6\s+256x1x1\s+256x1x1\s+0x558aa3e8b4f0\s+scale/);
  expect(lines[2]).toMatch(/^\s*6\s+6\s+-\s+-\s+-\s+add_one\(float\*, int\)$/);
});
