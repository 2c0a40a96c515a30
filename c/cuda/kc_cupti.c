/*
 * kc_cupti.c — CUPTI's one subscriber slot, shared with the application (the three cases:
 * c/cuda/kc_cupti.h). Exports cuptiSubscribe and cuptiSubscribe_v2 (wrappers that LD_PRELOAD puts
 * before libcupti); nothing else. Reads no environment variable. Called at set-up (subscribe),
 * from any application thread (the wrappers, the census), and from a short-lived thread of its
 * own (the hand-back); kc.cupti.mu guards kc.cupti.
 */
#define _GNU_SOURCE
#include "kc_state.h"
#include "kc_json.h"
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#define KC_EXPORT __attribute__((visibility("default")))


/* Subscribe kerncap: cuptiSubscribe_v2 (naming kerncap, learning the holder's name) when the
 * loaded libcupti has it, else cuptiSubscribe. On CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * kc.cupti.holder names the existing subscriber ("" when the library does not say). */
CUptiResult kc_cupti_subscribe(void *cupti, kc_subscribe_fn v1, kc_unsubscribe_fn unsub, CUpti_SubscriberHandle *sub,
                                      CUpti_CallbackFunc cb) {
  if (!kc.cupti.t0) kc.cupti.t0 = kc_now_s();
  kc_subscribe_v2_fn v2 = cupti ? (kc_subscribe_v2_fn)dlsym(cupti, "cuptiSubscribe_v2") : NULL;
  CUptiResult r;
  kc.cupti.holder[0] = 0;
  if (v2) {
    kc_subscriber_params_t p = {sizeof p, "kerncap", kc.cupti.holder, sizeof kc.cupti.holder};
    kc.cupti.api = "cuptiSubscribe_v2";
    r = v2(sub, cb, NULL, &p);
    kc.cupti.holder[sizeof kc.cupti.holder - 1] = 0;
  } else {
    kc.cupti.api = "cuptiSubscribe";
    r = v1(sub, cb, NULL);
  }
  if (r == CUPTI_SUCCESS) {
    kc.cupti.sub = *sub;
    kc.cupti.unsub = unsub;
    kc.cupti.held = 1;
  }
  return r;
}

/* A user-facing message for a refused subscribe: who holds CUPTI (as far as known) and the way out. */
void kc_cupti_busy_message(char *dst, size_t n, CUptiResult r, const char *result_text) {
  const char *h = kc.cupti.holder;
  const char *app = NULL;
  for (int i = 0; i < kc.cupti.ncalls; i++)
    if (kc.cupti.calls[i].result == CUPTI_SUCCESS) app = kc.cupti.calls[i].caller;
  if (r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    snprintf(dst, n, "%s failed: %s", kc.cupti.api, result_text);
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

/* Hand CUPTI back now (not from inside a CUPTI callback). Called with kc.cupti.mu held. */
static void kc_cupti_release_locked(const char *why, uint64_t at_launch) {
  if (!kc.cupti.held) return;
  kc.cupti.released = 1; /* first: callbacks still in flight on other threads do nothing from here on */
  kc.cupti.released_result = kc.cupti.unsub ? (int)kc.cupti.unsub(kc.cupti.sub) : -1;
  kc.cupti.held = 0;
  kc.cupti.released_why = why;
  kc.cupti.released_at_launch = at_launch;
}

static void *kc_cupti_release_thread(void *arg) {
  pthread_mutex_lock(&kc.cupti.mu);
  kc_cupti_release_locked(kc.cupti.released_why ? kc.cupti.released_why : (const char *)arg, kc.cupti.released_at_launch);
  pthread_mutex_unlock(&kc.cupti.mu);
  return NULL;
}

/* kerncap no longer needs CUPTI in this process (why: a short reason; at_launch: launches counted
 * so far). In run mode (hand_back) it is handed back at once, on a detached thread; else only
 * marked, so an application's later cuptiSubscribe gets it (the wrappers below). */
void kc_cupti_done(const char *why, uint64_t at_launch, int hand_back) {
  pthread_mutex_lock(&kc.cupti.mu);
  kc.cupti.may_release = 1;
  if (!kc.cupti.released_why) { kc.cupti.released_why = why; kc.cupti.released_at_launch = at_launch; }
  pthread_mutex_unlock(&kc.cupti.mu);
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
void kc_cupti_json(FILE *f) {
  pthread_mutex_lock(&kc.cupti.mu);
  fprintf(f, "{\"api\":\"%s\",\"subscribed\":%s,\"holder\":", kc.cupti.api ? kc.cupti.api : "", kc.cupti.held || kc.cupti.released ? "true" : "false");
  kc_json_str(f, kc.cupti.holder);
  fprintf(f, ",\"released\":%s", kc.cupti.released ? "true" : "false");
  if (kc.cupti.released) {
    fputs(",\"released_why\":", f);
    kc_json_str(f, kc.cupti.released_why ? kc.cupti.released_why : "");
    fprintf(f, ",\"released_at_launch\":%llu,\"unsubscribe_result\":%d", (unsigned long long)kc.cupti.released_at_launch, kc.cupti.released_result);
  }
  fprintf(f, ",\"app_calls_dropped\":%d,\"app_calls\":[", kc.cupti.dropped);
  for (int i = 0; i < kc.cupti.ncalls; i++) {
    kc_app_call_t *c = &kc.cupti.calls[i];
    fprintf(f, "%s{\"call\":\"%s\",\"caller\":", i ? "," : "", c->call);
    kc_json_str(f, c->caller);
    fprintf(f, ",\"result\":%d,\"kerncap_held\":%s,\"handed_back\":%s,\"t_s\":%.3f}", c->result, c->kerncap_held ? "true" : "false",
            c->handed_back ? "true" : "false", c->t_s);
  }
  fputs("]}", f);
  pthread_mutex_unlock(&kc.cupti.mu);
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
  pthread_mutex_lock(&kc.cupti.mu);
  if (!kc.cupti.t0) kc.cupti.t0 = kc_now_s();
  int handed = 0;
  if (kc.cupti.held && kc.cupti.may_release) {
    kc_cupti_release_locked(kc.cupti.released_why ? kc.cupti.released_why : "the application asked for CUPTI", kc.cupti.released_at_launch);
    handed = 1;
  }
  kc_app_call_t *c = NULL;
  if (kc.cupti.ncalls < KC_CUPTI_MAX_CALLS) {
    c = &kc.cupti.calls[kc.cupti.ncalls++];
    c->call = call;
    snprintf(c->caller, sizeof c->caller, "%s", caller);
    c->kerncap_held = kc.cupti.held;
    c->handed_back = handed;
    c->result = -1;
    c->t_s = kc_now_s() - kc.cupti.t0;
  } else kc.cupti.dropped++;
  pthread_mutex_unlock(&kc.cupti.mu);
  return c;
}

static void kc_cupti_app_exit(kc_app_call_t *c, CUptiResult r, const char *call, const char *caller) {
  pthread_mutex_lock(&kc.cupti.mu);
  if (c) c->result = (int)r;
  int refused = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && kc.cupti.held;
  pthread_mutex_unlock(&kc.cupti.mu);
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
KC_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud) {
  char caller[512];
  kc_subscribe_fn next = (kc_subscribe_fn)kc_cupti_next("cuptiSubscribe", (void *)cuptiSubscribe, __builtin_return_address(0), caller, sizeof caller);
  kc_app_call_t *c = kc_cupti_app_enter("cuptiSubscribe", caller);
  CUptiResult r = next ? next(s, cb, ud) : CUPTI_ERROR_NOT_INITIALIZED;
  kc_cupti_app_exit(c, r, "cuptiSubscribe", caller);
  return r;
}

KC_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                                                                     kc_subscriber_params_t *p) {
  char caller[512];
  kc_subscribe_v2_fn next = (kc_subscribe_v2_fn)kc_cupti_next("cuptiSubscribe_v2", (void *)cuptiSubscribe_v2, __builtin_return_address(0), caller, sizeof caller);
  kc_app_call_t *c = kc_cupti_app_enter("cuptiSubscribe_v2", caller);
  CUptiResult r = next ? next(s, cb, ud, p) : CUPTI_ERROR_NOT_INITIALIZED;
  kc_cupti_app_exit(c, r, "cuptiSubscribe_v2", caller);
  return r;
}
