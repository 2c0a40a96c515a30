// The bare cost of a CUDA context on this node (scripts/bench-replay-floor.sh): libcuda opened as
// kerncap opens it (dlopen), cuInit, the primary context of device 0 retained and made current,
// one 4-byte allocation freed, the context released.
#include <dlfcn.h>
#include <stdio.h>
typedef int (*fn)();
int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return fprintf(stderr, "no libcuda.so.1\n"), 2;
  fn init = (fn)dlsym(h, "cuInit"), get = (fn)dlsym(h, "cuDeviceGet"), retain = (fn)dlsym(h, "cuDevicePrimaryCtxRetain"),
     cur = (fn)dlsym(h, "cuCtxSetCurrent"), alloc = (fn)dlsym(h, "cuMemAlloc_v2"), freep = (fn)dlsym(h, "cuMemFree_v2"),
     release = (fn)dlsym(h, "cuDevicePrimaryCtxRelease_v2");
  int d = 0;
  void *c = 0;
  unsigned long long p = 0;
  if (init(0) || get(&d, 0) || retain(&c, d) || cur(c) || alloc(&p, 4) || freep(p)) return fprintf(stderr, "no CUDA context\n"), 2;
  release(d);
  return 0;
}
