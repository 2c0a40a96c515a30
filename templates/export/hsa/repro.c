/*
 * repro.c: replay one captured AMD GPU kernel dispatch with the HSA runtime (ROCr) alone.
 *
 * Written by `kerncap export` for a hip capture; needs the HSA headers and libhsa-runtime64,
 * nothing of kerncap. The capture's data is in data/ (README.md describes the files); capture.h
 * holds the tables read from data/kerncap.json; repro_common.h the reading of the data files, the
 * restore and the judging, the same as for a CUDA capture.
 *
 *   1. reserve every captured VA range at its exact address (hsa_amd_vmem_address_reserve,
 *      handle_create, map, set_access: ROCm 6.0 or newer), backed by the GPU agent's
 *      coarse-grained pool: pointers stored inside the memory stay valid;
 *   2. restore the before state: zero each range, copy its stored chunks from memory/before.bin;
 *   3. load the code object (the captured one, or -m FILE) into a frozen executable, find the
 *      kernel descriptor, restore the module globals by name;
 *   4. dispatch once (an AQL kernel dispatch packet with the captured grid and workgroup sizes in
 *      work-items, segment sizes and kernarg bytes) and compare every range with the after state:
 *      bit for bit, or element-wise within ATOL + RTOL * |expected|;
 *   5. time ITERS dispatches by the wall clock from the doorbell to the completion signal, each
 *      from the before state.
 *
 * Usage: ./repro [-m CODE_OBJECT] [-n ITERS] [-d EXPORT_DIR] [-g GPU_AGENT] [--no-verify]   (files under EXPORT_DIR, default .)
 * --no-verify: skip the check of the data files' checksums (it reads every stored byte once).
 * Exit: 0 match, 1 mismatch, 3 a data file damaged (its size or a checksum not the export's), 2 another error (an HSA error, a VA already taken, a missing file).
 *
 * The hsa_amd_vmem_* calls are looked up at run time (dlsym): ROCm 5.x headers and runtimes lack
 * them, and this program still builds there (and says, when run, that it needs ROCm 6.0).
 */
#define _GNU_SOURCE /* RTLD_DEFAULT, fseeko, clock_gettime */
#define _FILE_OFFSET_BITS 64
#include <dlfcn.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdint.h>
#include <time.h>

#include "capture.h"
#include "repro_common.h"

#define HK(call)                                                                \
  do {                                                                          \
    hsa_status_t s_ = (call);                                                   \
    if (s_ != HSA_STATUS_SUCCESS) {                                             \
      const char *m_ = "unknown error";                                         \
      hsa_status_string(s_, &m_);                                               \
      fprintf(stderr, "error: %s failed (0x%x): %s\n", #call, (unsigned)s_, m_); \
      exit(2);                                                                  \
    }                                                                           \
  } while (0)

static hsa_agent_t gpu;                        /* the GPU agent (-g: its ordinal among GPU agents) */
static hsa_amd_memory_pool_t dev_pool, kernarg_pool;
static size_t granule = 4096;                  /* the device pool's allocation granule (bytes) */

/* Host bytes to and from the device: a page-locked view of the host buffer, then hsa_memory_copy. */
static void copy_host(void *host, unsigned long long va, size_t n, int to_device) {
  if (!n) return;
  void *locked = NULL;
  HK(hsa_amd_memory_lock(host, n, &gpu, 1, &locked));
  if (to_device) HK(hsa_memory_copy((void *)(uintptr_t)va, locked, n));
  else HK(hsa_memory_copy(locked, (const void *)(uintptr_t)va, n));
  HK(hsa_amd_memory_unlock(host));
}
static void dev_write(unsigned long long va, const void *src, size_t n) { copy_host((void *)src, va, n, 1); }
static void dev_read(void *dst, unsigned long long va, size_t n) { copy_host(dst, va, n, 0); }
/* hsa_amd_memory_fill works in 4-byte words only: zeros are copied from the host, 64 MiB at a time. */
static void dev_zero(unsigned long long va, unsigned long long n) {
  size_t piece = n < (64u << 20) ? (size_t)n : (64u << 20);
  unsigned char *z = calloc(1, piece ? piece : 1);
  if (!z) die("out of host memory", NULL);
  for (unsigned long long done = 0; done < n; done += piece) dev_write(va + done, z, n - done < piece ? (size_t)(n - done) : piece);
  free(z);
}

/* ---- the agents and their memory pools ------------------------------------------------- */

struct agents { hsa_agent_t gpu[64]; int n_gpu; int have_kernarg; };

static hsa_status_t find_kernarg_pool(hsa_amd_memory_pool_t pool, void *data) {
  struct agents *a = data;
  uint32_t flags = 0;
  hsa_amd_segment_t seg;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg) != HSA_STATUS_SUCCESS || seg != HSA_AMD_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) == HSA_STATUS_SUCCESS && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) && !a->have_kernarg) {
    kernarg_pool = pool;
    a->have_kernarg = 1;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t each_agent(hsa_agent_t agent, void *data) {
  struct agents *a = data;
  hsa_device_type_t type;
  HK(hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type));
  if (type == HSA_DEVICE_TYPE_GPU && a->n_gpu < 64) a->gpu[a->n_gpu++] = agent;
  if (type == HSA_DEVICE_TYPE_CPU) hsa_amd_agent_iterate_memory_pools(agent, find_kernarg_pool, a);
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_device_pool(hsa_amd_memory_pool_t pool, void *data) {
  int *found = data;
  uint32_t flags = 0;
  hsa_amd_segment_t seg;
  if (*found || hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg) != HSA_STATUS_SUCCESS || seg != HSA_AMD_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) == HSA_STATUS_SUCCESS && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED)) {
    dev_pool = pool;
    *found = 1;
    size_t g = 0;
    if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, &g) == HSA_STATUS_SUCCESS && g > granule) granule = g;
  }
  return HSA_STATUS_SUCCESS;
}

/* ---- 1. the captured VAs --------------------------------------------------------------- */

/* The ROCm 6.0 virtual memory API (hsa_ext_amd.h), declared here: ROCm 5.x headers lack it. */
typedef struct { hsa_access_permission_t permissions; hsa_agent_t agent_handle; } kc_access_desc;
static hsa_status_t (*vmem_reserve)(void **va, size_t size, uint64_t address, uint64_t flags);
static hsa_status_t (*vmem_handle_create)(hsa_amd_memory_pool_t pool, size_t size, int type, uint64_t flags, uint64_t *handle);
static hsa_status_t (*vmem_map)(void *va, size_t size, size_t offset, uint64_t handle, uint64_t flags);
static hsa_status_t (*vmem_set_access)(void *va, size_t size, const kc_access_desc *desc, size_t n);

static void *need(const char *sym) {
  void *p = dlsym(RTLD_DEFAULT, sym);
  if (!p) {
    fprintf(stderr, "error: this HSA runtime lacks %s: replaying at the captured VAs needs ROCm 6.0 or newer (ROCm 5.x has no virtual memory API)\n", sym);
    exit(2);
  }
  return p;
}

/* Spans: the regions rounded out to the pool's granule (4 KiB at least), touching ones merged;
 * each reserved at exactly its address, mapped and made readable and writable by the GPU. */
static void reserve_regions(void) {
  *(void **)&vmem_reserve = need("hsa_amd_vmem_address_reserve");
  *(void **)&vmem_handle_create = need("hsa_amd_vmem_handle_create");
  *(void **)&vmem_map = need("hsa_amd_vmem_map");
  *(void **)&vmem_set_access = need("hsa_amd_vmem_set_access");
  unsigned long long align = granule > 4096 ? granule : 4096;
  for (int i = 0; i < N_REGIONS;) { /* REGIONS are sorted by VA */
    unsigned long long start = REGIONS[i].va / align * align;
    unsigned long long end = (REGIONS[i].va + REGIONS[i].size + align - 1) / align * align;
    for (i++; i < N_REGIONS && REGIONS[i].va / align * align <= end; i++) {
      unsigned long long e = (REGIONS[i].va + REGIONS[i].size + align - 1) / align * align;
      if (e > end) end = e;
    }
    size_t size = (size_t)(end - start);
    void *got = NULL;
    hsa_status_t r = vmem_reserve(&got, size, start, 0);
    if (r != HSA_STATUS_SUCCESS || (unsigned long long)(uintptr_t)got != start) {
      fprintf(stderr, "error: captured VA range 0x%llx-0x%llx (%zu bytes) is not free in this process", start, end, size);
      if (r == HSA_STATUS_SUCCESS) fprintf(stderr, " (the runtime offered %p)", got);
      fprintf(stderr, "\n  Something already occupies it (another allocation, a host mapping); run ./repro on its own, or with ASLR off: setarch -R ./repro\n");
      exit(2);
    }
    uint64_t handle = 0;
    HK(vmem_handle_create(dev_pool, size, 0 /* MEMORY_TYPE_NONE */, 0, &handle));
    HK(vmem_map(got, size, 0, handle, 0));
    kc_access_desc acc = {HSA_ACCESS_PERMISSION_RW, gpu};
    HK(vmem_set_access(got, size, &acc, 1));
  }
}

/* ---- 3. the code object ---------------------------------------------------------------- */

static hsa_executable_t exec;

static uint64_t load_kernel(const char *path, uint32_t *kernarg_bytes, uint32_t *group_bytes, uint32_t *private_bytes) {
  size_t n;
  char *image = read_file(path, &n);
  hsa_code_object_reader_t reader;
  HK(hsa_code_object_reader_create_from_memory(image, n, &reader));
  HK(hsa_executable_create_alt(HSA_PROFILE_BASE, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL, &exec));
  HK(hsa_executable_load_agent_code_object(exec, gpu, reader, NULL, NULL));
  HK(hsa_executable_freeze(exec, NULL));
  hsa_executable_symbol_t sym;
  if (hsa_executable_get_symbol_by_name(exec, KERNEL_SYMBOL, &gpu, &sym) != HSA_STATUS_SUCCESS) die("the code object has no kernel descriptor", KERNEL_SYMBOL);
  uint64_t kobj = 0;
  HK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &kobj));
  /* a rebuilt code object may need other segment sizes: its own, where the runtime says them */
  uint32_t v;
  if (hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &v) == HSA_STATUS_SUCCESS && v > *kernarg_bytes) *kernarg_bytes = v;
  if (hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &v) == HSA_STATUS_SUCCESS && v > *group_bytes) *group_bytes = v;
  if (hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &v) == HSA_STATUS_SUCCESS && v > *private_bytes) *private_bytes = v;
  free(image); /* the frozen executable holds its own copy */
  return kobj;
}

/* ---- 4. dispatch and compare ----------------------------------------------------------- */

static hsa_queue_t *queue;
static hsa_signal_t done;
static hsa_kernel_dispatch_packet_t packet; /* every field but the header; copied into the queue per dispatch */

static void dispatch(void) {
  hsa_signal_store_relaxed(done, 1);
  uint64_t idx = hsa_queue_add_write_index_relaxed(queue, 1);
  hsa_kernel_dispatch_packet_t *slot = (hsa_kernel_dispatch_packet_t *)queue->base_address + (idx % queue->size);
  memcpy((char *)slot + 4, (const char *)&packet + 4, sizeof packet - 4);
  int dims = GRID[2] > 1 || BLOCK[2] > 1 ? 3 : GRID[1] > 1 || BLOCK[1] > 1 ? 2 : 1;
  uint16_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
  /* the header and setup words last, in one atomic store: the packet is the GPU's from then on */
  __atomic_store_n((uint32_t *)slot, (uint32_t)header | ((uint32_t)dims << 16), __ATOMIC_RELEASE);
  hsa_signal_store_screlease(queue->doorbell_signal, (hsa_signal_value_t)idx);
  hsa_signal_value_t v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
  if (v != 0) {
    fprintf(stderr, "error: the dispatch's completion signal ended at %lld, not 0 (a queue error: the kernel faulted?)\n", (long long)v);
    exit(2);
  }
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  const char *module_path = NULL;
  int iters = 20, verify = 1, ordinal = CAPTURED_ORDINAL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc) module_path = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = count_arg("-n", argv[++i]);
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) root_dir = argv[++i];
    else if (!strcmp(argv[i], "-g") && i + 1 < argc) ordinal = count_arg("-g", argv[++i]);
    else if (!strcmp(argv[i], "--no-verify")) verify = 0;
    else {
      /* asked-for help: the usage on stdout, exit 0; anything else is a usage error (exit 2), the argument named */
      const int help = !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
      if (!help) bad_argument(argv[i], "mndg");
      fprintf(help ? stdout : stderr, "usage: %s [-m CODE_OBJECT] [-n ITERS (20)] [-d EXPORT_DIR (.)] [-g GPU_AGENT (%d)] [--no-verify]\n", argv[0], CAPTURED_ORDINAL);
      return help ? 0 : 2;
    }
  }
  {
    /* the data this run reads, there before the GPU is asked for */
    const char *const data[] = {BEFORE_FILE, AFTER_FILE, PARAMS_FILE};
    check_data(data, 3);
  }
  /* and each one as the export wrote it (its size and checksums): a file damaged in transit is named (exit 3), never replayed */
  if (verify) verify_data();
  hsa_status_t r0 = hsa_init();
  if (r0 != HSA_STATUS_SUCCESS) {
    const char *s = "unknown error";
    hsa_status_string(r0, &s);
    fprintf(stderr, "error: hsa_init failed (0x%x): %s\n  This program needs an AMD GPU and the amdgpu kernel driver (/dev/kfd).\n", (unsigned)r0, s);
    return 2;
  }
  struct agents a;
  memset(&a, 0, sizeof a);
  HK(hsa_iterate_agents(each_agent, &a));
  if (ordinal < 0 || ordinal >= a.n_gpu) {
    fprintf(stderr, "error: GPU agent %d not found (%d present)\n", ordinal, a.n_gpu);
    return 2;
  }
  gpu = a.gpu[ordinal];
  char name[64] = "", product[64] = "";
  HK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_NAME, name));
  if (hsa_agent_get_info(gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_PRODUCT_NAME, product) != HSA_STATUS_SUCCESS) product[0] = 0;
  printf("kernel %s\n  on %s (%s); captured on %s (%s)\n", shown(KERNEL_DEMANGLED), product[0] ? product : name, name, shown(CAPTURED_DEVICE), shown(CAPTURED_ARCH));
  if (strcmp(name, CAPTURED_ARCH) && !module_path) {
    fprintf(stderr, "error: the code object is for %s, GPU agent %d is %s\n  Run on a %s GPU, or rebuild the kernel for %s (make run-src) and pass it with -m.\n", shown(CAPTURED_ARCH), ordinal, name, shown(CAPTURED_ARCH), name);
    return 2;
  }
  int found = 0;
  HK(hsa_amd_agent_iterate_memory_pools(gpu, find_device_pool, &found));
  if (!found) die("the GPU agent has no coarse-grained global memory pool", name);
  if (!a.have_kernarg) die("no kernarg memory pool on any CPU agent", NULL);

  /* 1-2. reserve the captured VAs, restore the before state */
  reserve_regions();
  FILE *before = open_data(BEFORE_FILE), *after = open_data(AFTER_FILE);
  for (int i = 0; i < N_REGIONS; i++) restore_range(before, &REGIONS[i], REGIONS[i].va);

  /* 3. code object, kernel descriptor, module globals */
  uint32_t kernarg_bytes = KERNARG_SEGMENT_BYTES, group_bytes = GROUP_SEGMENT_BYTES, private_bytes = PRIVATE_SEGMENT_BYTES;
  uint64_t kobj = load_kernel(module_path ? module_path : data_path(MODULE_FILE), &kernarg_bytes, &group_bytes, &private_bytes);
  unsigned long long global_at[N_GLOBALS + 1];
  for (int i = 0; i < N_GLOBALS; i++) {
    hsa_executable_symbol_t sym;
    uint64_t va = 0;
    uint32_t size = 0;
    global_at[i] = 0;
    if (hsa_executable_get_symbol_by_name(exec, GLOBALS[i].name, &gpu, &sym) != HSA_STATUS_SUCCESS) {
      if (!module_path) die("the code object has no global", GLOBALS[i].name);
      continue; /* a rebuilt code object may lack another TU's variables: not restored, not compared */
    }
    HK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &va));
    HK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size));
    if (size != GLOBALS[i].size) die("a global's size differs from the capture's", GLOBALS[i].name);
    global_at[i] = va;
    restore_range(before, &GLOBALS[i], va);
  }

  /* the kernarg segment: the captured bytes (explicit and hidden arguments), in the CPU agent's kernarg pool */
  size_t ka_bytes = kernarg_bytes > PARAMS_BYTES ? kernarg_bytes : PARAMS_BYTES;
  if (ka_bytes < 16) ka_bytes = 16;
  void *kernarg = NULL;
  HK(hsa_amd_memory_pool_allocate(kernarg_pool, ka_bytes, 0, &kernarg));
  HK(hsa_amd_agents_allow_access(1, &gpu, NULL, kernarg));
  memset(kernarg, 0, ka_bytes);
  FILE *pf = open_data(PARAMS_FILE);
  read_at(pf, 0, kernarg, PARAMS_BYTES, PARAMS_FILE);
  fclose(pf);

  HK(hsa_queue_create(gpu, 1024, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX, &queue));
  HK(hsa_signal_create(1, 0, NULL, &done));
  memset(&packet, 0, sizeof packet);
  packet.workgroup_size_x = (uint16_t)BLOCK[0], packet.workgroup_size_y = (uint16_t)BLOCK[1], packet.workgroup_size_z = (uint16_t)BLOCK[2];
  packet.grid_size_x = GRID[0], packet.grid_size_y = GRID[1], packet.grid_size_z = GRID[2]; /* work-items, as the app's packet had them */
  packet.private_segment_size = private_bytes;
  packet.group_segment_size = group_bytes;
  packet.kernel_object = kobj;
  packet.kernarg_address = kernarg;
  packet.completion_signal = done;

  /* a device copy of the chunks the app changed, to put them back between timed dispatches */
  unsigned long long backup_bytes = changed_bytes();
  void *backup = NULL;
  if (backup_bytes) HK(hsa_amd_memory_pool_allocate(dev_pool, backup_bytes, 0, &backup));
  EACH_CHANGED_RUN(HK(hsa_memory_copy((char *)backup + off, (void *)(uintptr_t)va, n)));

  /* 4. one dispatch, then every range against the after state */
  dispatch();
  int bad = compare_all(before, after, global_at);

  /* 5. timed dispatches, each from the before state: 2 warm-up dispatches, then `iters` */
  if (iters > 0) {
    float *us = malloc(sizeof(float) * (size_t)iters);
    if (!us) die("out of host memory", NULL);
    for (int i = -2; i < iters; i++) {
      EACH_CHANGED_RUN(HK(hsa_memory_copy((void *)(uintptr_t)va, (char *)backup + off, n)));
      for (int g = 0; g < N_GLOBALS; g++)
        if (GLOBALS[g].changed && global_at[g]) restore_range(before, &GLOBALS[g], global_at[g]);
      double t0 = now_us();
      dispatch();
      if (i >= 0) us[i] = (float)(now_us() - t0);
    }
    qsort(us, (size_t)iters, sizeof *us, cmp_float);
    float med = iters % 2 ? us[iters / 2] : (us[iters / 2 - 1] + us[iters / 2]) / 2;
    printf("  kernel time: median %.2f us, min %.2f us over %d dispatches (wall clock from the doorbell to the completion signal, L2 warm)", med, us[0], iters);
    if (APP_LAUNCH_US >= 0) printf("; %.2f us in the app", APP_LAUNCH_US);
    printf("\n");
    free(us);
  }
  printf("%s: %d regions, %d module globals compared with the app's after state%s\n", bad ? "MISMATCH" : "MATCH", N_REGIONS, N_GLOBALS,
         JUDGED_AS);
  return bad ? 1 : 0;
}
