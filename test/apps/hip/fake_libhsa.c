/*
 * fake_libhsa.c: a stand-in libhsa-runtime64.so.1 for the HSA replay backend (src/native/libhsa.ts, src/replay/
 * hsa-backend.ts), so `kerncap replay` of a hip capture runs without an AMD GPU. Loaded through
 * KERNCAP_HSA_PATH. It exports every symbol the backend binds, with host memory for device memory:
 *  - agents: 1 (CPU, a kernarg pool 21) and 2 (GPU "gfx90a", a coarse-grained pool 20, granule 4 KiB);
 *  - hsa_amd_vmem_address_reserve maps the requested address itself (MAP_FIXED_NOREPLACE), so a
 *    taken VA fails as on a GPU; hsa_memory_copy is memcpy; a lock returns the host pointer;
 *  - the code object is not run: kernel descriptor "_Z5scalePffi.kd" is a C function (data[k] *=
 *    factor over {float* data; float factor; int n}; FAKE_HSA_JITTER=N moves the first N results
 *    by 0-2 ulp from dispatch to dispatch: a nondeterministic kernel); a doorbell runs the queued
 *    dispatch packets and sets their completion signals to 0.
 * It checks nothing an HSA runtime checks; it tests kerncap's use of the calls, not ROCr.
 * Build: gcc -shared -fPIC -o libfake_hsa.so fake_libhsa.c
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define OK 0u
#define ERR 0x1000u /* HSA_STATUS_ERROR */
#define ERR_SYMBOL 0x1013u
typedef uint32_t st_t;

static const char* g_status = "fake HSA runtime error";
st_t hsa_init(void) { return OK; }
st_t hsa_shut_down(void) { return OK; }
st_t hsa_status_string(st_t s, const char** out) { (void)s; *out = g_status; return OK; }
st_t hsa_system_get_info(uint32_t attr, void* v) { (void)attr; (void)v; return OK; }

st_t hsa_iterate_agents(st_t (*cb)(uint64_t, void*), void* data) {
  st_t s = cb(1, data);
  return s ? s : cb(2, data);
}
st_t hsa_agent_get_info(uint64_t agent, uint32_t attr, void* v) {
  if (attr == 17) *(uint32_t*)v = agent == 2 ? 1 : 0; /* HSA_AGENT_INFO_DEVICE: GPU / CPU */
  else if (attr == 0) strcpy(v, agent == 2 ? "gfx90a" : "fake-cpu"); /* NAME */
  else if (attr == 0xa009) strcpy(v, agent == 2 ? "Fake MI210" : "Fake CPU"); /* PRODUCT_NAME */
  return OK;
}
st_t hsa_amd_agent_iterate_memory_pools(uint64_t agent, st_t (*cb)(uint64_t, void*), void* data) {
  return cb(agent == 2 ? 20 : 21, data);
}
st_t hsa_amd_memory_pool_get_info(uint64_t pool, uint32_t attr, void* v) {
  if (attr == 0) *(uint32_t*)v = 0; /* SEGMENT: global */
  else if (attr == 1) *(uint32_t*)v = pool == 20 ? 4 : 1 | 2; /* GLOBAL_FLAGS: coarse / kernarg+fine */
  else if (attr == 6) *(uint64_t*)v = 4096; /* RUNTIME_ALLOC_GRANULE */
  return OK;
}
st_t hsa_amd_memory_pool_allocate(uint64_t pool, uint64_t size, uint32_t flags, void** p) {
  (void)pool; (void)flags;
  *p = aligned_alloc(4096, (size + 4095) & ~4095ull);
  if (!*p) return ERR;
  memset(*p, 0xcd, size); /* not zero: the engine must not rely on fresh memory being zero */
  return OK;
}
st_t hsa_amd_memory_pool_free(void* p) { free(p); return OK; }
st_t hsa_amd_agents_allow_access(uint32_t n, const uint64_t* agents, const uint32_t* flags, const void* p) {
  (void)n; (void)agents; (void)flags; (void)p; return OK;
}
st_t hsa_amd_memory_lock(void* host, uint64_t size, uint64_t* agents, int n, void** agent_ptr) {
  (void)size; (void)agents; (void)n; *agent_ptr = host; return OK;
}
st_t hsa_amd_memory_unlock(void* host) { (void)host; return OK; }
st_t hsa_memory_copy(uint64_t dst, uint64_t src, uint64_t n) { memcpy((void*)dst, (const void*)src, n); return OK; }

st_t hsa_code_object_reader_create_from_memory(const void* co, uint64_t size, uint64_t* r) {
  if (size < 4 || memcmp(co, "\x7f" "ELF", 4)) return ERR;
  *r = 77; return OK;
}
st_t hsa_code_object_reader_destroy(uint64_t r) { (void)r; return OK; }
st_t hsa_executable_create_alt(uint32_t p, uint32_t rounding, const char* o, uint64_t* e) { (void)p; (void)rounding; (void)o; *e = 5; return OK; }
st_t hsa_executable_load_agent_code_object(uint64_t e, uint64_t a, uint64_t r, const char* o, void* l) { (void)e; (void)a; (void)r; (void)o; (void)l; return OK; }
st_t hsa_executable_freeze(uint64_t e, const char* o) { (void)e; (void)o; return OK; }
st_t hsa_executable_destroy(uint64_t e) { (void)e; return OK; }
st_t hsa_executable_get_symbol_by_name(uint64_t e, const char* name, const uint64_t* agent, uint64_t* sym) {
  (void)e; (void)agent;
  if (strcmp(name, "_Z5scalePffi.kd") != 0) return ERR_SYMBOL;
  *sym = 1; return OK;
}
st_t hsa_executable_symbol_get_info(uint64_t sym, uint32_t attr, void* v) {
  if (attr == 22) *(uint64_t*)v = 0x1000 + sym; /* KERNEL_OBJECT */
  else return ERR;
  return OK;
}

/* ---- signals and the queue ---- */
static int64_t g_signals[64];
static int g_nsignals = 1; /* handle 0 stays unused */
st_t hsa_signal_create(int64_t v, uint32_t n, const uint64_t* consumers, uint64_t* s) {
  (void)n; (void)consumers;
  if (g_nsignals >= 64) return ERR;
  g_signals[g_nsignals] = v; *s = (uint64_t)g_nsignals++; return OK;
}
st_t hsa_signal_destroy(uint64_t s) { (void)s; return OK; }
void hsa_signal_store_relaxed(uint64_t s, int64_t v);
int64_t hsa_signal_wait_scacquire(uint64_t s, uint32_t cond, int64_t cmp, uint64_t timeout, uint32_t wait) {
  (void)cond; (void)cmp; (void)timeout; (void)wait; return g_signals[s];
}

struct queue { uint32_t type, features; void* base; uint64_t doorbell; uint32_t size, reserved; uint64_t id; };
struct packet {
  uint16_t header, setup, wg[3], reserved0;
  uint32_t grid[3], private_size, group_size;
  uint64_t kernel_object; void* kernarg; uint64_t reserved2, completion;
};
struct scale_args { float* data; float factor; int n; };
static struct queue g_queue;
static uint64_t g_write, g_read;

st_t hsa_queue_create(uint64_t agent, uint32_t size, uint32_t type, void* cb, void* data, uint32_t priv, uint32_t group, struct queue** q) {
  (void)agent; (void)type; (void)cb; (void)data; (void)priv; (void)group;
  g_queue.base = aligned_alloc(64, (size_t)size * 64);
  memset(g_queue.base, 0, (size_t)size * 64);
  g_queue.size = size;
  hsa_signal_create(0, 0, NULL, &g_queue.doorbell);
  g_write = g_read = 0;
  *q = &g_queue; return OK;
}
st_t hsa_queue_destroy(uint64_t q) { (void)q; free(g_queue.base); g_queue.base = NULL; return OK; }
uint64_t hsa_queue_add_write_index_relaxed(uint64_t q, uint64_t n) { (void)q; uint64_t i = g_write; g_write += n; return i; }

/* The "GPU": the doorbell runs every packet up to the index written. */
static void run_packets(uint64_t upto) {
  for (; g_read <= upto; g_read++) {
    struct packet* p = (struct packet*)g_queue.base + (g_read % g_queue.size);
    if ((p->header & 0xff) != 2) { fprintf(stderr, "fake_libhsa: packet %llu is not a kernel dispatch\n", (unsigned long long)g_read); continue; }
    if (p->kernel_object == 0x1001) {
      struct scale_args* a = p->kernarg;
      static int dispatches;
      int n0 = dispatches++;
      /* FAKE_HSA_SKIP_FROM=K: from the K-th dispatch on (0-based) the kernel does nothing, as a kernel
         that tells its timed launches from its checked ones and skips its work */
      const char* skip = getenv("FAKE_HSA_SKIP_FROM");
      if (!skip || n0 < atoi(skip))
        for (int k = 0; k < a->n; k++) a->data[k] *= a->factor;
      /* FAKE_HSA_STRAY_FROM=K: from the K-th dispatch on the kernel also writes the float just past its
         data (inside the span the replay maps, outside every region), where a kernel could keep a result */
      const char* stray = getenv("FAKE_HSA_STRAY_FROM");
      if (stray && *stray && n0 >= atoi(stray)) a->data[a->n] = 1.0f;
      /* FAKE_HSA_JITTER=N: the first N results move by 0, 1 or 2 ulp from dispatch to dispatch, as
         float atomics summed in another order do (a nondeterministic kernel) */
      const char* jitter = getenv("FAKE_HSA_JITTER");
      /* FAKE_HSA_JITTER_FROM=K: only from the K-th dispatch on (0-based): a candidate launched after
         the captured kernel's checked runs varies, the captured kernel does not */
      const char* from = getenv("FAKE_HSA_JITTER_FROM");
      int nj = jitter && n0 >= (from ? atoi(from) : 0) ? atoi(jitter) : 0, d = n0 % 3;
      for (int k = 0; k < nj && k < a->n; k++) {
        uint32_t bits;
        memcpy(&bits, &a->data[k], 4);
        if (bits & 0x7fffffff) bits += (uint32_t)d;
        memcpy(&a->data[k], &bits, 4);
      }
    }
    p->header = 1; /* HSA_PACKET_TYPE_INVALID: consumed */
    if (p->completion) g_signals[p->completion] = 0;
  }
}
void hsa_signal_store_relaxed(uint64_t s, int64_t v) { g_signals[s] = v; }
void hsa_signal_store_screlease(uint64_t s, int64_t v) {
  g_signals[s] = v;
  if (s == g_queue.doorbell) run_packets((uint64_t)v);
}

/* ---- virtual memory (ROCm 6.0+) ---- */
st_t hsa_amd_vmem_address_reserve(void** out, uint64_t size, uint64_t addr, uint64_t flags) {
  (void)flags;
  void* p = mmap((void*)addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return ERR;
  *out = p; return OK;
}
st_t hsa_amd_vmem_address_free(uint64_t va, uint64_t size) { munmap((void*)va, size); return OK; }
st_t hsa_amd_vmem_handle_create(uint64_t pool, uint64_t size, uint32_t type, uint64_t flags, uint64_t* h) {
  (void)pool; (void)size; (void)type; (void)flags; *h = 1; return OK;
}
st_t hsa_amd_vmem_handle_release(uint64_t h) { (void)h; return OK; }
st_t hsa_amd_vmem_map(uint64_t va, uint64_t size, uint64_t off, uint64_t h, uint64_t flags) {
  (void)off; (void)h; (void)flags;
  if (mprotect((void*)va, size, PROT_READ | PROT_WRITE)) return ERR;
  memset((void*)va, 0xcd, size);
  return OK;
}
st_t hsa_amd_vmem_unmap(uint64_t va, uint64_t size) { mprotect((void*)va, size, PROT_NONE); return OK; }
st_t hsa_amd_vmem_set_access(uint64_t va, uint64_t size, const void* desc, uint64_t n) { (void)va; (void)size; (void)desc; (void)n; return OK; }
