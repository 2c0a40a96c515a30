/*
 * kc_capture.c — the one launch the CUDA capture library captures: its kernel parameters and
 * their layout, its module image and module globals, the before/after snapshots around it
 * (c/cuda/kc_snapshot.c), the files of the capture folder and raw.json (c/common/kc_raw.c).
 * Exports nothing outside the library. Reads no environment variable (set-up did:
 * c/cuda/kerncap_cuda.c). Called from the CUPTI callback with kc.mu held, on the application thread
 * that made the captured launch (or the graph launch holding it: c/cuda/kc_graphs.c).
 */
#define _GNU_SOURCE
#include "kc_state.h"
#include "kc_symbols.h"
#include "kc_fatbin.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- output files ---- */
static int kc_write_file(const char *rel, const void *data, size_t n) {
  int fd;
  if (kc_open_out(rel, &fd)) return -1;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, (const char *)data + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      KC_FAIL("write %s: %s", rel, strerror(errno));
      close(fd);
      return -1;
    }
    done += (size_t)w;
  }
  close(fd);
  return 0;
}

/* Parameter layout (offset, size per parameter) of f. Sources, in order: cuFuncGetParamInfo on
 * the handle; cuKernelGetParamInfo (runtime launches hand over a CUkernel, for which
 * cuFuncGetParamInfo answers nothing: DESIGN.md); cuKernelGetFunction + cuFuncGetParamInfo. */
void kc_param_layout(CUfunction f, kc_layout_t *L) {
  L->n = 0;
  L->source = "none";
  size_t o, s;
  if (kc.cu.cuFuncGetParamInfo && kc.cu.cuFuncGetParamInfo(f, 0, &o, &s) == CUDA_SUCCESS) {
    L->source = "cuFuncGetParamInfo";
    while (L->n < KC_MAX_PARAMS && kc.cu.cuFuncGetParamInfo(f, L->n, &o, &s) == CUDA_SUCCESS) {
      L->off[L->n] = o; L->size[L->n] = s; L->n++;
    }
    return;
  }
  if (kc.cu.cuKernelGetParamInfo && kc.cu.cuKernelGetParamInfo((CUkernel)f, 0, &o, &s) == CUDA_SUCCESS) {
    L->source = "cuKernelGetParamInfo";
    while (L->n < KC_MAX_PARAMS && kc.cu.cuKernelGetParamInfo((CUkernel)f, L->n, &o, &s) == CUDA_SUCCESS) {
      L->off[L->n] = o; L->size[L->n] = s; L->n++;
    }
    return;
  }
  CUfunction g;
  if (kc.cu.cuKernelGetFunction && kc.cu.cuKernelGetFunction(&g, (CUkernel)f) == CUDA_SUCCESS && kc.cu.cuFuncGetParamInfo &&
      kc.cu.cuFuncGetParamInfo(g, 0, &o, &s) == CUDA_SUCCESS) {
    L->source = "cuKernelGetFunction+cuFuncGetParamInfo";
    while (L->n < KC_MAX_PARAMS && kc.cu.cuFuncGetParamInfo(g, L->n, &o, &s) == CUDA_SUCCESS) {
      L->off[L->n] = o; L->size[L->n] = s; L->n++;
    }
  }
}

/* The function handle to ask attributes/module of: a CUkernel is turned into this context's CUfunction. */
static CUfunction as_function(CUfunction f) {
  int v;
  if (kc.cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS) return f;
  CUfunction g;
  if (kc.cu.cuKernelGetFunction && kc.cu.cuKernelGetFunction(&g, (CUkernel)f) == CUDA_SUCCESS) return g;
  return f;
}

void kc_module_bind(uint32_t id, CUmodule h) {
  if (!h) return;
  for (size_t i = 0; i < kc.modules.n; i++)
    if (kc.modules.v[i].handle == h) kc.modules.v[i].handle = NULL; /* handle reused after an unload */
  for (size_t i = kc.modules.n; i-- > 0;)
    if (kc.modules.v[i].id == id) { kc.modules.v[i].handle = h; return; }
}

CUmodule kc_module_of(CUfunction f) {
  CUmodule m = NULL;
  if (kc.cu.cuFuncGetModule && kc.cu.cuFuncGetModule(&m, as_function(f)) != CUDA_SUCCESS) m = NULL;
  return m;
}


/* Pick the module image that holds the kernel: the image bound to the function's CUmodule,
 * else the last-loaded image whose bytes contain the mangled name. */
static kc_module_t *kc_find_module(const char *name, CUmodule h) {
  kc.module_by_handle = 1;
  for (size_t i = 0; h && i < kc.modules.n; i++)
    if (kc.modules.v[i].handle == h && kc.modules.v[i].bytes) return &kc.modules.v[i];
  kc.module_by_handle = 0;
  size_t nl = strlen(name);
  for (size_t i = kc.modules.n; i-- > 0;)
    if (kc.modules.v[i].bytes && memmem(kc.modules.v[i].bytes, kc.modules.v[i].size, name, nl)) return &kc.modules.v[i];
  return NULL;
}

/* ---- the application's fatbin (c/cuda/kc_fatbin.h) ---- */
typedef struct {
  const kc_module_t *m;
  const char *kernel;
  uint64_t addr, size;
  int how; /* kc_fatbin_holds: 1 the cubin itself, 2 an entry of its size naming the kernel */
} kc_fb_search_t;

static int fb_try(uint64_t addr, uint64_t size, void *ud) {
  kc_fb_search_t *s = ud;
  int h = kc_fatbin_holds(addr, size, (const unsigned char *)s->m->bytes, s->m->size, s->kernel);
  if (h == 1 || (h == 2 && !s->how)) { s->addr = addr; s->size = size; s->how = h; }
  return h == 1;
}

/* The application's fatbin that holds module m's cubin and PTX, copied (malloc'd, *n bytes), or
 * NULL: m's own load call handed a fatbin (that one is the only candidate; a cubin or PTX given
 * there has no fatbin around it), else the fatbins with PTX the app loaded, then the .nv_fatbin
 * sections of the loaded objects. *how says which was found, for raw.json. */
static unsigned char *kc_app_fatbin(const kc_module_t *m, const char *kernel, size_t *n, const char **how) {
  kc_fb_search_t s = {m, kernel, 0, 0, 0};
  if (!m->bytes || m->size < 4 || memcmp(m->bytes, "\x7f" "ELF", 4)) return NULL;
  uint64_t addr = 0;
  int ptx = 0;
  if (m->image) {
    uint64_t size = kc_fatbin_at(m->image, &addr, &ptx);
    if (!size || !ptx) return NULL;
    fb_try(addr, size, &s);
  } else {
    for (size_t i = kc.ptx_images.n; i-- > 0 && s.how != 1;) fb_try(kc.ptx_images.v[i].addr, kc.ptx_images.v[i].size, &s);
    if (s.how != 1) {
      kc_range_t *secs = calloc(KC_MAX_SECTIONS, sizeof *secs);
      if (secs) {
        dl_iterate_phdr(kc_nv_fatbin_of, secs);
        for (size_t k = 0; k < KC_MAX_SECTIONS && secs[k].addr; k++)
          if (kc_each_container(secs[k], fb_try, &s)) break;
        free(secs);
      }
    }
  }
  if (!s.how) return NULL;
  unsigned char *b = malloc(s.size);
  if (!b || kc_peek(s.addr, b, s.size)) { free(b); return NULL; }
  *n = s.size;
  *how = s.how == 1 ? "the application's fatbin that holds the loaded cubin byte for byte, kept whole for its PTX"
                    : "the application's fatbin with an entry of the loaded cubin's size naming the kernel, kept whole for its PTX";
  kc_log("module: the application's fatbin at 0x%llx (%llu bytes, with PTX) holds the kernel's cubin%s", (unsigned long long)s.addr,
         (unsigned long long)s.size, s.how == 1 ? "" : " (matched by size and name)");
  return b;
}

static const char *module_kind(const kc_module_t *m) {
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

/* Pack the kernel parameters into one buffer, as the kernel sees them. */
static int pack_params(void) {
  kc_param_layout(kc.cap.L.f, &kc.cap.lay);
  if (kc.cap.L.extra) { /* CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE pairs */
    void *buf = NULL;
    size_t sz = 0;
    for (void **e = kc.cap.L.extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = e[1];
      else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) sz = *(size_t *)e[1];
    }
    if (buf && sz) {
      kc.cap.params = malloc(sz);
      if (!kc.cap.params) return -1;
      memcpy(kc.cap.params, buf, sz);
      kc.cap.params_size = sz;
      if (!kc.cap.lay.n) kc.cap.lay.source = "extra CU_LAUNCH_PARAM_BUFFER_POINTER";
      return 0;
    }
  }
  if (!kc.cap.L.kernel_params) {
    if (kc.cap.lay.n) { KC_FAIL("kernel has %zu parameters but the launch passed none", kc.cap.lay.n); return -1; }
    kc.cap.params = malloc(1);
    kc.cap.params_size = 0;
    return 0;
  }
  if (!kc.cap.lay.n) {
    KC_FAIL("no parameter layout for %s: cuFuncGetParamInfo and cuKernelGetParamInfo both failed", kc.cap.name);
    return -1;
  }
  size_t total = kc.cap.lay.off[kc.cap.lay.n - 1] + kc.cap.lay.size[kc.cap.lay.n - 1];
  kc.cap.params = calloc(1, total ? total : 1);
  if (!kc.cap.params) return -1;
  for (size_t i = 0; i < kc.cap.lay.n; i++) memcpy(kc.cap.params + kc.cap.lay.off[i], kc.cap.L.kernel_params[i], kc.cap.lay.size[i]);
  kc.cap.params_size = total;
  return 0;
}

/* raw.json of the capture (c/common/kc_raw.c): the launch, the device, the module, the snapshot's items. */
static void write_raw_json(const kc_module_t *m, const char *modfile, const char *fatbin_how) {
  CUdevice dev = 0;
  char devname[256] = "unknown", arch[32], uuid[41] = "", pci[32] = "";
  int ma = 0, mi = 0, drv = 0;
  kc.cu.cuCtxGetDevice(&dev);
  kc.cu.cuDeviceGetName(devname, sizeof devname, dev);
  kc.cu.cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  kc.cu.cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  kc.cu.cuDriverGetVersion(&drv);
  snprintf(arch, sizeof arch, "sm_%d%d", ma, mi);
  CUuuid u; /* who captured, on which GPU (c/common/kc_process.c) */
  if (kc.cu.cuDeviceGetUuid_v2 && kc.cu.cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) kc_uuid_str((const unsigned char *)u.bytes, uuid);
  if (kc.cu.cuDeviceGetPCIBusId && kc.cu.cuDeviceGetPCIBusId(pci, sizeof pci, dev) != CUDA_SUCCESS) pci[0] = 0;
  const CUlaunchConfig *cfg = kc.cap.L.config;
  size_t nattrs = cfg ? cfg->numAttrs : 0;
  kc_raw_launch_attr_t *attrs = calloc(nattrs ? nattrs : 1, sizeof *attrs);
  const char *dem = kc_demangled(kc.cap.name);
  if (!attrs) { KC_FAIL("out of host memory for raw.json"); return; }
  unsigned cl[3] = {1, 1, 1};
  for (size_t i = 0; i < nattrs; i++) {
    const CUlaunchAttribute *a = &cfg->attrs[i];
    if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cl[0] = a->value.clusterDim.x; cl[1] = a->value.clusterDim.y; cl[2] = a->value.clusterDim.z;
    }
    attrs[i] = (kc_raw_launch_attr_t){(int)a->id, attr_name(a->id), &a->value, sizeof a->value};
  }
  kc_raw_func_attr_t fattrs[sizeof FUNC_ATTRS / sizeof *FUNC_ATTRS];
  size_t nfattrs = 0;
  CUfunction g = as_function(kc.cap.L.f);
  for (size_t i = 0; i < sizeof FUNC_ATTRS / sizeof *FUNC_ATTRS; i++) {
    int v;
    if (kc.cu.cuFuncGetAttribute(&v, FUNC_ATTRS[i].id, g) == CUDA_SUCCESS) fattrs[nfattrs++] = (kc_raw_func_attr_t){(int)FUNC_ATTRS[i].id, FUNC_ATTRS[i].name, v};
  }
  const char *fname = "", *fmsg = "";
  if (kc.cap.fault && kc.cu.cuGetErrorName) kc.cu.cuGetErrorName(kc.cap.fault, &fname);
  if (kc.cap.fault && kc.cu.cuGetErrorString) kc.cu.cuGetErrorString(kc.cap.fault, &fmsg);
  float ms = -1;
  if (kc.cap.ev0 && kc.cap.ev1) kc.cu.cuEventElapsedTime_v2(&ms, kc.cap.ev0, kc.cap.ev1);
  const kc_snap_t *sn = &kc.cap.sn;
  const kc_raw_time_t timing[] = {
      {"sync_us", "%.1f", kc.cap.t_sync}, {"before_us", "%.1f", sn->before_us}, {"after_us", "%.1f", sn->after_us},
      {"scan_before_us", "%.1f", sn->scan_us[0]}, {"scan_after_us", "%.1f", sn->scan_us[1]}, {"fsync_us", "%.1f", sn->fsync_us},
      {"app_launch_us", "%.3f", ms >= 0 ? ms * 1000.0 : -1.0}, {"app_to_capture_s", "%.3f", kc.cap.t_capture_start - kc.t0},
      {"before_bytes", "%.0f", (double)sn->stored_bytes[0]}, {"after_bytes", "%.0f", (double)sn->stored_bytes[1]},
  };
  kc_raw_t r = {
      .library = KC_VERSION, .frontend = "cuda",
      .name = kc.cap.name, .demangled = dem, .match_index = kc.cap.match_index, .launch_index = kc.cap.launch_index,
      .counts_benchmarks = kc.set.count_benchmarks,
      .vendor = "nvidia", .device_name = devname, .arch = arch, .driver_version = drv, .ordinal = (int)dev,
      .proc = &kc.proc, .visible_vars = KC_VISIBLE_VARS, .device_uuid = uuid[0] ? uuid : NULL, .pci_bus_id = pci[0] ? pci : NULL,
      .has_target = kc_several(), .target = kc.set.capture_all ? -1 : kc.cap.target,
      .has_graph = kc.cap.graph_id >= 0, .graph_id = kc.cap.graph_id, .graph_node = kc.cap.graph_node,
      .api = kc.cap.L.api,
      .grid = {kc.cap.L.grid[0], kc.cap.L.grid[1], kc.cap.L.grid[2]}, .block = {kc.cap.L.block[0], kc.cap.L.block[1], kc.cap.L.block[2]},
      .cluster = {cl[0], cl[1], cl[2]}, .shared_mem_bytes = kc.cap.L.shmem,
      .attrs = attrs, .nattrs = nattrs, .func_attrs = fattrs, .nfunc_attrs = nfattrs,
      .params_file = "kernel/params.bin", .params_size = kc.cap.params_size, .layout_source = kc.cap.lay.source,
      .nparams = kc.cap.lay.n, .param_offset = kc.cap.lay.off, .param_size = kc.cap.lay.size,
      .module_file = modfile, .module_kind = module_kind(m), .module_size = m->size, .has_module_id = 1, .module_id = m->id,
      .module_source = fatbin_how ? fatbin_how
                       : kc.module_by_handle ? "CUPTI module-loaded callback; image bound to the function's CUmodule"
                                             : "CUPTI module-loaded callback; image chosen by kernel name",
      .chunk = sn->chunk, .live_bytes = sn->live_bytes, .stored_before_bytes = sn->stored_bytes[0], .stored_after_bytes = sn->stored_bytes[1],
      .hashed_on_gpu = sn->scan_ok > 0, .gpu_scan_unavailable = sn->scan_why,
      .items = sn->items, .nregions = kc.regions.n, .nglobals = kc.globals.n,
      .has_fault = kc.cap.fault != 0, .fault_code = (int)kc.cap.fault, .fault_name = fname, .fault_message = fmsg,
      .app_launch_method = kc.cap.timing_method ? kc.cap.timing_method : "none",
      .has_globals_scan = 1, .globals_symbols = kc.g_symbols, .globals_unreadable = kc.g_skipped,
      .timing = timing, .ntiming = sizeof timing / sizeof *timing,
  };
  kc_raw_write(kc_capture_dir(), &r);
  free(attrs);
}

static void add_global(const char *name, void *ud) {
  CUmodule h = ud;
  CUdeviceptr d = 0;
  size_t size = 0;
  kc.g_symbols++;
  if (!strncmp(name, "$str", 4)) return; /* nvcc's string literals: constants of the image itself */
  if (kc.cu.cuModuleGetGlobal_v2(&d, &size, h, name) != CUDA_SUCCESS || !d || !size) return;
  for (size_t i = 0; i < kc.globals.n; i++)
    if (kc.globals.v[i].va == (uint64_t)d) return; /* the same variable in two cubin entries */
  char *copy = strdup(name);
  if (!copy || KC_VEC_PUSH(kc.globals, (kc_global_t){copy, d, size})) free(copy);
}

/* The module globals of the captured kernel's module, read from its image (c/cuda/kc_symbols.h). */
void kc_collect_globals_of(CUfunction f, const char *name) {
  CUmodule h = kc_module_of(f);
  kc_module_t *m = h ? kc_find_module(name, h) : NULL;
  if (!m || !kc.cu.cuModuleGetGlobal_v2) return;
  CUdevice dev = 0;
  int ma = 0, mi = 0;
  kc.cu.cuCtxGetDevice(&dev);
  kc.cu.cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  kc.cu.cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  kc_module_objects((const unsigned char *)m->bytes, m->size, (unsigned)(ma * 10 + mi), add_global, h, &kc.g_skipped);
  kc_log("module globals: %zu of %d data symbols (%d unreadable cubin entries)", kc.globals.n, kc.g_symbols, kc.g_skipped);
}
static void collect_globals(void) { kc_collect_globals_of(kc.cap.L.f, kc.cap.name); }

int kc_snap_live(kc_snap_t *s, const char *before_file) {
  if (kc_snap_init(s, kc.regions.n + kc.globals.n)) return -1;
  s->file[0] = before_file;
  for (size_t i = 0; i < kc.regions.n; i++)
    if (kc_snap_item(s, i, kc.regions.v[i].va, kc.regions.v[i].size, kc.regions.v[i].kind, NULL)) return -1;
  for (size_t i = 0; i < kc.globals.n; i++)
    if (kc_snap_item(s, kc.regions.n + i, kc.globals.v[i].va, kc.globals.v[i].size, "global", kc.globals.v[i].name)) return -1;
  kc.own_load = 1; /* the scan module's MODULE_LOADED is ours, not the application's */
  kc_snap_plan(s);
  kc.own_load = 0;
  return 0;
}

/* Before state of every live region and module global, with a progress file (c/cuda/kc_snapshot.c). */
static int snapshot_before(void) {
  if (kc_snap_live(&kc.cap.sn, "memory/before.bin")) return -1;
  char pp[4200];
  kc_path_join(pp, sizeof pp, "progress");
  kc.cap.sn.progress_fd = open(pp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  return kc_snap_pass(&kc.cap.sn, 0);
}

/* Launch entry of the matched launch: sync, before state, params, module, start event. */
void kc_capture_enter(void) {
  kc.cap.t_capture_start = kc_now_s();
  double t = kc_now_s();
  if (CU_CHECK(kc.cu.cuCtxSynchronize())) return;
  kc.cap.t_sync = (kc_now_s() - t) * 1e6;
  collect_globals();
  if (pack_params()) { if (kc.base.enabled) KC_FAIL("cannot pack kernel parameters"); return; }
  if (kc_write_file("kernel/params.bin", kc.cap.params, kc.cap.params_size)) return;
  kc.cap.mod = kc_find_module(kc.cap.name, kc_module_of(kc.cap.L.f)); /* now: after a fault the driver answers nothing */
  if (snapshot_before()) { kc_snap_free(&kc.cap.sn); return; }
  if (kc.cu.cuEventCreate(&kc.cap.ev0, CU_EVENT_DEFAULT) == CUDA_SUCCESS && kc.cu.cuEventCreate(&kc.cap.ev1, CU_EVENT_DEFAULT) == CUDA_SUCCESS) {
    /* 100 µs of kc_spin ahead of the start event: the stream is busy while the application's
     * launch is submitted, so ev0→ev1 is the kernel's GPU time, not the launch path (kc_scan.cu) */
    unsigned long long ns = 100000;
    void *spin_args[] = {&ns};
    kc.cap.timing_method = "events";
    if (kc.cap.sn.spin && kc.cu.cuLaunchKernel(kc.cap.sn.spin, 1, 1, 1, 1, 1, 1, 0, kc.cap.L.stream, spin_args, NULL) == CUDA_SUCCESS)
      kc.cap.timing_method = "events after kc_spin (launch path hidden)";
    kc.cu.cuEventRecord(kc.cap.ev0, kc.cap.L.stream);
  } else kc.cap.ev0 = kc.cap.ev1 = NULL;
}

/* Errors that cuCtxSynchronize returns when the kernel itself faulted (sticky: the context is
 * unusable afterwards, in the application as without kerncap). */
static int is_kernel_fault(CUresult r) {
  switch ((int)r) {
    case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718: case 719: return 1;
    default: return 0;
  }
}

void kc_capture_exit(void) {
  if (kc.cap.ev1) kc.cu.cuEventRecord(kc.cap.ev1, kc.cap.L.stream);
  CUresult sr = kc.cu.cuCtxSynchronize();
  if (sr != CUDA_SUCCESS && is_kernel_fault(sr)) {
    /* The captured launch faulted: what the engineer wants to reproduce. The before state, the
     * parameters and the module are already written; there is no after state (device memory
     * cannot be read any more). The application then fails exactly as it would without us. */
    kc.cap.fault = sr;
    if (kc_open_out("memory/after.bin", &kc.cap.sn.fd_after) || kc_snap_sync(&kc.cap.sn)) { kc_snap_free(&kc.cap.sn); return; }
  } else {
    if (CU_CHECK(sr)) return;
    if (kc_snap_pass(&kc.cap.sn, 1) || kc_snap_sync(&kc.cap.sn)) { kc_snap_free(&kc.cap.sn); return; }
  }
  kc_module_t *m = kc.cap.mod ? kc.cap.mod : kc_find_module(kc.cap.name, kc_module_of(kc.cap.L.f));
  if (!m) { KC_FAIL("no loaded module image contains %s (%zu images seen)", kc.cap.name, kc.modules.n); return; }
  char modfile[64];
  /* where the app's image was a fatbin with PTX, that fatbin: the replay and the export JIT its
   * PTX on a GPU the cubin does not run on; on this one the driver picks the same cubin again */
  size_t fb_size = 0;
  const char *fb_how = NULL;
  unsigned char *fb = kc_app_fatbin(m, kc.cap.name, &fb_size, &fb_how);
  kc_module_t kept = *m;
  if (fb) kept.bytes = (char *)fb, kept.size = fb_size;
  snprintf(modfile, sizeof modfile, "kernel/module.%s", module_kind(&kept));
  int werr = kc_write_file(modfile, kept.bytes, kept.size);
  if (!werr) write_raw_json(&kept, modfile, fb_how);
  free(fb);
  if (werr) return;
  uint64_t bb = kc.cap.sn.stored_bytes[0], ab = kc.cap.sn.stored_bytes[1];
  kc_snap_free(&kc.cap.sn);
  kc_log("captured %s (launch %llu): %llu bytes stored before, %llu after", kc.cap.name, (unsigned long long)kc.cap.launch_index,
        (unsigned long long)bb, (unsigned long long)ab);
  int all = kc_match_captured(&kc.match, kc.cap.target);
  if (kc_several()) {
    /* several captures: this one is complete in its folder; the next matching launch starts afresh */
    free(kc.cap.params);
    for (size_t i = 0; i < kc.globals.n; i++) free(kc.globals.v[i].name);
    kc.globals.n = 0;
    kc.cap = (kc_capture_t){.graph_id = -1};
    kc.capturing = 0;
    kc.capdir[0] = 0;
    if (!all) { kc_write_census(0); return; }
  }
  kc.done = 1;
  kc.counting_off = "capture written; CUPTI handed back"; /* run mode: a later profiler in the app gets CUPTI */
  kc_cupti_done(kc.counting_off, kc_census_read(&kc.census.launches), 1);
  kc_write_census(0);
  if (kc.exit_after) _exit(0);
}

/* Graph path (c/cuda/kc_graphs.c): kc.cap.L describes the node; capture it as a launch that kerncap makes
 * itself on kc.cap.L.stream. Returns 0 when the capture was written. */
int kc_capture_snapshot_and_launch(void) {
  int exit_after = kc.exit_after;
  kc.exit_after = 0; /* the application's state is put back first */
  kc_capture_enter();
  if (!kc.base.enabled || !kc.cap.sn.items) { kc.exit_after = exit_after; return -1; }
  /* the node's launch attributes (clusters, cooperative, priority) need cuLaunchKernelEx */
  CUresult r = kc.cap.L.config ? (kc.cu.cuLaunchKernelEx ? kc.cu.cuLaunchKernelEx(kc.cap.L.config, kc.cap.L.f, kc.cap.L.kernel_params, kc.cap.L.extra) : CUDA_ERROR_NOT_SUPPORTED)
                          : kc.cu.cuLaunchKernel(kc.cap.L.f, kc.cap.L.grid[0], kc.cap.L.grid[1], kc.cap.L.grid[2], kc.cap.L.block[0], kc.cap.L.block[1], kc.cap.L.block[2], kc.cap.L.shmem,
                                             kc.cap.L.stream, kc.cap.L.kernel_params, kc.cap.L.extra);
  kc.cap.timing_method = "events around kerncap's own launch of the node, after kc_spin (not inside the application's graph)";
  if (CU_CHECK(r)) { kc_snap_free(&kc.cap.sn); kc.exit_after = exit_after; return -1; }
  kc_capture_exit();
  kc.exit_after = exit_after;
  return kc.done ? 0 : -1;
}
