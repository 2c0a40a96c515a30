/* A stand-in libcupti for the replay's kernel clock (c/cuda/kc_timer.c), so that its CUPTI path runs
 * on a machine without an NVIDIA driver (test/cpu/native/kernel-timer.test.ts builds and drives it).
 * It keeps the subscriber's callback and the activity buffer callbacks; fake_cupti_launch(corr,
 * start, end) plays a driver launch: the callback at API entry with that correlation id, then a
 * kernel record (CUpti_ActivityKernel10) that the next cuptiActivityFlushAll delivers.
 * fake_cupti_mode(m): 0 normal, 1 CUPTI held by another subscriber (cuptiSubscribe_v2 names it
 * "Nsight Compute"), 2 cuptiActivityEnable refused. */
#include <cupti.h>
#include <stdlib.h>
#include <string.h>

#ifdef CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN /* CUDA 13 cupti_callbacks.h declares cuptiSubscribe_v2 */
typedef CUpti_SubscriberParams fake_params_t;
#else
typedef struct {
  size_t structSize;
  const char *subscriberName;
  char *oldSubscriberName;
  size_t oldSubscriberSize;
} fake_params_t;
#endif

static int mode;
static CUpti_CallbackFunc cb;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static int enabled;
static CUpti_ActivityKernel10 pending[64];
static int npending;

void fake_cupti_mode(int m) { mode = m; }
int fake_cupti_subscribed(void) { return cb != NULL; }
int fake_cupti_enabled(void) { return enabled; }

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc f, void *ud) {
  (void)ud;
  if (mode == 1) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *sub = (CUpti_SubscriberHandle)1;
  cb = f;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc f, void *ud, fake_params_t *p) {
  if (mode == 1 && p && p->oldSubscriberName && p->oldSubscriberSize > 16) strcpy(p->oldSubscriberName, "Nsight Compute");
  return cuptiSubscribe(sub, f, ud);
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub) {
  (void)sub;
  cb = NULL;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t e, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  (void)e; (void)s; (void)d; (void)id;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : r == CUPTI_ERROR_NOT_INITIALIZED ? "CUPTI_ERROR_NOT_INITIALIZED" : "fake";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc cp) {
  requested = rq;
  completed = cp;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  if (mode == 2) return CUPTI_ERROR_NOT_INITIALIZED;
  if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) enabled = 1;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) enabled = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  if (!requested || !completed || !npending) return CUPTI_SUCCESS;
  uint8_t *buf = NULL;
  size_t size = 0, max = 0;
  requested(&buf, &size, &max);
  size_t n = (size_t)npending * sizeof *pending;
  if (!buf || size < n) return CUPTI_ERROR_UNKNOWN;
  memcpy(buf, pending, n);
  npending = 0;
  completed(NULL, 0, buf, size, n);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec) {
  uint8_t *next = *rec ? (uint8_t *)*rec + sizeof(CUpti_ActivityKernel10) : buf;
  if (next + sizeof(CUpti_ActivityKernel10) > buf + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *rec = (CUpti_Activity *)next;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
  (void)ctx; (void)stream;
  *dropped = 0;
  return CUPTI_SUCCESS;
}

/* A launch as the driver would report it: the callback at entry, then (when the kind is enabled) its kernel record. */
void fake_cupti_launch(uint32_t correlation, uint64_t start, uint64_t end) {
  CUpti_CallbackData d;
  memset(&d, 0, sizeof d);
  d.callbackSite = CUPTI_API_ENTER;
  d.functionName = "cuLaunchKernelEx";
  d.correlationId = correlation;
  if (cb) cb(NULL, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &d);
  if (!enabled || npending == 64) return;
  CUpti_ActivityKernel10 *k = &pending[npending++];
  memset(k, 0, sizeof *k);
  k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k->start = start;
  k->end = end;
  k->correlationId = correlation;
}
