/*
 * repro.c: replay one captured GPU kernel launch with the CUDA driver API alone.
 *
 * Written by `kerncap export`; needs the CUDA toolkit's headers and the driver, nothing of kerncap.
 * The capture's data is in data/ (README.md describes the files); capture.h holds the tables read
 * from data/kerncap.json: the kernel, its launch, function and launch attributes, the regions and
 * module globals with their stored chunks; repro_common.h the reading of the data files, the
 * restore and the judging, the same for every GPU runtime.
 *
 *   1. reserve every captured VA range at its exact address (cuMemAddressReserve, cuMemCreate,
 *      cuMemMap, cuMemSetAccess): pointers stored inside the memory stay valid;
 *   2. restore the before state: zero each range, copy its stored chunks from memory/before.bin;
 *   3. load the module (the captured image, or -m FILE), apply the function attributes, restore
 *      the module globals by name;
 *   4. launch once with the captured parameter bytes and launch attributes and compare every range
 *      with the after state: bit for bit, or element-wise within ATOL + RTOL * |expected|;
 *   5. time ITERS launches with CUDA events, each from the before state.
 *
 * Usage: ./repro [-m MODULE] [-n ITERS] [-d EXPORT_DIR] [-g DEVICE] [--no-verify | --verify-only]   (files are found under EXPORT_DIR, default .)
 * --no-verify: skip the check of the data files' checksums (it reads every stored byte once).
 * --verify-only: check the data files and exit (0, or 3), the driver never loaded: a machine without a GPU checks the data.
 * Exit: 0 match, 1 mismatch, 3 a data file damaged (its size or a checksum not the export's), 2 another error (no driver, a
 * CUDA error, a VA already taken, a missing file).
 *
 * The driver (libcuda.so.1) is loaded at run time, after the data files are checked: the program links no libcuda, builds
 * where the toolkit has no driver stub, and says itself when there is no driver. Builds with cuda.h of CUDA 12.0 or newer
 * (cuLaunchKernelEx, the newest call); runs on a driver of CUDA 12.0 or newer: an entry point the driver lacks is
 * named, exit 2.
 */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftello */
#define _FILE_OFFSET_BITS 64
#include <cuda.h>
#include <dlfcn.h>

#if !defined(CUDA_VERSION) || CUDA_VERSION < 12000
#error "repro.c needs cuda.h of CUDA 12.0 or newer (cuLaunchKernelEx): point CUDA_HOME at such a toolkit"
#endif

#include "capture.h"
#include "repro_common.h"

/* ---- 0. the driver, loaded at run time ------------------------------------------------ */

/* Every driver entry point the program calls, each through `drv`: drv.F is a pointer of cuda.h's
 * type for F, resolved by the name cuda.h gives F (its #defines map some calls to versioned
 * entry points: cuMemAlloc is cuMemAlloc_v2, cuEventElapsedTime cuEventElapsedTime_v2 in CUDA 13),
 * the name the linker would have used. cuda.h's declarations give the types (__typeof__). */
#define KC_DRIVER(X)                                                                                                   \
  X(cuGetErrorString) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)                         \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemCreate)    \
  X(cuMemMap) X(cuMemSetAccess) X(cuMemAlloc) X(cuMemsetD8) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)          \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuFuncGetAttribute) X(cuFuncSetAttribute)         \
  X(cuLaunchKernelEx) X(cuLaunchKernel) X(cuCtxSynchronize) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)   \
  X(cuEventElapsedTime)
#define KC_STR_(s) #s
#define KC_STR(s) KC_STR_(s) /* the name after cuda.h's #defines: KC_STR(cuMemAlloc) is "cuMemAlloc_v2" */
#define KC_MEMBER(f) __typeof__(f) *f;
static struct { KC_DRIVER(KC_MEMBER) } drv;

/* A driver without `sym` (dlsym found none): named, with the driver it needs, exit 2. Every call
 * but cuLaunchKernelEx (CUDA 12.0) is older than CUDA 12.0; a newer cuda.h may map a call to a
 * newer entry point, which a driver as new as that cuda.h has. cuDriverGetVersion, looked up here
 * alone, says which CUDA this driver is for. */
static void missing_entry_point(void *lib, const char *sym) {
  int have = 0;
  fprintf(stderr, "error: the NVIDIA driver has no %s: ./repro needs a driver for CUDA 12.0 or newer", sym);
  void *p = dlsym(lib, "cuDriverGetVersion");
  CUresult (*version)(int *) = NULL;
  if (p) memcpy(&version, &p, sizeof p);
  if (version && version(&have) == CUDA_SUCCESS) fprintf(stderr, " (this one is for CUDA %d.%d)", have / 1000, have % 1000 / 10);
  if (CUDA_VERSION > 12000)
    fprintf(stderr, ", or one for CUDA %d.%d (the cuda.h it was built with) if the name is that cuda.h's", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
  fprintf(stderr, ". Update the NVIDIA driver.\n");
  exit(2);
}

/* dlopen libcuda.so.1 (else libcuda.so) and resolve every entry point into `drv`; exit 2 saying
 * what is missing: no driver, or an entry point an older driver lacks. cuEventElapsedTime_v2
 * (CUDA 12.8, cuda.h 12.8 and newer map cuEventElapsedTime to it) falls back to the
 * cuEventElapsedTime of older drivers: the same arguments, the same milliseconds. */
static void load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    char why[512];
    snprintf(why, sizeof why, "%s", e ? e : "unknown error");
    lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "error: ./repro needs an NVIDIA GPU and its driver: libcuda.so.1 could not be loaded: %s\n", shown(why));
      exit(2);
    }
  }
#define KC_RESOLVE(f)                                                                                  \
  {                                                                                                    \
    void *p_ = dlsym(lib, KC_STR(f));                                                                  \
    if (!p_ && !strcmp(KC_STR(f), "cuEventElapsedTime_v2")) p_ = dlsym(lib, "cuEventElapsedTime");     \
    if (!p_) missing_entry_point(lib, KC_STR(f));                                                      \
    memcpy(&drv.f, &p_, sizeof p_);                                                                    \
  }
  KC_DRIVER(KC_RESOLVE)
#undef KC_RESOLVE
}

#define CK(call)                                                          \
  do {                                                                    \
    CUresult r_ = (call);                                                 \
    if (r_ != CUDA_SUCCESS) {                                             \
      const char *s_ = "unknown error";                                   \
      const char *c_ = #call;                                             \
      drv.cuGetErrorString(r_, &s_);                                      \
      if (!strncmp(c_, "drv.", 4)) c_ += 4;                               \
      fprintf(stderr, "error: %s failed (%d): %s\n", c_, (int)r_, s_);   \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

static void dev_zero(unsigned long long va, unsigned long long n) { CK(drv.cuMemsetD8((CUdeviceptr)va, 0, n)); }
static void dev_write(unsigned long long va, const void *src, size_t n) { CK(drv.cuMemcpyHtoD((CUdeviceptr)va, src, n)); }
static void dev_read(void *dst, unsigned long long va, size_t n) { CK(drv.cuMemcpyDtoH(dst, (CUdeviceptr)va, n)); }

/* ---- 1. the captured VAs --------------------------------------------------------------- */

/* Spans: the regions rounded out to ALIGN, touching ones merged. The driver takes the address as
 * a hint only; a reservation whose address and size are multiples of 32 MiB was granted exactly
 * at the hint on the GPUs kerncap was measured on, hence max(granularity, 32 MiB), as in kerncap. */
static void reserve_regions(CUdevice dev) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(drv.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  unsigned long long align = gran > (32ull << 20) ? gran : (32ull << 20);
  for (int i = 0; i < N_REGIONS;) { /* REGIONS are sorted by VA */
    unsigned long long start = REGIONS[i].va / align * align;
    unsigned long long end = (REGIONS[i].va + REGIONS[i].size + align - 1) / align * align;
    for (i++; i < N_REGIONS && REGIONS[i].va / align * align <= end; i++) {
      unsigned long long e = (REGIONS[i].va + REGIONS[i].size + align - 1) / align * align;
      if (e > end) end = e;
    }
    size_t size = (size_t)(end - start);
    CUdeviceptr got = 0;
    CUresult r = drv.cuMemAddressReserve(&got, size, 0, (CUdeviceptr)start, 0);
    if (r != CUDA_SUCCESS || got != start) {
      fprintf(stderr, "error: captured VA range 0x%llx-0x%llx (%zu bytes) is not free in this process", start, end, size);
      if (r == CUDA_SUCCESS) fprintf(stderr, " (the driver offered 0x%llx)", (unsigned long long)got);
      fprintf(stderr, "\n  Something already occupies it (another allocation, a host mapping); run ./repro on its own, or with ASLR off: setarch -R ./repro\n");
      exit(2);
    }
    CUmemGenericAllocationHandle h;
    CK(drv.cuMemCreate(&h, size, &prop, 0));
    CK(drv.cuMemMap((CUdeviceptr)start, size, 0, h, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(drv.cuMemSetAccess((CUdeviceptr)start, size, &acc, 1));
  }
}

/* ---- 3. the module --------------------------------------------------------------------- */

/* cuModuleLoadData on a fatbin picks the GPU's machine code or JIT-compiles the fatbin's PTX; a
 * bare cubin runs on its own architecture only, so the PTX the export extracted is the fallback. */
static CUmodule load_module(const char *path, int captured, const char *arch) {
  size_t n;
  char *image = read_file(path, &n);
  CUmodule mod;
  CUresult r = drv.cuModuleLoadData(&mod, image);
  free(image);
  int has_sass = strstr(" " MODULE_SASS " ", arch) != NULL;
  if (r == CUDA_SUCCESS && captured && !has_sass && MODULE_PTX[0])
    printf("module: no machine code for %s in the image (it has %s): the driver JIT-compiled its PTX (%s)\n", arch, shown(MODULE_SASS), shown(MODULE_PTX));
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU && captured && MODULE_PTX_FILE[0]) {
    printf("module: no machine code for %s in the image (it has %s): JIT-compiling its PTX (%s, %s)\n", arch, shown(MODULE_SASS), shown(MODULE_PTX), shown(MODULE_PTX_FILE));
    image = read_file(data_path(MODULE_PTX_FILE), &n);
    r = drv.cuModuleLoadData(&mod, image);
    free(image);
  }
  if (r != CUDA_SUCCESS) {
    const char *s = "unknown error";
    drv.cuGetErrorString(r, &s);
    fprintf(stderr, "error: cuModuleLoadData(%s) failed: %s\n", shown(path), s);
    if (captured)
      fprintf(stderr, "  This GPU is %s; the image holds machine code for %s%s%s. Rebuild the kernel for %s (build.sh, make run-src) or run on such a GPU.\n", arch,
              MODULE_SASS[0] ? shown(MODULE_SASS) : "(unknown)", MODULE_PTX[0] ? " and PTX " : " and no PTX", shown(MODULE_PTX), arch);
    exit(2);
  }
  return mod;
}

/* The captured function attributes; those equal to the function's own are left alone (some,
 * such as the maximum dynamic shared memory, only rise). */
static void apply_function_attributes(CUfunction f) {
  for (int i = 0; i < N_FUNC_ATTRS; i++) {
    int cur = 0;
    if (drv.cuFuncGetAttribute(&cur, (CUfunction_attribute)FUNC_ATTRS[i].id, f) == CUDA_SUCCESS && cur == FUNC_ATTRS[i].value) continue;
    CK(drv.cuFuncSetAttribute(f, (CUfunction_attribute)FUNC_ATTRS[i].id, FUNC_ATTRS[i].value));
  }
}

/* ---- 4. launch and compare ------------------------------------------------------------- */

static CUfunction kernel;
static unsigned char *params;
static size_t params_bytes;
static CUlaunchAttribute launch_attrs[N_LAUNCH_ATTRS + 1];

static void launch(void) {
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = GRID[0], cfg.gridDimY = GRID[1], cfg.gridDimZ = GRID[2];
  cfg.blockDimX = BLOCK[0], cfg.blockDimY = BLOCK[1], cfg.blockDimZ = BLOCK[2];
  cfg.sharedMemBytes = SHARED_MEM_BYTES;
  cfg.attrs = launch_attrs;
  cfg.numAttrs = N_LAUNCH_ATTRS;
  /* the parameter bytes as captured: pointers in them are the captured VAs, reserved above */
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE, &params_bytes, CU_LAUNCH_PARAM_END};
  CK(drv.cuLaunchKernelEx(&cfg, kernel, NULL, extra));
}

/* ---- 5. timing ------------------------------------------------------------------------- */

/* kc_spin waits on the GPU's global timer, queued before each start event: the stream stays
 * busy while the host submits the launch, so the events time the kernel and not the launch path.
 * kc_evict reads `words` 32-bit words (a grid-stride loop; the sum is stored only when it equals
 * a constant, so that the reads stay): every L2 line the buffer maps to ends up clean, the dirty
 * lines the restore left written back (L2_WRITE_BACK). PTX for sm_70 and later, JIT-compiled by
 * the driver on any GPU. */
static const char SPIN_PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry kc_spin(.param .u64 ns)\n{\n"
    "  .reg .pred %p;\n  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [ns];\n  mov.u64 %rd2, %globaltimer;\n"
    "WAIT:\n  nanosleep.u32 1000;\n  mov.u64 %rd3, %globaltimer;\n"
    "  sub.s64 %rd4, %rd3, %rd2;\n  setp.lt.u64 %p, %rd4, %rd1;\n  @%p bra WAIT;\n  ret;\n}\n"
    ".visible .entry kc_evict(.param .u64 p, .param .u64 words, .param .u64 sink)\n{\n"
    "  .reg .pred %q<4>;\n  .reg .b32 %r<12>;\n  .reg .b64 %e<17>;\n"
    "  ld.param.u64 %e8, [p];\n  ld.param.u64 %e9, [words];\n  ld.param.u64 %e10, [sink];\n"
    "  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n  cvt.u64.u32 %e1, %r4;\n"
    "  mul.wide.u32 %e11, %r3, %r4;\n  mov.u32 %r5, %tid.x;\n  cvt.u64.u32 %e12, %r5;\n"
    "  add.s64 %e16, %e11, %e12;\n  setp.ge.u64 %q1, %e16, %e9;\n  @%q1 bra DONE;\n"
    "  mov.u32 %r7, %nctaid.x;\n  cvt.u64.u32 %e13, %r7;\n  mul.lo.s64 %e3, %e13, %e1;\n"
    "  cvta.to.global.u64 %e4, %e10;\n  cvta.to.global.u64 %e5, %e8;\n  mov.u32 %r10, 0;\n"
    "LOOP:\n  shl.b64 %e14, %e16, 2;\n  add.s64 %e15, %e5, %e14;\n  ld.global.u32 %r8, [%e15];\n"
    "  xor.b32 %r10, %r8, %r10;\n  add.s64 %e16, %e16, %e3;\n  setp.lt.u64 %q2, %e16, %e9;\n  @%q2 bra LOOP;\n"
    "  setp.ne.s32 %q3, %r10, -1640531527;\n  @%q3 bra DONE;\n  st.global.u32 [%e4], %r10;\n"
    "DONE:\n  ret;\n}\n";

int main(int argc, char **argv) {
  const char *module_path = NULL;
  int iters = 20, verify = 1, verify_only = 0, ordinal = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc) module_path = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = count_arg("-n", argv[++i]);
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) root_dir = argv[++i];
    else if (!strcmp(argv[i], "-g") && i + 1 < argc) ordinal = count_arg("-g", argv[++i]);
    else if (!strcmp(argv[i], "--no-verify")) verify = 0;
    else if (!strcmp(argv[i], "--verify-only")) verify_only = 1;
    else {
      /* asked-for help: the usage on stdout, exit 0; anything else is a usage error (exit 2), the argument named */
      const int help = !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
      if (!help) bad_argument(argv[i], "mndg");
      fprintf(help ? stdout : stderr, "usage: %s [-m MODULE] [-n ITERS (20)] [-d EXPORT_DIR (.)] [-g DEVICE (0)] [--no-verify | --verify-only]\n", argv[0]);
      return help ? 0 : 2;
    }
  }
  {
    /* the data this run reads, there before the GPU is asked for */
    const char *const data[] = {BEFORE_FILE, AFTER_FILE, PARAMS_FILE};
    check_data(data, 3);
  }
  /* and each one as the export wrote it (its size and checksums): a file damaged in transit is named (exit 3), never replayed */
  if (verify || verify_only) verify_data();
  if (verify_only) { /* the data alone: no driver, no GPU */
    printf("data: %d files as the export recorded them (sizes and kc64 checksums)\n", N_DATA_FILES);
    return 0;
  }
  /* then the driver: no driver, or one without an entry point the program calls, is exit 2, said */
  load_driver();
  CUresult r0 = drv.cuInit(0);
  if (r0 != CUDA_SUCCESS) {
    const char *s = "unknown error";
    drv.cuGetErrorString(r0, &s);
    fprintf(stderr, "error: cuInit failed (%d): %s\n  This program needs an NVIDIA GPU and its driver.\n", (int)r0, s);
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  CK(drv.cuDeviceGet(&dev, ordinal));
  CK(drv.cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(drv.cuCtxSetCurrent(ctx));
  char name[256] = "";
  int major = 0, minor = 0;
  CK(drv.cuDeviceGetName(name, sizeof name, dev));
  CK(drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CK(drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
  printf("kernel %s\n  on %s (%s); captured on %s (%s)\n", shown(KERNEL_DEMANGLED), name, arch, shown(CAPTURED_DEVICE), shown(CAPTURED_ARCH));

  /* 1-2. reserve the captured VAs, restore the before state */
  reserve_regions(dev);
  FILE *before = open_data(BEFORE_FILE), *after = open_data(AFTER_FILE);
  for (int i = 0; i < N_REGIONS; i++) restore_range(before, &REGIONS[i], REGIONS[i].va);

  /* 3. module, function attributes, module globals */
  CUmodule mod = load_module(module_path ? module_path : data_path(MODULE_FILE), module_path == NULL, arch);
  CK(drv.cuModuleGetFunction(&kernel, mod, KERNEL_NAME));
  apply_function_attributes(kernel);
  /* module globals: the loaded module has its own copies, found by name. A module rebuilt from
   * src/ may lack the other TUs' variables and numbers nvcc's string literals ($str) anew: those
   * are left out (0: not restored, not compared). */
  CUdeviceptr global_at[N_GLOBALS + 1];
  for (int i = 0; i < N_GLOBALS; i++) {
    size_t size = 0;
    global_at[i] = 0;
    if (module_path && !strncmp(GLOBALS[i].name, "$str", 4)) continue;
    if (drv.cuModuleGetGlobal(&global_at[i], &size, mod, GLOBALS[i].name) != CUDA_SUCCESS) {
      if (!module_path) die("the module has no global", GLOBALS[i].name);
      global_at[i] = 0;
      continue;
    }
    if (size != GLOBALS[i].size) die("a global's size differs from the capture's", GLOBALS[i].name);
    restore_range(before, &GLOBALS[i], global_at[i]);
  }
  FILE *pf = open_data(PARAMS_FILE);
  params_bytes = PARAMS_BYTES;
  params = malloc(params_bytes + 8);
  read_at(pf, 0, params, params_bytes, PARAMS_FILE);
  fclose(pf);
#if N_LAUNCH_ATTRS > 0 /* (without it, gcc -O0 warns of a copy from the empty table the loop never reads) */
  for (int i = 0; i < N_LAUNCH_ATTRS; i++) {
    CUlaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = (CUlaunchAttributeID)LAUNCH_ATTRS[i].id;
    memcpy(&a.value, LAUNCH_ATTRS[i].value, sizeof a.value < 64 ? sizeof a.value : 64);
    launch_attrs[i] = a;
  }
#endif

  /* a device copy of the chunks the app changed, to put them back between timed launches */
  unsigned long long backup_bytes = changed_bytes();
  CUdeviceptr backup = 0;
  if (backup_bytes) CK(drv.cuMemAlloc(&backup, backup_bytes));
  EACH_CHANGED_RUN(CK(drv.cuMemcpyDtoD(backup + off, (CUdeviceptr)va, n)));

  /* 4. one launch, then every range against the after state */
  launch();
  CUresult done = drv.cuCtxSynchronize();
  const char *s = "no error";
  drv.cuGetErrorString(done, &s);
  if (!FAULT_CODE && done != CUDA_SUCCESS) {
    fprintf(stderr, "error: the launch faulted (%d): %s\n  The app's did not; compute-sanitizer ./repro -n 0 shows where.\n", (int)done, s);
    return 2;
  }
  if (FAULT_CODE) { /* the app's launch faulted: the same fault is the match */
    printf("%s: the launch gave %d (%s); in the app it faulted with %d (%s)\n", (int)done == FAULT_CODE ? "MATCH" : "MISMATCH", (int)done, s, FAULT_CODE, shown(FAULT_NAME));
    return (int)done == FAULT_CODE ? 0 : 1;
  }
  int bad = compare_all(before, after, global_at);

  /* 5. timed launches, each from the before state: 2 warm-up launches, then `iters` */
  if (iters > 0) {
    CUmodule spin_mod;
    CUfunction spin;
    CUevent e0, e1;
    CK(drv.cuModuleLoadData(&spin_mod, SPIN_PTX));
    CK(drv.cuModuleGetFunction(&spin, spin_mod, "kc_spin"));
#if L2_WRITE_BACK
    /* the write-back buffer: twice the L2, at least 256 MiB (kerncap replay's size); without the
     * device memory for it, L2 stays as the restore leaves it, and the line below says so */
    CUfunction evict;
    CK(drv.cuModuleGetFunction(&evict, spin_mod, "kc_evict"));
    int l2_bytes = 0;
    drv.cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    unsigned long long flush_bytes = 2ull * (unsigned long long)l2_bytes > (256ull << 20) ? 2ull * (unsigned long long)l2_bytes : 256ull << 20;
    CUdeviceptr flush = 0, sink = 0;
    if (drv.cuMemAlloc(&flush, flush_bytes) != CUDA_SUCCESS || drv.cuMemAlloc(&sink, 4) != CUDA_SUCCESS) flush = 0;
    if (flush) CK(drv.cuMemsetD8(flush, 0, flush_bytes));
#endif
    CK(drv.cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(drv.cuEventCreate(&e1, CU_EVENT_DEFAULT));
    float *us = malloc(sizeof(float) * (size_t)iters);
    for (int i = -2; i < iters; i++) {
      EACH_CHANGED_RUN(CK(drv.cuMemcpyDtoD((CUdeviceptr)va, backup + off, n)));
      for (int g = 0; g < N_GLOBALS; g++)
        if (GLOBALS[g].changed && global_at[g]) restore_range(before, &GLOBALS[g], global_at[g]);
#if L2_WRITE_BACK
      if (flush) {
        unsigned long long words = flush_bytes / 4;
        void *evict_args[] = {&flush, &words, &sink};
        CK(drv.cuLaunchKernel(evict, 1024, 1, 1, 256, 1, 1, 0, NULL, evict_args, NULL));
      }
#endif
      unsigned long long ns = 30000;
      void *spin_args[] = {&ns};
      CK(drv.cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, spin_args, NULL));
      CK(drv.cuEventRecord(e0, NULL));
      launch();
      CK(drv.cuEventRecord(e1, NULL));
      CK(drv.cuEventSynchronize(e1));
      float ms = 0;
      CK(drv.cuEventElapsedTime(&ms, e0, e1));
      if (i >= 0) us[i] = ms * 1000;
    }
    qsort(us, (size_t)iters, sizeof *us, cmp_float);
    float med = iters % 2 ? us[iters / 2] : (us[iters / 2 - 1] + us[iters / 2]) / 2;
#if L2_WRITE_BACK
    const char *l2 = flush ? "L2 written back before each" : "L2 warm as the restore leaves it: no device memory to write it back";
#else
    const char *l2 = "L2 warm as the restore leaves it";
#endif
    printf("  kernel time: median %.2f us, min %.2f us over %d launches (CUDA events, %s)", med, us[0], iters, l2);
    if (APP_LAUNCH_US >= 0) printf("; %.2f us in the app", APP_LAUNCH_US);
    printf("\n");
    free(us);
  }
  printf("%s: %d regions, %d module globals compared with the app's after state%s\n", bad ? "MISMATCH" : "MATCH", N_REGIONS, N_GLOBALS,
         JUDGED_AS);
  return bad ? 1 : 0;
}
