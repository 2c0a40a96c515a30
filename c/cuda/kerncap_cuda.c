/*
 * kerncap_cuda.c — the CUDA capture library, injected into the application: set-up, the CUPTI
 * callback and its dispatch, the allocation, module and kernel tables, the launch census.
 *
 * Exports: InitializeInjection() (called once by libcuda at cuInit when CUDA_INJECTION64_PATH
 *          names this file), kerncap_set_ignore_launches(int) (for frontend shims: autotuner
 *          benchmark launches), the cuptiSubscribe / cuptiSubscribe_v2 wrappers of
 *          c/cuda/kc_cupti.c, and InitializeInjectionNvtx2 (NVTX_INJECTION64_PATH: c/cuda/kc_nvtx.c).
 *          Nothing else is visible (-fvisibility=hidden; test/cpu/c-exports.test.ts).
 * Reads:   KERNCAP_OUT, KERNCAP_MODE, KERNCAP_KERNEL, KERNCAP_DISPATCH, KERNCAP_CAPTURE_ALL,
 *          KERNCAP_MAX_CAPTURES, KERNCAP_LAUNCH_COUNT, KERNCAP_COUNT_BENCHMARKS, KERNCAP_EXIT_AFTER_CAPTURE,
 *          KERNCAP_CUPTI_PATH, KERNCAP_LOG; KERNCAP_NVTX_INCLUDE, KERNCAP_NVTX_EXCLUDE (c/cuda/kc_nvtx.c);
 *          KERNCAP_RANK, KERNCAP_PROCESS (c/common/kc_process.c);
 *          KERNCAP_CHUNK_BYTES (c/common/kc_raw.c). docs/raw-capture.md says what each means.
 * Writes:  the raw capture into KERNCAP_OUT (docs/raw-capture.md): kernel/, memory/ (c/cuda/kc_snapshot.c),
 *          a progress file, raw.json last (c/cuda/kc_capture.c, c/common/kc_raw.c). In a job of several
 *          processes only the one that claims the capture writes it (c/common/kc_process.c); every
 *          process writes its own census kernels.<pid>.json and error.<pid>.txt (c/common/kc_log.c).
 * Units:   this file; kc_graphs.c (CUDA graph launches and node capture), kc_capture.c (the
 *          captured launch), kc_snapshot.c (memory), kc_out.c (the files written, the census),
 *          kc_cupti.c (CUPTI sharing), kc_nvtx.c and kc_nvtx_filter.c (NVTX range selection); the
 *          headers kc_symbols.h (a module's data symbols) and kc_fatbin.h (the app's fatbin around a
 *          loaded cubin, kept for its PTX); over c/common/ (shared with the HSA library: the settings,
 *          the census, the matcher, the process of a job, the raw writer, the log). All state in
 *          `kc` (c/cuda/kc_state.h). Three X-macro lists of driver callbacks (c/cuda/kc_callbacks.h: KC_LAUNCH_CALLBACKS,
 *          KC_DRIVER_CALLBACKS, and KC_CAPTURE_CALLBACKS that only `run` enables) serve both the
 *          subscription and the dispatch.
 * Threads: CUPTI calls the callback on whichever application thread made the CUDA call; kc.mu
 *          guards the tables, a thread-local flag ignores the callbacks that our own CUDA calls
 *          fire, and each launch is captured at most once. A launch that cannot be captured
 *          (`list`, or a kernel that no --kernel matches) is counted without kc.mu: its census
 *          entry comes from a per-thread cache by function handle, its counts are atomics
 *          (on_launch says how).
 * Failure: never exit/abort on an error: KC_FAIL logs it to error.<pid>.txt, disables capture,
 *          returns. The application's own calls are never altered.
 */
#define _GNU_SOURCE
#include "kc_state.h"
#include "kc_collective.h"
#include "kc_json.h"
#include "kc_fatbin.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KC_EXPORT __attribute__((visibility("default")))

kc_state_t kc = {.mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .cupti = {.mu = PTHREAD_MUTEX_INITIALIZER}, .cap = {.graph_id = -1}};
const char *const KC_VISIBLE_VARS[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", NULL};

/* Exported for frontend shims (ctypes): on != 0 while the launches that follow are benchmarks of
 * the application's runtime (e.g. Triton's autotuner), 0 when the application's own launches
 * resume. Nested calls are the caller's business (the shim keeps a depth counter). */
KC_EXPORT void kerncap_set_ignore_launches(int on) { kc.ignore_launches = on != 0; }

#define KC_PEEK(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* ---- the launch path's caches ----
 * A launch names its kernel by a function handle (a CUfunction, or a CUkernel cast to one) and by
 * CUPTI's symbolName. Hashing and comparing the mangled name (often hundreds of bytes) at every
 * launch was most of the callback's cost; so each thread keeps a direct-mapped cache from handle
 * to census entry (entries never move: c/common/kc_census.h). A handle can name another kernel
 * once its module is unloaded or its context destroyed: those bump fn_gen, which empties every
 * thread's cache at once. */
#define KC_FN_CACHE 256
typedef struct { const void *f; kc_kstat_t *k; uint32_t gen; } kc_fn_slot_t;
static uint32_t fn_gen = 1; /* 0 is the empty slot's */
static pthread_key_t fn_key; /* frees a thread's cache when the thread ends */
static int fn_key_ok;

/* Per-thread state, in the static TLS block (initial-exec: read without a __tls_get_addr call on
 * the launch path; kerncap preloads the library, so the block is reserved at start-up). */
typedef struct {
  int in_tool;        /* our own CUDA calls fire callbacks too */
  /* Module id of the last MODULE_LOADED callback on this thread: a module loads inside the API
   * call that needs it (cuModuleLoad*, or lazily inside a launch or cuFuncGetModule), so the id
   * seen during a call belongs to the CUmodule that call returns or touches. */
  int loaded;
  uint32_t loaded_id;
  uint64_t image;     /* the image handed to the module/library load this thread is inside, 0 outside one */
  int capturing;      /* this thread is inside the launch being captured: its API exit completes the capture */
  kc_fn_slot_t *fn;   /* KC_FN_CACHE slots, made at this thread's first launch */
} kc_tls_t;
static __thread kc_tls_t tl __attribute__((tls_model("initial-exec")));

static inline kc_fn_slot_t *fn_slot(const void *f) {
  if (!tl.fn) {
    tl.fn = calloc(KC_FN_CACHE, sizeof *tl.fn);
    if (!tl.fn) return NULL;
    if (fn_key_ok) pthread_setspecific(fn_key, tl.fn);
  }
  return &tl.fn[((uintptr_t)f * 0x9E3779B97F4A7C15ull) >> 56 & (KC_FN_CACHE - 1)];
}
static void fn_cache_flush(void) { __atomic_fetch_add(&fn_gen, 1, __ATOMIC_ACQ_REL); }
/* The thread ends: its cache goes (and a launch from a later destructor on it makes a new one). */
static void fn_cache_free(void *p) {
  if (tl.fn == p) tl.fn = NULL;
  free(p);
}

/* Stream captures open in the process (successful cuStreamBeginCapture* minus the captures their
 * cuStreamEndCapture ended). A launch recorded into a graph is not an execution; while no capture
 * is open no launch can be one, so cuStreamIsCapturing (a driver call) is asked only while this is
 * non-zero. It can only be too high (an end that failed for another reason leaves it up), never
 * too low. */
static int open_stream_captures;

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

/* ---- callbacks ---- */
/* Every field of *L is set (no memset: this runs at every launch). */
static int decode_launch(CUpti_CallbackId cbid, const void *params, kc_launch_t *L) {
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
      L->extra = L->api[8] == 'K' ? p->extra : NULL; /* "cuLaunchKernel", not "cuLaunchCooperativeKernel" */
      L->config = NULL;
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
    default:
      memset(L, 0, sizeof *L);
      return 0;
  }
}

/* The census entry of a launch's kernel: from this thread's cache by function handle (launch_entry,
 * inlined), else found (or made) by name under kc.mu and cached (here). NULL when the host is out
 * of memory. */
static __attribute__((noinline)) kc_kstat_t *launch_entry_slow(CUfunction f, const char *name, kc_fn_slot_t *e, uint32_t gen) {
  pthread_mutex_lock(&kc.mu);
  kc_kstat_t *k = kc_census_get(&kc.census, name);
  pthread_mutex_unlock(&kc.mu);
  if (e && k) *e = (kc_fn_slot_t){f, k, gen};
  return k;
}
static inline kc_kstat_t *launch_entry(CUfunction f, const char *name) {
  uint32_t gen = __atomic_load_n(&fn_gen, __ATOMIC_ACQUIRE);
  kc_fn_slot_t *e = f ? fn_slot(f) : NULL; /* NULL: out of memory, found by name every time */
  if (e && e->f == f && e->gen == gen) return e->k; /* the launch path: inlined */
  return launch_entry_slow(f, name, e, gen);
}

/* The last launch's shape, written only when it changed (relaxed atomics: the census writer
 * reads them under kc.mu while other threads launch). */
static inline void note_shape(kc_kstat_t *k, const kc_launch_t *L) {
  for (int i = 0; i < 3; i++) {
    if (KC_PEEK(k->grid[i]) != L->grid[i]) __atomic_store_n(&k->grid[i], L->grid[i], __ATOMIC_RELAXED);
    if (KC_PEEK(k->block[i]) != L->block[i]) __atomic_store_n(&k->block[i], L->block[i], __ATOMIC_RELAXED);
  }
}

/* Under kc.mu, a launch of a kernel some --kernel matches: count it toward --dispatch
 * (c/common/kc_match.c) and, when it is the one, claim the job's capture and start it. */
static void capture_if_picked(kc_kstat_t *k, const kc_launch_t *L, const char *name, uint64_t idx) {
  if (!kc.capture || kc.done || !kc.base.enabled || kc.cap.L.api) return;
  if (kc.graphs.target_in_graph && !kc_several()) return; /* --dispatch already fell inside a graph launch */
  long m;
  int target = kc_match_pick(&kc.match, k, &m);
  if (target < 0) return;
  if (!__atomic_load_n(&open_stream_captures, __ATOMIC_ACQUIRE)) {
    /* no capture began through the calls followed (on_stream_capture); a synchronize inside one
     * begun otherwise would break the application's graph, so ask the driver before capturing */
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (kc.cu.cuStreamIsCapturing(L->stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) {
      kc_log("launch %llu of %s is recorded by a stream capture kerncap did not see begin: not captured", (unsigned long long)idx, name);
      return;
    }
  }
  if (!kc.claimed) { /* ---- exactly one process of the job captures (c/common/kc_process.c) ---- */
    int won = kc_claim(&kc.proc);
    if (won < 0) { KC_FAIL("cannot create the capture claim %s/claim: %s", kc.base.out, strerror(errno)); return; }
    if (!won) {
      kc_log("pid %d: another process claimed the capture first; this one only counted", (int)getpid());
      kc.capture = 0;
      kc.counting_off = "another process claimed the capture; CUPTI handed back";
      kc_cupti_done(kc.counting_off, kc_census_read(&kc.census.launches), 1);
      kc_write_census(0);
      return;
    }
    kc.claimed = 1;
  }
  if (kc_open_capture_folder()) return;
  kc.cap.L = *L;
  kc.cap.target = target;
  kc.cap.launch_index = idx;
  kc.cap.match_index = m;
  snprintf(kc.cap.name, sizeof kc.cap.name, "%s", name);
  kc_capture_enter();
  tl.capturing = 1; /* this launch's API exit completes the capture (on_launch_exit) */
}

/* Stream capture begins and ends (at API exit): open_stream_captures. */
static void on_stream_capture(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue) return;
  CUresult r = *(CUresult *)cb->functionReturnValue;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz: {
      /* an invalidated capture is ended too; any other failure leaves it open (or was no capture) */
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) return;
      int n = __atomic_load_n(&open_stream_captures, __ATOMIC_ACQUIRE);
      while (n > 0 && !__atomic_compare_exchange_n(&open_stream_captures, &n, n - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {}
      return;
    }
    default: /* every begin */
      if (r == CUDA_SUCCESS) __atomic_fetch_add(&open_stream_captures, 1, __ATOMIC_ACQ_REL);
  }
}

/* A module unload or a context's end: function handles may name other kernels from now on. */
static void on_unload(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  (void)cbid;
  (void)cb;
  fn_cache_flush(); /* at entry and again at exit: a launch racing the unload may have cached the old handle */
}

/* Launch exit: a module loaded lazily during the launch is the launched function's; the exit of
 * the launch being captured completes its capture. Without kc.mu unless one of the two. */
static void on_launch_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (!tl.loaded && !tl.capturing) return;
  kc_launch_t L;
  decode_launch(cbid, cb->functionParams, &L);
  pthread_mutex_lock(&kc.mu);
  if (tl.loaded && kc.capture && !kc.done) kc_module_bind(tl.loaded_id, kc_module_of(L.f));
  tl.loaded = 0;
  if (tl.capturing) {
    tl.capturing = 0;
    if (kc.cap.L.api && !kc.done && kc.base.enabled) kc_capture_exit();
  }
  pthread_mutex_unlock(&kc.mu);
}

/* Launch entry: count the launch; capture it when it is the one (or one of the ones) asked for.
 * Called without kc.mu. The counting path (every launch in `list`, every launch of a kernel no
 * --kernel matches in `run`) takes no lock once its kernel is known to this thread: census entry
 * from the handle cache, counts as atomics, the shape stored only when it changed, the coarse clock
 * read every 32nd launch for the periodic census. Everything else runs under kc.mu as before. */
static void on_launch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->callbackSite == CUPTI_API_EXIT) { on_launch_exit(cbid, cb); return; }
  kc_launch_t L;
  if (!decode_launch(cbid, cb->functionParams, &L)) return;
  const char *name = cb->symbolName ? cb->symbolName : "(unknown)";
  tl.loaded = 0; /* from here on, a module that loads belongs to this launch's function */
  if (__atomic_load_n(&open_stream_captures, __ATOMIC_ACQUIRE) > 0) {
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (kc.cu.cuStreamIsCapturing(L.stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) {
      /* recorded into a graph by stream capture: not an execution (the graph launch counts it) */
      kc_kstat_t *kr = launch_entry(L.f, name);
      if (kr) kc_census_add(&kr->recorded, 1);
      return;
    }
  }
  /* --nvtx-include/--nvtx-exclude: a launch outside the ranges asked for is neither counted nor
   * captured (ncu's --launch-skip counts only the launches its filters keep) */
  if (!kc_nvtx_launch_passes()) return;
  kc_kstat_t *k = launch_entry(L.f, name);
  uint64_t idx = __atomic_fetch_add(&kc.census.launches, 1, __ATOMIC_RELAXED);
  int bench = kc.ignore_launches && !kc.set.count_benchmarks;
  if (k) {
    kc_census_add(&k->count, 1);
    kc_nvtx_note_launch(k->name); /* list --print-summary per-nvtx (nothing otherwise) */
    if (bench) kc_census_add(&k->benchmark, 1);
    note_shape(k, &L);
    /* Once per kernel name, not per launch: this may load the function's module lazily (firing
     * MODULE_LOADED), which binds the image to its CUmodule. A module that loads later, inside a
     * launch, is bound at that launch's exit. While the driver names no module, asked again at
     * the kernel's 2nd, 4th, 8th… launch only. */
    uint64_t c = KC_PEEK(k->count);
    if (!KC_PEEK(k->module) && !(c & (c - 1))) {
      pthread_mutex_lock(&kc.mu);
      if (!k->module) {
        CUmodule mod = kc_module_of(L.f);
        __atomic_store_n(&k->module, (int64_t)(uintptr_t)mod, __ATOMIC_RELAXED);
        if (tl.loaded && kc.capture && !kc.done) kc_module_bind(tl.loaded_id, mod);
      }
      pthread_mutex_unlock(&kc.mu);
    }
  }
  tl.loaded = 0;
  if (!(idx & 31)) { /* survives a process that ends with _exit */
    double last, now = kc_coarse_s();
    __atomic_load(&kc.census_t, &last, __ATOMIC_RELAXED);
    if (now - last >= 1.0) {
      pthread_mutex_lock(&kc.mu);
      if (now - kc.census_t >= 1.0) kc_write_census(0);
      pthread_mutex_unlock(&kc.mu);
    }
  }
  if (!KC_PEEK(kc.capture) || KC_PEEK(kc.done) || !KC_PEEK(kc.base.enabled) || bench || !k) return;
  /* the regexes (and the demangling they may need) run once per name, not once per launch */
  if (!__atomic_load_n(&k->asked, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&kc.mu);
    kc_match_mask(&kc.match, k);
    pthread_mutex_unlock(&kc.mu);
  }
  if (!k->mask) return;
  pthread_mutex_lock(&kc.mu);
  capture_if_picked(k, &L, name, idx);
  pthread_mutex_unlock(&kc.mu);
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
  if (KC_VEC_PUSH(kc.modules, (kc_module_t){md->moduleId, md->cubinSize, NULL, NULL, tl.image})) { KC_FAIL("out of host memory for the module table"); return; }
  kc_module_t *m = &kc.modules.v[kc.modules.n - 1];
  tl.loaded_id = md->moduleId;
  tl.loaded = 1;
  /* the image is only valid during the callback: keep a copy while a capture may still come */
  if (kc.capture && !kc.done && md->pCubin && md->cubinSize) {
    m->bytes = malloc(md->cubinSize);
    if (m->bytes) memcpy(m->bytes, md->pCubin, md->cubinSize);
  }
}

/* The image a module or library load hands the driver: at the call's entry, a fatbin holding PTX
 * is recorded by address (kc_fatbin.h: the capture keeps it whole when it holds the kernel's cubin). */
static uint64_t load_image(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData: return (uint64_t)(uintptr_t)((const cuModuleLoadData_params *)cb->functionParams)->image;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx: return (uint64_t)(uintptr_t)((const cuModuleLoadDataEx_params *)cb->functionParams)->image;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary: return (uint64_t)(uintptr_t)((const cuModuleLoadFatBinary_params *)cb->functionParams)->fatCubin;
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData: return (uint64_t)(uintptr_t)((const cuLibraryLoadData_params *)cb->functionParams)->code;
    default: return 0;
  }
}

static int note_ptx_image(uint64_t image) {
  uint64_t addr = 0;
  int has_ptx = 0;
  uint64_t size = kc_fatbin_at(image, &addr, &has_ptx);
  if (!size || !has_ptx) return 0;
  for (size_t i = 0; i < kc.ptx_images.n; i++)
    if (kc.ptx_images.v[i].addr == addr) { kc.ptx_images.v[i].size = size; return 1; }
  if (KC_VEC_PUSH(kc.ptx_images, ((kc_image_t){addr, size}))) { KC_FAIL("out of host memory for the image table"); return 0; }
  return 1;
}

/* The file a module or library load names (cuModuleLoad, cuLibraryLoadFromFile), NULL for the others. */
static const char *load_file(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuModuleLoad) return ((const cuModuleLoad_params *)cb->functionParams)->fname;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile) return ((const cuLibraryLoadFromFile_params *)cb->functionParams)->fileName;
  return NULL;
}

/* A load from a file: the file read when it is a fatbin holding PTX, and that copy recorded as the
 * image (the file may change or go before the capture). The copy lives as long as the process:
 * only fatbins with PTX loaded while a capture is pending are kept. Returns its address, or 0. */
static uint64_t note_ptx_file(const char *path) {
  int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) return 0;
  unsigned char h[16];
  struct stat st;
  unsigned char *b = NULL;
  uint64_t at = 0;
  if (!fstat(fd, &st) && st.st_size >= 16 && (uint64_t)st.st_size <= KC_FATBIN_MAX && pread(fd, h, 16, 0) == 16 && kc_rd(h, 4) == KC_FATBIN_MAGIC &&
      (b = malloc((size_t)st.st_size)) && pread(fd, b, (size_t)st.st_size, 0) == st.st_size && note_ptx_image((uint64_t)(uintptr_t)b))
    at = (uint64_t)(uintptr_t)b, b = NULL;
  free(b);
  close(fd);
  return at;
}

/* Explicit module loads: bind the CUmodule they return to the image just seen. */
static void on_module_api(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->callbackSite == CUPTI_API_ENTER) {
    tl.loaded = 0;
    tl.image = load_image(cbid, cb);
    if (kc.capture && !kc.done) {
      if (tl.image) note_ptx_image(tl.image);
      else tl.image = note_ptx_file(load_file(cbid, cb));
    }
    return;
  }
  tl.image = 0;
  if (!tl.loaded || !cb->functionReturnValue || *(CUresult *)cb->functionReturnValue != CUDA_SUCCESS) return;
  CUmodule *out = NULL;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad: out = ((const cuModuleLoad_params *)cb->functionParams)->module; break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData: out = ((const cuModuleLoadData_params *)cb->functionParams)->module; break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx: out = ((const cuModuleLoadDataEx_params *)cb->functionParams)->module; break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary: out = ((const cuModuleLoadFatBinary_params *)cb->functionParams)->module; break;
    default: return;
  }
  if (out) kc_module_bind(tl.loaded_id, *out);
  tl.loaded = 0;
}

/* The callback lists (KC_LAUNCH_CALLBACKS, KC_DRIVER_CALLBACKS, KC_CAPTURE_CALLBACKS): c/cuda/kc_callbacks.h */
#include "kc_callbacks.h"

static void CUPTIAPI callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  (void)ud;
  if (!kc.base.enabled || kc.cupti.released) return;
  if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
      /* also while tl.in_tool: our cuFuncGetModule may be what loads a lazy module */
      pthread_mutex_lock(&kc.mu);
      on_module_loaded(data);
      pthread_mutex_unlock(&kc.mu);
    } else if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING || cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
      fn_cache_flush();
    }
    return;
  }
  if (tl.in_tool || dom != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const CUpti_CallbackData *cb = data;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) { /* the runtime's launches: most callbacks, ahead of the switch */
    /* its exit has work only after a lazy module load or for the launch being captured (on_launch_exit) */
    if (cb->callbackSite == CUPTI_API_EXIT && !tl.loaded && !tl.capturing) return;
    tl.in_tool = 1;
    on_launch(cbid, cb);
    tl.in_tool = 0;
    return;
  }
  tl.in_tool = 1;
  switch (cbid) {
#define KC_CASE(name, handler) case CUPTI_DRIVER_TRACE_CBID_##name: handler(cbid, cb); break;
    KC_LAUNCH_CALLBACKS(KC_CASE)
#undef KC_CASE
    default:
      pthread_mutex_lock(&kc.mu);
      switch (cbid) {
#define KC_CASE(name, handler) case CUPTI_DRIVER_TRACE_CBID_##name: handler(cbid, cb); break;
        KC_DRIVER_CALLBACKS(KC_CASE) KC_CAPTURE_CALLBACKS(KC_CASE)
#undef KC_CASE
        default: break;
      }
      pthread_mutex_unlock(&kc.mu);
  }
  tl.in_tool = 0;
}

/* ---- set-up ---- */
/* After an internal failure nothing more is to be seen: let a profiler in the application have CUPTI. */
static void on_fail(void) {
  if (kc.capture) kc_cupti_done("capture failed", kc_census_read(&kc.census.launches), 1);
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
  { /* ---- processes of a job (c/common/kc_process.c): number this one, apply --rank/--process ---- */
    char perr[256] = "";
    int prc = kc_proc_init(&kc.proc, kc.base.out, perr, sizeof perr);
    if (kc.proc.number < 0) fprintf(stderr, "[kerncap] cannot number this process in %s/processes: %s\n", kc.base.out, strerror(errno));
    atexit(at_exit); /* every process leaves its census, even when capture is off */
    if (prc) { KC_FAIL("%s", perr); return -1; }
  }
  char serr[1200] = "";
  int src = kc_settings_read(&kc.set, serr, sizeof serr); /* c/common/kc_settings.c, as the HSA library reads them */
  kc.base.verbose = kc.set.verbose;
  kc.capture = kc.set.capture;
  kc.exit_after = kc.set.exit_after;
  kc.census.module_fmt = "0x%llx";
  kc.match = (kc_match_t){.s = &kc.set, .census = &kc.census};
  if (src) { KC_FAIL("%s", serr); return -1; }
  if (kc_nvtx_setup(serr, sizeof serr)) { KC_FAIL("%s", serr); return -1; } /* c/cuda/kc_nvtx.c (NVTX may have read it first) */
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

  kc.census.demangle = kc_find_demangler();

  /* cuptiSubscribe_v2 when libcupti has it: a refusal then names the tool holding CUPTI (c/cuda/kc_cupti.c) */
  CUptiResult r = kc_cupti_subscribe(cp, kc.cupti_api.cuptiSubscribe, kc.cupti_api.cuptiUnsubscribe, &kc.sub, (CUpti_CallbackFunc)callback);
  if (r != CUPTI_SUCCESS) {
    const char *s = "";
    kc.cupti_api.cuptiGetResultString(r, &s);
    char msg[1024];
    kc_cupti_busy_message(msg, sizeof msg, r, s);
    KC_FAIL("%s", msg);
    return -1;
  }
  /* Only what the mode needs: CUPTI runs for each API call whose callback is enabled. */
#define KC_ID(name, handler) CUPTI_DRIVER_TRACE_CBID_##name,
  static const CUpti_CallbackId counting_cbids[] = {KC_LAUNCH_CALLBACKS(KC_ID) KC_DRIVER_CALLBACKS(KC_ID)};
  static const CUpti_CallbackId capture_cbids[] = {KC_CAPTURE_CALLBACKS(KC_ID)};
#undef KC_ID
  for (size_t i = 0; i < sizeof counting_cbids / sizeof *counting_cbids; i++)
    kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_DRIVER_API, counting_cbids[i]);
  if (kc.capture) {
    for (size_t i = 0; i < sizeof capture_cbids / sizeof *capture_cbids; i++)
      kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_DRIVER_API, capture_cbids[i]);
    kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  }
  kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  kc.cupti_api.cuptiEnableCallback(1, kc.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  kc_log("injected: mode=%s kernel=%s dispatch=%ld out=%s", kc.capture ? "capture" : "list", kc.set.kernel ? kc.set.kernel : "(any)",
         kc.set.dispatch, kc.base.out);
  return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init_once(void) {
  fn_key_ok = pthread_key_create(&fn_key, fn_cache_free) == 0; /* without it a thread's handle cache outlives the thread */
  tl.in_tool = 1;
  setup();
  tl.in_tool = 0;
}

/* Entry point named by CUDA's injection contract (CUDA_INJECTION64_PATH). Returns 1 (success)
 * even when capture is disabled, so the application always runs on. */
KC_EXPORT int InitializeInjection(void) {
  pthread_once(&once, init_once);
  return 1;
}
