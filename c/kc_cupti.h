/*
 * kc_cupti.h — sharing CUPTI's one subscriber slot (CUDA library only; included by kerncap_cuda.c
 * after <cupti.h>).
 *
 * CUPTI admits one subscriber per process (CUDA 13 still). Three cases:
 *  1. Another tool holds it when kerncap subscribes (nsys, ncu, compute-sanitizer, cuda-gdb, or the
 *     application's own profiler started before CUDA initialized): kc_cupti_subscribe uses
 *     cuptiSubscribe_v2 (CUDA 13 cupti_callbacks.h; looked up with dlsym, so older libcupti still
 *     work through cuptiSubscribe) whose params name the existing subscriber, and
 *     kc_cupti_busy_message says who and what to do.
 *  2. The application asks for CUPTI while kerncap holds it (torch.profiler / Kineto): kerncap
 *     exports cuptiSubscribe and cuptiSubscribe_v2 and is put on LD_PRELOAD by kerncap, so those
 *     calls reach these wrappers first. A wrapper records the call (which function, which library
 *     called it: dladdr of the return address, the time, the result), hands CUPTI back first when
 *     kerncap no longer needs it (run mode, this process's capture done or taken by another
 *     process, or the process not selected), then forwards to the libcupti the caller would have
 *     reached. When kerncap still needs CUPTI (capture pending, or `list` counting) the application's
 *     call fails as it would have, and a line on stderr says so with the consequence and the way out.
 *     Not caught: a libcupti linked statically into the application, a process where LD_PRELOAD is
 *     ignored (setuid, static binaries), calls made through dlsym on a libcupti handle.
 *  3. Once kerncap no longer needs CUPTI in run mode it hands it back at once (cuptiUnsubscribe on a
 *     short-lived thread: never from inside a CUPTI callback), so a profiler that starts later works
 *     even without the wrappers.
 * Everything recorded is written into the census (kernels.<pid>.json, "cupti") by kc_cupti_json.
 */
#ifndef KC_CUPTI_H
#define KC_CUPTI_H
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include "kc_json.h"

#ifdef CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN /* CUDA 13 cupti_callbacks.h */
typedef CUpti_SubscriberParams kc_subscriber_params_t;
#else
/* The layout of CUDA 13's CUpti_SubscriberParams, so that the library also builds against older
 * CUPTI headers (and still finds cuptiSubscribe_v2 at run time in a newer libcupti). */
typedef struct {
  size_t structSize;
  const char *subscriberName;
  char *oldSubscriberName;
  size_t oldSubscriberSize;
} kc_subscriber_params_t;
#endif
typedef CUptiResult (*kc_subscribe_v2_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *, kc_subscriber_params_t *);
typedef CUptiResult (*kc_subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*kc_unsubscribe_fn)(CUpti_SubscriberHandle);

#define KC_CUPTI_MAX_CALLS 8
typedef struct {
  const char *call;
  char caller[512];
  int result;        /* CUptiResult; -1 when the call was not forwarded (no libcupti found) */
  int kerncap_held;  /* kerncap held CUPTI when the call came (after any hand-back: still held) */
  int handed_back;   /* kerncap handed CUPTI back for this call */
  double t_s;        /* seconds since kerncap's library was initialized (or first call) */
} kc_app_call_t;

static struct {
  pthread_mutex_t mu;
  CUpti_SubscriberHandle sub;
  kc_unsubscribe_fn unsub;
  volatile int held;      /* kerncap's subscription is live */
  volatile int released;  /* kerncap handed it back (callbacks must do nothing from then on) */
  volatile int may_release; /* kerncap no longer needs CUPTI in this process */
  const char *released_why;
  uint64_t released_at_launch;
  int released_result;
  char holder[128];       /* the existing subscriber's name when kerncap's subscribe was refused */
  const char *api;        /* "cuptiSubscribe_v2" or "cuptiSubscribe" */
  kc_app_call_t calls[KC_CUPTI_MAX_CALLS];
  int ncalls, dropped;
  double t0;
} KCU = {.mu = PTHREAD_MUTEX_INITIALIZER};

static double kc_cupti_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Subscribe kerncap: cuptiSubscribe_v2 (naming kerncap, learning the holder's name) when the
 * loaded libcupti has it, else cuptiSubscribe. On CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * KCU.holder names the existing subscriber ("" when the library does not say). */
static CUptiResult kc_cupti_subscribe(void *cupti, kc_subscribe_fn v1, kc_unsubscribe_fn unsub, CUpti_SubscriberHandle *sub,
                                      CUpti_CallbackFunc cb) {
  if (!KCU.t0) KCU.t0 = kc_cupti_now();
  kc_subscribe_v2_fn v2 = cupti ? (kc_subscribe_v2_fn)dlsym(cupti, "cuptiSubscribe_v2") : NULL;
  CUptiResult r;
  KCU.holder[0] = 0;
  if (v2) {
    kc_subscriber_params_t p = {sizeof p, "kerncap", KCU.holder, sizeof KCU.holder};
    KCU.api = "cuptiSubscribe_v2";
    r = v2(sub, cb, NULL, &p);
    KCU.holder[sizeof KCU.holder - 1] = 0;
  } else {
    KCU.api = "cuptiSubscribe";
    r = v1(sub, cb, NULL);
  }
  if (r == CUPTI_SUCCESS) {
    KCU.sub = *sub;
    KCU.unsub = unsub;
    KCU.held = 1;
  }
  return r;
}

/* A user-facing message for a refused subscribe: who holds CUPTI (as far as known) and the way out. */
static void kc_cupti_busy_message(char *dst, size_t n, CUptiResult r, const char *result_text) {
  const char *h = KCU.holder;
  const char *app = NULL;
  for (int i = 0; i < KCU.ncalls; i++)
    if (KCU.calls[i].result == CUPTI_SUCCESS) app = KCU.calls[i].caller;
  if (r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    snprintf(dst, n, "%s failed: %s", KCU.api, result_text);
    return;
  }
  const char *way =
      strcasestr(h, "compute") && strcasestr(h, "nsight") ? "profile the capture instead: `ncu kerncap replay DIR` (or `ncu --mode=launch` ... ), not `ncu -- kerncap run`"
      : strcasestr(h, "systems") || strcasestr(h, "nsys") ? "run the capture outside nsys; profile the replay instead: `nsys profile kerncap replay DIR`"
      : strcasestr(h, "sanitizer") || strcasestr(h, "memcheck") ? "run the capture outside compute-sanitizer; check the replay instead: `compute-sanitizer --tool memcheck kerncap replay DIR`"
      : strcasestr(h, "gdb") ? "run the capture outside cuda-gdb; debug the replay instead: `cuda-gdb --args kerncap replay DIR`"
      : app ? "start the application's profiler (torch.profiler/Kineto) after the captured launch, or capture a run without it"
            : "run kerncap without the other CUDA tool (nsys, ncu, compute-sanitizer, cuda-gdb, or a profiler inside the application); point that tool at `kerncap replay DIR` instead";
  if (app)
    snprintf(dst, n, "CUPTI is already held%s%s%s by the application itself (cuptiSubscribe from %s, before CUDA initialized): kerncap cannot see launches in this process; %s",
             h[0] ? " (\"" : "", h, h[0] ? "\")" : "", app, way);
  else
    snprintf(dst, n, "CUPTI is already held by %s%s%s: kerncap cannot see launches under another CUPTI tool; %s", h[0] ? "\"" : "",
             h[0] ? h : "another tool (libcupti did not name it: cuptiSubscribe_v2 is missing)", h[0] ? "\"" : "", way);
}

/* Hand CUPTI back now (not from inside a CUPTI callback). Called with KCU.mu held. */
static void kc_cupti_release_locked(const char *why, uint64_t at_launch) {
  if (!KCU.held) return;
  KCU.released = 1; /* first: callbacks still in flight on other threads do nothing from here on */
  KCU.released_result = KCU.unsub ? (int)KCU.unsub(KCU.sub) : -1;
  KCU.held = 0;
  KCU.released_why = why;
  KCU.released_at_launch = at_launch;
}

static void *kc_cupti_release_thread(void *arg) {
  pthread_mutex_lock(&KCU.mu);
  kc_cupti_release_locked(KCU.released_why ? KCU.released_why : (const char *)arg, KCU.released_at_launch);
  pthread_mutex_unlock(&KCU.mu);
  return NULL;
}

/* kerncap no longer needs CUPTI in this process (why: a short reason; at_launch: launches counted
 * so far). In run mode (hand_back) it is handed back at once, on a detached thread; else only
 * marked, so an application's later cuptiSubscribe gets it (the wrappers below). */
static void kc_cupti_done(const char *why, uint64_t at_launch, int hand_back) {
  pthread_mutex_lock(&KCU.mu);
  KCU.may_release = 1;
  if (!KCU.released_why) { KCU.released_why = why; KCU.released_at_launch = at_launch; }
  pthread_mutex_unlock(&KCU.mu);
  if (!hand_back) return;
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &a, kc_cupti_release_thread, (void *)why)) kc_cupti_release_thread((void *)why);
  pthread_attr_destroy(&a);
}

/* The census's "cupti" object: how kerncap subscribed, whether it handed CUPTI back, and every
 * cuptiSubscribe the application made. */
static void kc_cupti_json(FILE *f, uint64_t launches_now) {
  pthread_mutex_lock(&KCU.mu);
  fprintf(f, "{\"api\":\"%s\",\"subscribed\":%s,\"holder\":", KCU.api ? KCU.api : "", KCU.held || KCU.released ? "true" : "false");
  kc_json_str(f, KCU.holder);
  fprintf(f, ",\"released\":%s", KCU.released ? "true" : "false");
  if (KCU.released) {
    fputs(",\"released_why\":", f);
    kc_json_str(f, KCU.released_why ? KCU.released_why : "");
    fprintf(f, ",\"released_at_launch\":%llu,\"unsubscribe_result\":%d", (unsigned long long)KCU.released_at_launch, KCU.released_result);
  }
  (void)launches_now;
  fprintf(f, ",\"app_calls_dropped\":%d,\"app_calls\":[", KCU.dropped);
  for (int i = 0; i < KCU.ncalls; i++) {
    kc_app_call_t *c = &KCU.calls[i];
    fprintf(f, "%s{\"call\":\"%s\",\"caller\":", i ? "," : "", c->call);
    kc_json_str(f, c->caller);
    fprintf(f, ",\"result\":%d,\"kerncap_held\":%s,\"handed_back\":%s,\"t_s\":%.3f}", c->result, c->kerncap_held ? "true" : "false",
            c->handed_back ? "true" : "false", c->t_s);
  }
  fputs("]}", f);
  pthread_mutex_unlock(&KCU.mu);
}

/* The cuptiSubscribe[_v2] the caller (return address ret) would have reached without kerncap:
 * looked up in the calling object's own dependency tree first (torch's libcupti wheel is a
 * dependency of libtorch_cuda.so, loaded RTLD_LOCAL), then the next object in the global scope. */
static void *kc_cupti_next(const char *sym, void *self, void *ret, char *caller, size_t n) {
  Dl_info di;
  void *f = NULL;
  caller[0] = 0;
  if (dladdr(ret, &di) && di.dli_fname) {
    snprintf(caller, n, "%s", di.dli_fname[0] ? di.dli_fname : "(main program)");
    void *h = di.dli_fname[0] ? dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (h) {
      f = dlsym(h, sym);
      dlclose(h);
    }
  }
  if (!f || f == self) f = dlsym(RTLD_NEXT, sym);
  return f == self ? NULL : f;
}

/* Record one application call; hand CUPTI back first when kerncap no longer needs it. Returns
 * the record (or NULL when the table is full). */
static kc_app_call_t *kc_cupti_app_enter(const char *call, const char *caller) {
  pthread_mutex_lock(&KCU.mu);
  if (!KCU.t0) KCU.t0 = kc_cupti_now();
  int handed = 0;
  if (KCU.held && KCU.may_release) {
    kc_cupti_release_locked(KCU.released_why ? KCU.released_why : "the application asked for CUPTI", KCU.released_at_launch);
    handed = 1;
  }
  kc_app_call_t *c = NULL;
  if (KCU.ncalls < KC_CUPTI_MAX_CALLS) {
    c = &KCU.calls[KCU.ncalls++];
    c->call = call;
    snprintf(c->caller, sizeof c->caller, "%s", caller);
    c->kerncap_held = KCU.held;
    c->handed_back = handed;
    c->result = -1;
    c->t_s = kc_cupti_now() - KCU.t0;
  } else KCU.dropped++;
  pthread_mutex_unlock(&KCU.mu);
  return c;
}

static void kc_cupti_app_exit(kc_app_call_t *c, CUptiResult r, const char *call, const char *caller) {
  pthread_mutex_lock(&KCU.mu);
  if (c) c->result = (int)r;
  int refused = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && KCU.held;
  pthread_mutex_unlock(&KCU.mu);
  if (refused)
    fprintf(stderr,
            "[kerncap] pid %d: the application's %s (from %s) was refused with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: "
            "kerncap holds CUPTI until its capture is done (in `kerncap list`, until the process exits). Consequence: the "
            "application's profiler (torch.profiler/Kineto, or any CUPTI client) records no CUDA activity in this process. "
            "Way out: start the profiler after the captured launch (kerncap hands CUPTI back once the capture is written), "
            "or capture a run without the profiler.\n",
            (int)getpid(), call, caller[0] ? caller : "an unknown library");
}

/* The wrappers: exported so that LD_PRELOAD puts them before libcupti (see the file comment). */
__attribute__((visibility("default"))) CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud) {
  char caller[512];
  kc_subscribe_fn next = (kc_subscribe_fn)kc_cupti_next("cuptiSubscribe", (void *)cuptiSubscribe, __builtin_return_address(0), caller, sizeof caller);
  kc_app_call_t *c = kc_cupti_app_enter("cuptiSubscribe", caller);
  CUptiResult r = next ? next(s, cb, ud) : CUPTI_ERROR_NOT_INITIALIZED;
  kc_cupti_app_exit(c, r, "cuptiSubscribe", caller);
  return r;
}

__attribute__((visibility("default"))) CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                                                                     kc_subscriber_params_t *p) {
  char caller[512];
  kc_subscribe_v2_fn next = (kc_subscribe_v2_fn)kc_cupti_next("cuptiSubscribe_v2", (void *)cuptiSubscribe_v2, __builtin_return_address(0), caller, sizeof caller);
  kc_app_call_t *c = kc_cupti_app_enter("cuptiSubscribe_v2", caller);
  CUptiResult r = next ? next(s, cb, ud, p) : CUPTI_ERROR_NOT_INITIALIZED;
  kc_cupti_app_exit(c, r, "cuptiSubscribe_v2", caller);
  return r;
}
#endif
