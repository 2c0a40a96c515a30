/*
 * kc_nvtx.c — the NVTX injection of the CUDA capture library: which NVTX ranges are open in each
 * thread, for `kerncap run|list --nvtx-include/--nvtx-exclude` (contract in c/cuda/kc_nvtx.h).
 *
 * Exports: InitializeInjectionNvtx2 (NVTX's injection entry: the application's NVTX, header-only
 *          NVTX 3 or libnvToolsExt, calls it at its first NVTX call when NVTX_INJECTION64_PATH names
 *          this library; kerncap sets that only with --nvtx, src/capture/nvtx.ts).
 * Reads:   KERNCAP_NVTX_INCLUDE, KERNCAP_NVTX_EXCLUDE (one expression per line), KERNCAP_NVTX_SUMMARY.
 * Why its own injection rather than CUPTI's NVTX callback domain: CUPTI sees NVTX only when
 *          NVTX_INJECTION64_PATH names libcupti and only once kerncap has subscribed, at cuInit;
 *          PyTorch often pushes a range before the first CUDA call (`with nvtx.range("step"):
 *          x = torch.randn(..., device="cuda")`), and a pop without its push would leave the stack
 *          wrong for the rest of the run. NVTX calls this library from its first call on.
 * Threads: push/pop ranges are per thread and per domain (NVTX's rule): each thread keeps its own
 *          stack, without a lock. Start/end ranges may end on another thread: one process-wide
 *          list under `se_mu`. A launch asks kc_nvtx_launch_passes on its own thread; the answer
 *          is cached until that thread's stack or the start/end list changes.
 * Failure: out of host memory: the range is not recorded (a later pop of it pops nothing); the
 *          application's NVTX calls never fail because of kerncap.
 */
#define _GNU_SOURCE
#include "kc_nvtx.h"
#include "kc_json.h"
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define KC_EXPORT __attribute__((visibility("default")))

static kc_nvtx_filter_t filter;
int kc_nvtx_filter_on, kc_nvtx_summary_on; /* kc_nvtx.h */
static int injected;
static uint64_t filtered_out;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int setup_rc;
static char setup_err[1200];

/* A domain handle given to the application: its name, kept for the life of the process (a
 * destroyed domain's handle may still be named by a late pop). */
typedef struct { char *name; } kc_domain_t;

/* ---- one thread's push/pop stack ---- */
typedef struct {
  kc_nvtx_range_t *v;
  size_t n, cap;
  uint64_t gen;        /* bumped at each push and pop */
  uint64_t cached_gen, cached_se; /* the cached answer's state */
  int cached, cached_pass;
  char *path;          /* kc_nvtx_note_launch: the stack as "A/B/", made again when gen moved */
  uint64_t path_gen;
} kc_stack_t;
static __thread kc_stack_t *ts;
static pthread_key_t ts_key;
static int ts_key_ok;

/* ---- the process's start/end ranges ---- */
typedef struct { uint64_t id; kc_nvtx_range_t r; } kc_open_t;
static pthread_mutex_t se_mu = PTHREAD_MUTEX_INITIALIZER;
static kc_open_t *se;
static size_t se_n, se_cap;
static uint64_t se_gen, se_next_id = 1;

static void stack_free(void *p) {
  kc_stack_t *s = p;
  for (size_t i = 0; i < s->n; i++) free((char *)s->v[i].name);
  free(s->v);
  free(s->path);
  free(s);
  if (ts == p) ts = NULL;
}

static kc_stack_t *stack(void) {
  if (ts) return ts;
  ts = calloc(1, sizeof *ts);
  if (ts && ts_key_ok) pthread_setspecific(ts_key, ts);
  return ts;
}

static void do_setup(void) {
  ts_key_ok = pthread_key_create(&ts_key, stack_free) == 0;
  setup_rc = kc_nvtx_filter_parse(&filter, getenv("KERNCAP_NVTX_INCLUDE"), getenv("KERNCAP_NVTX_EXCLUDE"), setup_err, sizeof setup_err);
  kc_nvtx_filter_on = !setup_rc && (filter.ninclude || filter.nexclude);
  const char *sum = getenv("KERNCAP_NVTX_SUMMARY");
  kc_nvtx_summary_on = sum && !strcmp(sum, "1");
}

int kc_nvtx_setup(char *err, size_t errn) {
  pthread_once(&setup_once, do_setup);
  if (setup_rc) snprintf(err, errn, "%s", setup_err);
  return setup_rc;
}

uint64_t kc_nvtx_filtered_out(void) { return __atomic_load_n(&filtered_out, __ATOMIC_RELAXED); }
int kc_nvtx_injected(void) { return __atomic_load_n(&injected, __ATOMIC_RELAXED); }

int kc_nvtx_launch_passes_slow(void) {
  if (!kc_nvtx_filter_on) return 1;
  kc_stack_t *s = stack();
  uint64_t g = __atomic_load_n(&se_gen, __ATOMIC_ACQUIRE);
  if (s && s->cached && s->cached_gen == s->gen && s->cached_se == g) {
    if (!s->cached_pass) __atomic_fetch_add(&filtered_out, 1, __ATOMIC_RELAXED);
    return s->cached_pass;
  }
  pthread_mutex_lock(&se_mu);
  kc_nvtx_range_t *open = NULL;
  size_t nopen = se_n;
  if (nopen && (open = malloc(nopen * sizeof *open)))
    for (size_t i = 0; i < nopen; i++) open[i] = se[i].r;
  int pass = kc_nvtx_filter_pass(&filter, s ? s->v : NULL, s ? s->n : 0, open, open ? nopen : 0);
  pthread_mutex_unlock(&se_mu);
  free(open);
  if (s) {
    s->cached_gen = s->gen;
    s->cached_se = g;
    s->cached = 1;
    s->cached_pass = pass;
  }
  if (!pass) __atomic_fetch_add(&filtered_out, 1, __ATOMIC_RELAXED);
  return pass;
}

/* ---- the per-range summary (KERNCAP_NVTX_SUMMARY) ---- */
typedef struct { char *path; const char *kernel; uint64_t count; } kc_range_count_t;
static pthread_mutex_t sum_mu = PTHREAD_MUTEX_INITIALIZER;
static kc_range_count_t sums[KC_NVTX_MAX_PATHS * 2]; /* open addressing, at most half full */
static size_t nsums;
static uint64_t sums_dropped;

/* The thread's ranges as one string, outermost first: "A/B/", a named domain's as "dom@X/"; "" outside any. */
static const char *stack_path(kc_stack_t *s) {
  if (s->path && s->path_gen == s->gen) return s->path;
  size_t n = 1;
  for (size_t i = 0; i < s->n; i++) n += strlen(s->v[i].name) + (s->v[i].domain ? strlen(s->v[i].domain) + 1 : 0) + 1;
  char *p = malloc(n);
  if (!p) return NULL;
  size_t l = 0;
  for (size_t i = 0; i < s->n; i++) l += (size_t)sprintf(p + l, "%s%s%s/", s->v[i].domain ? s->v[i].domain : "", s->v[i].domain ? "@" : "", s->v[i].name);
  p[l] = 0;
  free(s->path);
  s->path = p;
  s->path_gen = s->gen;
  return p;
}

void kc_nvtx_note_launch_slow(const char *kernel) {
  if (!kc_nvtx_summary_on || !kernel) return;
  kc_stack_t *s = stack();
  const char *path = s ? stack_path(s) : NULL;
  if (!path) return;
  uint64_t h = 1469598103934665603ull;
  for (const char *c = path; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  for (const char *c = kernel; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  pthread_mutex_lock(&sum_mu);
  const size_t cap = sizeof sums / sizeof *sums;
  for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
    kc_range_count_t *e = &sums[i];
    if (e->path && (e->kernel == kernel || !strcmp(e->kernel, kernel)) && !strcmp(e->path, path)) { e->count++; break; }
    if (!e->path) {
      if (nsums >= KC_NVTX_MAX_PATHS || !(e->path = strdup(path))) { sums_dropped++; break; }
      e->kernel = kernel;
      e->count = 1;
      nsums++;
      break;
    }
  }
  pthread_mutex_unlock(&sum_mu);
}

void kc_nvtx_ranges_json(FILE *f) {
  pthread_mutex_lock(&sum_mu);
  fputs(",\"ranges\":[", f);
  int first = 1;
  for (size_t i = 0; i < sizeof sums / sizeof *sums; i++) {
    if (!sums[i].path) continue;
    fputs(first ? "{\"range\":" : ",{\"range\":", f);
    kc_json_str(f, sums[i].path);
    fputs(",\"kernel\":", f);
    kc_json_str(f, sums[i].kernel);
    fprintf(f, ",\"count\":%llu}", (unsigned long long)sums[i].count);
    first = 0;
  }
  fprintf(f, "],\"ranges_dropped\":%llu", (unsigned long long)sums_dropped);
  pthread_mutex_unlock(&sum_mu);
}

/* ---- the messages ---- */
/* wchar_t (UTF-32 on Linux) as UTF-8; NULL out of memory. */
static char *utf8_of(const wchar_t *w) {
  if (!w) return strdup("");
  size_t n = wcslen(w);
  char *o = malloc(n * 4 + 1), *p = o;
  if (!o) return NULL;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = (uint32_t)w[i];
    if (c < 0x80) *p++ = (char)c;
    else if (c < 0x800) { *p++ = (char)(0xC0 | c >> 6); *p++ = (char)(0x80 | (c & 0x3F)); }
    else if (c < 0x10000) { *p++ = (char)(0xE0 | c >> 12); *p++ = (char)(0x80 | (c >> 6 & 0x3F)); *p++ = (char)(0x80 | (c & 0x3F)); }
    else { *p++ = (char)(0xF0 | (c >> 18 & 7)); *p++ = (char)(0x80 | (c >> 12 & 0x3F)); *p++ = (char)(0x80 | (c >> 6 & 0x3F)); *p++ = (char)(0x80 | (c & 0x3F)); }
  }
  *p = 0;
  return o;
}

/* The message of an event as an owned string (a registered string's handle is our own copy of it). */
static char *message_of(const nvtxEventAttributes_t *a) {
  if (!a) return strdup("");
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return strdup(a->message.ascii ? a->message.ascii : "");
    case NVTX_MESSAGE_TYPE_UNICODE: return utf8_of(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: return strdup(a->message.registered ? (const char *)a->message.registered : "");
    default: return strdup("");
  }
}

static const char *domain_name(nvtxDomainHandle_t d) { return d ? ((kc_domain_t *)d)->name : NULL; }

/* ---- push/pop ---- */
static int push(nvtxDomainHandle_t d, char *name) {
  kc_stack_t *s = stack();
  if (!s || !name) { free(name); return 0; }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    kc_nvtx_range_t *v = realloc(s->v, cap * sizeof *v);
    if (!v) { free(name); return (int)s->n; }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = (kc_nvtx_range_t){domain_name(d), name};
  s->gen++;
  return (int)s->n - 1; /* NVTX: the level of the pushed range, 0-based */
}

/* Pop the innermost range of domain d (a pop of another domain's range would break its nesting). */
static int pop(nvtxDomainHandle_t d) {
  kc_stack_t *s = stack();
  const char *dn = domain_name(d);
  if (!s) return -1;
  for (size_t i = s->n; i-- > 0;) {
    if (s->v[i].domain != dn) continue;
    free((char *)s->v[i].name);
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
    s->gen++;
    return (int)s->n;
  }
  return -1; /* NVTX: nothing to pop */
}

static int NVTX_API push_a(const char *m) { return push(NULL, strdup(m ? m : "")); }
static int NVTX_API push_w(const wchar_t *m) { return push(NULL, utf8_of(m)); }
static int NVTX_API push_ex(const nvtxEventAttributes_t *a) { return push(NULL, message_of(a)); }
static int NVTX_API pop_default(void) { return pop(NULL); }
static int NVTX_API domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { return push(d, message_of(a)); }
static int NVTX_API domain_pop(nvtxDomainHandle_t d) { return pop(d); }

/* ---- start/end ---- */
static nvtxRangeId_t start(nvtxDomainHandle_t d, char *name) {
  if (!name) return 0;
  pthread_mutex_lock(&se_mu);
  nvtxRangeId_t id = 0;
  if (se_n == se_cap) {
    size_t cap = se_cap ? se_cap * 2 : 16;
    kc_open_t *v = realloc(se, cap * sizeof *v);
    if (v) { se = v; se_cap = cap; }
  }
  if (se_n < se_cap) {
    id = se_next_id++;
    se[se_n++] = (kc_open_t){id, {domain_name(d), name}};
    __atomic_fetch_add(&se_gen, 1, __ATOMIC_RELEASE);
  } else free(name);
  pthread_mutex_unlock(&se_mu);
  return id;
}

static void end(nvtxRangeId_t id) {
  pthread_mutex_lock(&se_mu);
  for (size_t i = 0; i < se_n; i++) {
    if (se[i].id != id) continue;
    free((char *)se[i].r.name);
    se[i] = se[--se_n];
    __atomic_fetch_add(&se_gen, 1, __ATOMIC_RELEASE);
    break;
  }
  pthread_mutex_unlock(&se_mu);
}

static nvtxRangeId_t NVTX_API start_a(const char *m) { return start(NULL, strdup(m ? m : "")); }
static nvtxRangeId_t NVTX_API start_w(const wchar_t *m) { return start(NULL, utf8_of(m)); }
static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a) { return start(NULL, message_of(a)); }
static void NVTX_API end_default(nvtxRangeId_t id) { end(id); }
static nvtxRangeId_t NVTX_API domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { return start(d, message_of(a)); }
static void NVTX_API domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; end(id); }

/* ---- domains and registered strings ---- */
static nvtxDomainHandle_t domain_create(char *name) {
  kc_domain_t *d = name ? malloc(sizeof *d) : NULL;
  if (!d) { free(name); return NULL; } /* NULL: the default domain, as far as kerncap can tell */
  d->name = name;
  return (nvtxDomainHandle_t)d;
}
static nvtxDomainHandle_t NVTX_API domain_create_a(const char *m) { return domain_create(strdup(m ? m : "")); }
static nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t *m) { return domain_create(utf8_of(m)); }
static void NVTX_API domain_destroy(nvtxDomainHandle_t d) { (void)d; /* kept: see kc_domain_t */ }
static nvtxStringHandle_t NVTX_API register_a(nvtxDomainHandle_t d, const char *m) { (void)d; return (nvtxStringHandle_t)strdup(m ? m : ""); }
static nvtxStringHandle_t NVTX_API register_w(nvtxDomainHandle_t d, const wchar_t *m) { (void)d; return (nvtxStringHandle_t)utf8_of(m); }

/* Put fn into slot `id` of an NVTX module's function table. */
static void set_slot(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer fn) {
  if (t && id <= size && t[id]) *t[id] = fn;
}

/* NVTX's injection entry: fill the CORE and CORE2 tables with the range calls above. Returns 1
 * (the tool attached); 0 when NVTX offers no function table (NVTX then runs without a tool). */
KC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  pthread_once(&setup_once, do_setup); /* a bad expression is reported by the CUDA set-up (kc_nvtx_setup) */
  const NvtxExportTableCallbacks *cb = get ? get(NVTX_ETID_CALLBACKS) : NULL;
  if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;
  NvtxFunctionTable core = NULL, core2 = NULL;
  unsigned n1 = 0, n2 = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n1)) return 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n2)) core2 = NULL;
#define SET(t, n, id, fn) set_slot(t, n, id, (NvtxFunctionPointer)(fn))
  SET(core, n1, NVTX_CBID_CORE_RangePushA, push_a);
  SET(core, n1, NVTX_CBID_CORE_RangePushW, push_w);
  SET(core, n1, NVTX_CBID_CORE_RangePushEx, push_ex);
  SET(core, n1, NVTX_CBID_CORE_RangePop, pop_default);
  SET(core, n1, NVTX_CBID_CORE_RangeStartA, start_a);
  SET(core, n1, NVTX_CBID_CORE_RangeStartW, start_w);
  SET(core, n1, NVTX_CBID_CORE_RangeStartEx, start_ex);
  SET(core, n1, NVTX_CBID_CORE_RangeEnd, end_default);
  SET(core2, n2, NVTX_CBID_CORE2_DomainRangePushEx, domain_push_ex);
  SET(core2, n2, NVTX_CBID_CORE2_DomainRangePop, domain_pop);
  SET(core2, n2, NVTX_CBID_CORE2_DomainRangeStartEx, domain_start_ex);
  SET(core2, n2, NVTX_CBID_CORE2_DomainRangeEnd, domain_end);
  SET(core2, n2, NVTX_CBID_CORE2_DomainCreateA, domain_create_a);
  SET(core2, n2, NVTX_CBID_CORE2_DomainCreateW, domain_create_w);
  SET(core2, n2, NVTX_CBID_CORE2_DomainDestroy, domain_destroy);
  SET(core2, n2, NVTX_CBID_CORE2_DomainRegisterStringA, register_a);
  SET(core2, n2, NVTX_CBID_CORE2_DomainRegisterStringW, register_w);
#undef SET
  __atomic_store_n(&injected, 1, __ATOMIC_RELAXED);
  return 1;
}
