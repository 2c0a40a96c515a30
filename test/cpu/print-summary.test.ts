/**
 * `--print-summary` (ncu's option) of `list` and `check`: the tables each mode prints (check:
 * per-capture, per-kernel with each status's count and the geometric mean time ratio, per-gpu,
 * none; list: per-kernel, per-gpu, per-nvtx from the census's per-range counts, none), and a mode the verb does not have is a usage error
 * naming the ones it has, before anything runs.
 */
import { describe, expect, test } from "bun:test";
import { CHECK_SUMMARIES, groupTable, summaryTable } from "../../src/check/report.ts";
import type { ProcessCensus } from "../../src/capture/census.ts";
import { printSummaryArg } from "../../src/cli/args.ts";
import { gpuTable, LIST_SUMMARIES, nvtxTable } from "../../src/cli/format.ts";
import { processSummary, readCensus } from "../../src/capture/census.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../../src/cli/main.ts";
import type { CheckRecord } from "../../src/format/check-record.ts";
import { output } from "./fixtures.ts";

/** A record with what the summaries read: status, kernel, GPU, time ratio. */
function rec(id: string, status: CheckRecord["status"], kernel: string | null, gpu: string | null, ratio?: number): CheckRecord {
  const time =
    ratio === undefined ? null : { verdict: status === "slower" ? "slower" : "same", ratio, low: ratio * 0.95, high: ratio * 1.05, baselineMedianUs: 10 };
  return { id, status, kernel, gpu, time, timing: { medianUs: 10 * (ratio ?? 1) }, worker: 0 } as unknown as CheckRecord;
}

const RECORDS = [
  rec("a/1", "ok", "softmax", "0", 1.0),
  rec("a/2", "ok", "softmax", "1", 1.21),
  rec("b/1", "slower", "gemm", "0", 1.5),
  rec("b/2", "ok", "gemm", "1", 0.96),
  rec("c/1", "error", null, "1"),
];

describe("check --print-summary", () => {
  test("per-kernel: one row per kernel, each status counted, the geometric mean of the time ratios; regressions first", () => {
    const t = groupTable(RECORDS, "kernel").split("\n");
    expect(t[0]).toMatch(/^captures\s+mismatch\s+slower\s+error\s+skipped\s+ok\s+time \(geomean\)\s+kernel$/);
    expect(t.slice(1).map((l) => l.trim().split(/\s+/))).toEqual([
      // the unreadable capture's kernel is "?"; gemm: one slower, one ok, sqrt(1.5 * 0.96) = 1.2
      ["1", "0", "0", "1", "0", "0", "—", "?"],
      ["2", "0", "1", "0", "0", "1", "1.20×", "gemm"],
      ["2", "0", "0", "0", "0", "2", "1.10×", "softmax"],
    ]);
  });

  test("per-gpu: one row per GPU entry", () => {
    const rows = groupTable(RECORDS, "gpu")
      .split("\n")
      .slice(1)
      .map((l) => l.trim().split(/\s+/));
    expect(rows.map((r) => [r[0], r.at(-1)])).toEqual([
      ["2", "0"],
      ["3", "1"],
    ]);
    expect(groupTable([rec("x", "ok", "k", "2", 1), rec("y", "mismatch", "k", "3")], "gpu").split("\n")[1]).toMatch(/ 3$/); // a GPU with a regression first
  });

  test("per-capture is the default table; none keeps only the count line", () => {
    const full = summaryTable(RECORDS, 2);
    expect(full.split("\n")).toHaveLength(1 + RECORDS.length + 1);
    expect(full.split("\n")[1]).toMatch(/^slower/);
    const none = summaryTable(RECORDS, 2, "none");
    expect(none).toBe("5 captures checked (2.0 s of checks): 1 slower, 1 error, 3 ok");
    expect(summaryTable(RECORDS, 2, "per-kernel").split("\n").at(-1)).toBe(none);
    expect(summaryTable(RECORDS.slice(0, 1), 2, "none")).toStartWith("1 capture checked (2.0 s of checks)"); // one, not "1 captures"
  });

  test("a mode check does not have is a usage error before any capture is read", async () => {
    const r = await output(() => runCli(["check", "/nonexistent-corpus", "--print-summary", "per-nvtx"]));
    expect(r.value).toBe(2);
    expect(r.err).toContain("--print-summary per-nvtx: not one of per-capture, per-kernel, per-gpu, none");
  });
});

describe("list --print-summary", () => {
  const proc = (pid: number, visible: Record<string, string>, kernels: string[], launches: number): ProcessCensus =>
    ({
      file: `kernels.${pid}.json`,
      final: true,
      counting: true,
      process: { pid, visibleDevices: visible },
      launches,
      kernels: kernels.map((name) => ({ name })),
      graphs: [],
      errors: [],
    }) as unknown as ProcessCensus;

  test("per-gpu: processes, launches and distinct kernels per set of visible GPUs", () => {
    const t = gpuTable([
      proc(1, { CUDA_VISIBLE_DEVICES: "0" }, ["k1", "k2"], 10),
      proc(2, { CUDA_VISIBLE_DEVICES: "1" }, ["k1"], 4),
      proc(3, { CUDA_VISIBLE_DEVICES: "0" }, ["k2", "k3"], 6),
      proc(4, {}, ["k9"], 1),
    ]);
    expect(t.split("\n").map((l) => l.trim().split(/\s+/))).toEqual([
      ["visible", "GPUs", "processes", "launches", "kernels"],
      ["0", "2", "16", "3"],
      ["1", "1", "4", "1"],
      ["all", "1", "1", "1"],
    ]);
  });

  test("per-nvtx: launches per open ranges and kernel, summed over processes, demangled, by range", () => {
    const withRanges = (pid: number, ranges: { range: string; kernel: string; count: number }[]) =>
      ({ ...proc(pid, {}, [], 0), nvtx: { injected: true, filteredOut: 0, ranges } }) as ProcessCensus;
    const t = nvtxTable(
      [
        withRanges(1, [
          { range: "A/B/", kernel: "_Z1kv", count: 2 },
          { range: "", kernel: "_Z1kv", count: 5 },
        ]),
        withRanges(2, [
          { range: "A/B/", kernel: "_Z1kv", count: 3 },
          { range: "A/", kernel: "_Z1gv", count: 1 },
        ]),
      ],
      [
        { name: "_Z1kv", demangled: "k()" },
        { name: "_Z1gv", demangled: "g()" },
      ] as any,
    );
    expect(t.split("\n").map((l) => l.trim().split(/\s{2,}/))).toEqual([
      ["NVTX ranges", "count", "kernel"],
      ["(no range)", "5", "k()"],
      ["A/", "1", "g()"],
      ["A/B/", "5", "k()"],
    ]);
  });

  test("the census's per-range counts reach list --json (kernels.<pid>.json as c/cuda/kc_out.c writes it)", () => {
    const dir = mkdtempSync(join(tmpdir(), "kerncap-census-nvtx-"));
    try {
      writeFileSync(
        join(dir, "kernels.7.json"),
        JSON.stringify({
          final: true,
          counting: true,
          process: { pid: 7 },
          launches: 3,
          kernels: [{ name: "_Z1kv", demangled: "k()", count: 3, grid: [1, 1, 1], block: [32, 1, 1], module: "0x1" }],
          graphs: [],
          nvtx: { injected: true, filtered_out: 2, ranges: [{ range: "A/", kernel: "_Z1kv", count: 3 }], ranges_dropped: 0 },
        }),
      );
      const p = readCensus(dir).processes[0]!;
      expect(p.nvtx).toEqual({ injected: true, filteredOut: 2, ranges: [{ range: "A/", kernel: "_Z1kv", count: 3 }], rangesDropped: 0 });
      expect(processSummary(p).nvtx).toEqual(p.nvtx!);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the modes, and a usage error for another before the application runs", async () => {
    expect(printSummaryArg(undefined, LIST_SUMMARIES, "per-kernel")).toBe("per-kernel");
    expect(printSummaryArg("none", LIST_SUMMARIES, "per-kernel")).toBe("none");
    expect(() => printSummaryArg("per-capture", LIST_SUMMARIES, "per-kernel")).toThrow(/not one of per-kernel, per-gpu, per-nvtx, none/);
    expect(CHECK_SUMMARIES).toContain("per-capture");
    const r = await output(() => runCli(["list", "--print-summary", "per-capture", "--", "/nonexistent/app"]));
    expect(r.value).toBe(2);
    expect(r.err).toContain("--print-summary per-capture: not one of");
  });
});
