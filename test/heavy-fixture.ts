/**
 * Test helper (not shipped code): a CUDA project whose kernel header pulls <vector>, <string>,
 * <unordered_map>, <memory>, <mutex>, <algorithm>, cuda_fp16 and host structures, as real code
 * bases do; compiled with the local nvcc (sm_90) and rendered as a kerncap reproducer.
 * Used by test/cpu/frontends/cuda/prune.test.ts and test/cpu/watch.test.ts (both skip without nvcc).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cubinKernels } from "../src/codeobj/cubin.ts";
import { pickCubin } from "../src/codeobj/fatbin.ts";
import { NVCC } from "./nvcc-fixtures.ts";
import { renderCudaReproducer } from "../src/frontends/cuda/repro.ts";
import { locateKernelSource } from "../src/frontends/cuda/locate.ts";

/** The reproducer's kernel, its demangled name, and the header (under out/src) that defines it. */
export interface HeavyReproducer {
  kernel: string;
  demangled: string;
  header: string;
}

/**
 * Write the project under `work`/heavy, compile it (nvcc -fatbin, sm_90), locate row_scale<__half, 64>
 * and render its reproducer into `out`.
 * @throws Error when nvcc is missing or the project does not compile
 */
export async function makeHeavyReproducer(work: string, out: string): Promise<HeavyReproducer> {
  if (!NVCC) throw new Error("nvcc not found");
  const proj = join(work, "heavy");
  mkdirSync(join(proj, "lib"), { recursive: true });
  writeFileSync(
    join(proj, "lib", "common.cuh"),
    [
      "#pragma once",
      "#include <vector>",
      "#include <string>",
      "#include <unordered_map>",
      "#include <memory>",
      "#include <mutex>",
      "#include <algorithm>",
      "#include <cuda_fp16.h>",
      "struct device_info { std::string name; std::vector<int> sms; std::unordered_map<std::string, int> caps; };",
      "struct pool { std::mutex m; std::vector<std::unique_ptr<float[]>> blocks; size_t total() const { return blocks.size(); } };",
      "inline std::string describe(const device_info& d) { std::string s = d.name; for (int v : d.sms) s += std::to_string(v); return s; }",
      "static inline int pick(const std::vector<int>& v) { return *std::max_element(v.begin(), v.end()); }",
      "constexpr int warps_for(int cols) { return cols >= 64 ? 8 : 4; }",
      "template <typename T> struct traits { static constexpr int vec = 1; };",
      "template <> struct traits<__half> { static constexpr int vec = 2; };",
      "__device__ __forceinline__ float to_f(float x) { return x; }",
      "__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }",
    ].join("\n") + "\n",
  );
  writeFileSync(
    join(proj, "lib", "ops.cuh"),
    [
      "#pragma once",
      '#include "common.cuh"',
      "template <typename T, int COLS>",
      "__global__ void __launch_bounds__(32 * warps_for(COLS)) row_scale(float* y, const T* x, float a, int n) {",
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;",
      "  if (i < n) y[i] = to_f(x[i]) * a * traits<T>::vec + COLS;",
      "}",
      "template <typename T> __global__ void other(T* p) { p[0] = T(1); }",
    ].join("\n") + "\n",
  );
  writeFileSync(
    join(proj, "app.cu"),
    [
      '#include "lib/ops.cuh"',
      "#include <cstdio>",
      "int main() {",
      '  device_info d; d.name = "x"; printf("%s\\n", describe(d).c_str());',
      "  float* y = nullptr; __half* h = nullptr;",
      "  row_scale<__half, 64><<<1, 256>>>(y, h, 2.0f, 0); other<float><<<1, 1>>>(y);",
      "  return 0;",
      "}",
    ].join("\n") + "\n",
  );
  const fat = join(work, "heavy.fatbin");
  const b = Bun.spawnSync([NVCC!, "-fatbin", "-O3", "-std=c++17", "-gencode", "arch=compute_90,code=sm_90", "-o", fat, join(proj, "app.cu")], {
    stdout: "pipe",
    stderr: "pipe",
  });
  if (b.exitCode !== 0) throw new Error(b.stderr.toString());
  const module = new Uint8Array(readFileSync(fat));
  const kernel = cubinKernels(pickCubin(module, "sm_90").cubin).find((k) => k.includes("row_scale"))!;
  const demangled = "void row_scale<__half, 64>(float*, __half const*, float, int)";
  const loc = await locateKernelSource({ kernel, demangled, module, arch: "sm_90", sourceRoot: proj });
  renderCudaReproducer({ outDir: out, kernelName: kernel, demangledName: demangled, arch: "sm_90", location: loc, sourceRoot: proj });
  return { kernel, demangled, header: join(out, "src", "lib", "ops.cuh") };
}
