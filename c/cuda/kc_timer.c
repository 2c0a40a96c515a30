/*
 * kc_timer.c — the replay's kernel clock: the GPU's own start and end timestamps of each kernel
 * launch, from CUPTI's activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL records, what nsys
 * reports), for kerncap's own process (c/build/libkerncap_timer.so, loaded by
 * src/native/kernel-timer.ts through bun:ffi; never injected into an application).
 *
 * Exports (plain C, callable through bun:ffi; everything else is hidden):
 *   kc_timer_start(path, err, n)  dlopen libcupti at `path` (the capture's search: src/native/libcupti-search.ts),
 *                                 subscribe (cuptiSubscribe_v2 when present, naming the holder when
 *                                 CUPTI is taken), enable the launch callbacks and the kernel
 *                                 activity kind, register the buffer callbacks. 0, or a KC_TIMER_E_*
 *                                 code with a message in err (the caller then times with events).
 *   kc_timer_mark(tag)            the next launches (until the next mark) carry `tag` (0: none): the
 *                                 launch callback keeps (correlation id, tag), so that a kernel record
 *                                 is matched to the launch that queued it, not to a spin or scan kernel.
 *   kc_timer_flush(forced)        cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED when forced):
 *                                 the records of completed kernels reach the buffer callback. CUptiResult.
 *   kc_timer_read(out, max)       copies out the records of marked launches gathered since the last
 *                                 read (tag, start ns, end ns, correlation id: kc_timer_record_t), in
 *                                 CUPTI's order; returns how many; the rest stay for the next read.
 *                                 Records of unmarked launches are dropped as they arrive.
 *   kc_timer_lost()               records lost so far (CUPTI's dropped ones, marked ones past the table).
 *   kc_timer_stop()               disable, flush, unsubscribe; idempotent.
 * Reads no environment variable. Threads: the caller's (one at a time: the replay is single-threaded),
 * the launching thread (the driver callback, inside a launch) and CUPTI's own (the buffer callbacks);
 * `mu` guards the tables the last two fill.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KC_EXPORT __attribute__((visibility("default")))

enum { KC_TIMER_E_DLOPEN = 1, KC_TIMER_E_SYMBOL = 2, KC_TIMER_E_SUBSCRIBERS = 3, KC_TIMER_E_SUBSCRIBE = 4, KC_TIMER_E_ACTIVITY = 5, KC_TIMER_E_STARTED = 6 };

/* One kernel's record as the caller reads it (32 bytes; src/native/kernel-timer.ts reads this layout). */
typedef struct {
  uint64_t tag;   /* kc_timer_mark's value when the launch was made; 0: an unmarked launch */
  uint64_t start; /* ns, the GPU's timestamp (CUpti_ActivityKernel*.start) */
  uint64_t end;   /* ns */
  uint32_t correlation;
  uint32_t pad;
} kc_timer_record_t;

#define KC_MAX_RECORDS 4096
#define KC_MAX_MARKS 1024
#define KC_BUFFER_BYTES (1u << 20)

/* The CUDA 13 CUpti_SubscriberParams layout (c/cuda/kc_cupti.h does the same for older headers). */
typedef struct {
  size_t structSize;
  const char *subscriberName;
  char *oldSubscriberName;
  size_t oldSubscriberSize;
} kc_timer_subscriber_params_t;

#define KC_TIMER_FUNCS(X)                                                                                   \
  X(cuptiSubscribe, CUptiResult, (CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))                    \
  X(cuptiUnsubscribe, CUptiResult, (CUpti_SubscriberHandle))                                                \
  X(cuptiEnableCallback, CUptiResult, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId)) \
  X(cuptiGetResultString, CUptiResult, (CUptiResult, const char **))                                        \
  X(cuptiActivityRegisterCallbacks, CUptiResult, (CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc)) \
  X(cuptiActivityEnable, CUptiResult, (CUpti_ActivityKind))                                                 \
  X(cuptiActivityDisable, CUptiResult, (CUpti_ActivityKind))                                                \
  X(cuptiActivityFlushAll, CUptiResult, (uint32_t))                                                         \
  X(cuptiActivityGetNextRecord, CUptiResult, (uint8_t *, size_t, CUpti_Activity **))                        \
  X(cuptiActivityGetNumDroppedRecords, CUptiResult, (CUcontext, uint32_t, size_t *))

static struct {
  pthread_mutex_t mu;
  void *lib;
#define KC_FIELD(name, ret, args) ret(*name) args;
  KC_TIMER_FUNCS(KC_FIELD)
#undef KC_FIELD
  CUpti_SubscriberHandle sub;
  int started;
  int registered; /* the buffer callbacks */
  volatile uint64_t tag; /* set by kc_timer_mark, read by the launch callback */
  struct { uint32_t correlation; uint64_t tag; } marks[KC_MAX_MARKS];
  unsigned nmarks; /* a ring: the oldest mark is overwritten */
  kc_timer_record_t rec[KC_MAX_RECORDS];
  unsigned nrec;
  uint64_t lost;
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void msg(char *err, size_t n, const char *fmt, const char *a, const char *b) {
  if (err && n) snprintf(err, n, fmt, a, b);
}

static const char *result_text(CUptiResult r) {
  const char *s = "";
  if (T.cuptiGetResultString && T.cuptiGetResultString(r, &s) != CUPTI_SUCCESS) s = "";
  return s ? s : "";
}

/* Driver API callback: a launch made while a tag is set keeps (its correlation id, the tag). */
static void CUPTIAPI on_launch(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  (void)ud;
  (void)cbid;
  const CUpti_CallbackData *cb = data;
  uint64_t tag = T.tag;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER || !tag) return;
  pthread_mutex_lock(&T.mu);
  unsigned i = T.nmarks++ % KC_MAX_MARKS;
  T.marks[i].correlation = cb->correlationId;
  T.marks[i].tag = tag;
  pthread_mutex_unlock(&T.mu);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  /* records are 8-byte aligned; malloc's alignment is more */
  *buffer = malloc(KC_BUFFER_BYTES);
  *size = *buffer ? KC_BUFFER_BYTES : 0;
  *max_records = 0;
}

static uint64_t tag_of(uint32_t correlation) {
  unsigned n = T.nmarks < KC_MAX_MARKS ? T.nmarks : KC_MAX_MARKS;
  for (unsigned k = 0; k < n; k++) {
    unsigned i = (T.nmarks - 1 - k) % KC_MAX_MARKS; /* the newest first */
    if (T.marks[i].correlation == correlation) return T.marks[i].tag;
  }
  return 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *r = NULL;
  pthread_mutex_lock(&T.mu);
  while (valid && T.cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    /* start, end and correlationId sit at the same offsets in every CUpti_ActivityKernel version */
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
    uint64_t tag = tag_of(k->correlationId);
    if (!tag) continue; /* a launch nobody timed (a spin, a scan, a checked run): kept out of the table */
    if (T.nrec == KC_MAX_RECORDS) {
      T.lost++;
      continue;
    }
    T.rec[T.nrec++] = (kc_timer_record_t){.tag = tag, .start = k->start, .end = k->end, .correlation = k->correlationId};
  }
  size_t dropped = 0;
  if (T.cuptiActivityGetNumDroppedRecords && T.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) T.lost += dropped;
  pthread_mutex_unlock(&T.mu);
  free(buffer);
}

KC_EXPORT void kc_timer_stop(void) {
  if (!T.started) return;
  T.started = 0;
  T.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  T.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (T.sub) T.cuptiUnsubscribe(T.sub);
  T.sub = NULL;
}

/* Subscribe as "kerncap replay clock"; on MULTIPLE_SUBSCRIBERS, say who holds CUPTI when libcupti tells. */
static int subscribe(char *err, size_t n) {
  typedef CUptiResult (*v2_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *, kc_timer_subscriber_params_t *);
  v2_fn v2 = (v2_fn)dlsym(T.lib, "cuptiSubscribe_v2");
  char holder[256] = "";
  CUptiResult r;
  if (v2) {
    kc_timer_subscriber_params_t p = {sizeof p, "kerncap replay clock", holder, sizeof holder};
    r = v2(&T.sub, on_launch, NULL, &p);
    holder[sizeof holder - 1] = 0;
  } else
    r = T.cuptiSubscribe(&T.sub, on_launch, NULL);
  if (r == CUPTI_SUCCESS) return 0;
  T.sub = NULL;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    msg(err, n, "CUPTI is held by another client (%s): %s", holder[0] ? holder : "a profiler or sanitizer in this process", result_text(r));
    return KC_TIMER_E_SUBSCRIBERS;
  }
  msg(err, n, "cuptiSubscribe failed: %s%s", result_text(r), "");
  return KC_TIMER_E_SUBSCRIBE;
}

static int enable(char *err, size_t n) {
  static const CUpti_CallbackId launches[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                              CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                                              CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel};
  for (size_t i = 0; i < sizeof launches / sizeof *launches; i++) {
    CUptiResult r = T.cuptiEnableCallback(1, T.sub, CUPTI_CB_DOMAIN_DRIVER_API, launches[i]);
    if (r != CUPTI_SUCCESS) {
      msg(err, n, "cuptiEnableCallback (launches) failed: %s%s", result_text(r), "");
      return KC_TIMER_E_SUBSCRIBE;
    }
  }
  /* once per process: a later session (check, watch) starts the clock again on the same callbacks */
  CUptiResult r = T.registered ? CUPTI_SUCCESS : T.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  const char *what = "cuptiActivityRegisterCallbacks";
  if (r == CUPTI_SUCCESS) T.registered = 1;
  if (r == CUPTI_SUCCESS) {
    what = "cuptiActivityEnable(CONCURRENT_KERNEL)";
    r = T.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  if (r != CUPTI_SUCCESS) {
    msg(err, n, "%s failed: %s", what, result_text(r));
    return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? KC_TIMER_E_SUBSCRIBERS : KC_TIMER_E_ACTIVITY;
  }
  return 0;
}

KC_EXPORT int kc_timer_start(const char *path, char *err, size_t n) {
  if (err && n) err[0] = 0;
  if (T.started) {
    msg(err, n, "the kernel clock is already started%s%s", "", "");
    return KC_TIMER_E_STARTED;
  }
  if (!T.lib) {
    T.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!T.lib) {
      const char *e = dlerror();
      msg(err, n, "libcupti does not load: %s%s", e ? e : path, "");
      return KC_TIMER_E_DLOPEN;
    }
#define KC_LOAD(name, ret, args)                                  \
  T.name = (ret(*) args)dlsym(T.lib, #name);                      \
  if (!T.name) {                                                  \
    msg(err, n, "%s lacks %s", path, #name);                      \
    dlclose(T.lib);                                               \
    T.lib = NULL;                                                 \
    return KC_TIMER_E_SYMBOL;                                     \
  }
    KC_TIMER_FUNCS(KC_LOAD)
#undef KC_LOAD
  }
  int rc = subscribe(err, n);
  if (!rc) rc = enable(err, n);
  if (rc) {
    T.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (T.sub) T.cuptiUnsubscribe(T.sub);
    T.sub = NULL;
    return rc;
  }
  pthread_mutex_lock(&T.mu);
  T.nrec = 0;
  T.nmarks = 0;
  T.lost = 0;
  pthread_mutex_unlock(&T.mu);
  T.tag = 0;
  T.started = 1;
  return 0;
}

KC_EXPORT void kc_timer_mark(uint64_t tag) { T.tag = tag; }

KC_EXPORT int kc_timer_flush(int forced) {
  if (!T.started) return CUPTI_ERROR_NOT_INITIALIZED;
  return T.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

KC_EXPORT int kc_timer_read(kc_timer_record_t *out, int max) {
  pthread_mutex_lock(&T.mu);
  unsigned k = max < 0 ? 0 : (unsigned)max < T.nrec ? (unsigned)max : T.nrec;
  memcpy(out, T.rec, k * sizeof *out);
  memmove(T.rec, T.rec + k, (T.nrec - k) * sizeof *out);
  T.nrec -= k;
  pthread_mutex_unlock(&T.mu);
  return (int)k;
}

KC_EXPORT uint64_t kc_timer_lost(void) {
  pthread_mutex_lock(&T.mu);
  uint64_t l = T.lost;
  pthread_mutex_unlock(&T.mu);
  return l;
}
