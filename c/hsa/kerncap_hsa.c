/*
 * kerncap_hsa.c: the HSA (AMD ROCm) capture library of kerncap.
 *
 * Contract: docs/raw-capture.md (the raw capture the CUDA library writes, raw_version 2 through
 * c/common/kc_raw.c; frontend "hip", vendor "amd", arch "gfxNNN", every range hashed on the CPU, and the
 * `hsa` block).
 *
 * Exports (nothing else is visible; built with -fvisibility=hidden):
 *   bool OnLoad(void* table, uint64_t runtime_version, uint64_t failed_tool_count,
 *               const char* const* failed_tool_names)   - HSA tools entry (HSA_TOOLS_LIB)
 *   void OnUnload(void)                                  - called by hsa_shut_down
 * The ROCm 6.2+ rocprofiler-register path is not built: ROCm 5.2's headers lack it; ROCr still
 * honours HSA_TOOLS_LIB in 6.x.
 *
 * Environment: the KERNCAP_* settings as the CUDA library reads them, through the same code
 * (c/common/kc_settings.h: KERNCAP_OUT, KERNCAP_MODE, KERNCAP_KERNEL one ERE per line, KERNCAP_DISPATCH,
 * KERNCAP_CAPTURE_ALL, KERNCAP_MAX_CAPTURES, KERNCAP_LAUNCH_COUNT, KERNCAP_EXIT_AFTER_CAPTURE,
 * KERNCAP_LOG); KERNCAP_CHUNK_BYTES (c/common/kc_raw.c), KERNCAP_RANK, KERNCAP_PROCESS (multi-process
 * jobs: c/common/kc_process.c; one process claims the capture, every process writes kernels.<pid>.json
 * and error.<pid>.txt). Which dispatch is captured: c/common/kc_match.h, the CUDA library's rules
 * (several --kernel targets and --capture-all write KERNCAP_OUT/captures/<n>/ each). The census:
 * c/common/kc_census.c.
 *
 * How: OnLoad patches the runtime's API table. hsa_queue_create on a GPU agent becomes
 * hsa_amd_queue_intercept_create + hsa_amd_queue_intercept_register (tools-only entries of the AMD
 * extension table), so every AQL packet the application submits passes kc_on_packets before the
 * hardware queue. Allocations are tracked from hsa_amd_memory_pool_allocate/free and
 * hsa_memory_allocate/free (the hsa_amd_vmem_* API is absent from ROCm 5.2's headers and is not
 * tracked). Code object bytes are kept from hsa_code_object_reader_create_from_memory/_file; at
 * hsa_executable_freeze the executable's kernel symbols map kernel_object -> name, kernarg size,
 * module.
 *
 * Capture of the matching dispatch (inside the packet handler, on the thread that rang the
 * doorbell): forward the packets before it, drain the queue with a barrier-AND packet and wait,
 * copy every live region chunk by chunk, hash each chunk (kc64) and store the non-zero ones
 * (before state), forward the dispatch, drain again, copy and hash again and store the chunks
 * that changed (after state), write the files, raw.json last (c/common/kc_raw.c).
 * Other queues are not drained (documented limitation).
 *
 * Threads: any application thread may create queues, allocate, load code or submit packets; one
 * mutex guards the tables; capture runs under it. Failures never abort the application: they go
 * through KC_FAIL (c/common/kc_log.c): a log line, error.<pid>.txt, capture disabled.
 *
 * Run on AMD hardware: NEVER. This file was compiled and its exports checked on a machine without
 * an AMD GPU (Debian 12, ROCm 5.2 headers).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include "kc_census.h"
#include "kc_json.h"
#include "kc_log.h"
#include "kc_match.h"
#include "kc_process.h"
#include "kc_raw.h"
#include "kc_settings.h"
#include "kc_vec.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hsa_api_table.h"

#define KC_LIBRARY "kerncap_hsa 0.1.0"
#define KC_EXPORT __attribute__((visibility("default")))
#define KC_PAGE 4096ull
#define KC_STAGING (64ull << 20) /* at least the largest chunk (c/common/kc_raw.c kc_chunk_bytes) */

/* ---- state: one struct, set up once ---- */

typedef struct { uint64_t va, size; bool gpu, live; } kc_region;
typedef struct { uint64_t handle; int module; } kc_reader;           /* code object reader -> module */
typedef struct { uint64_t exec; int module; } kc_exec_module;         /* executable -> module loaded */
typedef struct { uint8_t* bytes; size_t size; } kc_module;
typedef struct {
  uint64_t kernel_object;
  char* name;
  uint32_t kernarg_size, group, priv;
  int module;
  kc_kstat_t* stat; /* its census entry (c/common/kc_census.h), found on its first dispatch */
} kc_kernel;
typedef struct { hsa_queue_t* queue; hsa_agent_t agent; } kc_queue;


static struct {
  pthread_once_t once;
  pthread_mutex_t mu;
  kc_base_t base; /* out, verbose, enabled: the shared log/fail path (c/common/kc_log.c) */
  kc_settings_t set;  /* the KERNCAP_* settings (c/common/kc_settings.c) */
  kc_census_t census; /* every kernel dispatched, its counts (c/common/kc_census.c) */
  kc_match_t match;   /* --kernel / --dispatch (c/common/kc_match.c) */
  bool capture_mode, done, in_capture, claimed;
  char capdir[4096];  /* several captures: the folder of the one being written (else empty) */
  uint64_t runtime_version;
  struct timespec t_load;
  struct CoreApiTable core; /* the runtime's original entries */
  struct AmdExtTable amd;
  size_t amd_size;
  uint8_t *staging;
  KC_VEC(kc_region) regions;
  KC_VEC(kc_reader) readers;
  KC_VEC(kc_exec_module) execs;
  KC_VEC(kc_module) modules;
  KC_VEC(kc_kernel) kernels;
  uint32_t* kernel_slot; /* open addressing by kernel_object: 1 + index into kernels, 0 empty */
  size_t kernel_cap;
  KC_VEC(kc_queue) queues;
  kc_proc_t proc;            /* this process of the job (c/common/kc_process.c) */
  struct timespec census_t;  /* last write of kernels.<pid>.json */
} S = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static const char* const KC_VISIBLE_VARS[] = {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_VISIBLE_DEVICES", NULL};

/* ---- checks ---- */

static const char* kc_status(hsa_status_t st) {
  const char* s = NULL;
  if (S.core.hsa_status_string_fn && S.core.hsa_status_string_fn(st, &s) == HSA_STATUS_SUCCESS && s) return s;
  return "unknown hsa_status_t";
}

#define KC_CHECK(call)                                                             \
  do {                                                                             \
    hsa_status_t kc_st_ = (call);                                                  \
    if (kc_st_ != HSA_STATUS_SUCCESS && kc_st_ != HSA_STATUS_INFO_BREAK) {         \
      kc_fail_at(__FILE__, __LINE__, "%s: %s", #call, kc_status(kc_st_));                       \
      return kc_st_;                                                               \
    }                                                                              \
  } while (0)

#define KC_CHECK_SYS(cond, what)                                                   \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      kc_fail_at(__FILE__, __LINE__, "%s: %s", what, strerror(errno));                          \
      return HSA_STATUS_ERROR;                                                     \
    }                                                                              \
  } while (0)

static double kc_us_since(const struct timespec* t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) * 1e6 + (double)(t.tv_nsec - t0->tv_nsec) / 1e3;
}

/* ---- helpers ---- */

static bool kc_is_gpu(hsa_agent_t agent) {
  hsa_device_type_t t = HSA_DEVICE_TYPE_CPU;
  return S.core.hsa_agent_get_info_fn(agent, HSA_AGENT_INFO_DEVICE, &t) == HSA_STATUS_SUCCESS && t == HSA_DEVICE_TYPE_GPU;
}


/* The folder of the capture being written: KERNCAP_OUT, or its own folder when several are taken. */
static const char* kc_dir(void) { return S.capdir[0] ? S.capdir : S.base.out; }

static size_t kc_kernel_hash(uint64_t kernel_object, size_t cap) { return (size_t)((kernel_object * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1); }

/* The kernel a dispatch packet names, by its kernel_object (a table lookup: it runs per dispatch). */
static kc_kernel* kc_kernel_of(uint64_t kernel_object) {
  if (!S.kernel_cap) return NULL;
  for (size_t j = kc_kernel_hash(kernel_object, S.kernel_cap); S.kernel_slot[j]; j = (j + 1) & (S.kernel_cap - 1))
    if (S.kernels.v[S.kernel_slot[j] - 1].kernel_object == kernel_object) return &S.kernels.v[S.kernel_slot[j] - 1];
  return NULL;
}

/* Index kernels.v[i] by its kernel_object (the table at most half full). 0, or -1 (out of memory). */
static int kc_kernel_index(size_t i) {
  if ((i + 1) * 2 > S.kernel_cap) {
    size_t cap = S.kernel_cap ? S.kernel_cap * 2 : 256;
    uint32_t* t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t k = 0; k < i; k++) {
      size_t j = kc_kernel_hash(S.kernels.v[k].kernel_object, cap);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = (uint32_t)k + 1;
    }
    free(S.kernel_slot);
    S.kernel_slot = t;
    S.kernel_cap = cap;
  }
  size_t j = kc_kernel_hash(S.kernels.v[i].kernel_object, S.kernel_cap);
  while (S.kernel_slot[j]) j = (j + 1) & (S.kernel_cap - 1);
  S.kernel_slot[j] = (uint32_t)i + 1;
  return 0;
}

static hsa_agent_t kc_agent_of(const hsa_queue_t* q, int* ordinal) {
  hsa_agent_t a = {0};
  for (size_t i = 0; i < S.queues.n; i++)
    if (S.queues.v[i].queue == q) a = S.queues.v[i].agent;
  *ordinal = 0;
  return a;
}

/* ---- kernels.json ---- */

/* kernels.<pid>.json: this process's census (identity, counts; c/common/kc_census.c). final: written at exit. */
static void kc_write_kernels_json(bool final) {
  clock_gettime(CLOCK_MONOTONIC, &S.census_t);
  /* every dispatch is counted here, also in a process that is not selected or lost the claim */
  kc_census_doc_t d = {.final = final, .mode = S.set.mode, .proc = &S.proc, .visible_vars = KC_VISIBLE_VARS};
  kc_census_write(&S.census, S.base.out, &d);
}

/* ---- snapshots (c/common/kc_raw.c: chunked items, hashed on the CPU) ---- */

/* kc_read_fn of an item: device memory through hsa_memory_copy, host memory directly. */
static int kc_read_range(void* ud, uint64_t va, void* dst, size_t len) {
  const kc_region* r = ud;
  if (!r->gpu) {
    memcpy(dst, (const void*)(uintptr_t)va, len);
    return 0;
  }
  hsa_status_t st = S.core.hsa_memory_copy_fn(dst, (const void*)(uintptr_t)va, len);
  if (st != HSA_STATUS_SUCCESS) { KC_FAIL("hsa_memory_copy of %zu bytes at 0x%llx: %s", len, (unsigned long long)va, kc_status(st)); return -1; }
  return 0;
}

/* The snapshot of one capture: an item per live region (src[i] the region of items[i]). */
typedef struct {
  uint32_t chunk;
  kc_item_t* items;
  kc_region** src;
  size_t n;
  int fd[2];                           /* memory/before.bin, memory/after.bin */
  uint64_t next_off[2], stored[2], live; /* bytes */
} kc_snap;

static void kc_snap_free(kc_snap* sn) {
  for (size_t i = 0; sn->items && i < sn->n; i++) kc_item_free(&sn->items[i]);
  free(sn->items);
  free(sn->src);
  for (int w = 0; w < 2; w++)
    if (sn->fd[w] >= 0) close(sn->fd[w]);
}

static hsa_status_t kc_snap_init(kc_snap* sn) {
  memset(sn, 0, sizeof *sn);
  sn->fd[0] = sn->fd[1] = -1;
  sn->chunk = kc_chunk_bytes();
  sn->items = calloc(S.regions.n + 1, sizeof *sn->items);
  sn->src = calloc(S.regions.n + 1, sizeof *sn->src);
  KC_CHECK_SYS(sn->items && sn->src, "calloc snapshot items");
  for (size_t i = 0; i < S.regions.n; i++) {
    kc_region* r = &S.regions.v[i];
    if (!r->live) continue;
    if (kc_item_init(&sn->items[sn->n], r->va, r->size, r->gpu ? "device" : "host-mapped", NULL, sn->chunk)) return HSA_STATUS_ERROR;
    sn->src[sn->n++] = r;
    sn->live += r->size;
  }
  return HSA_STATUS_SUCCESS;
}

/* Pass which (0 before: non-zero chunks; 1 after: changed chunks) over every item, into its
 * memory file, flushed to disk (a capture folder is complete only when its data is). */
static hsa_status_t kc_snap_pass(kc_snap* sn, int which) {
  const char* rel = which ? "memory/after.bin" : "memory/before.bin";
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", kc_dir(), rel);
  sn->fd[which] = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  KC_CHECK_SYS(sn->fd[which] >= 0, rel);
  int werr = 0;
  uint64_t wfail = 0;
  for (size_t i = 0; i < sn->n; i++) {
    kc_cpu_pass_t p = {sn->chunk, which, (char*)S.staging, kc_read_range, sn->src[i], sn->fd[which], &sn->next_off[which], &sn->stored[which], NULL, &werr, &wfail};
    if (kc_item_cpu_pass(&sn->items[i], &p)) {
      if (werr) KC_FAIL("writing %s failed at offset %llu: %s (free space in the --out folder's file system, or choose another --out)", rel, (unsigned long long)wfail, strerror(werr));
      return HSA_STATUS_ERROR;
    }
    if (which) kc_item_count_changes(&sn->items[i], sn->chunk);
  }
  KC_CHECK_SYS(ftruncate(sn->fd[which], (off_t)sn->next_off[which]) == 0, "ftruncate memory file");
  KC_CHECK_SYS(fdatasync(sn->fd[which]) == 0, "fdatasync memory file");
  return HSA_STATUS_SUCCESS;
}

/* Submit a barrier-AND packet (barrier bit set: waits for everything before it) and wait. */
static hsa_status_t kc_drain(hsa_amd_queue_intercept_packet_writer writer) {
  hsa_signal_t sig;
  KC_CHECK(S.core.hsa_signal_create_fn(1, 0, NULL, &sig));
  hsa_barrier_and_packet_t b;
  memset(&b, 0, sizeof b);
  b.completion_signal = sig;
  b.header = (uint16_t)((HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                        (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                        (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
  writer(&b, 1);
  S.core.hsa_signal_wait_scacquire_fn(sig, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
  S.core.hsa_signal_destroy_fn(sig);
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t kc_write_file(const char* rel, const void* data, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", kc_dir(), rel);
  FILE* f = fopen(path, "wb");
  KC_CHECK_SYS(f != NULL, "fopen");
  size_t w = fwrite(data, 1, n, f);
  fclose(f);
  KC_CHECK_SYS(w == n, "fwrite");
  return HSA_STATUS_SUCCESS;
}

/* Which dispatch this capture is (c/common/kc_match.c). */
typedef struct { int target; long match_index; uint64_t launch_index; } kc_pick;

/* Capture dispatch d (its packets before it already forwarded) into kc_dir(). *forwarded: d was
 * handed to the queue (from then on a failure must not submit it again). */
static hsa_status_t kc_capture(const hsa_kernel_dispatch_packet_t* d, kc_kernel* k, const kc_pick* pk, hsa_agent_t agent,
                               hsa_amd_queue_intercept_packet_writer writer, bool* forwarded) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double app_s = kc_us_since(&S.t_load) / 1e6;
  if (!S.staging) {
    S.staging = aligned_alloc(KC_PAGE, KC_STAGING);
    KC_CHECK_SYS(S.staging, "aligned_alloc staging");
  }
  KC_CHECK(kc_drain(writer));
  double sync_us = kc_us_since(&t0);

  /* kernarg segment: lives in host-accessible kernarg memory; copy before the dispatch. */
  char path[4200];
  snprintf(path, sizeof path, "%s/kernel", kc_dir());
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/memory", kc_dir());
  mkdir(path, 0755);
  KC_CHECK(kc_write_file("kernel/params.bin", d->kernarg_address, k->kernarg_size));
  kc_snap sn;
  hsa_status_t st = kc_snap_init(&sn);
  struct timespec tb;
  clock_gettime(CLOCK_MONOTONIC, &tb);
  if (st == HSA_STATUS_SUCCESS) st = kc_snap_pass(&sn, 0);
  double before_us = kc_us_since(&tb);
  if (st != HSA_STATUS_SUCCESS) { kc_snap_free(&sn); return st; }

  struct timespec tl;
  clock_gettime(CLOCK_MONOTONIC, &tl);
  writer(d, 1);
  *forwarded = true;
  st = kc_drain(writer);
  double launch_us = kc_us_since(&tl);

  struct timespec ta;
  clock_gettime(CLOCK_MONOTONIC, &ta);
  if (st == HSA_STATUS_SUCCESS) st = kc_snap_pass(&sn, 1);
  double after_us = kc_us_since(&ta);
  kc_module* m = k->module >= 0 ? &S.modules.v[k->module] : NULL;
  if (st == HSA_STATUS_SUCCESS && m) st = kc_write_file("kernel/module.hsaco", m->bytes, m->size);
  if (st != HSA_STATUS_SUCCESS) { kc_snap_free(&sn); return st; }

  char name[64] = {0}, product[64] = {0};
  S.core.hsa_agent_get_info_fn(agent, HSA_AGENT_INFO_NAME, name);
  S.core.hsa_agent_get_info_fn(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_PRODUCT_NAME, product);
  const char* dem = k->stat ? kc_census_demangled(&S.census, k->stat) : k->name;
  const kc_raw_time_t timing[] = {
      {"sync_us", "%.1f", sync_us}, {"before_us", "%.1f", before_us}, {"app_launch_us", "%.1f", launch_us},
      {"after_us", "%.1f", after_us}, {"app_to_capture_s", "%.3f", app_s},
  };
  kc_raw_t r = {
      .library = KC_LIBRARY, .frontend = "hip",
      .name = k->name, .demangled = dem, .match_index = pk->match_index, .launch_index = pk->launch_index, .counts_benchmarks = -1,
      .vendor = "amd", .device_name = product[0] ? product : name, .arch = name, .driver_version = (int64_t)S.runtime_version, .ordinal = 0,
      .proc = &S.proc, .visible_vars = KC_VISIBLE_VARS, /* no device UUID on this path */
      .has_target = kc_settings_several(&S.set), .target = S.set.capture_all ? -1 : pk->target,
      .api = "hsa_kernel_dispatch_packet",
      .grid = {d->grid_size_x, d->grid_size_y, d->grid_size_z}, .block = {d->workgroup_size_x, d->workgroup_size_y, d->workgroup_size_z},
      .cluster = {1, 1, 1}, .shared_mem_bytes = d->group_segment_size,
      .params_file = "kernel/params.bin", .params_size = k->kernarg_size, .layout_source = "amdgpu metadata (kerncap reads kernel/module.hsaco)",
      .module_file = m ? "kernel/module.hsaco" : NULL, .module_kind = "hsaco", .module_size = m ? m->size : 0,
      .module_source = "hsa_code_object_reader_create_from_memory/file",
      .chunk = sn.chunk, .live_bytes = sn.live, .stored_before_bytes = sn.stored[0], .stored_after_bytes = sn.stored[1],
      .hashed_on_gpu = 0, .gpu_scan_unavailable = "the HSA library hashes every chunk on the CPU",
      .items = sn.items, .nregions = sn.n,
      .timing = timing, .ntiming = sizeof timing / sizeof *timing,
      .has_hsa = 1, .hsa_kernel_object = d->kernel_object, .hsa_group_segment_size = d->group_segment_size,
      .hsa_private_segment_size = d->private_segment_size, .hsa_kernarg_address = (uint64_t)(uintptr_t)d->kernarg_address,
      .hsa_runtime_version = S.runtime_version,
  };
  int bad = kc_raw_write(kc_dir(), &r);
  kc_snap_free(&sn);
  if (bad) return HSA_STATUS_ERROR;
  kc_log("captured %s (launch %llu) into %s", k->name, (unsigned long long)pk->launch_index, kc_dir());
  return HSA_STATUS_SUCCESS;
}

/* ---- the packet handler ---- */

/* Count one dispatch; true when it is one to capture (*pk says which). Called with S.mu held. */
static bool kc_note_dispatch(const hsa_kernel_dispatch_packet_t* d, kc_kernel** out, kc_pick* pk) {
  pk->launch_index = S.census.launches++;
  kc_kernel* k = kc_kernel_of(d->kernel_object);
  kc_kstat_t* s = k ? k->stat : NULL;
  if (!s) {
    s = kc_census_get(&S.census, k ? k->name : "(unknown kernel object)");
    if (!s) { KC_FAIL("out of host memory for the kernel census"); return false; }
    if (k) k->stat = s;
    if (!s->count) s->module = k ? k->module : -1;
  }
  s->count++;
  s->grid[0] = d->grid_size_x; s->grid[1] = d->grid_size_y; s->grid[2] = d->grid_size_z;
  s->block[0] = d->workgroup_size_x; s->block[1] = d->workgroup_size_y; s->block[2] = d->workgroup_size_z;
  *out = k;
  if (kc_us_since(&S.census_t) >= 1e6) kc_write_kernels_json(false); /* survives a process that ends with _exit */
  if (!S.capture_mode || S.done || !S.base.enabled || !k) return false;
  if (!kc_match_mask(&S.match, s)) return false;
  pk->target = kc_match_pick(&S.match, s, &pk->match_index);
  if (pk->target < 0) return false;
  /* ---- exactly one process of the job captures (c/common/kc_process.c) ---- */
  int won = 1;
  if (!S.claimed) {
    won = kc_claim(&S.proc);
    if (won < 0) { KC_FAIL("%s: %s", "create the capture claim", strerror(errno)); return false; }
    if (!won) {
      kc_log("pid %d: another process claimed the capture first; this one only counts", (int)getpid());
      S.capture_mode = false;
      return false;
    }
    S.claimed = true;
  }
  return kc_settings_several(&S.set) ? kc_raw_capture_dir(S.base.out, S.match.ncaptures, S.capdir, sizeof S.capdir) == 0 : true;
}

static void kc_on_packets(const void* pkts, uint64_t count, uint64_t user_index, void* data,
                          hsa_amd_queue_intercept_packet_writer writer) {
  (void)user_index;
  const hsa_kernel_dispatch_packet_t* p = pkts;
  const hsa_queue_t* q = data;
  uint64_t start = 0;
  pthread_mutex_lock(&S.mu);
  for (uint64_t i = 0; i < count; i++) {
    uint16_t type = (p[i].header >> HSA_PACKET_HEADER_TYPE) & ((1 << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
    if (type != HSA_PACKET_TYPE_KERNEL_DISPATCH) continue;
    kc_kernel* k = NULL;
    kc_pick pk;
    if (!kc_note_dispatch(&p[i], &k, &pk)) continue;
    if (i > start) writer(&p[start], i - start);
    int ordinal;
    hsa_agent_t agent = kc_agent_of(q, &ordinal);
    S.in_capture = true;
    bool forwarded = false;
    hsa_status_t st = kc_capture(&p[i], k, &pk, agent, writer, &forwarded);
    S.in_capture = false;
    /* several captures: the next matching dispatch starts afresh until every one is written */
    S.done = st != HSA_STATUS_SUCCESS || kc_match_captured(&S.match, pk.target);
    S.capdir[0] = 0;
    if (!forwarded) writer(&p[i], 1); /* the dispatch must still run, exactly once */
    start = i + 1;
    kc_write_kernels_json(false);
    if (st == HSA_STATUS_SUCCESS && S.done && S.set.exit_after) {
      if (count > start) writer(&p[start], count - start);
      pthread_mutex_unlock(&S.mu);
      _exit(0);
    }
  }
  pthread_mutex_unlock(&S.mu);
  if (count > start) writer(&p[start], count - start);
}

/* ---- intercepted API calls (one list; see kc_install) ---- */

#define KC_CORE_HOOKS(X)                       \
  X(hsa_queue_create)                          \
  X(hsa_queue_destroy)                         \
  X(hsa_memory_allocate)                       \
  X(hsa_memory_free)                           \
  X(hsa_code_object_reader_create_from_memory) \
  X(hsa_code_object_reader_create_from_file)   \
  X(hsa_executable_load_agent_code_object)     \
  X(hsa_executable_freeze)
#define KC_AMD_HOOKS(X)           \
  X(hsa_amd_memory_pool_allocate) \
  X(hsa_amd_memory_pool_free)

static void kc_track_alloc(void* ptr, size_t size) {
  if (!ptr || !size) return;
  hsa_amd_pointer_info_t info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  bool gpu = false;
  if (S.amd.hsa_amd_pointer_info_fn && S.amd.hsa_amd_pointer_info_fn(ptr, &info, NULL, NULL, NULL) == HSA_STATUS_SUCCESS)
    gpu = kc_is_gpu(info.agentOwner);
  kc_region r = {(uint64_t)(uintptr_t)ptr, size, gpu, true};
  pthread_mutex_lock(&S.mu);
  if (KC_VEC_PUSH(S.regions, r)) KC_FAIL("out of host memory for the %s table", "regions");
  pthread_mutex_unlock(&S.mu);
}

static void kc_track_free(void* ptr) {
  pthread_mutex_lock(&S.mu);
  for (size_t i = 0; i < S.regions.n; i++)
    if (S.regions.v[i].live && S.regions.v[i].va == (uint64_t)(uintptr_t)ptr) S.regions.v[i].live = false;
  pthread_mutex_unlock(&S.mu);
}

static hsa_status_t kc_hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags, void** ptr) {
  hsa_status_t st = S.amd.hsa_amd_memory_pool_allocate_fn(pool, size, flags, ptr);
  if (st == HSA_STATUS_SUCCESS && S.base.enabled) kc_track_alloc(*ptr, size);
  return st;
}

static hsa_status_t kc_hsa_amd_memory_pool_free(void* ptr) {
  if (S.base.enabled) kc_track_free(ptr);
  return S.amd.hsa_amd_memory_pool_free_fn(ptr);
}

static hsa_status_t kc_hsa_memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  hsa_status_t st = S.core.hsa_memory_allocate_fn(region, size, ptr);
  if (st == HSA_STATUS_SUCCESS && S.base.enabled) kc_track_alloc(*ptr, size);
  return st;
}

static hsa_status_t kc_hsa_memory_free(void* ptr) {
  if (S.base.enabled) kc_track_free(ptr);
  return S.core.hsa_memory_free_fn(ptr);
}

static hsa_status_t kc_hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                        void (*callback)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                        uint32_t private_segment_size, uint32_t group_segment_size, hsa_queue_t** queue) {
  if (!S.base.enabled || !S.amd.hsa_amd_queue_intercept_create_fn || !kc_is_gpu(agent))
    return S.core.hsa_queue_create_fn(agent, size, type, callback, data, private_segment_size, group_segment_size, queue);
  hsa_status_t st = S.amd.hsa_amd_queue_intercept_create_fn(agent, size, type, callback, data, private_segment_size,
                                                             group_segment_size, queue);
  if (st != HSA_STATUS_SUCCESS) {
    /* Not interceptable: give the application its plain queue and stop capturing. */
    KC_FAIL("%s: %s", "hsa_amd_queue_intercept_create", kc_status(st));
    return S.core.hsa_queue_create_fn(agent, size, type, callback, data, private_segment_size, group_segment_size, queue);
  }
  KC_CHECK(S.amd.hsa_amd_queue_intercept_register_fn(*queue, kc_on_packets, *queue));
  kc_queue q = {*queue, agent};
  pthread_mutex_lock(&S.mu);
  if (KC_VEC_PUSH(S.queues, q)) KC_FAIL("out of host memory for the %s table", "queues");
  pthread_mutex_unlock(&S.mu);
  kc_log("intercepting queue %p", (void*)*queue);
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t kc_hsa_queue_destroy(hsa_queue_t* queue) {
  pthread_mutex_lock(&S.mu);
  for (size_t i = 0; i < S.queues.n; i++)
    if (S.queues.v[i].queue == queue) S.queues.v[i].queue = NULL;
  pthread_mutex_unlock(&S.mu);
  return S.core.hsa_queue_destroy_fn(queue);
}

static void kc_keep_reader(uint64_t reader, const void* bytes, size_t size) {
  kc_module m = {malloc(size), size};
  if (!m.bytes) return;
  memcpy(m.bytes, bytes, size);
  pthread_mutex_lock(&S.mu);
  if (KC_VEC_PUSH(S.modules, m)) {
    KC_FAIL("out of host memory for the module table");
    free(m.bytes);
  } else if (KC_VEC_PUSH(S.readers, ((kc_reader){reader, (int)S.modules.n - 1}))) KC_FAIL("out of host memory for the reader table");
  pthread_mutex_unlock(&S.mu);
}

static hsa_status_t kc_hsa_code_object_reader_create_from_memory(const void* code_object, size_t size,
                                                                 hsa_code_object_reader_t* reader) {
  hsa_status_t st = S.core.hsa_code_object_reader_create_from_memory_fn(code_object, size, reader);
  if (st == HSA_STATUS_SUCCESS && S.base.enabled) kc_keep_reader(reader->handle, code_object, size);
  return st;
}

static hsa_status_t kc_hsa_code_object_reader_create_from_file(hsa_file_t file, hsa_code_object_reader_t* reader) {
  hsa_status_t st = S.core.hsa_code_object_reader_create_from_file_fn(file, reader);
  struct stat sb;
  if (st == HSA_STATUS_SUCCESS && S.base.enabled && fstat(file, &sb) == 0 && sb.st_size > 0) {
    uint8_t* buf = malloc((size_t)sb.st_size);
    if (buf && pread(file, buf, (size_t)sb.st_size, 0) == sb.st_size) kc_keep_reader(reader->handle, buf, (size_t)sb.st_size);
    free(buf);
  }
  return st;
}

static hsa_status_t kc_hsa_executable_load_agent_code_object(hsa_executable_t exec, hsa_agent_t agent,
                                                             hsa_code_object_reader_t reader, const char* options,
                                                             hsa_loaded_code_object_t* loaded) {
  hsa_status_t st = S.core.hsa_executable_load_agent_code_object_fn(exec, agent, reader, options, loaded);
  if (st != HSA_STATUS_SUCCESS || !S.base.enabled) return st;
  pthread_mutex_lock(&S.mu);
  for (size_t i = 0; i < S.readers.n; i++)
    if (S.readers.v[i].handle == reader.handle) {
      kc_exec_module e = {exec.handle, S.readers.v[i].module};
      if (KC_VEC_PUSH(S.execs, e)) KC_FAIL("out of host memory for the %s table", "execs");
    }
  pthread_mutex_unlock(&S.mu);
  return st;
}

/* Symbol iteration callback: record each kernel's object, name and segment sizes. */
static hsa_status_t kc_on_symbol(hsa_executable_t exec, hsa_executable_symbol_t sym, void* data) {
  (void)data;
  hsa_symbol_kind_t kind;
  if (S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind) != HSA_STATUS_SUCCESS ||
      kind != HSA_SYMBOL_KIND_KERNEL)
    return HSA_STATUS_SUCCESS;
  uint32_t len = 0;
  KC_CHECK(S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &len));
  char* name = calloc(len + 1, 1);
  if (!name) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  KC_CHECK(S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_NAME, name));
  if (len > 3 && strcmp(name + len - 3, ".kd") == 0) name[len - 3] = 0;
  kc_kernel k = {0, name, 0, 0, 0, -1, 0};
  KC_CHECK(S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &k.kernel_object));
  KC_CHECK(S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &k.kernarg_size));
  KC_CHECK(S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &k.group));
  KC_CHECK(S.core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &k.priv));
  /* The module: the one code object of this executable whose bytes hold the name. */
  for (size_t i = 0; i < S.execs.n; i++) {
    if (S.execs.v[i].exec != exec.handle) continue;
    kc_module* m = &S.modules.v[S.execs.v[i].module];
    if (k.module < 0 || memmem(m->bytes, m->size, name, strlen(name))) k.module = S.execs.v[i].module;
  }
  if (KC_VEC_PUSH(S.kernels, k) || kc_kernel_index(S.kernels.n - 1)) KC_FAIL("out of host memory for the %s table", "kernels");
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t kc_hsa_executable_freeze(hsa_executable_t exec, const char* options) {
  hsa_status_t st = S.core.hsa_executable_freeze_fn(exec, options);
  if (st != HSA_STATUS_SUCCESS || !S.base.enabled) return st;
  pthread_mutex_lock(&S.mu);
  S.core.hsa_executable_iterate_symbols_fn(exec, kc_on_symbol, NULL);
  pthread_mutex_unlock(&S.mu);
  return st;
}

/* ---- setup ---- */

static void kc_setup(void) {
  clock_gettime(CLOCK_MONOTONIC, &S.t_load);
  char serr[1200] = "";
  int src = kc_settings_read(&S.set, serr, sizeof serr); /* c/common/kc_settings.c, as the CUDA library reads them */
  S.base.verbose = S.set.verbose;
  S.capture_mode = S.set.capture;
  if (S.set.out) snprintf(S.base.out, sizeof S.base.out, "%s", S.set.out);
  S.base.enabled = S.base.out[0] != 0;
  S.census.module_fmt = "module-%lld";
  S.match = (kc_match_t){.s = &S.set, .census = &S.census};
  kc_log_init(&S.base);
  if (!S.base.enabled) {
    fprintf(stderr, "[kerncap] KERNCAP_OUT is not set; the HSA capture library stays idle\n");
    return;
  }
  { /* ---- processes of a job (c/common/kc_process.c): number this one, apply --rank/--process ---- */
    char perr[256] = "";
    if (kc_proc_init(&S.proc, S.base.out, perr, sizeof perr)) { KC_FAIL("KERNCAP_RANK/KERNCAP_PROCESS: %s", perr); return; }
    if (S.capture_mode && !S.proc.admitted) { /* not selected: count only */
      S.capture_mode = false;
      kc_log("pid %d not selected (%s): counting only", S.proc.pid, S.proc.why);
    }
  }
  if (src) { KC_FAIL("%s", serr); return; }
  S.census.demangle = kc_find_demangler();
}

static void kc_at_exit(void) {
  pthread_mutex_lock(&S.mu);
  kc_write_kernels_json(true);
  pthread_mutex_unlock(&S.mu);
}

KC_EXPORT bool OnLoad(void* table, uint64_t runtime_version, uint64_t failed_tool_count,
                      const char* const* failed_tool_names) {
  (void)failed_tool_count;
  (void)failed_tool_names;
  pthread_once(&S.once, kc_setup);
  struct HsaApiTable* t = table;
  if (!S.base.enabled || !t || !t->core_ || !t->amd_ext_) return true;
  if (S.core.hsa_init_fn) return true; /* already installed */
  S.runtime_version = runtime_version;
  size_t core_size = t->core_->version.minor_id < sizeof S.core ? t->core_->version.minor_id : sizeof S.core;
  S.amd_size = t->amd_ext_->version.minor_id < sizeof S.amd ? t->amd_ext_->version.minor_id : sizeof S.amd;
  memcpy(&S.core, t->core_, core_size);
  memcpy(&S.amd, t->amd_ext_, S.amd_size);
  if (core_size < sizeof S.core || S.amd_size < offsetof(struct AmdExtTable, hsa_amd_queue_intercept_register_fn) + sizeof(void*)) {
    KC_FAIL("OnLoad: the HSA API table is older than ROCm 5.2's; not intercepting");
    return true;
  }
#define KC_INSTALL_CORE(fn) t->core_->fn##_fn = kc_##fn;
#define KC_INSTALL_AMD(fn) t->amd_ext_->fn##_fn = kc_##fn;
  KC_CORE_HOOKS(KC_INSTALL_CORE)
  KC_AMD_HOOKS(KC_INSTALL_AMD)
  atexit(kc_at_exit);
  kc_log("loaded (%s, runtime %llu, out %s, mode %s)", KC_LIBRARY, (unsigned long long)runtime_version, S.base.out,
         S.capture_mode ? "capture" : "list");
  return true;
}

KC_EXPORT void OnUnload(void) { kc_at_exit(); }
