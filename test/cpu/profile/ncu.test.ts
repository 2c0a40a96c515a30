import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../../../src/errors.ts";
import { tempDir } from "../fixtures.ts";
import { findNsightTool, metricValue, NCU_METRICS, ncuCommand, ncuUserOptions, parseCsv, parseNcuDetails, replayArgv } from "../../../src/profile/ncu.ts";
import { exportPath, ncuFailure, printedFigures, reportName } from "../../../src/profile/profile.ts";
import { profileCapture } from "../../../src/ops/profile.ts";

const fixture = (name: string) => readFileSync(join(import.meta.dir, "../../fixtures/profile", name), "utf8");

describe("ncu report figures", () => {
  test("ncu 2025 details page: SOL, launch, occupancy, command-line metrics and the bottleneck rule", () => {
    const [f, ...more] = parseNcuDetails(fixture("ncu-details-2025.csv"));
    expect(more).toEqual([]);
    expect(f!.kernel).toBe("matmul_kernel");
    expect([f!.grid, f!.block]).toEqual(["(8, 6, 1)", "(128, 1, 1)"]);
    expect(f!.durationUs).toBeCloseTo(48.19, 6);
    expect(f!.smThroughputPct).toBeCloseTo(62.07, 6);
    // SOL's "Memory Throughput" (%), not Memory Workload Analysis's of the same name (Gbyte/second)
    expect(f!.memoryThroughputPct).toBeCloseTo(81.36, 6);
    expect(f!.achievedOccupancyPct).toBeCloseTo(6.22, 6);
    expect(f!.registersPerThread).toBe(168);
    expect(f!.dramBytes).toBeCloseTo(1.05e6 + 786.43e3, 3); // Mbyte + Kbyte
    expect(f!.limiter).toMatchObject({ bound: "memory", source: "ncu rule", sections: ["Memory Workload Analysis"] });
    expect(f!.limiter!.text).toStartWith("Memory is more heavily utilized");
  });

  test("real ncu 2025.3.1 output of kerncap replay on the H200 (test/fixtures/ncu-h200): ns/us units, rule rows under the section id", () => {
    const real = (name: string) => readFileSync(join(import.meta.dir, "../../fixtures/ncu-h200", name), "utf8");
    const [f] = parseNcuDetails(real("ncu-import-details.csv"));
    expect(f).toMatchObject({
      kernel: "scale_jobs(const Job *, int)",
      grid: "(64, 8, 1)",
      block: "(256, 1, 1)",
      durationUs: 4.64,
      smThroughputPct: 6,
      memoryThroughputPct: 12.79,
      achievedOccupancyPct: 42.7,
      registersPerThread: 20,
    });
    expect(f!.limiter).toMatchObject({ bound: "latency", source: "ncu rule", sections: ["Launch Statistics"] });
    // without -c 1 every launch of the name is profiled (the replay's checked, warm-up and timed ones): 8 here
    const all = parseNcuDetails(real("ncu-replay-details.csv"));
    expect(all.map((x) => x.id)).toEqual(["0", "1", "2", "3", "4", "5", "6", "7"]);
    expect(all[0]!.durationUs).toBeCloseTo(3.712, 9); // "3,712" ns
    // the replay's stdout before the CSV (MATCH…) is skipped
    const t = parseNcuDetails(real("ncu-triton.csv"));
    expect(t).toHaveLength(7);
    expect(t[0]).toMatchObject({ kernel: "matmul_kernel", grid: "(8, 3, 1)", registersPerThread: 64, durationUs: 5.952 });
  });

  test("an older layout (no rule columns, SM [%]/Memory [%], ms, thousands separators): the ncu metric name wins over the display one", () => {
    const [f] = parseNcuDetails(fixture("ncu-details-2022.csv"));
    expect(f!.kernel).toBe("void fma_loop<float>(float*, int)");
    expect(f!.durationUs).toBeCloseTo(1120.448, 6); // gpu__time_duration.sum in ns, not the rounded 1.12 ms
    expect(f!.smThroughputPct).toBeCloseTo(91.87, 6);
    expect(f!.memoryThroughputPct).toBeCloseTo(3.41, 6);
    expect(f!.dramBytes).toBeCloseTo(1234.5e9, 0);
    expect(f!.limiter).toMatchObject({ bound: "compute", source: "throughputs", sections: ["Compute Workload Analysis"] });
    expect([f!.grid, f!.device]).toEqual(["", ""]); // columns this ncu did not print
  });

  test("columns by name, whatever their order; several launches; latency-bound below 60% of peak", () => {
    const head = ["Metric Value", "Metric Unit", "Metric Name", "Section Name", "Kernel Name", "ID"];
    const row = (id: string, name: string, unit: string, value: string) => [value, unit, name, "GPU Speed Of Light Throughput", `k${id}`, id];
    const rows = [
      head,
      row("0", "Duration", "nsecond", "1,650"),
      row("0", "Compute (SM) Throughput", "%", "12.5"),
      row("0", "Memory Throughput", "%", "40"),
      row("1", "Duration", "second", "0.5"),
      row("1", "Memory Throughput", "%", "n/a"),
    ];
    const csv = rows.map((r) => r.map((x) => `"${x}"`).join(",")).join("\r\n") + "\r\n";
    const fs = parseNcuDetails(csv);
    expect(fs.map((f) => [f.id, f.kernel, f.durationUs])).toEqual([
      ["0", "k0", 1.65],
      ["1", "k1", 5e5],
    ]);
    expect(fs[0]!.limiter).toMatchObject({ bound: "latency", sections: ["Scheduler Statistics", "Warp State Statistics"] });
    expect(fs[1]!.memoryThroughputPct).toBeNull();
    expect(fs[1]!.limiter).toBeNull();
  });

  test("no header row: a clear error", () => {
    const e = (() => {
      try {
        parseNcuDetails("==PROF== Disconnected\n");
      } catch (x) {
        return x;
      }
    })();
    expect(e).toBeInstanceOf(KerncapError);
    expect((e as KerncapError).code).toBe("E_NCU_REPORT");
  });

  test("CSV quoting and units", () => {
    expect(parseCsv('"a ""b""",c\n"x,y",\n')).toEqual([
      ['a "b"', "c"],
      ["x,y", ""],
    ]);
    expect([
      metricValue("1,024", "Kbyte"),
      metricValue("2", "msecond"),
      metricValue("3", "Gibyte"),
      metricValue("75.5", "%"),
      metricValue("n/a", "%"),
      metricValue("1e3", "byte"),
    ]).toEqual([1_024_000, 2000, 3 * 2 ** 30, 75.5, null, 1000]);
  });
});

describe("the details page ncu prints while it exports (no --import)", () => {
  test("real ncu 2025.3.1 output on the H200: the app's own lines and ==PROF== lines, then the CSV", () => {
    const out = fixture("ncu-stdout-export-2025.txt");
    expect(out).toContain("fma done"); // the profiled program's stdout comes first
    const f = printedFigures(out)!;
    expect(f.kernel).toBe("fma_loop(float *, int, int)");
    expect(f.durationUs).toBeCloseTo(407.2, 6);
    expect(f.registersPerThread).toBe(16);
    expect(f.grid).toBe("(16384, 1, 1)");
  });
  test("output without the page (an ncu that printed none): null, so the report is imported instead", () => {
    expect(printedFigures("==PROF== Connected to process 1\nMATCH\n==PROF== Report: /x.ncu-rep\n")).toBeNull();
  });
});

describe("ncu command line", () => {
  test("the captured launch only (mangled name, exact, one launch), the report at the temp base, then the user's options and the replay", () => {
    const replay = replayArgv(["/opt/kerncap"], "/caps/mm", { iters: 0 });
    expect(replay).toEqual(["/opt/kerncap", "replay", "/caps/mm", "--runs", "1", "--iters", "0"]);
    const cmd = ncuCommand({
      ncu: "/usr/local/cuda/bin/ncu",
      kernel: "_Z5scalePfi",
      reportBase: "/caps/mm/profile/.replay.tmp-1",
      userOptions: ncuUserOptions(["--set", "full"]),
      replay,
    });
    expect(cmd.slice(0, 9)).toEqual([
      "/usr/local/cuda/bin/ncu",
      "--kernel-name-base",
      "mangled",
      "--kernel-name",
      "_Z5scalePfi",
      "--launch-count",
      "1",
      "--export",
      "/caps/mm/profile/.replay.tmp-1",
    ]);
    expect(cmd.slice(9, 14)).toEqual(["--csv", "--page", "details", "--print-units", "base"]); // the figures printed while profiling: no --import
    expect(cmd.slice(14, 18)).toEqual(["--set", "full", "--metrics", NCU_METRICS.join(",")]);
    expect(cmd.slice(18)).toEqual(replay);
    // a manifest's name that ncu would read as its own option (a received capture's): refused
    expect(() => ncuCommand({ ncu: "ncu", kernel: "--section-folder=/tmp/x", reportBase: "/tmp/r", userOptions: [], replay: [] })).toThrow(
      /would read it as one of its options/,
    );
    // or as a filter of its own: regex:.* matched every kernel of the replay (trial 17)
    for (const kernel of ["regex:.*", "regex:_Z5scalePfi", "a b", "x\ny"])
      expect(() => ncuCommand({ ncu: "ncu", kernel, reportBase: "/tmp/r", userOptions: [], replay: [] }), kernel).toThrow(/or as a filter \(regex:…\)/);
    expect(ncuCommand({ ncu: "ncu", kernel: "_Z5scalePfi.clone.1$x", reportBase: "/tmp/r", userOptions: [], replay: [] })).toContain("_Z5scalePfi.clone.1$x");
    expect(replayArgv(["bun", "main.ts"], "d", { iters: 5, module: "/d/build/k.cubin" })).toEqual([
      "bun",
      "main.ts",
      "replay",
      "d",
      "--runs",
      "1",
      "--iters",
      "5",
      "--module",
      "/d/build/k.cubin",
    ]);
  });

  test("the user's --metrics are merged with kerncap's (ncu takes it once); the options kerncap sets are refused", () => {
    const o = ncuUserOptions(["--metrics=l1tex__t_bytes.sum,dram__bytes_read.sum", "--clock-control", "none"]);
    expect(o.slice(0, 2)).toEqual(["--clock-control", "none"]);
    expect(o[3]!.split(",").sort()).toEqual(["l1tex__t_bytes.sum", ...NCU_METRICS].sort()); // each once
    for (const bad of [
      ["-k", "x"],
      ["--kernel-name=x"],
      ["-c", "2"],
      ["--launch-skip", "1"],
      ["-o", "r"],
      ["--export=r"],
      ["--csv"],
      ["--print-units", "auto"],
    ]) {
      expect(() => ncuUserOptions(bad)).toThrow(/kerncap profile sets/);
    }
    expect(() => ncuUserOptions(["--metrics"])).toThrow(/needs a value/);
  });

  test("ncu is found on PATH, then in CUDA_HOME/bin; missing: E_NO_NCU naming where it looked", () => {
    const root = tempDir();
    const bin = join(root, "bin");
    mkdirSync(bin);
    writeFileSync(join(bin, "ncu"), "#!/bin/sh\n");
    chmodSync(join(bin, "ncu"), 0o755);
    expect(findNsightTool("ncu", { PATH: bin })).toBe(join(bin, "ncu"));
    expect(findNsightTool("ncu", { PATH: "/nonexistent", CUDA_HOME: root })).toBe(join(bin, "ncu"));
    let e: unknown;
    try {
      findNsightTool("nsys", { PATH: "/nonexistent", CUDA_HOME: join(root, "none") });
    } catch (x) {
      e = x;
    }
    expect((e as KerncapError).code).toBe("E_NO_NSYS");
    expect((e as KerncapError).message).toContain(join(root, "none", "bin"));
    expect((e as KerncapError).hint).toContain("CUDA_HOME");
  });

  test("report names stay in DIR/profile; ncu's failures say what to do", () => {
    expect(reportName("blocks-128.v2")).toBe("blocks-128.v2");
    for (const bad of ["../x", ".hidden", "a/b", "", "-x"]) expect(() => reportName(bad)).toThrow(/not a report name/);
    expect(ncuFailure(1, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "", "k").hint).toContain("NVreg_RestrictProfilingToAdminUsers");
    expect(ncuFailure(0, "==WARNING== No kernels were profiled.", "", "_Z1kv").message).toContain("no launch of _Z1kv");
    expect(ncuFailure(2, "", "[kerncap] ERROR  no NVIDIA driver\nother", "k").message).toContain("no NVIDIA driver");
  });
});

describe("profile -o/--export (ncu's option) and -f", () => {
  test("the report's path: the extension added when missing, an existing file replaced only with -f, a folder or a missing parent refused", () => {
    const d = tempDir();
    expect(exportPath(join(d, "r"), ".ncu-rep", false)).toBe(join(d, "r.ncu-rep"));
    expect(exportPath(join(d, "r.ncu-rep"), ".ncu-rep", false)).toBe(join(d, "r.ncu-rep"));
    expect(exportPath(join(d, "t"), ".nsys-rep", false)).toBe(join(d, "t.nsys-rep"));
    writeFileSync(join(d, "r.ncu-rep"), "old");
    const e = (() => {
      try {
        exportPath(join(d, "r"), ".ncu-rep", false);
      } catch (x) {
        return x as KerncapError;
      }
    })();
    expect(e?.code).toBe("E_EXISTS");
    expect(e?.hint).toContain("-f");
    expect(exportPath(join(d, "r"), ".ncu-rep", true)).toBe(join(d, "r.ncu-rep"));
    mkdirSync(join(d, "dir.ncu-rep"));
    expect(() => exportPath(join(d, "dir"), ".ncu-rep", true)).toThrow(/not a regular file/);
    expect(() => exportPath(join(d, "none", "r"), ".ncu-rep", true)).toThrow(/does not exist/);
  });
  test("--name and --export together are refused before ncu is looked for; -o after `--` points at kerncap's own -o", async () => {
    const { makeCapture } = await import("../fixtures.ts");
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    await expect(profileCapture(dir, { name: "a", export: join(tempDir(), "b"), toolOptions: [] })).rejects.toThrow("--name and --export both name the report");
    expect(() => ncuUserOptions(["-o", "x"])).toThrow(/kerncap profile DIR -o PATH/);
  });
});

describe("profile where no GPU is", () => {
  test("an ncu that writes no report and prints nothing: the missing GPU said as every GPU verb says it (its code and hint), not an empty E_NCU (nu #3)", async () => {
    const { probeGpu } = await import("../../../src/native/libcuda.ts");
    let noGpu: KerncapError | undefined;
    try {
      probeGpu();
    } catch (e) {
      noGpu = e as KerncapError;
    }
    if (!noGpu) return; // a machine with a GPU: the GPU suite profiles there
    const { makeCapture } = await import("../fixtures.ts");
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const bin = tempDir();
    writeFileSync(join(bin, "ncu"), "#!/bin/sh\nexit 1\n");
    chmodSync(join(bin, "ncu"), 0o755);
    const saved = process.env.PATH;
    process.env.PATH = `${bin}:${saved}`;
    try {
      const e = (await profileCapture(dir, { toolOptions: [], quiet: true }).then(
        () => undefined,
        (x) => x,
      )) as KerncapError;
      expect(e.code).toBe(noGpu.code);
      expect(e.message).toContain("ncu wrote no report (exit 1): ");
      expect(e.message).toContain(noGpu.message);
      expect(e.hint).toBe(noGpu.hint);
    } finally {
      process.env.PATH = saved;
    }
  });
});
