/*
 * fake_libcuda.c: the CUDA driver entry points the exported program (templates/export/repro.c)
 * calls, on host memory, so that the program runs on a machine without a GPU (test/cpu/export.test.ts).
 * "Device" memory is host memory mapped at the requested VA (mmap MAP_FIXED_NOREPLACE), copies
 * are memcpy, and a launch of the captured kernel applies the writes listed in the file that
 * KC_FAKE_KERNEL names: lines "VA FILE OFFSET BYTES" (copy BYTES of FILE at OFFSET to VA) or
 * "VA = BYTE" (one byte). Without KC_FAKE_KERNEL a launch writes nothing.
 *
 * Environment: KC_FAKE_NO_DEVICE=1 (cuInit fails), KC_FAKE_TAKEN=VA (that address is mapped
 * before the program starts: the reservation is refused), KC_FAKE_CC=80 (the compute capability),
 * KC_FAKE_NO_SASS=1 (a module image that is not PTX text fails with CUDA_ERROR_NO_BINARY_FOR_GPU),
 * KC_FAKE_LOG=FILE (each call that loads a module or launches appends a line), KC_FAKE_FAULT=N
 * (cuCtxSynchronize returns CUresult N: the kernel faulted), KC_FAKE_PRINTF=TEXT (cuCtxSynchronize
 * writes TEXT to stdout, as the driver writes a kernel's device-side printf).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void logf_(const char *fmt, const char *s, unsigned long long v) {
  const char *p = getenv("KC_FAKE_LOG");
  if (!p) return;
  FILE *f = fopen(p, "a");
  if (!f) return;
  fprintf(f, fmt, s, v);
  fputc('\n', f);
  fclose(f);
}

CUresult cuInit(unsigned int flags) {
  (void)flags;
  const char *taken = getenv("KC_FAKE_TAKEN");
  if (taken) mmap((void *)strtoull(taken, NULL, 0), 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  return getenv("KC_FAKE_NO_DEVICE") ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : r == CUDA_ERROR_NO_BINARY_FOR_GPU ? "no kernel image is available for execution on the device" : r == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered" : "fake error";
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)0x1; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) {
  if (getenv("KC_FAKE_PRINTF")) fputs(getenv("KC_FAKE_PRINTF"), stdout);
  return getenv("KC_FAKE_FAULT") ? (CUresult)atoi(getenv("KC_FAKE_FAULT")) : CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int n, CUdevice d) { (void)d; snprintf(name, (size_t)n, "fake GPU"); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  int cc = getenv("KC_FAKE_CC") ? atoi(getenv("KC_FAKE_CC")) : 90;
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? cc / 10 : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? cc % 10 : 0;
  return CUDA_SUCCESS;
}
CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o) { (void)p, (void)o; *g = 2 << 20; return CUDA_SUCCESS; }
CUresult cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
  (void)align, (void)flags;
  void *p = mmap((void *)addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0); /* elsewhere, as the driver does */
  *out = (CUdeviceptr)p;
  return p == MAP_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p, unsigned long long f) { (void)size, (void)p, (void)f; *h = 1; return CUDA_SUCCESS; }
CUresult cuMemMap(CUdeviceptr va, size_t size, size_t off, CUmemGenericAllocationHandle h, unsigned long long f) { (void)va, (void)size, (void)off, (void)h, (void)f; return CUDA_SUCCESS; }
CUresult cuMemSetAccess(CUdeviceptr va, size_t size, const CUmemAccessDesc *d, size_t n) { (void)va, (void)size, (void)d, (void)n; return CUDA_SUCCESS; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = (CUdeviceptr)malloc(n); return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY; }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { memset((void *)d, v, n); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)d, s, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (const void *)s, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove((void *)d, (const void *)s, n); return CUDA_SUCCESS; }

CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  const char *t = (const char *)image;
  while (*t == '\n' || *t == ' ' || *t == '\t') t++;
  int ptx = !strncmp(t, "//", 2) || !strncmp(t, ".version", 8);
  logf_("load %s%llu", ptx ? "ptx" : "image", 0);
  if (getenv("KC_FAKE_NO_SASS") && !ptx) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  *m = (CUmodule)0x2;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  (void)m;
  *f = (CUfunction)(unsigned long)(strcmp(name, "kc_spin") ? 0x10 : 0x20);
  return CUDA_SUCCESS;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *n, CUmodule m, const char *name) { (void)p, (void)n, (void)m, (void)name; return CUDA_ERROR_NOT_FOUND; }
CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) { (void)a, (void)f; *v = 0; return CUDA_SUCCESS; }
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f; logf_("attribute %s%llu", "", ((unsigned long long)a << 32) | (unsigned)v); return CUDA_SUCCESS; }

/* The captured kernel: the writes of KC_FAKE_KERNEL. */
CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
  (void)f, (void)params, (void)extra;
  logf_("launch %sgrid %llu", "", cfg->gridDimX);
  const char *path = getenv("KC_FAKE_KERNEL");
  FILE *k = path ? fopen(path, "r") : NULL;
  if (!k) return CUDA_SUCCESS;
  char line[4096];
  while (fgets(line, sizeof line, k)) {
    unsigned long long va, off, n;
    unsigned v;
    char file[3000];
    if (sscanf(line, "%llx = %u", &va, &v) == 2) {
      *(unsigned char *)va = (unsigned char)v;
    } else if (sscanf(line, "%llx %2999s %llu %llu", &va, file, &off, &n) == 4) {
      FILE *d = fopen(file, "rb");
      if (!d || fseek(d, (long)off, SEEK_SET) || fread((void *)va, 1, n, d) != n) return CUDA_ERROR_INVALID_VALUE;
      fclose(d);
    }
  }
  fclose(k);
  return CUDA_SUCCESS;
}
/* The timing's spin kernel. */
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)p, (void)e;
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *e, unsigned int flags) { (void)flags; *e = (CUevent)0x3; return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { (void)a, (void)b; *ms = 0.0125f; return CUDA_SUCCESS; }
