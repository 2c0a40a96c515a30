// l2_state.cu — the L2 state a timed launch starts from, without kerncap (scripts/exp-kernel-time.sh).
// The shape of PyTorch's `a * 2.0` (one read, one write, float4), timed with CUDA events after a
// spin kernel as `kerncap replay` times (src/replay/backends/cuda.ts), after each way of preparing
// the launch that the replay does or could do: back to back, the output restored from a device
// backup (cudaMemcpyAsync device to device, as the replay's restore), the restore then a read of
// 2×L2 (dirty lines written back), that read then the kernel's own buffers read again, the app's
// case of torch_app.py (a 2^24-float tensor written then read by a sum just before), an in-place
// add on the input (triton_app.py's case), a memset flush (dirty lines), the restore with no spin
// or a 2 ms one, and back to back as a graph launch or a plain launch on a stream of its own
// (the replay launches on the null stream with cuLaunchKernelEx). Buffers from cudaMalloc
// or from cuMemCreate + cuMemMap (the replay's fixed-VA spans), and an empty kernel (what the
// event pair costs by itself, to set beside ncu's duration of the same empty kernel).
//
// Usage: l2_state [N_FLOATS...]   (default 16777216 1048576); `l2_state empty` launches only the
// empty kernel 20 times (for ncu -k regex:empty_kernel). Prints one JSON object per line.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(2); } } while (0)
#define DK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #x, (int)r_); exit(2); } } while (0)
// the driver's VMM calls through the runtime (no -lcuda at link time)
template <class F> static F driver(const char *name) {
  void *p = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  if (!p) { fprintf(stderr, "no driver entry point %s\n", name); exit(2); }
  return (F)p;
}

__global__ void mul_scalar(const float4 *a, float4 *o, size_t n4, float s) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n4) { float4 x = a[i]; o[i] = make_float4(x.x * s, x.y * s, x.z * s, x.w * s); }
}
__global__ void add_inplace(float4 *a, size_t n4, float v) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n4) { float4 x = a[i]; a[i] = make_float4(x.x + v, x.y + v, x.z + v, x.w + v); }
}
__global__ void read_all(const float4 *p, size_t n4, float *sink) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) s += p[i].x;
  if (s == 12345.f) *sink = s;
}
__global__ void empty_kernel() {}
// kc_spin of c/cuda/kc_scan.cu: one thread waits `ns` of the global timer
__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { __nanosleep(1000); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

static size_t g_gran = 0;
// device memory of `bytes`: cudaMalloc, or a cuMemCreate + cuMemMap span as the replay maps (src/native/libcuda.ts mapAt)
static float4 *alloc(size_t bytes, bool vmm) {
  if (!vmm) { void *p; CK(cudaMalloc(&p, bytes)); return (float4 *)p; }
  int dev; CK(cudaGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  static auto granularity = driver<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity");
  static auto reserve = driver<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
  static auto create = driver<decltype(&cuMemCreate)>("cuMemCreate");
  static auto map = driver<decltype(&cuMemMap)>("cuMemMap");
  static auto access = driver<decltype(&cuMemSetAccess)>("cuMemSetAccess");
  if (!g_gran) DK(granularity(&g_gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t align = std::max(g_gran, (size_t)32 << 20), size = (bytes + align - 1) / align * align;
  CUdeviceptr va; CUmemGenericAllocationHandle h;
  DK(reserve(&va, size, align, 0, 0));
  DK(create(&h, size, &prop, 0));
  DK(map(va, size, 0, h, 0));
  CUmemAccessDesc d = {};
  d.location = prop.location;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DK(access(va, size, &d, 1));
  return (float4 *)va;
}

struct Stats { float med, p10, p90; };
static Stats stats(std::vector<float> t) {
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]};
}

int main(int argc, char **argv) {
  CK(cudaFree(0));
  const int T = 256, ITERS = 40, WARM = 4;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  if (argc > 1 && !strcmp(argv[1], "empty")) {
    for (int i = 0; i < 20; i++) { spin<<<1, 1>>>(30000); empty_kernel<<<1, 32>>>(); }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  int l2 = 0; CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  size_t fl4 = std::max((size_t)256 << 20, 2 * (size_t)l2) / 16;
  float4 *fl; float *sink;
  CK(cudaMalloc(&fl, fl4 * 16)); CK(cudaMalloc(&sink, 4)); CK(cudaMemset(fl, 0, fl4 * 16));
  // the event pair's own cost: an empty kernel after the spin
  {
    std::vector<float> t;
    for (int it = 0; it < ITERS + WARM; it++) {
      spin<<<1, 1>>>(30000);
      CK(cudaEventRecord(e0)); empty_kernel<<<1, 32>>>(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (it >= WARM) t.push_back(ms * 1000);
    }
    Stats s = stats(t);
    printf("{\"case\":\"empty kernel (events after spin)\",\"floats\":0,\"memory\":\"-\",\"medianUs\":%.3f,\"p10Us\":%.3f,\"p90Us\":%.3f}\n", s.med, s.p10, s.p90);
  }
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; i++) sizes.push_back(strtoull(argv[i], 0, 10));
  if (sizes.empty()) sizes = {16777216, 1048576};
  const char *names[] = {"back to back", "restore (dtod)", "restore, read 2xL2", "restore, read 2xL2, read a and o",
                         "app: t written then read (torch_app.py)", "app: a += 0.01 just before (triton_app.py)",
                         "restore, memset 2xL2", "restore, no spin", "restore, spin 2000 us",
                         "back to back, graph launch (own stream)", "back to back, own stream"};
  const int MODES = sizeof names / sizeof *names;
  for (size_t nf : sizes) {
    for (int vmm = 0; vmm < 2; vmm++) {
      size_t n4 = nf / 4, bytes = n4 * 16;
      float4 *a = alloc(bytes, vmm), *o = alloc(bytes, vmm), *bk = alloc(bytes, vmm), *tt = alloc(bytes, vmm);
      int G = (int)((n4 + T - 1) / T);
      CK(cudaMemset(a, 0x3f, bytes)); CK(cudaMemset(o, 0, bytes)); CK(cudaMemcpy(bk, o, bytes, cudaMemcpyDeviceToDevice));
      CK(cudaDeviceSynchronize());
      // the mul as a one-node graph, captured on its own stream (modes 9 and 10 run on that stream)
      cudaStream_t st;
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      mul_scalar<<<G, T, 0, st>>>(a, o, n4, 2.f);
      CK(cudaStreamEndCapture(st, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      for (int mode = 0; mode < MODES; mode++) {
        std::vector<float> t;
        for (int it = 0; it < ITERS + WARM; it++) {
          if (mode == 1 || mode == 2 || mode == 3 || mode == 6 || mode == 7 || mode == 8) CK(cudaMemcpyAsync(o, bk, bytes, cudaMemcpyDeviceToDevice));
          if (mode == 2 || mode == 3) read_all<<<1024, 256>>>(fl, fl4, sink);
          if (mode == 3) { read_all<<<1024, 256>>>(o, n4, sink); read_all<<<1024, 256>>>(a, n4, sink); }
          if (mode == 4) { add_inplace<<<G, T>>>(tt, n4, 1.f); read_all<<<1024, 256>>>(tt, n4, sink); }
          if (mode == 5) add_inplace<<<G, T>>>(a, n4, 0.f);
          if (mode == 6) CK(cudaMemsetAsync(fl, it & 0xff, fl4 * 16));
          cudaStream_t on = mode >= 9 ? st : 0;
          if (mode != 7) spin<<<1, 1, 0, on>>>(mode == 8 ? 2000000ull : 30000ull);
          CK(cudaEventRecord(e0, on));
          if (mode == 9) CK(cudaGraphLaunch(ge, st));
          else mul_scalar<<<G, T, 0, on>>>(a, o, n4, 2.f);
          CK(cudaEventRecord(e1, on)); CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
          if (it >= WARM) t.push_back(ms * 1000);
        }
        Stats s = stats(t);
        printf("{\"case\":\"%s\",\"floats\":%zu,\"memory\":\"%s\",\"medianUs\":%.3f,\"p10Us\":%.3f,\"p90Us\":%.3f}\n", names[mode], nf,
               vmm ? "cuMemCreate+cuMemMap" : "cudaMalloc", s.med, s.p10, s.p90);
        fflush(stdout);
      }
    }
  }
  return 0;
}
