/*
 * kc_cupti.h — sharing CUPTI's one subscriber slot (CUDA library only; c/cuda/kc_cupti.c).
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
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

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

typedef struct {
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
} kc_cupti_share_t;

/* Subscribe kerncap: cuptiSubscribe_v2 (naming kerncap, learning the holder's name) when the
 * loaded libcupti has it, else cuptiSubscribe. On CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * kc.cupti.holder names the existing subscriber ("" when the library does not say). */
CUptiResult kc_cupti_subscribe(void *cupti, kc_subscribe_fn v1, kc_unsubscribe_fn unsub, CUpti_SubscriberHandle *sub,
                                      CUpti_CallbackFunc cb);

/* A user-facing message for a refused subscribe: who holds CUPTI (as far as known) and the way out. */
void kc_cupti_busy_message(char *dst, size_t n, CUptiResult r, const char *result_text);

/* kerncap no longer needs CUPTI in this process (why: a short reason; at_launch: launches counted
 * so far). In run mode (hand_back) it is handed back at once, on a detached thread; else only
 * marked, so an application's later cuptiSubscribe gets it (the wrappers below). */
void kc_cupti_done(const char *why, uint64_t at_launch, int hand_back);

/* The census's "cupti" object: how kerncap subscribed, whether it handed CUPTI back, and every
 * cuptiSubscribe the application made. */
void kc_cupti_json(FILE *f);
#endif
