/*
 * fake_hsa_runtime.c: drives libkerncap_hsa.so without a GPU or a real HSA runtime.
 * It builds an HSA API table of stubs (host memory stands in for device memory; the "queue"
 * executes a dispatch by running a C function on the kernarg pointers), calls OnLoad, then plays
 * an application: load a code object, allocate, dispatch "scale" three times. kerncap's test checks
 * the raw capture written for KERNCAP_KERNEL/KERNCAP_DISPATCH.
 * Usage: HSA_TOOLS_LIB=LIB fake_hsa_runtime CODE_OBJECT (the tool library is found as ROCr finds
 * it; without HSA_TOOLS_LIB the "application" runs with no tool, as under plain ROCr).
 *        HSA_TOOLS_LIB=LIB fake_hsa_runtime CODE_OBJECT NAME...: the code object's kernels are the
 * distinct NAMEs, and the application dispatches one packet per NAME, in order, each alone in
 * its doorbell (test/cpu/c-match.test.ts: which dispatches the library captures).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hsa_api_table.h"

static hsa_amd_queue_intercept_handler g_handler;
static void* g_handler_data;
static hsa_queue_t g_queue;
static int g_signal_value[16];
static int g_nsignals;
static float* g_bufs[2];

struct scale_args { float* data; float factor; int n; };

/* NAME... mode: the kernels (distinct names; symbol i has handle i + 1, kernel object 0x2000 + i) */
static const char** g_names;
static int g_nnames;
static const char* g_kernel[256];
static int g_nkernels;
static int kernel_index(const char* name) {
  for (int i = 0; i < g_nkernels; i++)
    if (!strcmp(g_kernel[i], name)) return i;
  return -1;
}

static hsa_status_t s_agent_get_info(hsa_agent_t a, hsa_agent_info_t attr, void* v) {
  if (attr == HSA_AGENT_INFO_DEVICE) *(hsa_device_type_t*)v = a.handle == 2 ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU;
  else if (attr == HSA_AGENT_INFO_NAME) strcpy(v, "gfx90a");
  else if ((int)attr == HSA_AMD_AGENT_INFO_PRODUCT_NAME) strcpy(v, "Fake MI210");
  return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_status_string(hsa_status_t st, const char** s) { (void)st; *s = "fake"; return HSA_STATUS_SUCCESS; }
static hsa_status_t s_queue_create(hsa_agent_t a, uint32_t sz, hsa_queue_type32_t t, void (*cb)(hsa_status_t, hsa_queue_t*, void*),
                                   void* d, uint32_t p, uint32_t g, hsa_queue_t** q) {
  (void)a; (void)sz; (void)t; (void)cb; (void)d; (void)p; (void)g; *q = &g_queue; return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_intercept_register(hsa_queue_t* q, hsa_amd_queue_intercept_handler h, void* d) {
  (void)q; g_handler = h; g_handler_data = d; return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_pool_alloc(hsa_amd_memory_pool_t p, size_t size, uint32_t f, void** ptr) {
  (void)p; (void)f; *ptr = aligned_alloc(4096, (size + 4095) & ~4095ul); memset(*ptr, 0, size); return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_pool_free(void* p) { free(p); return HSA_STATUS_SUCCESS; }
static hsa_status_t s_pointer_info(const void* p, hsa_amd_pointer_info_t* i, void* (*a)(size_t), uint32_t* n, hsa_agent_t** ag) {
  (void)p; (void)a; (void)n; (void)ag; i->agentOwner.handle = 1; /* host: the library memcpy's */ return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_reader_mem(const void* c, size_t s, hsa_code_object_reader_t* r) { (void)c; (void)s; r->handle = 77; return HSA_STATUS_SUCCESS; }
static hsa_status_t s_load(hsa_executable_t e, hsa_agent_t a, hsa_code_object_reader_t r, const char* o, hsa_loaded_code_object_t* l) {
  (void)e; (void)a; (void)r; (void)o; (void)l; return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_freeze(hsa_executable_t e, const char* o) { (void)e; (void)o; return HSA_STATUS_SUCCESS; }
static hsa_status_t s_iterate_symbols(hsa_executable_t e, hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* d) {
  if (g_nkernels) {
    for (int i = 0; i < g_nkernels; i++) cb(e, (hsa_executable_symbol_t){(uint64_t)i + 1}, d);
    return HSA_STATUS_SUCCESS;
  }
  hsa_executable_symbol_t s1 = {1}, s2 = {2};
  cb(e, s1, d);
  return cb(e, s2, d);
}
static hsa_status_t s_symbol_info(hsa_executable_symbol_t s, hsa_executable_symbol_info_t attr, void* v) {
  char kd[512];
  if (g_nkernels) snprintf(kd, sizeof kd, "%s.kd", g_kernel[s.handle - 1]);
  const char* name = g_nkernels ? kd : s.handle == 1 ? "_Z5scalePffi.kd" : "other.kd";
  switch (attr) {
    case HSA_EXECUTABLE_SYMBOL_INFO_TYPE: *(hsa_symbol_kind_t*)v = HSA_SYMBOL_KIND_KERNEL; break;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH: *(uint32_t*)v = (uint32_t)strlen(name); break;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME: memcpy(v, name, strlen(name)); break;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT: *(uint64_t*)v = (g_nkernels ? 0x1fff : 0x1000) + s.handle; break;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE: *(uint32_t*)v = sizeof(struct scale_args); break;
    default: *(uint32_t*)v = 0;
  }
  return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_signal_create(hsa_signal_value_t v, uint32_t n, const hsa_agent_t* c, hsa_signal_t* s) {
  (void)n; (void)c; g_signal_value[g_nsignals] = (int)v; s->handle = (uint64_t)g_nsignals++; return HSA_STATUS_SUCCESS;
}
static hsa_status_t s_signal_destroy(hsa_signal_t s) { (void)s; return HSA_STATUS_SUCCESS; }
static hsa_signal_value_t s_signal_wait(hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t v, uint64_t t, hsa_wait_state_t w) {
  (void)c; (void)v; (void)t; (void)w; return g_signal_value[s.handle];
}
static hsa_status_t s_memory_copy(void* d, const void* s, size_t n) { memcpy(d, s, n); return HSA_STATUS_SUCCESS; }

/* The "GPU": runs dispatches as they reach the hardware queue; completes barriers at once. */
static void writer(const void* pkts, uint64_t count) {
  const hsa_kernel_dispatch_packet_t* p = pkts;
  for (uint64_t i = 0; i < count; i++) {
    int type = p[i].header & 0xff;
    if (type == HSA_PACKET_TYPE_KERNEL_DISPATCH && p[i].kernel_object == 0x1001) {
      struct scale_args* a = p[i].kernarg_address;
      for (int k = 0; k < a->n; k++) a->data[k] *= a->factor;
    } else if (type == HSA_PACKET_TYPE_BARRIER_AND) {
      g_signal_value[((const hsa_barrier_and_packet_t*)&p[i])->completion_signal.handle] = 0;
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_names = (const char**)argv + 2;
  g_nnames = argc - 2;
  for (int i = 0; i < g_nnames; i++)
    if (kernel_index(g_names[i]) < 0 && g_nkernels < 256) g_kernel[g_nkernels++] = g_names[i];
  const char* tools = getenv("HSA_TOOLS_LIB");
  void* lib = tools && *tools ? dlopen(tools, RTLD_NOW) : NULL;
  if (tools && *tools && !lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  bool (*on_load)(void*, uint64_t, uint64_t, const char* const*) = lib ? (bool (*)(void*, uint64_t, uint64_t, const char* const*))dlsym(lib, "OnLoad") : NULL;
  static struct CoreApiTable core;
  static struct AmdExtTable amd;
  static struct HsaApiTable root;
  core.version.minor_id = sizeof core;
  amd.version.minor_id = sizeof amd;
  core.hsa_agent_get_info_fn = s_agent_get_info;
  core.hsa_status_string_fn = s_status_string;
  core.hsa_queue_create_fn = s_queue_create;
  core.hsa_code_object_reader_create_from_memory_fn = s_reader_mem;
  core.hsa_executable_load_agent_code_object_fn = s_load;
  core.hsa_executable_freeze_fn = s_freeze;
  core.hsa_executable_iterate_symbols_fn = s_iterate_symbols;
  core.hsa_executable_symbol_get_info_fn = s_symbol_info;
  core.hsa_signal_create_fn = s_signal_create;
  core.hsa_signal_destroy_fn = s_signal_destroy;
  core.hsa_signal_wait_scacquire_fn = s_signal_wait;
  core.hsa_memory_copy_fn = s_memory_copy;
  core.hsa_init_fn = (__typeof__(core.hsa_init_fn))s_freeze; /* any non-null */
  amd.hsa_amd_queue_intercept_create_fn = s_queue_create;
  amd.hsa_amd_queue_intercept_register_fn = s_intercept_register;
  amd.hsa_amd_memory_pool_allocate_fn = s_pool_alloc;
  amd.hsa_amd_memory_pool_free_fn = s_pool_free;
  amd.hsa_amd_pointer_info_fn = s_pointer_info;
  root.core_ = &core;
  root.amd_ext_ = &amd;
  if (on_load && !on_load(&root, 1005, 0, NULL)) return 3;

  /* The application, calling through the (patched) table as libhsa-runtime64's exports do. */
  FILE* f = fopen(argv[1], "rb");
  static unsigned char co[1 << 20];
  size_t con = f ? fread(co, 1, sizeof co, f) : 0;
  if (f) fclose(f);
  hsa_code_object_reader_t reader;
  hsa_executable_t exec = {5};
  hsa_agent_t gpu = {2};
  root.core_->hsa_code_object_reader_create_from_memory_fn(co, con, &reader);
  root.core_->hsa_executable_load_agent_code_object_fn(exec, gpu, reader, NULL, NULL);
  root.core_->hsa_executable_freeze_fn(exec, NULL);
  hsa_queue_t* q;
  root.core_->hsa_queue_create_fn(gpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &q);
  hsa_amd_memory_pool_t pool = {9};
  const int n = 3000;
  for (int b = 0; b < 2; b++) root.amd_ext_->hsa_amd_memory_pool_allocate_fn(pool, n * sizeof(float), 0, (void**)&g_bufs[b]);
  for (int k = 0; k < n; k++) g_bufs[0][k] = (float)k;
  struct scale_args* args;
  root.amd_ext_->hsa_amd_memory_pool_allocate_fn(pool, sizeof *args, 0, (void**)&args);
  for (int i = 0; i < g_nnames; i++) { /* NAME... mode: one dispatch per name, nothing computed */
    *args = (struct scale_args){g_bufs[0], 1.0f, 0};
    hsa_kernel_dispatch_packet_t pk;
    memset(&pk, 0, sizeof pk);
    pk.header = HSA_PACKET_TYPE_KERNEL_DISPATCH;
    pk.workgroup_size_x = 64; pk.workgroup_size_y = 1; pk.workgroup_size_z = 1;
    pk.grid_size_x = 64 * (uint32_t)(i + 1); pk.grid_size_y = 1; pk.grid_size_z = 1;
    pk.kernarg_address = args;
    pk.kernel_object = 0x2000 + (uint64_t)kernel_index(g_names[i]);
    if (g_handler) g_handler(&pk, 1, 0, g_handler_data, writer);
    else writer(&pk, 1);
  }
  for (int it = 0; g_nnames == 0 && it < 3; it++) {
    *args = (struct scale_args){g_bufs[0], 2.0f, n};
    hsa_kernel_dispatch_packet_t pk[2];
    memset(pk, 0, sizeof pk);
    for (int j = 0; j < 2; j++) {
      pk[j].header = HSA_PACKET_TYPE_KERNEL_DISPATCH;
      pk[j].workgroup_size_x = 256; pk[j].workgroup_size_y = 1; pk[j].workgroup_size_z = 1;
      pk[j].grid_size_x = 3072; pk[j].grid_size_y = 1; pk[j].grid_size_z = 1;
      pk[j].kernarg_address = args;
    }
    pk[0].kernel_object = 0x1002; /* "other" first, then scale, in one doorbell */
    pk[1].kernel_object = 0x1001;
    pk[1].group_segment_size = 512;
    if (g_handler) g_handler(pk, 2, 0, g_handler_data, writer);
    else writer(pk, 2); /* no tool: the packets reach the "hardware" queue as they are */
  }
  void (*on_unload)(void) = lib ? (void (*)(void))dlsym(lib, "OnUnload") : NULL;
  if (on_unload) on_unload();
  printf("data[3]=%g\n", g_bufs[0][3]);
  return 0;
}
