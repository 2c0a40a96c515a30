/* kc_state.h — the CUDA capture library's one state struct and its libcuda/libcupti pointer
 * table, shared by its units (c/cuda/kerncap_cuda.c, kc_capture.c, kc_snapshot.c, kc_graphs.c,
 * kc_cupti.c, kc_out.c) over the units it shares with the HSA library (c/common/). Everything here
 * is hidden inside the library (-fvisibility=hidden).
 *
 * The units call downwards only: kerncap_cuda.c (set-up, callback) → kc_graphs.c → kc_capture.c →
 * kc_snapshot.c → kc_out.c (the files it writes, the census) → kc_cupti.c → c/common/.
 *
 * `kc` is set up once (c/cuda/kerncap_cuda.c setup, under pthread_once); from then on every field but
 * `cupti` (its own mutex) is read and written with kc.mu held, by the application thread whose
 * CUDA call fired the callback, except the launch counters (kc.census.launches and each census
 * entry's counts: atomics, bumped by the launch path without the mutex: c/cuda/kerncap_cuda.c
 * on_launch). Per-thread flags (re-entry, the module a call loaded, the function-handle cache) are
 * thread-locals of c/cuda/kerncap_cuda.c.
 */
#ifndef KC_STATE_H
#define KC_STATE_H
#include <cuda.h>
#include <cupti.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <time.h>

#define KC_VERSION "kerncap_cuda 0.1.0"
#define KC_MAX_PARAMS 1024

#include "kc_census.h"
#include "kc_log.h"
#include "kc_match.h"
#include "kc_process.h"
#include "kc_settings.h"
#include "kc_vec.h"
#include "kc_cupti.h"
#include "kc_snapshot.h"
#include "kc_graphs.h"
#include "kc_nvtx.h"

/* ---- libcuda / libcupti entry points, resolved with dlsym at set-up (one X-macro list each) ---- */
#define KC_CU_FUNCS(X)                                                                \
  X(cuCtxSynchronize) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)       \
  X(cuMemcpyDtoH_v2) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuGetErrorString) X(cuGetErrorName)         \
  X(cuFuncGetParamInfo) X(cuKernelGetParamInfo) X(cuKernelGetFunction)              \
  X(cuFuncGetAttribute) X(cuFuncGetModule) X(cuStreamIsCapturing)                   \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDriverGetVersion)                  \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime_v2)  \
  X(cuEventDestroy_v2) X(cuMemHostGetDevicePointer_v2) X(cuModuleGetGlobal_v2)         \
  X(cuMemcpyDtoHAsync_v2) X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize) \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) X(cuLaunchKernel)       \
  X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuEventQuery) X(cuDeviceGetUuid_v2) X(cuDeviceGetPCIBusId) \
  X(cuGraphKernelNodeGetParams_v2) X(cuFuncGetName) X(cuKernelGetName) X(cuGraphGetNodes)   \
  X(cuGraphNodeGetType) X(cuGraphChildGraphNodeGetGraph) X(cuGraphClone) X(cuGraphNodeFindInClone)      \
  X(cuGraphNodeGetDependencies_v2) X(cuGraphDestroyNode) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) \
  X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGraphKernelNodeSetParams_v2) X(cuMemcpyHtoD_v2) X(cuMemsetD8_v2) \
  X(cuGraphKernelNodeGetAttribute) X(cuGraphNodeSetParams) X(cuGraphMemcpyNodeSetParams) X(cuGraphMemsetNodeSetParams) \
  X(cuGraphNodeSetEnabled) X(cuLaunchKernelEx)
#define KC_CUPTI_FUNCS(X) X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiGetResultString)
#define KC_FN_FIELD(name) __typeof__(name) *name;
typedef struct { KC_CU_FUNCS(KC_FN_FIELD) } kc_driver_t;
typedef struct { KC_CUPTI_FUNCS(KC_FN_FIELD) } kc_cupti_api_t;

/* ---- tables ---- */
typedef struct {
  uint64_t va, size; /* bytes */
  const char *kind;  /* raw.json region kind */
} kc_region_t;

typedef struct {
  uint32_t id;       /* CUPTI module id */
  size_t size;
  char *bytes;       /* the image, copied at load (capture mode only) */
  CUmodule handle;   /* learnt later (c/cuda/kerncap_cuda.c tl_loaded_id); NULL while unknown */
  uint64_t image;    /* the image the load call handed the driver (its address in the app), 0 when
                      * the module loaded outside such a call (lazily, or through the runtime) */
} kc_module_t;

/* A fatbin holding PTX that the application handed to a module or library load (c/cuda/kc_fatbin.h):
 * where it lies in the app's memory, read back only at capture. */
typedef struct {
  uint64_t addr, size;
} kc_image_t;

/* A module-scope variable (__device__/__constant__) of the captured kernel's module. */
typedef struct {
  char *name;
  uint64_t va, size;
} kc_global_t;

/* ---- the launch being captured ---- */
typedef struct {
  const char *api;
  CUfunction f;
  CUstream stream;
  unsigned grid[3], block[3], shmem;
  void **kernel_params;
  void **extra;
  const CUlaunchConfig *config; /* cuLaunchKernelEx only */
} kc_launch_t;

typedef struct {
  size_t n;
  size_t off[KC_MAX_PARAMS], size[KC_MAX_PARAMS]; /* bytes */
  const char *source;
} kc_layout_t;

typedef struct {
  kc_launch_t L;
  kc_layout_t lay;
  char *params;
  size_t params_size;
  kc_snap_t sn;
  CUevent ev0, ev1;
  double t_sync, t_capture_start;
  uint64_t launch_index;
  long match_index;
  const char *timing_method; /* how app_launch_us was measured */
  CUresult fault;            /* the captured launch faulted (kc_capture.c is_kernel_fault), else 0 */
  int graph_id;              /* >= 0: the launch was kernel node graph_node of CUDA graph graph_id */
  int target;                /* which --kernel target this capture is (several targets) */
  size_t graph_node;
  kc_module_t *mod;          /* the kernel's module image, found at launch entry */
  char name[4096];
} kc_capture_t;

typedef struct {
  kc_base_t base;   /* out, verbose, enabled: the shared log/fail path (c/common/kc_log.c) */
  pthread_mutex_t mu;
  kc_settings_t set; /* the KERNCAP_* settings (c/common/kc_settings.c) */
  kc_census_t census; /* every kernel seen, its counts (c/common/kc_census.c) */
  kc_match_t match;  /* --kernel / --dispatch (c/common/kc_match.c) */
  int capture;      /* mode capture (else list); cleared when another process claims the capture */
  volatile int done; /* the run's captures are written */
  int exit_after;   /* KERNCAP_EXIT_AFTER_CAPTURE (cleared while kerncap runs a graph node itself) */
  int own_load;     /* our own cuModuleLoadData is running (the scan kernel) */
  int claimed;                 /* this process holds the job's capture claim */
  char capdir[4096];           /* several captures: the folder of the one being written (else empty) */
  /* Set by a frontend shim (kerncap_set_ignore_launches) while an autotuner benchmarks candidate
   * configs: process-wide, because the autotuner may launch from any thread while it holds it. */
  volatile int ignore_launches;
  double t0;
  KC_VEC(kc_region_t) regions;
  KC_VEC(kc_module_t) modules;
  KC_VEC(kc_image_t) ptx_images; /* fatbins with PTX the app loaded, newest last (kerncap_cuda.c on_module_api) */
  CUpti_SubscriberHandle sub;
  KC_VEC(kc_global_t) globals; /* module globals of the captured kernel's module (kc_collect_globals_of) */
  int g_skipped, g_symbols;    /* unreadable cubin entries; data symbols read */
  int module_by_handle;        /* how kc_find_module chose, for raw.json */
  double census_t;             /* when kernels.<pid>.json was last written (kc_coarse_s) */
  const char *counting_off;    /* why this process stopped counting (CUPTI handed back), or NULL */
  kc_driver_t cu;
  kc_cupti_api_t cupti_api;
  kc_proc_t proc;      /* this process of the job: number, rank, selection (c/common/kc_process.c) */
  kc_capture_t cap;    /* the capture being written */
  volatile int capturing; /* kc.cap holds a launch between its entry and exit (read without kc.mu) */
  kc_graphs_t graphs;  /* executable CUDA graphs (c/cuda/kc_graphs.c) */
  kc_cupti_share_t cupti; /* CUPTI's one subscriber slot (c/cuda/kc_cupti.c) */
} kc_state_t;

extern kc_state_t kc;
extern const char *const KC_VISIBLE_VARS[];

/* More than one capture in this run (c/common/kc_settings.h): each goes to a folder of its own
 * (kc_open_capture_folder), and graph executions are not taken. */
static inline int kc_several(void) { return kc_settings_several(&kc.set); }

static inline double kc_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* The same clock to a tick (1-4 ms): read from the vDSO's data page without reading the clock
 * source, so it costs a few ns even where CLOCK_MONOTONIC falls back to a system call (a clock
 * source the vDSO cannot read, as on some virtual machines). For the launch path's once-a-second
 * census. */
static inline double kc_coarse_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- c/cuda/kc_out.c: what the library writes ---- */
/* Check a driver call: on error KC_FAIL with file:line, the call text and the driver's string; returns it. */
CUresult kc_cu_check(CUresult r, const char *call, const char *file, int line);
#define CU_CHECK(call) kc_cu_check((call), #call, __FILE__, __LINE__)
/* The folder of the capture being written: KERNCAP_OUT, or its own folder when several are taken. */
const char *kc_capture_dir(void);
void kc_path_join(char *dst, size_t n, const char *rel);
int kc_open_out(const char *rel, int *fd);
/* Several captures: the next one goes to KERNCAP_OUT/captures/<n>/ (kc.capdir). 0, or -1 (KC_FAIL). */
int kc_open_capture_folder(void);
/* kernels.<pid>.json: the census with the CUDA parts (CUPTI sharing, graphs). final: at exit. */
void kc_write_census(int final);
/* The demangled name of a kernel of the census (the name itself when it is not a C++ name). */
const char *kc_demangled(const char *name);

/* ---- c/cuda/kc_capture.c: the captured launch ---- */
void kc_param_layout(CUfunction f, kc_layout_t *L);
void kc_module_bind(uint32_t id, CUmodule h);
CUmodule kc_module_of(CUfunction f);
void kc_collect_globals_of(CUfunction f, const char *name);
/* A snapshot of every live region and module global (items set, hashing planned); before_file:
 * the file of its pass 0. 0, or -1 (KC_FAIL; s is to be freed with kc_snap_free). */
int kc_snap_live(kc_snap_t *s, const char *before_file);
void kc_capture_enter(void);
void kc_capture_exit(void);
int kc_capture_snapshot_and_launch(void);
#endif
