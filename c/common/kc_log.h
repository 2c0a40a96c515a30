/* kc_log.h — the one log and failure path of both capture libraries (c/common/kc_log.c).
 *
 * Each library embeds a kc_base_t in its state struct and hands it to kc_log_init once, at set-up.
 * kc_log: a `[kerncap]` line on stderr when KERNCAP_LOG=1. KC_FAIL: an internal failure, never an
 * exit or abort inside the application: capture is disabled (base.enabled = 0), the library's
 * on_fail hook runs (the CUDA library hands CUPTI back), a line goes to stderr and to
 * KERNCAP_OUT/error.<pid>.txt, whose presence tells kerncap that this process failed.
 */
#ifndef KC_LOG_H
#define KC_LOG_H

typedef struct {
  char out[4096];          /* KERNCAP_OUT; empty: not started by kerncap */
  int verbose;             /* KERNCAP_LOG=1 */
  volatile int enabled;    /* 0 after an internal failure */
  void (*on_fail)(void);   /* run at each failure, after enabled is cleared; may be NULL */
} kc_base_t;

/* The library's base state; read by kc_log/kc_fail_at from then on. */
void kc_log_init(kc_base_t *base);
void kc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kc_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define KC_FAIL(...) kc_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#endif
