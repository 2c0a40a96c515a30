/* Plays a CUDA application's launches into the CUDA capture library without a GPU: loads the
 * library (as libcuda would at cuInit), takes the callback it subscribed from the stand-in
 * libcupti (c/test/fake_cuda.c), announces one module image holding every kernel name, then calls
 * the callback at API entry and exit of a cuLaunchKernel for each launch, as CUPTI does.
 *
 *   launch_main LIB seq NAME...          one launch per NAME, in order (test/cpu/c-match.test.ts)
 *   launch_main LIB bench N NAME...      N launches cycling over the NAMEs; prints the ns per
 *                                        launch of the callbacks (scripts/bench-launch-path.sh)
 *   launch_main LIB threads T N NAME...  T threads at once, N launches each cycling over the NAMEs
 *                                        (test/cpu/c-match.test.ts: every one counted)
 *   launch_main LIB nvtx EVENT...        NAME launches as seq does, between real NVTX calls: push:R
 *                                        (nvtxRangePushA), pop (nvtxRangePop); NVTX 3 loads the
 *                                        library named by NVTX_INJECTION64_PATH (test/cpu/nvtx.test.ts)
 *   launch_main LIB module IMAGE CUBIN NAME...   the module announced as a load of a real image:
 *                                        cuModuleLoadData(IMAGE) whose MODULE_LOADED hands CUBIN
 *   launch_main LIB file IMAGE CUBIN NAME...     the same through cuModuleLoad(IMAGE's path)
 *   launch_main LIB library IMAGE CUBIN NAME...  cuLibraryLoadData(IMAGE in a __fatBinC_Wrapper_t),
 *                                        then CUBIN's MODULE_LOADED later, outside any call (lazy)
 *   launch_main LIB cbids -              the callbacks the library enabled at set-up, one "DOMAIN CBID"
 *                                        line each (test/cpu/c-launch-path.test.ts)
 *   launch_main LIB lazy - CUBIN NAME...  CUBIN's MODULE_LOADED alone, as the runtime's lazy load of
 *                                        a fatbin in this program's .nv_fatbin section (the test
 *                                        links one in); then one launch per NAME
 *                                        (test/cpu/c-fatbin.test.ts: which image the capture keeps)
 *
 * With KC_COUNT_REGEXEC=1 in the environment, the program prints "regexec N" on stderr at exit: the
 * calls the library made to regexec (the kernel-name matcher), counted by the regexec defined here
 * when the program is linked with -rdynamic (the library's calls then reach it first).
 * Each distinct name gets its own function handle, as a module's functions do. The library reads
 * its KERNCAP_* settings from the environment; it finds the stand-in libcuda.so.1 through
 * LD_LIBRARY_PATH and libcupti through KERNCAP_CUPTI_PATH. Links against the stand-in libcupti. */
#include <cuda.h>
#include <cupti.h>
#include <nvtx3/nvToolsExt.h>
#include <dlfcn.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*kc_fake_cb)(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *);
kc_fake_cb fake_cupti_callback(void);
int fake_cupti_enabled(int i, int *domain, unsigned *cbid);

/* regexec, counted (KC_COUNT_REGEXEC): the library's own matcher runs through it. */
static long regexec_calls;
int regexec(const regex_t *re, const char *s, size_t n, regmatch_t *m, int flags) {
  static int (*real)(const regex_t *, const char *, size_t, regmatch_t *, int);
  if (!real) real = (int (*)(const regex_t *, const char *, size_t, regmatch_t *, int))dlsym(RTLD_NEXT, "regexec");
  __atomic_fetch_add(&regexec_calls, 1, __ATOMIC_RELAXED);
  return real ? real(re, s, n, m, flags) : REG_NOMATCH;
}
__attribute__((destructor)) static void report_regexec(void) {
  const char *c = getenv("KC_COUNT_REGEXEC");
  if (c && !strcmp(c, "1")) fprintf(stderr, "regexec %ld\n", __atomic_load_n(&regexec_calls, __ATOMIC_RELAXED));
}

static const char **names;
static int nnames;
static CUresult ok = CUDA_SUCCESS;

static CUfunction *handles;

/* The function handle of each name: one per distinct name (the index of its first occurrence). */
static void make_handles(void) {
  handles = calloc(nnames, sizeof *handles);
  for (int i = 0; i < nnames; i++) {
    int j = 0;
    while (strcmp(names[j], names[i])) j++;
    handles[i] = (CUfunction)(uintptr_t)(0x10000 + 64 * j);
  }
}

/* One cuLaunchKernel of kernel i through the callback (entry, then exit). 0, or -1 once the
 * library has handed CUPTI back (no callback any more). */
static int launch(int i, unsigned grid) {
  kc_fake_cb cb = fake_cupti_callback();
  if (!cb) return -1;
  cuLaunchKernel_params p = {.f = handles[i], .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1};
  CUpti_CallbackData d = {.callbackSite = CUPTI_API_ENTER, .functionName = "cuLaunchKernel", .functionParams = &p,
                          .functionReturnValue = &ok, .symbolName = names[i]};
  cb(NULL, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d);
  d.callbackSite = CUPTI_API_EXIT;
  cb = fake_cupti_callback();
  if (cb) cb(NULL, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d);
  return 0;
}

static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(*n + 1);
  if (b && fread(b, 1, *n, f) != *n) { free(b); b = NULL; }
  fclose(f);
  return b;
}

/* One driver API call with a module or library load inside, as CUPTI reports it. */
static void api_call(CUpti_CallbackId cbid, const char *name, void *params, int site) {
  kc_fake_cb cb = fake_cupti_callback();
  CUpti_CallbackData d = {.callbackSite = site, .functionName = name, .functionParams = params, .functionReturnValue = &ok};
  if (cb) cb(NULL, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}

static void module_loaded(const char *cubin, size_t n) {
  kc_fake_cb cb = fake_cupti_callback();
  CUpti_ModuleResourceData md = {.moduleId = 1, .cubinSize = n, .pCubin = cubin};
  CUpti_ResourceData rd = {.resourceDescriptor = &md};
  if (cb) cb(NULL, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
}

/* module / library / lazy: announce CUBIN as the loaded module of IMAGE (see the usage above). */
static int load_real(const char *mode, const char *image_path, const char *cubin_path) {
  size_t n = 0, in = 0;
  char *cubin = read_all(cubin_path, &n), *image = strcmp(image_path, "-") ? read_all(image_path, &in) : NULL;
  if (!cubin || (strcmp(image_path, "-") && !image)) { fprintf(stderr, "cannot read %s or %s\n", image_path, cubin_path); return 2; }
  CUmodule mod = (CUmodule)(uintptr_t)0x5000; /* what the stand-in cuFuncGetModule answers */
  if (!strcmp(mode, "module")) {
    cuModuleLoadData_params p = {.module = &mod, .image = image};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, "cuModuleLoadData", &p, CUPTI_API_ENTER);
    module_loaded(cubin, n);
    api_call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, "cuModuleLoadData", &p, CUPTI_API_EXIT);
  } else if (!strcmp(mode, "file")) {
    cuModuleLoad_params p = {.module = &mod, .fname = image_path};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoad, "cuModuleLoad", &p, CUPTI_API_ENTER);
    module_loaded(cubin, n);
    api_call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoad, "cuModuleLoad", &p, CUPTI_API_EXIT);
  } else if (!strcmp(mode, "library")) {
    struct { unsigned magic, version; const void *data; void *unused; } wrapper = {0x466243b1u, 1, image, NULL};
    CUlibrary lib = NULL;
    cuLibraryLoadData_params p = {.library = &lib, .code = &wrapper};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData, "cuLibraryLoadData", &p, CUPTI_API_ENTER);
    api_call(CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData, "cuLibraryLoadData", &p, CUPTI_API_EXIT);
    module_loaded(cubin, n);
  } else {
    module_loaded(cubin, n);
  }
  /* the image stays allocated until the capture is written, as an application's would */
  for (int i = 0; i < nnames && launch(i, 1 + i) == 0; i++) {}
  free(image);
  free(cubin);
  return 0;
}

static long per_thread;
static void *thread_main(void *arg) {
  for (long i = 0; i < per_thread; i++) launch((int)((i + (long)(intptr_t)arg) % nnames), 1 + (unsigned)(i & 7));
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: %s LIB seq NAME... | LIB bench N NAME... | LIB threads T N NAME... | LIB nvtx EVENT... | LIB cbids - | LIB module|file|library|lazy IMAGE CUBIN NAME...\n", argv[0]); return 2; }
  int bench = !strcmp(argv[2], "bench"), threads = !strcmp(argv[2], "threads") ? atoi(argv[3]) : 0;
  int real = !strcmp(argv[2], "module") || !strcmp(argv[2], "file") || !strcmp(argv[2], "library") || !strcmp(argv[2], "lazy");
  if (real && argc < 6) return 2;
  long n = bench ? atol(argv[3]) : 0;
  int nvtx = !strcmp(argv[2], "nvtx");
  int skip = bench ? 4 : threads ? 5 : real ? 5 : 3;
  if (threads && argc < 6) return 2;
  per_thread = threads ? atol(argv[4]) : 0;
  names = (const char **)argv + skip;
  nnames = argc - skip;
  const char **events = names;
  int nevents = nnames;
  if (nvtx) { /* the kernels are the events that are not NVTX calls */
    names = calloc(nevents, sizeof *names);
    nnames = 0;
    for (int i = 0; i < nevents; i++)
      if (strncmp(events[i], "push:", 5) && strcmp(events[i], "pop")) names[nnames++] = events[i];
  }
  if (nnames < 1) return 2;
  make_handles();
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
  if (!init || init() != 1) { fprintf(stderr, "InitializeInjection missing or failed\n"); return 2; }
  kc_fake_cb cb = fake_cupti_callback();
  if (!cb) { fprintf(stderr, "the library did not subscribe (see its error file)\n"); return 3; }
  if (!strcmp(argv[2], "cbids")) {
    int dom;
    unsigned id;
    for (int i = 0; fake_cupti_enabled(i, &dom, &id); i++) printf("%d %u\n", dom, id);
    return 0;
  }
  if (real) return load_real(argv[2], argv[3], argv[4]);
  /* the module image: every name, NUL-separated (the library finds a kernel's image by its name) */
  size_t size = 0;
  for (int i = 0; i < nnames; i++) size += strlen(names[i]) + 1;
  char *image = calloc(1, size + 1), *at = image;
  for (int i = 0; i < nnames; i++) at = stpcpy(at, names[i]) + 1;
  CUpti_ModuleResourceData md = {.moduleId = 1, .cubinSize = size, .pCubin = image};
  CUpti_ResourceData rd = {.resourceDescriptor = &md};
  cb(NULL, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
  if (threads) {
    pthread_t t[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return 0;
  }
  if (nvtx) {
    for (int i = 0, k = 0; i < nevents; i++) {
      if (!strncmp(events[i], "push:", 5)) nvtxRangePushA(events[i] + 5);
      else if (!strcmp(events[i], "pop")) nvtxRangePop();
      else if (launch(k, 1 + k) == 0) k++;
      else break;
    }
    return 0;
  }
  if (!bench) {
    for (int i = 0; i < nnames && launch(i, 1 + i) == 0; i++) {}
    return 0;
  }
  for (int i = 0; i < 1000; i++) launch(i % nnames, 1); /* warm-up: every name known */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++) launch((int)(i % nnames), 1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n);
  return 0;
}
