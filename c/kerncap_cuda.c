/*
 * kerncap_cuda.c — the CUDA capture library, injected into the application: set-up, the CUPTI
 * callback and its dispatch, the allocation, module and kernel tables, the launch census.
 *
 * Exports: InitializeInjection() (called once by libcuda at cuInit when CUDA_INJECTION64_PATH
 *          names this file), kerncap_set_ignore_launches(int) (for frontend shims: autotuner
 *          benchmark launches), and the cuptiSubscribe / cuptiSubscribe_v2 wrappers of
 *          c/kc_cupti.c. Nothing else is visible (-fvisibility=hidden; test/cpu/c-exports.test.ts).
 * Reads:   KERNCAP_OUT, KERNCAP_MODE, KERNCAP_KERNEL, KERNCAP_DISPATCH, KERNCAP_CAPTURE_ALL,
 *          KERNCAP_MAX_CAPTURES, KERNCAP_LAUNCH_COUNT, KERNCAP_COUNT_BENCHMARKS, KERNCAP_EXIT_AFTER_CAPTURE,
 *          KERNCAP_CUPTI_PATH, KERNCAP_LOG; KERNCAP_RANK, KERNCAP_PROCESS (c/kc_process.c);
 *          KERNCAP_CHUNK_BYTES (c/kc_raw.c). docs/raw-capture.md says what each means.
 * Writes:  the raw capture into KERNCAP_OUT (docs/raw-capture.md): kernel/, memory/ (c/kc_snapshot.c),
 *          a progress file, raw.json last (c/kc_capture.c, c/kc_raw.c). In a job of several
 *          processes only the one that claims the capture writes it (c/kc_process.c); every
 *          process writes its own census kernels.<pid>.json and error.<pid>.txt (c/kc_log.c).
 * Units:   this file; kc_capture.c (the captured launch), kc_snapshot.c (memory), kc_graphs.c
 *          (CUDA graph launches and node capture), kc_cupti.c (CUPTI sharing), kc_process.c,
 *          kc_raw.c, kc_log.c (shared with the HSA library); all state in `kc` (c/kc_state.h).
 *          One X-macro list of driver callbacks (KC_DRIVER_CALLBACKS) serves both the
 *          subscription and the dispatch.
 * Threads: CUPTI calls the callback on whichever application thread made the CUDA call; kc.mu
 *          guards the tables, a thread-local flag ignores the callbacks that our own CUDA calls
 *          fire, and each launch is captured at most once.
 * Failure: never exit/abort on an error: KC_FAIL logs it to error.<pid>.txt, disables capture,
 *          returns. The application's own calls are never altered.
 */
#define _GNU_SOURCE
#include "kc_state.h"
#include "kc_collective.h"
#include "kc_json.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KC_EXPORT __attribute__((visibility("default")))

kc_state_t kc = {.mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .cupti = {.mu = PTHREAD_MUTEX_INITIALIZER}, .cap = {.graph_id = -1}};
const char *const KC_VISIBLE_VARS[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", NULL};

static __thread int in_tool; /* our own CUDA calls fire callbacks too */
/* Exported for frontend shims (ctypes): on != 0 while the launches that follow are benchmarks of
 * the application's runtime (e.g. Triton's autotuner), 0 when the application's own launches
 * resume. Nested calls are the caller's business (the shim keeps a depth counter). */
KC_EXPORT void kerncap_set_ignore_launches(int on) { kc.ignore_launches = on != 0; }
/* Module id of the last MODULE_LOADED callback on this thread: a module loads inside the API call
 * that needs it (cuModuleLoad*, or lazily inside a launch or cuFuncGetModule), so the id seen
 * during a call belongs to the CUmodule that call returns or touches. */
static __thread uint32_t tl_loaded_id;
static __thread int tl_loaded;

/* ---- tables ---- */
static void region_add(uint64_t va, uint64_t size, const char *kind) {
  if (!va || !size) return;
  if (KC_VEC_PUSH(kc.regions, (kc_region_t){va, size, kind})) KC_FAIL("out of host memory for the region table");
}

/* Remove the region that starts at va (free), or every region inside [va, va+size) (unmap). */
static void region_remove(uint64_t va, uint64_t size) {
  for (size_t i = 0; i < kc.regions.n;) {
    kc_region_t *r = &kc.regions.v[i];
    int hit = size ? (r->va >= va && r->va + r->size <= va + size) : (r->va == va);
    if (hit) kc.regions.v[i] = kc.regions.v[--kc.regions.n];
    else i++;
  }
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

kc_kstat_t *kc_kstat_get(const char *name) {
  if (kc.nkstats * 2 >= kc.ckstats) {
    size_t n = kc.ckstats ? kc.ckstats * 2 : 1024;
    kc_kstat_t *t = calloc(n, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < kc.ckstats; i++) {
      if (!kc.kstats[i].name) continue;
      size_t j = hash_str(kc.kstats[i].name) & (n - 1);
      while (t[j].name) j = (j + 1) & (n - 1);
      t[j] = kc.kstats[i];
    }
    free(kc.kstats);
    kc.kstats = t;
    kc.ckstats = n;
  }
  size_t j = hash_str(name) & (kc.ckstats - 1);
  while (kc.kstats[j].name) {
    if (!strcmp(kc.kstats[j].name, name)) return &kc.kstats[j];
    j = (j + 1) & (kc.ckstats - 1);
  }
  kc.kstats[j].name = strdup(name);
  kc.nkstats++;
  return &kc.kstats[j];
}


char *kc_demangle(const char *name) {
  if (kc.demangle && name && name[0] == '_' && name[1] == 'Z') {
    int st = 0;
    char *d = kc.demangle(name, NULL, NULL, &st);
    if (st == 0 && d) return d;
    free(d);
  }
  return strdup(name ? name : "");
}

/* Write kernels.<pid>.json, this process's census: who it is, every kernel seen with its count
 * and last launch shape, CUPTI sharing. final: written at exit (else a periodic or post-capture
 * snapshot of the counts: a process that ends with _exit, e.g. a fork-started Python worker,
 * leaves the last one). Atomic rename. */
void kc_write_census(int final) {
  if (!kc.base.out[0] || kc_proc_forked(&kc.proc)) return; /* a forked child holds its parent's tables */
  char p[4200], t[4300];
  kc_proc_file(kc.base.out, p, sizeof p, "kernels", "json");
  snprintf(t, sizeof t, "%s.part", p);
  FILE *f = fopen(t, "w");
  if (!f) return;
  kc.census_t = kc_now_s();
  fprintf(f, "{\"final\":%s,\"mode\":\"%s\",\"counting\":", final ? "true" : "false", getenv("KERNCAP_MODE") ? getenv("KERNCAP_MODE") : "");
  if (kc.counting_off) kc_json_str(f, kc.counting_off);
  else fputs("true", f);
  fputs(",\"process\":", f);
  kc_proc_json(f, &kc.proc, KC_VISIBLE_VARS, NULL, NULL);
  fputs(",\"cupti\":", f);
  kc_cupti_json(f);
  fprintf(f, ",\"launches\":%llu,\"kernels\":[", (unsigned long long)kc.launches);
  int first = 1;
  for (size_t i = 0; i < kc.ckstats; i++) {
    kc_kstat_t *k = &kc.kstats[i];
    if (!k->name) continue;
    char *d = kc_demangle(k->name);
    fprintf(f, "%s\n{\"name\":", first ? "" : ",");
    kc_json_str(f, k->name);
    fprintf(f, ",\"demangled\":");
    kc_json_str(f, d);
    fprintf(f, ",\"count\":%llu,\"benchmark\":%llu,\"graph\":%llu,\"recorded\":%llu,\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"module\":\"0x%llx\"}",
            (unsigned long long)k->count, (unsigned long long)k->benchmark, (unsigned long long)k->graph, (unsigned long long)k->recorded, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
            k->block[2], (unsigned long long)k->module);
    free(d);
    first = 0;
  }
  fprintf(f, "\n]");
  kc_graphs_json(f);
  fprintf(f, "}\n");
  fclose(f);
  rename(t, p);
}

/* ---- callbacks ---- */
static int decode_launch(CUpti_CallbackId cbid, const void *params, kc_launch_t *L) {
  memset(L, 0, sizeof *L);
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      /* cuLaunchCooperativeKernel's params are cuLaunchKernel's minus `extra` */
      const cuLaunchKernel_params *p = params;
      L->api = (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz)
                   ? "cuLaunchKernel" : "cuLaunchCooperativeKernel";
      L->f = p->f;
      L->grid[0] = p->gridDimX; L->grid[1] = p->gridDimY; L->grid[2] = p->gridDimZ;
      L->block[0] = p->blockDimX; L->block[1] = p->blockDimY; L->block[2] = p->blockDimZ;
      L->shmem = p->sharedMemBytes;
      L->stream = p->hStream;
      L->kernel_params = p->kernelParams;
      L->extra = !strcmp(L->api, "cuLaunchKernel") ? p->extra : NULL;
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const cuLaunchKernelEx_params *p = params;
      const CUlaunchConfig *c = p->config;
      L->api = "cuLaunchKernelEx";
      L->f = p->f;
      L->config = c;
      L->grid[0] = c->gridDimX; L->grid[1] = c->gridDimY; L->grid[2] = c->gridDimZ;
      L->block[0] = c->blockDimX; L->block[1] = c->blockDimY; L->block[2] = c->blockDimZ;
      L->shmem = c->sharedMemBytes;
      L->stream = c->hStream;
      L->kernel_params = p->kernelParams;
      L->extra = p->extra;
      return 1;
    }
    default: return 0;
  }
}

/* Which --kernel targets match a kernel name (mangled or demangled): bit t for target t; with no
 * target, bit 0 (any kernel). Called once per name (kc_kstat_t.asked). A collective kernel (NCCL,
 * RCCL, NVSHMEM: c/kc_collective.h) matches none: it waits on its peers, so no synchronize or
 * snapshot may run around it; it is only counted (kerncap run then says why it was not captured). */
uint64_t kc_target_mask(const char *name) {
  if (kc_is_collective(name)) {
    kc_log("%s is a collective kernel: counted, never captured", name);
    return 0;
  }
  if (!kc.ntargets) return 1;
  uint64_t m = 0;
  char *d = NULL;
  for (int t = 0; t < kc.ntargets; t++) {
    if (regexec(&kc.re[t], name, 0, NULL, 0) == 0) { m |= 1ull << t; continue; }
    if (!d) d = kc_demangle(name);
    if (regexec(&kc.re[t], d, 0, NULL, 0) == 0) m |= 1ull << t;
  }
  free(d);
  return m;
}
int kc_name_matches(const char *name) { return kc_target_mask(name) != 0; }

/* Count a matching launch toward --dispatch and say which target it is the capture of (-1: none).
 * One target: its Nth matching launch (with KERNCAP_LAUNCH_COUNT=K, the Nth to the N+K-1th). Several:
 * each target's Nth. capture_all: each kernel's Nth. */
static int pick_target(kc_kstat_t *k) {
  if (kc.capture_all) {
    uint64_t n = k->own++;
    if (n != (uint64_t)kc.dispatch || k->captured || kc.ncaptures >= kc.max_captures) return -1;
    k->captured = 1;
    return 0;
  }
  int pick = -1;
  for (int t = 0; t < (kc.ntargets ? kc.ntargets : 1); t++) {
    if (!(k->mask >> t & 1)) continue;
    long m = kc.tmatches[t]++;
    if (m >= kc.dispatch && m < kc.dispatch + kc.launch_count && !kc.tdone[t] && pick < 0) pick = t;
  }
  return pick;
}

static void on_launch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  kc_launch_t L;
  if (!decode_launch(cbid, cb->functionParams, &L)) return;
  const char *name = cb->symbolName ? cb->symbolName : "(unknown)";
  if (cb->callbackSite == CUPTI_API_EXIT) {
    /* a lazily loaded module came in during this launch: it is the launched function's */
    if (tl_loaded && kc.capture && !kc.done) kc_module_bind(tl_loaded_id, kc_module_of(L.f));
    tl_loaded = 0;
    if (kc.cap.L.api && !kc.done && kc.base.enabled && kc.cap.launch_index + 1 == kc.launches && !strcmp(name, kc.cap.name)) kc_capture_exit();
    return;
  }
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (kc.cu.cuStreamIsCapturing(L.stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) {
    /* recorded into a graph by stream capture: not an execution (the graph launch counts it) */
    kc_kstat_t *kr = kc_kstat_get(name);
    if (kr) kr->recorded++;
    return;
  }
  uint64_t idx = kc.launches++;
  kc_kstat_t *k = kc_kstat_get(name);
  tl_loaded = 0;
  int bench = kc.ignore_launches && !kc.count_benchmarks;
  if (k) {
    k->count++;
    if (bench) k->benchmark++;
    memcpy(k->grid, L.grid, sizeof L.grid);
    memcpy(k->block, L.block, sizeof L.block);
    /* Once per kernel name, not per launch: this may load the function's module lazily (firing
     * MODULE_LOADED), which binds the image to its CUmodule. A module that loads later, inside a
     * launch, is bound at that launch's exit. */
    if (!k->module) {
      CUmodule mod = kc_module_of(L.f);
      k->module = (uint64_t)(uintptr_t)mod;
      if (tl_loaded && kc.capture && !kc.done) kc_module_bind(tl_loaded_id, mod);
    }
  }
  tl_loaded = 0;
  if (kc_now_s() - kc.census_t >= 1.0) kc_write_census(0); /* survives a process that ends with _exit */
  if (!kc.capture || kc.done || !kc.base.enabled || kc.cap.L.api || bench) return;
  /* the regexes (and the demangling they may need) run once per name, not once per launch */
  if (!k) return;
  if (!k->asked) { k->mask = kc_target_mask(name); k->asked = 1; }
  if (!k->mask) return;
  if (kc.graphs.target_in_graph && !kc_several()) return; /* --dispatch already fell inside a graph launch */
  long m = kc.capture_all ? (long)k->own : kc.tmatches[0];
  int target = pick_target(k);
  if (target < 0) return;
  if (!kc.claimed) { /* ---- exactly one process of the job captures (c/kc_process.c) ---- */
    int won = kc_claim(&kc.proc);
    if (won < 0) { KC_FAIL("cannot create the capture claim %s/claim: %s", kc.base.out, strerror(errno)); return; }
    if (!won) {
      kc_log("pid %d: another process claimed the capture first; this one only counted", (int)getpid());
      kc.capture = 0;
      kc.counting_off = "another process claimed the capture; CUPTI handed back";
      kc_cupti_done(kc.counting_off, kc.launches, 1);
      kc_write_census(0);
      return;
    }
    kc.claimed = 1;
  }
  if (kc_open_capture_folder()) return;
  kc.cap.L = L;
  kc.cap.target = target;
  kc.cap.launch_index = idx;
  kc.cap.match_index = kc.ntargets > 1 && !kc.capture_all ? kc.dispatch : m;
  snprintf(kc.cap.name, sizeof kc.cap.name, "%s", name);
  kc_capture_enter();
}

static void on_memory(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  const void *p = cb->functionParams;
  int exit_ok = cb->callbackSite == CUPTI_API_EXIT && cb->functionReturnValue &&
                *(CUresult *)cb->functionReturnValue == CUDA_SUCCESS;
  if (!exit_ok) return;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const cuMemAlloc_v2_params *a = p;
      region_add(*a->dptr, a->bytesize, "device");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const cuMemAllocPitch_v2_params *a = p;
      region_add(*a->dptr, (uint64_t)*a->pPitch * a->Height, "pitched");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const cuMemAllocManaged_params *a = p;
      region_add(*a->dptr, a->bytesize, "managed");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const cuMemAllocAsync_params *a = p;
      region_add(*a->dptr, a->bytesize, "async");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const cuMemAllocFromPoolAsync_params *a = p;
      region_add(*a->dptr, a->bytesize, "async");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2: {
      const cuMemHostAlloc_params *a = p;
      if (a->Flags & CU_MEMHOSTALLOC_DEVICEMAP) region_add((uint64_t)(uintptr_t)*a->pp, a->bytesize, "host-mapped");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
      const cuMemHostRegister_v2_params *a = p;
      if (a->Flags & CU_MEMHOSTREGISTER_DEVICEMAP) region_add((uint64_t)(uintptr_t)a->p, a->bytesize, "host-mapped");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const cuMemMap_params *a = p;
      region_add(a->ptr, a->size, "vmm");
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const cuMemUnmap_params *a = p;
      region_remove(a->ptr, a->size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
      const cuMemFree_v2_params *a = p;
      region_remove(a->dptr, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      const cuMemFreeAsync_params *a = p;
      region_remove(a->dptr, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
      const cuMemFreeHost_params *a = p;
      region_remove((uint64_t)(uintptr_t)a->p, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister: {
      const cuMemHostUnregister_params *a = p;
      region_remove((uint64_t)(uintptr_t)a->p, 0);
      break;
    }
    default: break;
  }
}

static void on_module_loaded(const CUpti_ResourceData *rd) {
  const CUpti_ModuleResourceData *md = rd->resourceDescriptor;
  if (!md || kc.own_load) return;
  if (KC_VEC_PUSH(kc.modules, (kc_module_t){md->moduleId, md->cubinSize, NULL, NULL})) { KC_FAIL("out of host memory for the module table"); return; }
  kc_module_t *m = &kc.modules.v[kc.modules.n - 1];
  tl_loaded_id = md->moduleId;
  tl_loaded = 1;
  /* the image is only valid during the callback: keep a copy while a capture may still come */
  if (kc.capture && !kc.done && md->pCubin && md->cubinSize) {
    m->bytes = malloc(md->cubinSize);
    if (m->bytes) memcpy(m->bytes, md->pCubin, md->cubinSize);
  }
}

/* Explicit module loads: bind the CUmodule they return to the image just seen. */
static void on_module_api(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->callbackSite == CUPTI_API_ENTER) { tl_loaded = 0; return; }
  if (!tl_loaded || !cb->functionReturnValue || *(CUresult *)cb->functionReturnValue != CUDA_SUCCESS) return;
  CUmodule *out = NULL;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad: out = ((const cuModuleLoad_params *)cb->functionParams)->module; break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData: out = ((const cuModuleLoadData_params *)cb->functionParams)->module; break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx: out = ((const cuModuleLoadDataEx_params *)cb->functionParams)->module; break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary: out = ((const cuModuleLoadFatBinary_params *)cb->functionParams)->module; break;
    default: return;
  }
  if (out) kc_module_bind(tl_loaded_id, *out);
  tl_loaded = 0;
}

/* Every driver API callback the library enables, with its handler: one list for the subscription
 * (setup) and the dispatch (callback). */
#define KC_DRIVER_CALLBACKS(X)                                                                             \
  X(cuLaunchKernel, on_launch) X(cuLaunchKernel_ptsz, on_launch) X(cuLaunchKernelEx, on_launch)            \
  X(cuLaunchKernelEx_ptsz, on_launch) X(cuLaunchCooperativeKernel, on_launch)                              \
  X(cuLaunchCooperativeKernel_ptsz, on_launch)                                                             \
  X(cuMemAlloc_v2, on_memory) X(cuMemAllocPitch_v2, on_memory) X(cuMemAllocManaged, on_memory)             \
  X(cuMemAllocAsync, on_memory) X(cuMemAllocAsync_ptsz, on_memory) X(cuMemAllocFromPoolAsync, on_memory)   \
  X(cuMemAllocFromPoolAsync_ptsz, on_memory) X(cuMemHostAlloc, on_memory) X(cuMemHostAlloc_v2, on_memory) \
  X(cuMemHostRegister, on_memory) X(cuMemHostRegister_v2, on_memory) X(cuMemMap, on_memory)               \
  X(cuMemUnmap, on_memory) X(cuMemFree_v2, on_memory) X(cuMemFreeAsync, on_memory)                         \
  X(cuMemFreeAsync_ptsz, on_memory) X(cuMemFreeHost, on_memory) X(cuMemHostUnregister, on_memory)          \
  X(cuModuleLoad, on_module_api) X(cuModuleLoadData, on_module_api) X(cuModuleLoadDataEx, on_module_api)   \
  X(cuModuleLoadFatBinary, on_module_api)                                                                  \
  X(cuGraphLaunch, kc_on_graph) X(cuGraphLaunch_ptsz, kc_on_graph) X(cuGraphInstantiate, kc_on_graph)               \
  X(cuGraphInstantiate_v2, kc_on_graph) X(cuGraphInstantiateWithFlags, kc_on_graph)                              \
  X(cuGraphInstantiateWithParams, kc_on_graph) X(cuGraphInstantiateWithParams_ptsz, kc_on_graph)                 \
  X(cuGraphExecKernelNodeSetParams_v2, kc_on_graph_node_update) X(cuGraphExecKernelNodeSetParams, kc_on_graph_node_update) \
  X(cuGraphExecNodeSetParams, kc_on_graph_node_update) X(cuGraphExecMemcpyNodeSetParams, kc_on_graph_node_update)           \
  X(cuGraphExecMemsetNodeSetParams, kc_on_graph_node_update) X(cuGraphExecChildGraphNodeSetParams, kc_on_graph_node_update) \
  X(cuGraphExecUpdate, kc_on_graph_node_update) X(cuGraphExecUpdate_v2, kc_on_graph_node_update)                           \
  X(cuGraphNodeSetEnabled, kc_on_graph_node_update)

static void CUPTIAPI callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  (void)ud;
  if (!kc.base.enabled || kc.cupti.released) return;
  if (dom == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    /* also while in_tool: our cuFuncGetModule may be what loads a lazy module */
    pthread_mutex_lock(&kc.mu);
    on_module_loaded(data);
    pthread_mutex_unlock(&kc.mu);
    return;
  }
  if (in_tool) return;
  in_tool = 1;
  pthread_mutex_lock(&kc.mu);
  if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
    const CUpti_CallbackData *cb = data;
    switch (cbid) {
#define KC_CASE(name, handler) case CUPTI_DRIVER_TRACE_CBID_##name: handler(cbid, cb); break;
      KC_DRIVER_CALLBACKS(KC_CASE)
#undef KC_CASE
      default: break;
    }
  }
  pthread_mutex_unlock(&kc.mu);
  in_tool = 0;
}

/* ---- set-up ---- */
/* After an internal failure nothing more is to be seen: let a profiler in the application have CUPTI. */
static void on_fail(void) {
  if (kc.capture) kc_cupti_done("capture failed", kc.launches, 1);
}

static void *open_lib(const char *const *names, char *tried, size_t n) {
  for (; *names; names++) {
    if (!**names) continue;
    void *h = dlopen(*names, RTLD_NOW | RTLD_GLOBAL);
    if (h) return h;
    size_t l = strlen(tried);
    snprintf(tried + l, n - l, "%s%s", l ? ", " : "", *names);
  }
  return NULL;
}

static void at_exit(void) {
  if (!kc.base.out[0]) return;
  pthread_mutex_lock(&kc.mu);
  kc_write_census(1);
  pthread_mutex_unlock(&kc.mu);
}

static int setup(void) {
  const char *out = getenv("KERNCAP_OUT");
  if (!out || !*out) return -1; /* not started by kerncap: stay inert */
  snprintf(kc.base.out, sizeof kc.base.out, "%s", out);
  kc.base.on_fail = on_fail;
  kc_log_init(&kc.base);
  kc.t0 = kc_now_s();
  { /* ---- processes of a job (c/kc_process.c): number this one, apply --rank/--process ---- */
    char perr[256] = "";
    int prc = kc_proc_init(&kc.proc, kc.base.out, perr, sizeof perr);
    if (kc.proc.number < 0) fprintf(stderr, "[kerncap] cannot number this process in %s/processes: %s\n", kc.base.out, strerror(errno));
    atexit(at_exit); /* every process leaves its census, even when capture is off */
    if (prc) { KC_FAIL("%s", perr); return -1; }
  }
  kc.base.verbose = getenv("KERNCAP_LOG") && !strcmp(getenv("KERNCAP_LOG"), "1");
  const char *mode = getenv("KERNCAP_MODE");
  kc.capture = mode && !strcmp(mode, "capture");
  kc.exit_after = getenv("KERNCAP_EXIT_AFTER_CAPTURE") && !strcmp(getenv("KERNCAP_EXIT_AFTER_CAPTURE"), "1");
  kc.count_benchmarks = getenv("KERNCAP_COUNT_BENCHMARKS") && !strcmp(getenv("KERNCAP_COUNT_BENCHMARKS"), "1");
  const char *d = getenv("KERNCAP_DISPATCH");
  kc.dispatch = d ? strtol(d, NULL, 10) : 0;
  const char *re = getenv("KERNCAP_KERNEL");
  if (re && *re) { /* one regex per line */
    char *copy = strdup(re), *save = NULL;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
      if (kc.ntargets == KC_MAX_TARGETS) { KC_FAIL("more than %d --kernel targets", KC_MAX_TARGETS); free(copy); return -1; }
      if (regcomp(&kc.re[kc.ntargets], line, REG_EXTENDED | REG_NOSUB)) { KC_FAIL("invalid --kernel regex: %s", line); free(copy); return -1; }
      kc.ntargets++;
    }
    free(copy);
  }
  kc.capture_all = getenv("KERNCAP_CAPTURE_ALL") && !strcmp(getenv("KERNCAP_CAPTURE_ALL"), "1");
  const char *mc = getenv("KERNCAP_MAX_CAPTURES");
  kc.max_captures = mc && atoi(mc) > 0 ? atoi(mc) : 64;
  const char *lc = getenv("KERNCAP_LAUNCH_COUNT");
  kc.launch_count = lc && strtol(lc, NULL, 10) > 0 ? strtol(lc, NULL, 10) : 1;
  kc.base.enabled = 1;
  if (kc.capture && !kc.proc.admitted) {
    /* not selected by --rank/--process: hold no CUPTI at all (the application's profiler keeps
     * working) and leave a census that says why this process was not counted */
    kc.counting_off = kc.proc.why;
    kc_log("pid %d not selected (%s): not subscribing to CUPTI", kc.proc.pid, kc.proc.why);
    kc_write_census(0);
    return 0;
  }

  char tried[4096] = "";
  const char *cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
  void *cu = open_lib(cuda_names, tried, sizeof tried);
  if (!cu) { KC_FAIL("libcuda not loadable (tried %s)", tried); return -1; }
#define LOAD_CU(name) kc.cu.name = (__typeof__(kc.cu.name))dlsym(cu, #name);
  KC_CU_FUNCS(LOAD_CU)
  if (!kc.cu.cuCtxSynchronize || !kc.cu.cuMemcpyDtoH_v2 || !kc.cu.cuFuncGetAttribute) { KC_FAIL("libcuda lacks required entry points"); return -1; }

  tried[0] = 0;
  const char *env_cupti = getenv("KERNCAP_CUPTI_PATH");
  const char *cupti_names[] = {env_cupti ? env_cupti : "", "libcupti.so", "libcupti.so.13", "libcupti.so.12", NULL};
  void *cp = open_lib(cupti_names, tried, sizeof tried);
  if (!cp) { KC_FAIL("libcupti not found (tried %s); set KERNCAP_CUPTI_PATH", tried); return -1; }
#define LOAD_CUPTI(name) kc.cupti_api.name = (__typeof__(kc.cupti_api.name))dlsym(cp, #name); \
  if (!kc.cupti_api.name) { KC_FAIL("libcupti lacks %s", #name); return -1; }
  KC_CUPTI_FUNCS(LOAD_CUPTI)

  const char *cxx_names[] = {"libstdc++.so.6", NULL};
  tried[0] = 0;
  void *cxx = open_lib(cxx_names, tried, sizeof tried);
  if (cxx) kc.demangle = (__typeof__(kc.demangle))dlsym(cxx, "__cxa_demangle");

  /* cuptiSubscribe_v2 when libcupti has it: a refusal then names the tool holding CUPTI (c/kc_cupti.c) */
  CUptiResult r = kc_cupti_subscribe(cp, kc.cupti_api.cuptiSubscribe, kc.cupti_api.cuptiUnsubscribe, &kc.sub, (CUpti_CallbackFunc)callback);
  if (r != CUPTI_SUCCESS) {
    const char *s = "";
    kc.cupti_api.cuptiGetResultString(r, &s);
    char msg[1024];
    kc_cupti_busy_message(msg, sizeof msg, r, s);
    KC_FAIL("%s", msg);
    return -1;
  }
  static const CUpti_CallbackId driver_cbids[] = {
#define KC_ID(name, handler) CUPTI_DRIVER_TRACE_CBID_##name,
      KC_DRIVER_CALLBACKS(KC_ID)
#undef KC_ID
  };
  for (size_t i = 0; i < sizeof driver_cbids / sizeof *driver_cbids; i++)
    kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_cbids[i]);
  kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  kc_log("injected: mode=%s kernel=%s dispatch=%ld out=%s", kc.capture ? "capture" : "list", re ? re : "(any)", kc.dispatch,
        kc.base.out);
  return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init_once(void) {
  in_tool = 1;
  setup();
  in_tool = 0;
}

/* Entry point named by CUDA's injection contract (CUDA_INJECTION64_PATH). Returns 1 (success)
 * even when capture is disabled, so the application always runs on. */
KC_EXPORT int InitializeInjection(void) {
  pthread_once(&once, init_once);
  return 1;
}
