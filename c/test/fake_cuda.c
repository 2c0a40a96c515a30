/* Stand-ins for libcuda.so.1 (-DFAKE_LIBCUDA) and libcupti.so (-DFAKE_LIBCUPTI), so that the CUDA
 * capture library runs on a machine without an NVIDIA driver (c/test/launch_main.c drives it;
 * test/cpu/c-match.test.ts and scripts/bench-launch-path.sh use them).
 * libcuda: every entry point the library looks up (c/cuda/kc_state.h KC_CU_FUNCS) exists and fails
 * with CUDA_ERROR_UNKNOWN, except the few a capture without device memory needs to succeed:
 * cuCtxSynchronize, cuStreamIsCapturing (never capturing), cuFuncGetModule (one module), streams, events, pinned host memory. The library then takes its fallbacks
 * (no parameter layout, the CPU instead of the scan kernel, no timing events), as it would with a
 * driver that lacks them.
 * libcupti: cuptiSubscribe keeps the callback, which fake_cupti_callback() hands to the driver
 * program; cuptiUnsubscribe drops it (the library hands CUPTI back once its capture is written);
 * cuptiEnableCallback keeps the table of enabled callbacks (fake_cupti_enabled). */
#ifdef FAKE_LIBCUDA
#define KC_STUB(name) int name(void) { return 999; }
KC_STUB(cuCtxGetCurrent) KC_STUB(cuCtxSetCurrent) KC_STUB(cuCtxGetDevice)
KC_STUB(cuMemcpyDtoH_v2) KC_STUB(cuGetErrorString) KC_STUB(cuGetErrorName)
KC_STUB(cuFuncGetParamInfo) KC_STUB(cuKernelGetParamInfo) KC_STUB(cuKernelGetFunction)
KC_STUB(cuFuncGetAttribute)
KC_STUB(cuDeviceGetName) KC_STUB(cuDeviceGetAttribute) KC_STUB(cuDriverGetVersion)
KC_STUB(cuEventElapsedTime_v2)
KC_STUB(cuMemHostGetDevicePointer_v2) KC_STUB(cuModuleGetGlobal_v2)
KC_STUB(cuMemcpyDtoHAsync_v2)
KC_STUB(cuModuleLoadData) KC_STUB(cuModuleGetFunction) KC_STUB(cuModuleUnload) KC_STUB(cuLaunchKernel)
KC_STUB(cuMemAlloc_v2) KC_STUB(cuMemFree_v2) KC_STUB(cuEventQuery) KC_STUB(cuDeviceGetUuid_v2) KC_STUB(cuDeviceGetPCIBusId)
KC_STUB(cuGraphKernelNodeGetParams_v2) KC_STUB(cuFuncGetName) KC_STUB(cuKernelGetName) KC_STUB(cuGraphGetNodes)
KC_STUB(cuGraphNodeGetType) KC_STUB(cuGraphChildGraphNodeGetGraph) KC_STUB(cuGraphClone) KC_STUB(cuGraphNodeFindInClone)
KC_STUB(cuGraphNodeGetDependencies_v2) KC_STUB(cuGraphDestroyNode) KC_STUB(cuGraphInstantiateWithFlags) KC_STUB(cuGraphLaunch)
KC_STUB(cuGraphExecDestroy) KC_STUB(cuGraphDestroy) KC_STUB(cuGraphKernelNodeSetParams_v2) KC_STUB(cuMemcpyHtoD_v2) KC_STUB(cuMemsetD8_v2)
KC_STUB(cuGraphKernelNodeGetAttribute) KC_STUB(cuGraphNodeSetParams) KC_STUB(cuGraphMemcpyNodeSetParams) KC_STUB(cuGraphMemsetNodeSetParams)
KC_STUB(cuGraphNodeSetEnabled) KC_STUB(cuLaunchKernelEx)
#include <stdlib.h>
int cuCtxSynchronize(void) { return 0; }
/* every function is in one module */
int cuFuncGetModule(void **m, void *f) { (void)f; *m = (void *)0x5000; return 0; }
/* streams, events and pinned buffers of the snapshot pipeline: handles that do nothing, host memory */
static int kc_handle;
int cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = &kc_handle; return 0; }
int cuStreamDestroy_v2(void *s) { (void)s; return 0; }
int cuStreamSynchronize(void *s) { (void)s; return 0; }
int cuEventCreate(void **e, unsigned flags) { (void)flags; *e = &kc_handle; return 0; }
int cuEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
int cuEventSynchronize(void *e) { (void)e; return 0; }
int cuEventDestroy_v2(void *e) { (void)e; return 0; }
int cuMemHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; *p = malloc(n); return *p ? 0 : 2; }
int cuMemFreeHost(void *p) { free(p); return 0; }
int cuStreamIsCapturing(void *stream, int *status) {
  (void)stream;
  *status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
  return 0;
}
#endif

#ifdef FAKE_LIBCUPTI
typedef void (*kc_fake_cb)(void *, int, unsigned, const void *);
static kc_fake_cb volatile g_cb;
int cuptiSubscribe(void **sub, kc_fake_cb cb, void *ud) {
  (void)ud;
  *sub = (void *)1;
  g_cb = cb;
  return 0;
}
int cuptiUnsubscribe(void *sub) {
  (void)sub;
  g_cb = 0;
  return 0;
}
/* What the subscriber enabled, in order (a later disable of the same callback removes it):
 * fake_cupti_enabled hands the table to the driver program (c/test/launch_main.c cbids). */
#define FAKE_MAX_ENABLED 1024
static struct { int domain; unsigned cbid; } enabled[FAKE_MAX_ENABLED];
static int nenabled;
int cuptiEnableCallback(unsigned enable, void *sub, int domain, unsigned cbid) {
  (void)sub;
  int i = 0;
  while (i < nenabled && !(enabled[i].domain == domain && enabled[i].cbid == cbid)) i++;
  if (!enable && i < nenabled) enabled[i] = enabled[--nenabled];
  else if (enable && i == nenabled && nenabled < FAKE_MAX_ENABLED) {
    enabled[nenabled].domain = domain;
    enabled[nenabled++].cbid = cbid;
  }
  return 0;
}
int cuptiEnableDomain(unsigned enable, void *sub, int domain) {
  (void)enable; (void)sub; (void)domain;
  return 0;
}
/* The i-th enabled callback: 1 with *domain and *cbid set, 0 past the end. */
int fake_cupti_enabled(int i, int *domain, unsigned *cbid) {
  if (i < 0 || i >= nenabled) return 0;
  *domain = enabled[i].domain;
  *cbid = enabled[i].cbid;
  return 1;
}
int cuptiGetResultString(int r, const char **s) {
  (void)r;
  *s = "fake libcupti";
  return 0;
}
kc_fake_cb fake_cupti_callback(void) { return g_cb; }
#endif
