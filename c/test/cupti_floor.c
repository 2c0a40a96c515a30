/* The floor under the capture library's per-launch cost: an injection library (CUDA_INJECTION64_PATH,
 * as kerncap injects libkerncap_cuda.so) that subscribes to CUPTI with a callback that does nothing.
 * What an application pays under it is what CUPTI and the driver charge a callback tool, whatever
 * the tool does in its callback; scripts/bench-launch-overhead.sh (FLOORS) runs it beside the
 * library, so the difference between the two is the library's own work.
 *
 * Reads KC_FLOOR: "launch" (default) enables the driver API callbacks of the launch entry points the
 *   library counts (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and their _ptsz);
 *   "driver" every driver API callback (cuptiEnableDomain: what a launch costs when each driver call
 *   the runtime makes around it reaches CUPTI too); "list" and "run" exactly the callbacks the
 *   capture library enables in that mode (c/cuda/kc_callbacks.h: the resource callbacks included), so
 *   the library's figure minus this floor's is its own work, not CUPTI's charge for a longer list;
 *   "none" subscribes and enables nothing.
 *   KERNCAP_CUPTI_PATH names libcupti, else libcupti.so / .so.13 / .so.12 are tried.
 * Writes nothing; a failure is one line on stderr and the application runs on without it.
 * Build: gcc -O2 -shared -fPIC -Ic/cuda -I<CUDA include dirs> -o libcupti_floor.so c/test/cupti_floor.c -ldl */
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kc_callbacks.h"

static void CUPTIAPI nothing(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  (void)ud; (void)dom; (void)cbid; (void)data;
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
  const char *path = getenv("KERNCAP_CUPTI_PATH");
  const char *names[] = {path && *path ? path : "libcupti.so", "libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  void *h = NULL;
  for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
  if (!h) { fprintf(stderr, "cupti_floor: libcupti not loadable\n"); return 1; }
  CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) = (CUptiResult(*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))dlsym(h, "cuptiSubscribe");
  CUptiResult (*enable)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) =
      (CUptiResult(*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId))dlsym(h, "cuptiEnableCallback");
  CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) =
      (CUptiResult(*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain))dlsym(h, "cuptiEnableDomain");
  CUpti_SubscriberHandle sub;
  if (!subscribe || !enable || !enable_domain || subscribe(&sub, (CUpti_CallbackFunc)nothing, NULL) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_floor: cuptiSubscribe failed\n");
    return 1;
  }
  const char *mode = getenv("KC_FLOOR");
  if (mode && (!strcmp(mode, "list") || !strcmp(mode, "run"))) {
#define KC_ID(name, handler) CUPTI_DRIVER_TRACE_CBID_##name,
    static const CUpti_CallbackId counting[] = {KC_LAUNCH_CALLBACKS(KC_ID) KC_DRIVER_CALLBACKS(KC_ID)};
    static const CUpti_CallbackId capture[] = {KC_CAPTURE_CALLBACKS(KC_ID)};
#undef KC_ID
    for (size_t i = 0; i < sizeof counting / sizeof *counting; i++) enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, counting[i]);
    if (!strcmp(mode, "run")) {
      for (size_t i = 0; i < sizeof capture / sizeof *capture; i++) enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, capture[i]);
      enable(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
    }
    enable(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
    enable(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  } else if (mode && !strcmp(mode, "driver")) enable_domain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  else if (!mode || !*mode || !strcmp(mode, "launch")) {
    static const CUpti_CallbackId launch[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    };
    for (size_t i = 0; i < sizeof launch / sizeof *launch; i++) enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, launch[i]);
  }
  return 1;
}
