/**
 * compute-sanitizer next to kerncap (issue 13), without a GPU: kerncap run under the sanitizer is
 * told from the environment its launcher sets, and is named as compute-sanitizer (not as an
 * Nsight tool, whose launcher it shares); compute-sanitizer as the application is refused by name
 * before anything runs; both refusals say to check the replay instead.
 */
import { expect, test } from "bun:test";
import { launchingTool, SANITIZER_WAY_OUT, toolAsApp, toolOfInjection, underSanitizer } from "../../../src/capture/coexist.ts";
import { captureKernel, listKernels, refuseToolAsApp } from "../../../src/capture/session.ts";

test("under compute-sanitizer: its injection library, preload or variables; named before the Nsight launcher token", () => {
  expect(underSanitizer({ CUDA_INJECTION64_PATH: "/usr/local/cuda/compute-sanitizer/libTreeLauncherTargetInjection.so" })).toBe(true);
  expect(underSanitizer({ LD_PRELOAD: "/opt/cuda/compute-sanitizer/libsanitizer-collection.so" })).toBe(true);
  expect(underSanitizer({ NV_SANITIZER_INJECTION_PORT_BASE: "10000" })).toBe(true);
  expect(underSanitizer({ NV_TPS_LAUNCH_TOKEN: "Compute Sanitizer" })).toBe(true);
  expect(
    launchingTool({ NV_TPS_LAUNCH_TOKEN: "Compute Sanitizer", CUDA_INJECTION64_PATH: "/usr/local/cuda/compute-sanitizer/libsanitizer-collection.so" }),
  ).toBe("compute-sanitizer");
  // not the sanitizer: no tool, ASan in the preload, ncu
  expect(underSanitizer({ PATH: "/usr/bin", LD_PRELOAD: "/usr/lib/x86_64-linux-gnu/libasan.so.8", ASAN_OPTIONS: "detect_leaks=0" })).toBe(false);
  expect(launchingTool({ PATH: "/usr/bin" })).toBeUndefined();
  expect(launchingTool({ NV_COMPUTE_PROFILER_PERFWORKS_DIR: "/opt/nvidia/nsight-compute/2025.3/target" })).toBe("Nsight Compute (ncu)");
  expect(toolOfInjection("/usr/local/cuda/compute-sanitizer/libsanitizer-collection.so")).toBe("compute-sanitizer");
});

test("compute-sanitizer (or cuda-memcheck) as the application: refused by name, E_TOOL, with the replay command", async () => {
  expect(toolAsApp(["/usr/local/cuda/bin/compute-sanitizer", "--tool", "memcheck", "./app"])).toBe("compute-sanitizer");
  expect(toolAsApp(["cuda-memcheck", "./app"])).toBe("cuda-memcheck");
  expect(toolAsApp(["python3", "compute-sanitizer.py"])).toBeUndefined();
  // behind wrappers and in a shell's -c string
  expect(toolAsApp(["env", "CUDA_VISIBLE_DEVICES=0", "compute-sanitizer", "./app"])).toBe("compute-sanitizer");
  expect(toolAsApp(["srun", "-n", "1", "compute-sanitizer", "./app"])).toBeUndefined(); // "1" is taken for the command: no false refusal, a miss
  expect(toolAsApp(["nohup", "/opt/cuda/bin/cuda-memcheck", "./app"])).toBe("cuda-memcheck");
  expect(toolAsApp(["bash", "-c", "cd build && compute-sanitizer --tool memcheck ./app"])).toBe("compute-sanitizer");
  expect(toolAsApp(["/bin/sh", "-ec", "X=1 env Y=2 compute-sanitizer ./app"])).toBe("compute-sanitizer");
  expect(toolAsApp(["bash", "-c", "python3 run.py --log compute-sanitizer.txt"])).toBeUndefined();
  expect(toolAsApp(["bash", "script.sh"])).toBeUndefined();
  expect(toolAsApp(["python3", "-m", "compute-sanitizer"])).toBeUndefined();
  expect(() => refuseToolAsApp(["python3", "app.py"])).not.toThrow();
  let err: any;
  try {
    refuseToolAsApp(["compute-sanitizer", "./app"]);
  } catch (e) {
    err = e;
  }
  expect(err?.code).toBe("E_TOOL");
  expect(err.message).toContain("compute-sanitizer");
  expect(err.hint).toBe(SANITIZER_WAY_OUT);
  expect(SANITIZER_WAY_OUT).toContain("compute-sanitizer --tool memcheck kerncap replay DIR");
  // before the GPU is touched or the PATH searched: prepare never runs
  const prepare = async () => {
    throw new Error("prepare ran");
  };
  await expect(listKernels({ argv: ["/nonexistent/compute-sanitizer", "./app"], verbose: false } as any, prepare)).rejects.toMatchObject({ code: "E_TOOL" });
  await expect(captureKernel({ argv: ["compute-sanitizer", "./app"] } as any, prepare)).rejects.toMatchObject({ code: "E_TOOL" });
});
