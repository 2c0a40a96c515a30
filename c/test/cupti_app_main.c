/* Test app for the cuptiSubscribe wrappers of c/cuda/kc_cupti.h (test/cpu/capture/cupti-share.test.ts).
 * Built twice: with -DFAKE_CUPTI as a stand-in libcupti (first cuptiSubscribe succeeds, later
 * ones fail with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39, as the one-subscriber rule
 * does), and as the application, linked against it. The application calls InitializeInjection
 * when the capture library is preloaded (as libcuda would at cuInit), then subscribes twice and
 * prints both results. */
#include <dlfcn.h>
#include <stdio.h>
#ifdef FAKE_CUPTI
static int subscribers;
int cuptiSubscribe(void **s, void *cb, void *ud) {
  (void)cb; (void)ud;
  *s = (void *)1;
  return subscribers++ ? 39 : 0;
}
#else
int cuptiSubscribe(void **s, void *cb, void *ud);
int main(void) {
  int (*init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
  if (init) init();
  void *s;
  int a = cuptiSubscribe(&s, NULL, NULL);
  int b = cuptiSubscribe(&s, NULL, NULL);
  printf("%d %d\n", a, b);
  return 0;
}
#endif
