/**
 * Test helper (not shipped code): builds small CUDA modules with the local nvcc once per test
 * process, in a temp folder, all nvcc runs in parallel. Tests skip (test.skipIf(!NVCC)) when nvcc
 * is missing; NVCC env var overrides the path.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const NVCC: string | undefined = [process.env.NVCC, "/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find(
  (p): p is string => !!p && existsSync(p),
);
export const NO_NVCC_REASON = "nvcc not found (set NVCC or install the CUDA toolkit): skipping tests that compile real cubins";

/**
 * Kernels whose parameter layouts the tests compute by hand (x86-64 / CUDA C++ ABI: scalars are
 * naturally aligned; a struct's alignment is its largest member's; offsets round up to alignment).
 */
export const KERNELS_CU = `
#include <cstdint>
struct S { float a; double b; char c; };           // align 8, size 24 (a@0 b@8 c@16)
struct Big { float v[32]; };                      // align 4, size 128
struct alignas(16) A16 { float x; };              // align 16, size 16
struct Huge { int v[5000]; };                     // align 4, size 20000
__device__ int dev_counter;                       // .nv.global, 4 bytes
__device__ float dev_table[100] = {1.0f};         // .nv.global.init, 400 bytes
__constant__ float const_coef[16];                // .nv.constant3, 64 bytes
__constant__ int const_init[4] = {1, 2, 3, 4};    // .nv.constant3, 16 bytes
__managed__ int man_val[8];                       // .nv.global, 32 bytes, managed
__device__ __noinline__ float helper(float x) { return x * 3 + man_val[1]; }
template <typename T, int N>
__global__ void tk(T* out, const T* in, int n) { int i = threadIdx.x; if (i < n) out[i] = in[i] * N + dev_counter; }
template __global__ void tk<float, 2>(float*, const float*, int);
template __global__ void tk<double, 3>(double*, const double*, int);
extern "C" __global__ void structk(char c, S s, short h, double* p, int64_t q) {
  p[0] = s.a + s.b + s.c + c + h + q + const_coef[3] + const_init[1] + dev_table[2] + helper(s.a);
}
extern "C" __global__ void gridk(const __grid_constant__ Big b, float* out) { out[threadIdx.x] = b.v[threadIdx.x]; }
extern "C" __global__ void typesk(bool b, char c, short s, int i, long long l, float f, double d, float4 v4, A16 a,
                                  double2 d2, void* p, unsigned char uc) {}
extern "C" __global__ void hugek(Huge h, char c, int* out) { out[0] = h.v[threadIdx.x] + c; }
extern "C" __global__ void emptyk() {}
`;

export interface Fixtures {
  dir: string;
  /** nvcc -cubin -arch=<arch>, keyed by arch. */
  cubin: Record<"sm_90" | "sm_90a" | "sm_80" | "sm_100a" | "sm_120", Uint8Array>;
  /** nvcc -fatbin, sm_80 + sm_90a + sm_90 cubins + compute_90 PTX, default compression. */
  fatbin: Uint8Array;
  /** Same targets minus sm_90a, --compress-mode=speed -Xfatbin -compress-all (LZ4 entries). */
  fatbinLz4: Uint8Array;
  /** Same, --compress-mode=size -Xfatbin -compress-all (zstd entries). */
  fatbinZstd: Uint8Array;
  /** Same, --no-compress. */
  fatbinPlain: Uint8Array;
  /** nvcc -c host object (its .nv_fatbin holds sm_80, sm_90, compute_90). */
  hostObject: Uint8Array;
  /** nvcc -ptx -arch=sm_90. */
  ptx: Uint8Array;
}

let cached: Promise<Fixtures> | undefined;

/** Build (once per process) every fixture; throws with nvcc's stderr when a build fails. */
export function buildFixtures(): Promise<Fixtures> {
  return (cached ??= build());
}

async function build(): Promise<Fixtures> {
  if (!NVCC) throw new Error(NO_NVCC_REASON);
  const dir = mkdtempSync(join(tmpdir(), "kerncap-codeobj-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "k.cu"), KERNELS_CU);
  const gencodes = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"];
  const jobs: Record<string, string[]> = {
    "sm_90.cubin": ["-cubin", "-arch=sm_90"],
    "sm_90a.cubin": ["-cubin", "-arch=sm_90a"],
    "sm_80.cubin": ["-cubin", "-arch=sm_80"],
    "sm_100a.cubin": ["-cubin", "-arch=sm_100a"],
    "sm_120.cubin": ["-cubin", "-arch=sm_120"],
    "k.fatbin": ["-fatbin", "-gencode", "arch=compute_90a,code=sm_90a", ...gencodes],
    "lz4.fatbin": ["-fatbin", ...gencodes, "--compress-mode=speed", "-Xfatbin", "-compress-all"],
    "zstd.fatbin": ["-fatbin", ...gencodes, "--compress-mode=size", "-Xfatbin", "-compress-all"],
    "plain.fatbin": ["-fatbin", ...gencodes, "--no-compress"],
    "k.o": ["-c", ...gencodes],
    "k.ptx": ["-ptx", "-arch=sm_90"],
  };
  await Promise.all(
    Object.entries(jobs).map(async ([out, args]) => {
      const p = Bun.spawn([NVCC, ...args, "-o", out, "k.cu"], { cwd: dir, stdout: "pipe", stderr: "pipe" });
      if ((await p.exited) !== 0) throw new Error(`nvcc ${args.join(" ")} failed: ${await new Response(p.stderr).text()}`);
    }),
  );
  const read = (f: string) => new Uint8Array(readFileSync(join(dir, f)));
  return {
    dir,
    cubin: {
      sm_90: read("sm_90.cubin"),
      sm_90a: read("sm_90a.cubin"),
      sm_80: read("sm_80.cubin"),
      sm_100a: read("sm_100a.cubin"),
      sm_120: read("sm_120.cubin"),
    },
    fatbin: read("k.fatbin"),
    fatbinLz4: read("lz4.fatbin"),
    fatbinZstd: read("zstd.fatbin"),
    fatbinPlain: read("plain.fatbin"),
    hostObject: read("k.o"),
    ptx: read("k.ptx"),
  };
}
