/*
 * kerncap_cuda.c — the CUDA capture library, injected into the application.
 *
 * Exports: InitializeInjection() (called once by libcuda at cuInit when CUDA_INJECTION64_PATH
 *          names this file), kerncap_set_ignore_launches(int) (for frontend shims: autotuner
 *          benchmark launches), and cuptiSubscribe / cuptiSubscribe_v2 wrappers that see the
 *          application's own CUPTI requests when kerncap puts this file on LD_PRELOAD
 *          (c/kc_cupti.h). Nothing else is visible (-fvisibility=hidden).
 * Reads:   KERNCAP_OUT, KERNCAP_MODE, KERNCAP_KERNEL, KERNCAP_DISPATCH, KERNCAP_LAUNCH_COUNT, KERNCAP_COUNT_BENCHMARKS,
 *          KERNCAP_EXIT_AFTER_CAPTURE, KERNCAP_CUPTI_PATH, KERNCAP_LOG, KERNCAP_RANK,
 *          KERNCAP_PROCESS, KERNCAP_CHUNK_BYTES (docs/raw-capture.md).
 * Writes:  the raw capture into KERNCAP_OUT (docs/raw-capture.md): chunked memory snapshots
 *          (kc_snapshot.h, scan kernel kc_scan.cu), a progress file; raw.json last. In a job of
 *          several processes only the one that claims the capture writes it (c/kc_process.h);
 *          every process writes its own census kernels.<pid>.json and error.<pid>.txt.
 * Parts:   kc_snapshot.h (memory), kc_graphs.h (CUDA graph launches and node capture),
 *          kc_process.h (which process captures), kc_cupti.h (CUPTI sharing), kc_symbols.h
 *          (module globals), kc_json.h; one X-macro list of driver callbacks (KC_DRIVER_CALLBACKS)
 *          serves both the subscription and the dispatch.
 * Threads: CUPTI calls the callback on whichever application thread made the CUDA call; a
 *          mutex guards the tables, a thread-local flag ignores the callbacks that our own
 *          CUDA calls fire, and exactly one launch is ever captured.
 * Failure: never exit/abort on an error: log it to error.txt, disable capture, return.
 *          The application's own calls are never altered.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include "kc_json.h"
#include "kc_symbols.h"
#include <cupti.h>
#include "kc_cupti.h"
#include "kc_process.h"
#include "kc_collective.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define KC_EXPORT __attribute__((visibility("default")))
#define KC_VERSION "kerncap_cuda 0.1.0"
#define KC_MAX_PARAMS 1024
#define KC_MAX_TARGETS 64

/* ---- dynamically resolved libcuda / libcupti entry points (one X-macro list each) ---- */
#define CU_FUNCS(X)                                                                 \
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

#define CUPTI_FUNCS(X)                                                              \
  X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiGetResultString)

#define DECL_PTR(name) static __typeof__(name) *p_##name;
CU_FUNCS(DECL_PTR)
CUPTI_FUNCS(DECL_PTR)

/* ---- state ---- */
typedef struct {
  uint64_t va, size;
  const char *kind;
} region_t;

typedef struct {
  uint32_t id;
  size_t size;
  char *bytes;     /* copied at load (capture mode only) */
  CUmodule handle; /* learnt later (see tl_loaded_id); NULL while unknown */
} module_t;

typedef struct {
  char *name;
  uint64_t count;
  uint64_t benchmark; /* launches while a frontend said "benchmarking" (kerncap_set_ignore_launches) */
  uint64_t graph;     /* of count, executions as a kernel node of a CUDA graph launch (kc_graphs.h) */
  uint64_t recorded;  /* launches recorded into a graph by stream capture (not executions: not in count) */
  unsigned grid[3], block[3];
  uint64_t module;
  signed char asked;  /* the --kernel targets were matched against this name (once per name) */
  uint64_t mask;      /* bit t: target t's regex matches this name */
  uint64_t own;       /* launches counted toward --dispatch (capture_all: per kernel) */
  char captured;      /* capture_all: this kernel's capture is written */
} kstat_t;

/* A module-scope variable (__device__/__constant__) of the captured kernel's module. */
typedef struct {
  char *name;
  uint64_t va, size;
} kglobal_t;

/* The library's process-wide state (the one capture is C, the CUDA graphs KG, below). */
static struct {
  pthread_mutex_t mu;
  int enabled;   /* 0 after an internal failure */
  int capture;   /* mode capture (else list) */
  int done;      /* the one capture has been written */
  int log;
  int exit_after;
  int own_load; /* our own cuModuleLoadData is running (the scan kernel) */
  char out[4096];
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
  uint64_t launches;
  double t0;
  region_t *regions;
  size_t nregions, cregions;
  module_t *modules;
  size_t nmodules, cmodules;
  kstat_t *kstats; /* open addressing */
  size_t ckstats, nkstats;
  CUpti_SubscriberHandle sub;
  kglobal_t *g;             /* module globals of the captured kernel's module (collect_globals) */
  size_t ng, cg;
  int g_skipped, g_symbols; /* unreadable cubin entries; data symbols read */
  int module_by_handle;     /* how find_module chose, for the manifest */
  double census_t;          /* when kernels.<pid>.json was last written (now_s) */
  const char *counting_off; /* why this process stopped counting (CUPTI handed back), or NULL */
  char *(*demangle)(const char *, char *, size_t *, int *);
} S = {.mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP};

/* More than one capture in this run (several targets, every kernel, or consecutive launches of one):
 * each goes to a folder of its own (open_capture_folder), and graph executions are not taken. */
static int several(void) { return S.ntargets > 1 || S.capture_all || S.launch_count > 1; }

static __thread int in_tool; /* our own CUDA calls fire callbacks too */

/* ---- processes of a job (c/kc_process.h) ---- */
static kc_proc_t KP;              /* this process: number, rank, selection */
static const char *const KC_VISIBLE_VARS[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", NULL};
/* Set by a frontend shim (the Triton sitecustomize) while an autotuner benchmarks candidate
 * configs: those launches are counted apart and never taken by --dispatch. Process-wide, because
 * the autotuner may launch from any thread while it holds the flag. */
static volatile int ignore_launches;

/* Exported for frontend shims (ctypes): on != 0 while the launches that follow are benchmarks of
 * the application's runtime (e.g. Triton's autotuner), 0 when the application's own launches
 * resume. Nested calls are the caller's business (the shim keeps a depth counter). */
KC_EXPORT void kerncap_set_ignore_launches(int on) { ignore_launches = on != 0; }
/* Module id of the last MODULE_LOADED callback on this thread: a module loads inside the API call
 * that needs it (cuModuleLoad*, or lazily inside a launch or cuFuncGetModule), so the id seen
 * during a call belongs to the CUmodule that call returns or touches. */
static __thread uint32_t tl_loaded_id;
static __thread int tl_loaded;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void logf_(const char *fmt, ...) {
  if (!S.log) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[kerncap] ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

/* A file of the capture being written: in KERNCAP_OUT, or in its own folder when several are taken. */
static void path_join(char *dst, size_t n, const char *rel) { snprintf(dst, n, "%s/%s", S.capdir[0] ? S.capdir : S.out, rel); }

/* Record an internal failure: error.txt gets a line; capture stops; the app runs on. */
static void fail(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  S.enabled = 0;
  if (S.capture) kc_cupti_done("capture failed", S.launches, 1); /* nothing more to see: let a profiler have CUPTI */
  fprintf(stderr, "[kerncap] capture disabled: %s (%s:%d)\n", msg, file, line);
  if (!S.out[0]) return;
  char p[4200];
  kc_proc_file(S.out, p, sizeof p, "error", "txt"); /* per process: error.<pid>.txt */
  FILE *f = fopen(p, "a");
  if (f) {
    fprintf(f, "%s (%s:%d)\n", msg, file, line);
    fclose(f);
  }
}
#define FAIL(...) fail(__FILE__, __LINE__, __VA_ARGS__)

/* Check a driver call: on error log file:line, the call text and the driver's string, return it. */
static CUresult cu_check(CUresult r, const char *call, const char *file, int line) {
  if (r != CUDA_SUCCESS) {
    const char *s = "unknown";
    if (p_cuGetErrorString) p_cuGetErrorString(r, &s);
    fail(file, line, "%s failed: %s (%d)", call, s, (int)r);
  }
  return r;
}
#define CU_CHECK(call) cu_check((call), #call, __FILE__, __LINE__)

/* ---- tables ---- */
static void region_add(uint64_t va, uint64_t size, const char *kind) {
  if (!va || !size) return;
  if (S.nregions == S.cregions) {
    size_t n = S.cregions ? S.cregions * 2 : 256;
    region_t *r = realloc(S.regions, n * sizeof *r);
    if (!r) { FAIL("out of host memory for the region table"); return; }
    S.regions = r;
    S.cregions = n;
  }
  S.regions[S.nregions++] = (region_t){va, size, kind};
}

/* Remove the region that starts at va (free), or every region inside [va, va+size) (unmap). */
static void region_remove(uint64_t va, uint64_t size) {
  for (size_t i = 0; i < S.nregions;) {
    region_t *r = &S.regions[i];
    int hit = size ? (r->va >= va && r->va + r->size <= va + size) : (r->va == va);
    if (hit) S.regions[i] = S.regions[--S.nregions];
    else i++;
  }
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static kstat_t *kstat_get(const char *name) {
  if (S.nkstats * 2 >= S.ckstats) {
    size_t n = S.ckstats ? S.ckstats * 2 : 1024;
    kstat_t *t = calloc(n, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < S.ckstats; i++) {
      if (!S.kstats[i].name) continue;
      size_t j = hash_str(S.kstats[i].name) & (n - 1);
      while (t[j].name) j = (j + 1) & (n - 1);
      t[j] = S.kstats[i];
    }
    free(S.kstats);
    S.kstats = t;
    S.ckstats = n;
  }
  size_t j = hash_str(name) & (S.ckstats - 1);
  while (S.kstats[j].name) {
    if (!strcmp(S.kstats[j].name, name)) return &S.kstats[j];
    j = (j + 1) & (S.ckstats - 1);
  }
  S.kstats[j].name = strdup(name);
  S.nkstats++;
  return &S.kstats[j];
}


static char *demangle(const char *name) {
  if (S.demangle && name && name[0] == '_' && name[1] == 'Z') {
    int st = 0;
    char *d = S.demangle(name, NULL, NULL, &st);
    if (st == 0 && d) return d;
    free(d);
  }
  return strdup(name ? name : "");
}

/* Write kernels.<pid>.json, this process's census: who it is, every kernel seen with its count
 * and last launch shape, CUPTI sharing. final: written at exit (else a periodic or post-capture
 * snapshot of the counts: a process that ends with _exit, e.g. a fork-started Python worker,
 * leaves the last one). Atomic rename. */
static void kc_graphs_json(FILE *f);
static void write_kernels_json(int final) {
  if (!S.out[0] || kc_proc_forked(&KP)) return; /* a forked child holds its parent's tables */
  char p[4200], t[4300];
  kc_proc_file(S.out, p, sizeof p, "kernels", "json");
  snprintf(t, sizeof t, "%s.part", p);
  FILE *f = fopen(t, "w");
  if (!f) return;
  S.census_t = now_s();
  fprintf(f, "{\"final\":%s,\"mode\":\"%s\",\"counting\":", final ? "true" : "false", getenv("KERNCAP_MODE") ? getenv("KERNCAP_MODE") : "");
  if (S.counting_off) kc_json_str(f, S.counting_off);
  else fputs("true", f);
  fputs(",\"process\":", f);
  kc_proc_json(f, &KP, KC_VISIBLE_VARS, NULL, NULL);
  fputs(",\"cupti\":", f);
  kc_cupti_json(f, S.launches);
  fprintf(f, ",\"launches\":%llu,\"kernels\":[", (unsigned long long)S.launches);
  int first = 1;
  for (size_t i = 0; i < S.ckstats; i++) {
    kstat_t *k = &S.kstats[i];
    if (!k->name) continue;
    char *d = demangle(k->name);
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

/* ---- output files ---- */
static int open_out(const char *rel, int *fd) {
  char p[4200];
  path_join(p, sizeof p, rel);
  *fd = open(p, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (*fd < 0) { FAIL("cannot create %s: %s", p, strerror(errno)); return -1; }
  return 0;
}
#define kc_open_out open_out

static int write_file(const char *rel, const void *data, size_t n) {
  int fd;
  if (open_out(rel, &fd)) return -1;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, (const char *)data + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      FAIL("write %s: %s", rel, strerror(errno));
      close(fd);
      return -1;
    }
    done += (size_t)w;
  }
  close(fd);
  return 0;
}

/* Module globals (S.g) are not allocations, so no memory callback sees them; they are found at
 * capture time (kc_symbols.h + cuModuleGetGlobal) and snapshotted after the regions. */
#include "kc_snapshot.h"

/* ---- the launch being captured ---- */
typedef struct {
  const char *api;
  CUfunction f;
  CUstream stream;
  unsigned grid[3], block[3], shmem;
  void **kernel_params;
  void **extra;
  const CUlaunchConfig *config; /* cuLaunchKernelEx only */
} launch_t;

typedef struct {
  size_t n;
  size_t off[KC_MAX_PARAMS], size[KC_MAX_PARAMS];
  const char *source;
} layout_t;

/* Parameter layout (offset, size per parameter) of f. Sources, in order: cuFuncGetParamInfo on
 * the handle; cuKernelGetParamInfo (runtime launches hand over a CUkernel, for which
 * cuFuncGetParamInfo answers nothing: DESIGN.md); cuKernelGetFunction + cuFuncGetParamInfo. */
static void param_layout(CUfunction f, layout_t *L) {
  L->n = 0;
  L->source = "none";
  size_t o, s;
  if (p_cuFuncGetParamInfo && p_cuFuncGetParamInfo(f, 0, &o, &s) == CUDA_SUCCESS) {
    L->source = "cuFuncGetParamInfo";
    while (L->n < KC_MAX_PARAMS && p_cuFuncGetParamInfo(f, L->n, &o, &s) == CUDA_SUCCESS) {
      L->off[L->n] = o; L->size[L->n] = s; L->n++;
    }
    return;
  }
  if (p_cuKernelGetParamInfo && p_cuKernelGetParamInfo((CUkernel)f, 0, &o, &s) == CUDA_SUCCESS) {
    L->source = "cuKernelGetParamInfo";
    while (L->n < KC_MAX_PARAMS && p_cuKernelGetParamInfo((CUkernel)f, L->n, &o, &s) == CUDA_SUCCESS) {
      L->off[L->n] = o; L->size[L->n] = s; L->n++;
    }
    return;
  }
  CUfunction g;
  if (p_cuKernelGetFunction && p_cuKernelGetFunction(&g, (CUkernel)f) == CUDA_SUCCESS && p_cuFuncGetParamInfo &&
      p_cuFuncGetParamInfo(g, 0, &o, &s) == CUDA_SUCCESS) {
    L->source = "cuKernelGetFunction+cuFuncGetParamInfo";
    while (L->n < KC_MAX_PARAMS && p_cuFuncGetParamInfo(g, L->n, &o, &s) == CUDA_SUCCESS) {
      L->off[L->n] = o; L->size[L->n] = s; L->n++;
    }
  }
}

/* The function handle to ask attributes/module of: a CUkernel is turned into this context's CUfunction. */
static CUfunction as_function(CUfunction f) {
  int v;
  if (p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS) return f;
  CUfunction g;
  if (p_cuKernelGetFunction && p_cuKernelGetFunction(&g, (CUkernel)f) == CUDA_SUCCESS) return g;
  return f;
}

static void module_bind(uint32_t id, CUmodule h) {
  if (!h) return;
  for (size_t i = 0; i < S.nmodules; i++)
    if (S.modules[i].handle == h) S.modules[i].handle = NULL; /* handle reused after an unload */
  for (size_t i = S.nmodules; i-- > 0;)
    if (S.modules[i].id == id) { S.modules[i].handle = h; return; }
}

static CUmodule module_of(CUfunction f) {
  CUmodule m = NULL;
  if (p_cuFuncGetModule && p_cuFuncGetModule(&m, as_function(f)) != CUDA_SUCCESS) m = NULL;
  return m;
}


/* Pick the module image that holds the kernel: the image bound to the function's CUmodule,
 * else the last-loaded image whose bytes contain the mangled name. */
static module_t *find_module(const char *name, CUmodule h) {
  S.module_by_handle = 1;
  for (size_t i = 0; h && i < S.nmodules; i++)
    if (S.modules[i].handle == h && S.modules[i].bytes) return &S.modules[i];
  S.module_by_handle = 0;
  size_t nl = strlen(name);
  for (size_t i = S.nmodules; i-- > 0;)
    if (S.modules[i].bytes && memmem(S.modules[i].bytes, S.modules[i].size, name, nl)) return &S.modules[i];
  return NULL;
}

static const char *module_kind(const module_t *m) {
  const unsigned char *b = (const unsigned char *)m->bytes;
  if (m->size >= 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') return "cubin";
  if (m->size >= 4 && b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba) return "fatbin";
  return "ptx";
}

static const char *attr_name(int id) {
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: return "ACCESS_POLICY_WINDOW";
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: return "COOPERATIVE";
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: return "SYNCHRONIZATION_POLICY";
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: return "CLUSTER_DIMENSION";
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: return "CLUSTER_SCHEDULING_POLICY_PREFERENCE";
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: return "PROGRAMMATIC_STREAM_SERIALIZATION";
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: return "PROGRAMMATIC_EVENT";
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: return "PRIORITY";
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: return "MEM_SYNC_DOMAIN_MAP";
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: return "MEM_SYNC_DOMAIN";
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: return "PREFERRED_CLUSTER_DIMENSION";
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: return "LAUNCH_COMPLETION_EVENT";
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return "PREFERRED_SHARED_MEMORY_CARVEOUT";
    default: return "UNKNOWN";
  }
}

/* Function attributes that an application can set (cuFuncSetAttribute) and a replay must re-apply. */
static const struct { CUfunction_attribute id; const char *name; } FUNC_ATTRS[] = {
    {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "MAX_DYNAMIC_SHARED_SIZE_BYTES"},
    {CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, "PREFERRED_SHARED_MEMORY_CARVEOUT"},
    {CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, "CLUSTER_SIZE_MUST_BE_SET"},
    {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, "REQUIRED_CLUSTER_WIDTH"},
    {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, "REQUIRED_CLUSTER_HEIGHT"},
    {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, "REQUIRED_CLUSTER_DEPTH"},
    {CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED"},
    {CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, "CLUSTER_SCHEDULING_POLICY_PREFERENCE"},
};

typedef struct {
  launch_t L;
  layout_t lay;
  char *params;
  size_t params_size;
  kc_snap_t sn;
  CUevent ev0, ev1;
  double t_sync, t_capture_start;
  uint64_t launch_index;
  long match_index;
  const char *timing_method; /* how app_launch_us was measured */
  CUresult fault;            /* the captured launch faulted (is_kernel_fault), else 0 */
  int graph_id;              /* >= 0: the launch was kernel node graph_node of CUDA graph graph_id */
  int target;                /* which --kernel target this capture is (several targets) */
  size_t graph_node;
  module_t *mod;             /* the kernel's module image, found at launch entry */
  char name[4096];
} capture_t;

static capture_t C = {.graph_id = -1};

/* Pack the kernel parameters into one buffer, as the kernel sees them. */
static int pack_params(void) {
  param_layout(C.L.f, &C.lay);
  if (C.L.extra) { /* CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE pairs */
    void *buf = NULL;
    size_t sz = 0;
    for (void **e = C.L.extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = e[1];
      else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) sz = *(size_t *)e[1];
    }
    if (buf && sz) {
      C.params = malloc(sz);
      if (!C.params) return -1;
      memcpy(C.params, buf, sz);
      C.params_size = sz;
      if (!C.lay.n) C.lay.source = "extra CU_LAUNCH_PARAM_BUFFER_POINTER";
      return 0;
    }
  }
  if (!C.L.kernel_params) {
    if (C.lay.n) { FAIL("kernel has %zu parameters but the launch passed none", C.lay.n); return -1; }
    C.params = malloc(1);
    C.params_size = 0;
    return 0;
  }
  if (!C.lay.n) {
    FAIL("no parameter layout for %s: cuFuncGetParamInfo and cuKernelGetParamInfo both failed", C.name);
    return -1;
  }
  size_t total = C.lay.off[C.lay.n - 1] + C.lay.size[C.lay.n - 1];
  C.params = calloc(1, total ? total : 1);
  if (!C.params) return -1;
  for (size_t i = 0; i < C.lay.n; i++) memcpy(C.params + C.lay.off[i], C.L.kernel_params[i], C.lay.size[i]);
  C.params_size = total;
  return 0;
}

static void write_raw_json(module_t *m, const char *modfile) {
  char p[4200], t[4300];
  path_join(p, sizeof p, "raw.json");
  snprintf(t, sizeof t, "%s.part", p);
  FILE *f = fopen(t, "w");
  if (!f) { FAIL("cannot write raw.json: %s", strerror(errno)); return; }
  CUdevice dev = 0;
  char devname[256] = "unknown";
  int ma = 0, mi = 0, drv = 0;
  p_cuCtxGetDevice(&dev);
  p_cuDeviceGetName(devname, sizeof devname, dev);
  p_cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  p_cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  p_cuDriverGetVersion(&drv);
  char *dem = demangle(C.name);
  kc_json j, *w = &j; /* c/kc_json.h; the keys are the raw_version 2 schema (src/capture/raw.ts) */
  kc_json_init(w, f);
  kc_json_begin_object(w);
  kc_json_ku64(w, "raw_version", 2);
  kc_json_kstr(w, "library", KC_VERSION);
  kc_json_kstr(w, "frontend", "cuda");
  kc_json_key(w, "kernel");
  kc_json_begin_object(w);
  kc_json_kstr(w, "name", C.name);
  kc_json_kstr(w, "demangled", dem);
  free(dem);
  kc_json_ki64(w, "match_index", C.match_index);
  kc_json_ku64(w, "launch_index", C.launch_index);
  kc_json_kbool(w, "counts_benchmarks", S.count_benchmarks);
  kc_json_end_object(w);
  kc_json_key(w, "device");
  kc_json_begin_object(w);
  kc_json_kstr(w, "vendor", "nvidia");
  kc_json_kstr(w, "name", devname);
  char arch[32];
  snprintf(arch, sizeof arch, "sm_%d%d", ma, mi);
  kc_json_kstr(w, "arch", arch);
  kc_json_ki64(w, "driver_version", drv);
  kc_json_ki64(w, "ordinal", (int)dev);
  kc_json_end_object(w);
  { /* ---- process identity (c/kc_process.h): who captured, on which GPU ---- */
    char uuid[41] = "", pci[32] = "";
    CUuuid u;
    if (p_cuDeviceGetUuid_v2 && p_cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) kc_uuid_str((const unsigned char *)u.bytes, uuid);
    if (p_cuDeviceGetPCIBusId && p_cuDeviceGetPCIBusId(pci, sizeof pci, dev) != CUDA_SUCCESS) pci[0] = 0;
    kc_json_key(w, "process");
    kc_proc_json(kc_json_value(w), &KP, KC_VISIBLE_VARS, uuid[0] ? uuid : NULL, pci[0] ? pci : NULL);
  }
  unsigned cl[3] = {1, 1, 1};
  if (several()) kc_json_ki64(w, "target", S.capture_all ? -1 : C.target);
  if (C.graph_id >= 0) {
    kc_json_key(w, "graph");
    kc_json_begin_object(w);
    kc_json_ki64(w, "id", C.graph_id);
    kc_json_ku64(w, "kernel_node", C.graph_node);
    kc_json_end_object(w);
  }
  kc_json_key(w, "launch");
  kc_json_begin_object(w);
  kc_json_kstr(w, "api", C.L.api);
  kc_json_kdim3(w, "grid", C.L.grid[0], C.L.grid[1], C.L.grid[2]);
  kc_json_kdim3(w, "block", C.L.block[0], C.L.block[1], C.L.block[2]);
  kc_json_ku64(w, "shared_mem_bytes", C.L.shmem);
  kc_json_key(w, "attributes");
  kc_json_begin_array(w);
  if (C.L.config) {
    for (unsigned i = 0; i < C.L.config->numAttrs; i++) {
      const CUlaunchAttribute *a = &C.L.config->attrs[i];
      if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        cl[0] = a->value.clusterDim.x; cl[1] = a->value.clusterDim.y; cl[2] = a->value.clusterDim.z;
      }
      kc_json_begin_object(w);
      kc_json_ki64(w, "id", (int)a->id);
      kc_json_kstr(w, "name", attr_name(a->id));
      kc_json_key(w, "value_hex");
      kc_json_hexbytes(w, &a->value, sizeof a->value);
      kc_json_end_object(w);
    }
  }
  kc_json_end_array(w);
  kc_json_kdim3(w, "cluster", cl[0], cl[1], cl[2]);
  kc_json_end_object(w);
  kc_json_key(w, "function_attributes");
  kc_json_begin_array(w);
  CUfunction g = as_function(C.L.f);
  for (size_t i = 0; i < sizeof FUNC_ATTRS / sizeof *FUNC_ATTRS; i++) {
    int v;
    if (p_cuFuncGetAttribute(&v, FUNC_ATTRS[i].id, g) != CUDA_SUCCESS) continue;
    kc_json_begin_object(w);
    kc_json_ki64(w, "id", (int)FUNC_ATTRS[i].id);
    kc_json_kstr(w, "name", FUNC_ATTRS[i].name);
    kc_json_ki64(w, "value", v);
    kc_json_end_object(w);
  }
  kc_json_end_array(w);
  kc_json_key(w, "params");
  kc_json_begin_object(w);
  kc_json_kstr(w, "file", "kernel/params.bin");
  kc_json_ku64(w, "size", C.params_size);
  kc_json_kstr(w, "layout_source", C.lay.source);
  kc_json_key(w, "layout");
  kc_json_begin_array(w);
  for (size_t i = 0; i < C.lay.n; i++) {
    kc_json_begin_object(w);
    kc_json_ku64(w, "index", i);
    kc_json_ku64(w, "offset", C.lay.off[i]);
    kc_json_ku64(w, "size", C.lay.size[i]);
    kc_json_end_object(w);
  }
  kc_json_end_array(w);
  kc_json_end_object(w);
  kc_json_key(w, "module");
  kc_json_begin_object(w);
  kc_json_kstr(w, "file", modfile);
  kc_json_kstr(w, "kind", module_kind(m));
  kc_json_ku64(w, "size", m->size);
  kc_json_ku64(w, "id", m->id);
  kc_json_kstr(w, "source", S.module_by_handle ? "CUPTI module-loaded callback; image bound to the function's CUmodule"
                                              : "CUPTI module-loaded callback; image chosen by kernel name");
  kc_json_end_object(w);
  float ms = -1;
  if (C.ev0 && C.ev1) p_cuEventElapsedTime_v2(&ms, C.ev0, C.ev1);
  const kc_snap_t *sn = &C.sn;
  kc_json_key(w, "memory");
  kc_json_begin_object(w);
  kc_json_ku64(w, "chunk_bytes", sn->chunk);
  kc_json_kstr(w, "hash", KC_HASH_NAME);
  kc_json_ku64(w, "align", KC_ALIGN);
  kc_json_ku64(w, "live_bytes", sn->live_bytes);
  kc_json_ku64(w, "stored_before_bytes", sn->stored_bytes[0]);
  kc_json_ku64(w, "stored_after_bytes", sn->stored_bytes[1]);
  kc_json_kbool(w, "hashed_on_gpu", sn->scan_ok > 0);
  kc_json_key(w, "gpu_scan_unavailable");
  if (sn->scan_ok > 0) kc_json_null(w);
  else kc_json_string(w, sn->scan_why);
  kc_json_end_object(w);
  kc_json_key(w, "regions");
  kc_json_begin_array(w);
  for (size_t i = 0; i < S.nregions; i++) {
    FILE *o = kc_json_value(w);
    fputc('\n', o);
    kc_json_item(o, &sn->items[i]);
  }
  kc_json_end_array(w);
  kc_json_key(w, "globals");
  kc_json_begin_array(w);
  for (size_t i = 0; i < S.ng; i++) {
    FILE *o = kc_json_value(w);
    fputc('\n', o);
    kc_json_item(o, &sn->items[S.nregions + i]);
  }
  kc_json_end_array(w);
  if (C.fault) {
    const char *fname = "", *fmsg = "";
    if (p_cuGetErrorName) p_cuGetErrorName(C.fault, &fname);
    if (p_cuGetErrorString) p_cuGetErrorString(C.fault, &fmsg);
    kc_json_key(w, "fault");
    kc_json_begin_object(w);
    kc_json_ki64(w, "code", (int)C.fault);
    kc_json_kstr(w, "name", fname);
    kc_json_kstr(w, "message", fmsg);
    kc_json_end_object(w);
  }
  kc_json_kstr(w, "app_launch_method", C.timing_method ? C.timing_method : "none");
  kc_json_key(w, "globals_scan");
  kc_json_begin_object(w);
  kc_json_ki64(w, "symbols", S.g_symbols);
  kc_json_ku64(w, "globals", S.ng);
  kc_json_ki64(w, "unreadable_entries", S.g_skipped);
  kc_json_end_object(w);
  kc_json_key(w, "timing");
  kc_json_begin_object(w);
  kc_json_kdouble(w, "sync_us", "%.1f", C.t_sync);
  kc_json_kdouble(w, "before_us", "%.1f", sn->before_us);
  kc_json_kdouble(w, "after_us", "%.1f", sn->after_us);
  kc_json_kdouble(w, "scan_before_us", "%.1f", sn->scan_us[0]);
  kc_json_kdouble(w, "scan_after_us", "%.1f", sn->scan_us[1]);
  kc_json_kdouble(w, "fsync_us", "%.1f", sn->fsync_us);
  kc_json_kdouble(w, "app_launch_us", "%.3f", ms >= 0 ? ms * 1000.0 : -1.0);
  kc_json_kdouble(w, "app_to_capture_s", "%.3f", C.t_capture_start - S.t0);
  kc_json_ku64(w, "before_bytes", sn->stored_bytes[0]);
  kc_json_ku64(w, "after_bytes", sn->stored_bytes[1]);
  kc_json_end_object(w);
  kc_json_key(w, "hsa");
  kc_json_null(w);
  kc_json_end_object(w);
  fputc('\n', f);
  fclose(f);
  rename(t, p);
}

static void add_global(const char *name, void *ud) {
  CUmodule h = ud;
  CUdeviceptr d = 0;
  size_t size = 0;
  S.g_symbols++;
  if (!strncmp(name, "$str", 4)) return; /* nvcc's string literals: constants of the image itself */
  if (p_cuModuleGetGlobal_v2(&d, &size, h, name) != CUDA_SUCCESS || !d || !size) return;
  for (size_t i = 0; i < S.ng; i++)
    if (S.g[i].va == (uint64_t)d) return; /* the same variable in two cubin entries */
  if (S.ng == S.cg) {
    size_t c = S.cg ? S.cg * 2 : 16;
    kglobal_t *g = realloc(S.g, c * sizeof *g);
    if (!g) return;
    S.g = g;
    S.cg = c;
  }
  S.g[S.ng].name = strdup(name);
  S.g[S.ng].va = d;
  S.g[S.ng].size = size;
  if (S.g[S.ng].name) S.ng++;
}

/* The module globals of the captured kernel's module, read from its image (kc_symbols.h). */
static void collect_globals_of(CUfunction f, const char *name) {
  CUmodule h = module_of(f);
  module_t *m = h ? find_module(name, h) : NULL;
  if (!m || !p_cuModuleGetGlobal_v2) return;
  CUdevice dev = 0;
  int ma = 0, mi = 0;
  p_cuCtxGetDevice(&dev);
  p_cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  p_cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  kc_module_objects((const unsigned char *)m->bytes, m->size, (unsigned)(ma * 10 + mi), add_global, h, &S.g_skipped);
  logf_("module globals: %zu of %d data symbols (%d unreadable cubin entries)", S.ng, S.g_symbols, S.g_skipped);
}
static void collect_globals(void) { collect_globals_of(C.L.f, C.name); }

/* Before state of every live region and module global (kc_snapshot.h). */
static int snapshot_before(void) {
  size_t n = S.nregions + S.ng;
  if (kc_snap_init(&C.sn, n)) return -1;
  for (size_t i = 0; i < S.nregions; i++)
    if (kc_item_init(&C.sn, i, S.regions[i].va, S.regions[i].size, S.regions[i].kind, NULL)) return -1;
  for (size_t i = 0; i < S.ng; i++)
    if (kc_item_init(&C.sn, S.nregions + i, S.g[i].va, S.g[i].size, "global", S.g[i].name)) return -1;
  char pp[4200];
  path_join(pp, sizeof pp, "progress");
  C.sn.progress_fd = open(pp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  S.own_load = 1; /* the scan module's MODULE_LOADED is ours, not the application's */
  kc_snap_plan(&C.sn);
  S.own_load = 0;
  return kc_snap_pass(&C.sn, 0);
}

/* Launch entry of the matched launch: sync, before state, params, module, start event. */
static void capture_enter(CUpti_CallbackData *cb) {
  (void)cb;
  C.t_capture_start = now_s();
  double t = now_s();
  if (CU_CHECK(p_cuCtxSynchronize())) return;
  C.t_sync = (now_s() - t) * 1e6;
  collect_globals();
  if (pack_params()) { if (S.enabled) FAIL("cannot pack kernel parameters"); return; }
  if (write_file("kernel/params.bin", C.params, C.params_size)) return;
  C.mod = find_module(C.name, module_of(C.L.f)); /* now: after a fault the driver answers nothing */
  if (snapshot_before()) { kc_snap_free(&C.sn); return; }
  if (p_cuEventCreate(&C.ev0, CU_EVENT_DEFAULT) == CUDA_SUCCESS && p_cuEventCreate(&C.ev1, CU_EVENT_DEFAULT) == CUDA_SUCCESS) {
    /* 100 µs of kc_spin ahead of the start event: the stream is busy while the application's
     * launch is submitted, so ev0→ev1 is the kernel's GPU time, not the launch path (kc_scan.cu) */
    unsigned long long ns = 100000;
    void *spin_args[] = {&ns};
    C.timing_method = "events";
    if (C.sn.spin && p_cuLaunchKernel(C.sn.spin, 1, 1, 1, 1, 1, 1, 0, C.L.stream, spin_args, NULL) == CUDA_SUCCESS)
      C.timing_method = "events after kc_spin (launch path hidden)";
    p_cuEventRecord(C.ev0, C.L.stream);
  } else C.ev0 = C.ev1 = NULL;
}

/* Errors that cuCtxSynchronize returns when the kernel itself faulted (sticky: the context is
 * unusable afterwards, in the application as without kerncap). */
static int is_kernel_fault(CUresult r) {
  switch ((int)r) {
    case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718: case 719: return 1;
    default: return 0;
  }
}

static void capture_exit(void) {
  if (C.ev1) p_cuEventRecord(C.ev1, C.L.stream);
  CUresult sr = p_cuCtxSynchronize();
  if (sr != CUDA_SUCCESS && is_kernel_fault(sr)) {
    /* The captured launch faulted: what the engineer wants to reproduce. The before state, the
     * parameters and the module are already written; there is no after state (device memory
     * cannot be read any more). The application then fails exactly as it would without us. */
    C.fault = sr;
    if (kc_open_out("memory/after.bin", &C.sn.fd_after) || kc_snap_sync(&C.sn)) { kc_snap_free(&C.sn); return; }
  } else {
    if (CU_CHECK(sr)) return;
    if (kc_snap_pass(&C.sn, 1) || kc_snap_sync(&C.sn)) { kc_snap_free(&C.sn); return; }
  }
  module_t *m = C.mod ? C.mod : find_module(C.name, module_of(C.L.f));
  if (!m) { FAIL("no loaded module image contains %s (%zu images seen)", C.name, S.nmodules); return; }
  char modfile[64];
  snprintf(modfile, sizeof modfile, "kernel/module.%s", module_kind(m));
  if (write_file(modfile, m->bytes, m->size)) return;
  write_raw_json(m, modfile);
  uint64_t bb = C.sn.stored_bytes[0], ab = C.sn.stored_bytes[1];
  kc_snap_free(&C.sn);
  logf_("captured %s (launch %llu): %llu bytes stored before, %llu after", C.name, (unsigned long long)C.launch_index,
        (unsigned long long)bb, (unsigned long long)ab);
  S.ncaptures++;
  if (several()) {
    /* several captures: this one is complete in its folder; the next matching launch starts afresh */
    int all = 1;
    if (S.capture_all) all = S.ncaptures >= S.max_captures;
    else if (S.launch_count > 1) all = S.ncaptures >= S.launch_count;
    else {
      S.tdone[C.target] = 1;
      for (int t = 0; t < S.ntargets; t++) all &= S.tdone[t];
    }
    free(C.params);
    for (size_t i = 0; i < S.ng; i++) free(S.g[i].name);
    S.ng = 0;
    C = (capture_t){.graph_id = -1};
    S.capdir[0] = 0;
    if (!all) { write_kernels_json(0); return; }
  }
  S.done = 1;
  S.counting_off = "capture written; CUPTI handed back"; /* run mode: a later profiler in the app gets CUPTI */
  kc_cupti_done(S.counting_off, S.launches, 1);
  write_kernels_json(0);
  if (S.exit_after) _exit(0);
}

/* Graph path (kc_graphs.h): C.L describes the node; capture it as a launch that kerncap makes
 * itself on C.L.stream. Returns 0 when the capture was written. */
static int capture_snapshot_and_launch(void) {
  int exit_after = S.exit_after;
  S.exit_after = 0; /* the application's state is put back first */
  capture_enter(NULL);
  if (!S.enabled || !C.sn.items) { S.exit_after = exit_after; return -1; }
  /* the node's launch attributes (clusters, cooperative, priority) need cuLaunchKernelEx */
  CUresult r = C.L.config ? (p_cuLaunchKernelEx ? p_cuLaunchKernelEx(C.L.config, C.L.f, C.L.kernel_params, C.L.extra) : CUDA_ERROR_NOT_SUPPORTED)
                          : p_cuLaunchKernel(C.L.f, C.L.grid[0], C.L.grid[1], C.L.grid[2], C.L.block[0], C.L.block[1], C.L.block[2], C.L.shmem,
                                             C.L.stream, C.L.kernel_params, C.L.extra);
  C.timing_method = "events around kerncap's own launch of the node, after kc_spin (not inside the application's graph)";
  if (CU_CHECK(r)) { kc_snap_free(&C.sn); S.exit_after = exit_after; return -1; }
  capture_exit();
  S.exit_after = exit_after;
  return S.done ? 0 : -1;
}

/* ---- callbacks ---- */
static int decode_launch(CUpti_CallbackId cbid, const void *params, launch_t *L) {
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
 * target, bit 0 (any kernel). Called once per name (kstat_t.asked). A collective kernel (NCCL,
 * RCCL, NVSHMEM: c/kc_collective.h) matches none: it waits on its peers, so no synchronize or
 * snapshot may run around it; it is only counted (kerncap run then says why it was not captured). */
static uint64_t target_mask(const char *name) {
  if (kc_is_collective(name)) {
    logf_("%s is a collective kernel: counted, never captured", name);
    return 0;
  }
  if (!S.ntargets) return 1;
  uint64_t m = 0;
  char *d = NULL;
  for (int t = 0; t < S.ntargets; t++) {
    if (regexec(&S.re[t], name, 0, NULL, 0) == 0) { m |= 1ull << t; continue; }
    if (!d) d = demangle(name);
    if (regexec(&S.re[t], d, 0, NULL, 0) == 0) m |= 1ull << t;
  }
  free(d);
  return m;
}
static int name_matches(const char *name) { return target_mask(name) != 0; }

/* Count a matching launch toward --dispatch and say which target it is the capture of (-1: none).
 * One target: its Nth matching launch (with KERNCAP_LAUNCH_COUNT=K, the Nth to the N+K-1th). Several:
 * each target's Nth. capture_all: each kernel's Nth. */
static int pick_target(kstat_t *k) {
  if (S.capture_all) {
    uint64_t n = k->own++;
    if (n != (uint64_t)S.dispatch || k->captured || S.ncaptures >= S.max_captures) return -1;
    k->captured = 1;
    return 0;
  }
  int pick = -1;
  for (int t = 0; t < (S.ntargets ? S.ntargets : 1); t++) {
    if (!(k->mask >> t & 1)) continue;
    long m = S.tmatches[t]++;
    if (m >= S.dispatch && m < S.dispatch + S.launch_count && !S.tdone[t] && pick < 0) pick = t;
  }
  return pick;
}

/* Several captures in one run: the next one goes to KERNCAP_OUT/captures/<n>/. */
static int open_capture_folder(void) {
  if (!several()) return 0;
  const char *sub[] = {"", "/kernel", "/memory"};
  for (int i = 0; i < 3; i++) {
    char p[4300];
    if (strlen(S.out) > sizeof S.capdir - 32) { FAIL("KERNCAP_OUT is too long for several captures"); return -1; }
    int w = snprintf(S.capdir, sizeof S.capdir, "%.4000s/captures/%d", S.out, S.ncaptures);
    (void)w;
    snprintf(p, sizeof p, "%s%s", S.capdir, sub[i]);
    if (i == 0) {
      char parent[4300];
      snprintf(parent, sizeof parent, "%s/captures", S.out);
      mkdir(parent, 0755);
    }
    if (mkdir(p, 0755) && errno != EEXIST) { FAIL("cannot create %s: %s", p, strerror(errno)); return -1; }
  }
  return 0;
}

#include "kc_graphs.h"

static void on_launch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  launch_t L;
  if (!decode_launch(cbid, cb->functionParams, &L)) return;
  const char *name = cb->symbolName ? cb->symbolName : "(unknown)";
  if (cb->callbackSite == CUPTI_API_EXIT) {
    /* a lazily loaded module came in during this launch: it is the launched function's */
    if (tl_loaded && S.capture && !S.done) module_bind(tl_loaded_id, module_of(L.f));
    tl_loaded = 0;
    if (C.L.api && !S.done && S.enabled && C.launch_index + 1 == S.launches && !strcmp(name, C.name)) capture_exit();
    return;
  }
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (p_cuStreamIsCapturing(L.stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) {
    /* recorded into a graph by stream capture: not an execution (the graph launch counts it) */
    kstat_t *kr = kstat_get(name);
    if (kr) kr->recorded++;
    return;
  }
  uint64_t idx = S.launches++;
  kstat_t *k = kstat_get(name);
  tl_loaded = 0;
  int bench = ignore_launches && !S.count_benchmarks;
  if (k) {
    k->count++;
    if (bench) k->benchmark++;
    memcpy(k->grid, L.grid, sizeof L.grid);
    memcpy(k->block, L.block, sizeof L.block);
    /* Once per kernel name, not per launch: this may load the function's module lazily (firing
     * MODULE_LOADED), which binds the image to its CUmodule. A module that loads later, inside a
     * launch, is bound at that launch's exit. */
    if (!k->module) {
      CUmodule mod = module_of(L.f);
      k->module = (uint64_t)(uintptr_t)mod;
      if (tl_loaded && S.capture && !S.done) module_bind(tl_loaded_id, mod);
    }
  }
  tl_loaded = 0;
  if (now_s() - S.census_t >= 1.0) write_kernels_json(0); /* survives a process that ends with _exit */
  if (!S.capture || S.done || !S.enabled || C.L.api || bench) return;
  /* the regexes (and the demangling they may need) run once per name, not once per launch */
  if (!k) return;
  if (!k->asked) { k->mask = target_mask(name); k->asked = 1; }
  if (!k->mask) return;
  if (KG.target_in_graph && !several()) return; /* --dispatch already fell inside a graph launch */
  long m = S.capture_all ? (long)k->own : S.tmatches[0];
  int target = pick_target(k);
  if (target < 0) return;
  if (!S.claimed) { /* ---- exactly one process of the job captures (c/kc_process.h) ---- */
    int won = kc_claim(&KP);
    if (won < 0) { FAIL("cannot create the capture claim %s/claim: %s", S.out, strerror(errno)); return; }
    if (!won) {
      logf_("pid %d: another process claimed the capture first; this one only counted", (int)getpid());
      S.capture = 0;
      S.counting_off = "another process claimed the capture; CUPTI handed back";
      kc_cupti_done(S.counting_off, S.launches, 1);
      write_kernels_json(0);
      return;
    }
    S.claimed = 1;
  }
  if (open_capture_folder()) return;
  C.L = L;
  C.target = target;
  C.launch_index = idx;
  C.match_index = S.ntargets > 1 && !S.capture_all ? S.dispatch : m;
  snprintf(C.name, sizeof C.name, "%s", name);
  capture_enter((CUpti_CallbackData *)cb);
}

/* Updates of an executable graph in place (kc_graphs.h): followed at API exit, when they succeeded. */
static void on_graph_node_update(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue || *(CUresult *)cb->functionReturnValue != CUDA_SUCCESS) return;
  const void *p = cb->functionParams;
  const kc_exec_node_params *en = p;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2: kc_graph_exec_updated(p); break; /* list mode too: kernel names */
    case CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled: kc_graph_node_enabled(p); break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2:
      if (S.capture && !S.done) kc_graph_node_updated(en->hGraphExec, en->hNode, ((const cuGraphExecKernelNodeSetParams_v2_params *)p)->nodeParams);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams: { /* the CUDA 11 struct: CUDA_KERNEL_NODE_PARAMS_v1, without kern and ctx */
      const CUDA_KERNEL_NODE_PARAMS_v1 *v1 = ((const cuGraphExecKernelNodeSetParams_params *)p)->nodeParams;
      if (!S.capture || S.done || !v1) break;
      CUDA_KERNEL_NODE_PARAMS np;
      memset(&np, 0, sizeof np);
      np.func = v1->func;
      np.gridDimX = v1->gridDimX; np.gridDimY = v1->gridDimY; np.gridDimZ = v1->gridDimZ;
      np.blockDimX = v1->blockDimX; np.blockDimY = v1->blockDimY; np.blockDimZ = v1->blockDimZ;
      np.sharedMemBytes = v1->sharedMemBytes;
      np.kernelParams = v1->kernelParams;
      np.extra = v1->extra;
      kc_graph_node_updated(en->hGraphExec, en->hNode, &np);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
      CUgraphNodeParams *gp = ((const cuGraphExecNodeSetParams_params *)p)->nodeParams;
      if (!S.capture || S.done || !gp) break;
      if (gp->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        CUDA_KERNEL_NODE_PARAMS np; /* CUDA_KERNEL_NODE_PARAMS_v3 is laid out as _v2 */
        memcpy(&np, &gp->kernel, sizeof np);
        kc_graph_node_updated(en->hGraphExec, en->hNode, &np);
      } else kc_graph_other_updated(en->hGraphExec, en->hNode, gp->type, NULL, gp);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams:
      if (S.capture && !S.done) kc_graph_other_updated(en->hGraphExec, en->hNode, CU_GRAPH_NODE_TYPE_MEMCPY, ((const cuGraphExecMemcpyNodeSetParams_params *)p)->copyParams, NULL);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams:
      if (S.capture && !S.done) kc_graph_other_updated(en->hGraphExec, en->hNode, CU_GRAPH_NODE_TYPE_MEMSET, ((const cuGraphExecMemsetNodeSetParams_params *)p)->memsetParams, NULL);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams:
      if (S.capture && !S.done) kc_graph_other_updated(en->hGraphExec, en->hNode, CU_GRAPH_NODE_TYPE_GRAPH, ((const cuGraphExecChildGraphNodeSetParams_params *)p)->childGraph, NULL);
      break;
    default: break;
  }
}

static void on_graph(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) {
    if (cb->callbackSite == CUPTI_API_ENTER) kc_graph_launched(((const cuGraphLaunch_params *)cb->functionParams)->hGraph);
    return;
  }
  if (cb->callbackSite == CUPTI_API_EXIT && cb->functionReturnValue && *(CUresult *)cb->functionReturnValue == CUDA_SUCCESS)
    kc_graph_instantiated(cb->functionParams);
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
  if (!md || S.own_load) return;
  if (S.nmodules == S.cmodules) {
    size_t n = S.cmodules ? S.cmodules * 2 : 64;
    module_t *m = realloc(S.modules, n * sizeof *m);
    if (!m) { FAIL("out of host memory for the module table"); return; }
    S.modules = m;
    S.cmodules = n;
  }
  module_t *m = &S.modules[S.nmodules++];
  m->id = md->moduleId;
  m->size = md->cubinSize;
  m->bytes = NULL;
  m->handle = NULL;
  tl_loaded_id = md->moduleId;
  tl_loaded = 1;
  /* the image is only valid during the callback: keep a copy while a capture may still come */
  if (S.capture && !S.done && md->pCubin && md->cubinSize) {
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
  if (out) module_bind(tl_loaded_id, *out);
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
  X(cuGraphLaunch, on_graph) X(cuGraphLaunch_ptsz, on_graph) X(cuGraphInstantiate, on_graph)               \
  X(cuGraphInstantiate_v2, on_graph) X(cuGraphInstantiateWithFlags, on_graph)                              \
  X(cuGraphInstantiateWithParams, on_graph) X(cuGraphInstantiateWithParams_ptsz, on_graph)                 \
  X(cuGraphExecKernelNodeSetParams_v2, on_graph_node_update) X(cuGraphExecKernelNodeSetParams, on_graph_node_update) \
  X(cuGraphExecNodeSetParams, on_graph_node_update) X(cuGraphExecMemcpyNodeSetParams, on_graph_node_update)           \
  X(cuGraphExecMemsetNodeSetParams, on_graph_node_update) X(cuGraphExecChildGraphNodeSetParams, on_graph_node_update) \
  X(cuGraphExecUpdate, on_graph_node_update) X(cuGraphExecUpdate_v2, on_graph_node_update)                           \
  X(cuGraphNodeSetEnabled, on_graph_node_update)

static void CUPTIAPI callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  (void)ud;
  if (!S.enabled || KCU.released) return;
  if (dom == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    /* also while in_tool: our cuFuncGetModule may be what loads a lazy module */
    pthread_mutex_lock(&S.mu);
    on_module_loaded(data);
    pthread_mutex_unlock(&S.mu);
    return;
  }
  if (in_tool) return;
  in_tool = 1;
  pthread_mutex_lock(&S.mu);
  if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
    const CUpti_CallbackData *cb = data;
    switch (cbid) {
#define KC_CASE(name, handler) case CUPTI_DRIVER_TRACE_CBID_##name: handler(cbid, cb); break;
      KC_DRIVER_CALLBACKS(KC_CASE)
#undef KC_CASE
      default: break;
    }
  }
  pthread_mutex_unlock(&S.mu);
  in_tool = 0;
}

/* ---- set-up ---- */
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
  if (!S.out[0]) return;
  pthread_mutex_lock(&S.mu);
  write_kernels_json(1);
  pthread_mutex_unlock(&S.mu);
}

static int setup(void) {
  const char *out = getenv("KERNCAP_OUT");
  if (!out || !*out) return -1; /* not started by kerncap: stay inert */
  snprintf(S.out, sizeof S.out, "%s", out);
  S.t0 = now_s();
  { /* ---- processes of a job (c/kc_process.h): number this one, apply --rank/--process ---- */
    char perr[256] = "";
    int prc = kc_proc_init(&KP, S.out, perr, sizeof perr);
    if (KP.number < 0) fprintf(stderr, "[kerncap] cannot number this process in %s/processes: %s\n", S.out, strerror(errno));
    atexit(at_exit); /* every process leaves its census, even when capture is off */
    if (prc) { FAIL("%s", perr); return -1; }
  }
  S.log = getenv("KERNCAP_LOG") && !strcmp(getenv("KERNCAP_LOG"), "1");
  const char *mode = getenv("KERNCAP_MODE");
  S.capture = mode && !strcmp(mode, "capture");
  S.exit_after = getenv("KERNCAP_EXIT_AFTER_CAPTURE") && !strcmp(getenv("KERNCAP_EXIT_AFTER_CAPTURE"), "1");
  S.count_benchmarks = getenv("KERNCAP_COUNT_BENCHMARKS") && !strcmp(getenv("KERNCAP_COUNT_BENCHMARKS"), "1");
  const char *d = getenv("KERNCAP_DISPATCH");
  S.dispatch = d ? strtol(d, NULL, 10) : 0;
  const char *re = getenv("KERNCAP_KERNEL");
  if (re && *re) { /* one regex per line */
    char *copy = strdup(re), *save = NULL;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
      if (S.ntargets == KC_MAX_TARGETS) { FAIL("more than %d --kernel targets", KC_MAX_TARGETS); free(copy); return -1; }
      if (regcomp(&S.re[S.ntargets], line, REG_EXTENDED | REG_NOSUB)) { FAIL("invalid --kernel regex: %s", line); free(copy); return -1; }
      S.ntargets++;
    }
    free(copy);
  }
  S.capture_all = getenv("KERNCAP_CAPTURE_ALL") && !strcmp(getenv("KERNCAP_CAPTURE_ALL"), "1");
  const char *mc = getenv("KERNCAP_MAX_CAPTURES");
  S.max_captures = mc && atoi(mc) > 0 ? atoi(mc) : 64;
  const char *lc = getenv("KERNCAP_LAUNCH_COUNT");
  S.launch_count = lc && strtol(lc, NULL, 10) > 0 ? strtol(lc, NULL, 10) : 1;
  S.enabled = 1;
  if (S.capture && !KP.admitted) {
    /* not selected by --rank/--process: hold no CUPTI at all (the application's profiler keeps
     * working) and leave a census that says why this process was not counted */
    S.counting_off = KP.why;
    logf_("pid %d not selected (%s): not subscribing to CUPTI", KP.pid, KP.why);
    write_kernels_json(0);
    return 0;
  }

  char tried[4096] = "";
  const char *cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
  void *cu = open_lib(cuda_names, tried, sizeof tried);
  if (!cu) { FAIL("libcuda not loadable (tried %s)", tried); return -1; }
#define LOAD_CU(name) p_##name = (__typeof__(p_##name))dlsym(cu, #name);
  CU_FUNCS(LOAD_CU)
  if (!p_cuCtxSynchronize || !p_cuMemcpyDtoH_v2 || !p_cuFuncGetAttribute) { FAIL("libcuda lacks required entry points"); return -1; }

  tried[0] = 0;
  const char *env_cupti = getenv("KERNCAP_CUPTI_PATH");
  const char *cupti_names[] = {env_cupti ? env_cupti : "", "libcupti.so", "libcupti.so.13", "libcupti.so.12", NULL};
  void *cp = open_lib(cupti_names, tried, sizeof tried);
  if (!cp) { FAIL("libcupti not found (tried %s); set KERNCAP_CUPTI_PATH", tried); return -1; }
#define LOAD_CUPTI(name) p_##name = (__typeof__(p_##name))dlsym(cp, #name); \
  if (!p_##name) { FAIL("libcupti lacks %s", #name); return -1; }
  CUPTI_FUNCS(LOAD_CUPTI)

  const char *cxx_names[] = {"libstdc++.so.6", NULL};
  tried[0] = 0;
  void *cxx = open_lib(cxx_names, tried, sizeof tried);
  if (cxx) S.demangle = (__typeof__(S.demangle))dlsym(cxx, "__cxa_demangle");

  /* cuptiSubscribe_v2 when libcupti has it: a refusal then names the tool holding CUPTI (c/kc_cupti.h) */
  CUptiResult r = kc_cupti_subscribe(cp, p_cuptiSubscribe, p_cuptiUnsubscribe, &S.sub, (CUpti_CallbackFunc)callback);
  if (r != CUPTI_SUCCESS) {
    const char *s = "";
    p_cuptiGetResultString(r, &s);
    char msg[1024];
    kc_cupti_busy_message(msg, sizeof msg, r, s);
    FAIL("%s", msg);
    return -1;
  }
  static const CUpti_CallbackId driver_cbids[] = {
#define KC_ID(name, handler) CUPTI_DRIVER_TRACE_CBID_##name,
      KC_DRIVER_CALLBACKS(KC_ID)
#undef KC_ID
  };
  for (size_t i = 0; i < sizeof driver_cbids / sizeof *driver_cbids; i++)
    p_cuptiEnableCallback(1, S.sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_cbids[i]);
  p_cuptiEnableCallback(1, S.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  logf_("injected: mode=%s kernel=%s dispatch=%ld out=%s", S.capture ? "capture" : "list", re ? re : "(any)", S.dispatch,
        S.out);
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
