/* kc_state.h — the CUDA capture library's one state struct and its libcuda/libcupti pointer
 * table, shared by its units (c/kerncap_cuda.c, kc_capture.c, kc_snapshot.c, kc_graphs.c,
 * kc_cupti.c). Everything here is hidden inside the library (-fvisibility=hidden).
 *
 * `kc` is set up once (c/kerncap_cuda.c setup, under pthread_once); from then on every field but
 * `cupti` (its own mutex) is read and written with kc.mu held, by the application thread whose
 * CUDA call fired the callback. Per-thread flags (re-entry, the module a call loaded) are
 * thread-locals of c/kerncap_cuda.c.
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
#define KC_MAX_TARGETS 64

#include "kc_log.h"
#include "kc_process.h"
#include "kc_vec.h"
#include "kc_cupti.h"
#include "kc_snapshot.h"
#include "kc_graphs.h"

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
  CUmodule handle;   /* learnt later (c/kerncap_cuda.c tl_loaded_id); NULL while unknown */
} kc_module_t;

typedef struct {
  char *name;
  uint64_t count;
  uint64_t benchmark; /* launches while a frontend said "benchmarking" (kerncap_set_ignore_launches) */
  uint64_t graph;     /* of count, executions as a kernel node of a CUDA graph launch (kc_graphs.c) */
  uint64_t recorded;  /* launches recorded into a graph by stream capture (not executions: not in count) */
  unsigned grid[3], block[3];
  uint64_t module;
  signed char asked;  /* the --kernel targets were matched against this name (once per name) */
  uint64_t mask;      /* bit t: target t's regex matches this name */
  uint64_t own;       /* launches counted toward --dispatch (capture_all: per kernel) */
  char captured;      /* capture_all: this kernel's capture is written */
} kc_kstat_t;

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
  kc_base_t base;   /* out, verbose, enabled: the shared log/fail path (c/kc_log.c) */
  pthread_mutex_t mu;
  int capture;      /* mode capture (else list) */
  int done;         /* the run's captures are written */
  int exit_after;
  int own_load;     /* our own cuModuleLoadData is running (the scan kernel) */
  regex_t re[KC_MAX_TARGETS]; /* KERNCAP_KERNEL: one POSIX ERE per line (several: one capture each) */
  int ntargets;                /* 0: any kernel */
  long dispatch;
  long tmatches[KC_MAX_TARGETS]; /* matching launches seen, per target */
  char tdone[KC_MAX_TARGETS];    /* that target's capture is written */
  int capture_all;             /* KERNCAP_CAPTURE_ALL=1: the Nth launch of every distinct matching kernel */
  int max_captures;            /* KERNCAP_MAX_CAPTURES (capture_all; default 64) */
  long launch_count;           /* KERNCAP_LAUNCH_COUNT: one target's launches dispatch .. dispatch+launch_count-1 (default 1) */
  int ncaptures;               /* captures written so far */
  int claimed;                 /* this process holds the job's capture claim */
  char capdir[4096];           /* several captures: the folder of the one being written (else empty) */
  int count_benchmarks; /* KERNCAP_COUNT_BENCHMARKS=1: --dispatch counts autotuner benchmark launches too */
  /* Set by a frontend shim (kerncap_set_ignore_launches) while an autotuner benchmarks candidate
   * configs: process-wide, because the autotuner may launch from any thread while it holds it. */
  volatile int ignore_launches;
  uint64_t launches;
  double t0;
  KC_VEC(kc_region_t) regions;
  KC_VEC(kc_module_t) modules;
  kc_kstat_t *kstats; /* open addressing, power-of-two size */
  size_t ckstats, nkstats;
  CUpti_SubscriberHandle sub;
  KC_VEC(kc_global_t) globals; /* module globals of the captured kernel's module (kc_collect_globals_of) */
  int g_skipped, g_symbols;    /* unreadable cubin entries; data symbols read */
  int module_by_handle;        /* how kc_find_module chose, for raw.json */
  double census_t;             /* when kernels.<pid>.json was last written (kc_now_s) */
  const char *counting_off;    /* why this process stopped counting (CUPTI handed back), or NULL */
  char *(*demangle)(const char *, char *, size_t *, int *);
  kc_driver_t cu;
  kc_cupti_api_t cupti_api;
  kc_proc_t proc;      /* this process of the job: number, rank, selection (c/kc_process.c) */
  kc_capture_t cap;    /* the capture being written */
  kc_graphs_t graphs;  /* executable CUDA graphs (c/kc_graphs.c) */
  kc_cupti_share_t cupti; /* CUPTI's one subscriber slot (c/kc_cupti.c) */
} kc_state_t;

extern kc_state_t kc;
extern const char *const KC_VISIBLE_VARS[];

/* More than one capture in this run (several targets, every kernel, or consecutive launches of one):
 * each goes to a folder of its own (kc_open_capture_folder), and graph executions are not taken. */
static inline int kc_several(void) { return kc.ntargets > 1 || kc.capture_all || kc.launch_count > 1; }

static inline double kc_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Check a driver call: on error KC_FAIL with file:line, the call text and the driver's string; returns it. */
CUresult kc_cu_check(CUresult r, const char *call, const char *file, int line);
#define CU_CHECK(call) kc_cu_check((call), #call, __FILE__, __LINE__)

/* ---- c/kerncap_cuda.c ---- */
kc_kstat_t *kc_kstat_get(const char *name);
char *kc_demangle(const char *name); /* malloc'd; the name itself when it is not a C++ name */
uint64_t kc_target_mask(const char *name);
int kc_name_matches(const char *name);
void kc_write_census(int final);

/* ---- c/kc_capture.c: the captured launch ---- */
void kc_param_layout(CUfunction f, kc_layout_t *L);
void kc_module_bind(uint32_t id, CUmodule h);
CUmodule kc_module_of(CUfunction f);
void kc_collect_globals_of(CUfunction f, const char *name);
/* A snapshot of every live region and module global (items set, hashing planned); before_file:
 * the file of its pass 0. 0, or -1 (KC_FAIL; s is to be freed with kc_snap_free). */
int kc_snap_live(kc_snap_t *s, const char *before_file);
void kc_path_join(char *dst, size_t n, const char *rel);
int kc_open_out(const char *rel, int *fd);
int kc_open_capture_folder(void);
void kc_capture_enter(void);
void kc_capture_exit(void);
int kc_capture_snapshot_and_launch(void);
#endif
