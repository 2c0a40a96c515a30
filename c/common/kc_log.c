/*
 * kc_log.c — the log and failure path of both capture libraries (contract in c/common/kc_log.h).
 * Exports nothing outside the library (-fvisibility=hidden). Reads no environment variable itself
 * (the library reads KERNCAP_OUT and KERNCAP_LOG into its kc_base_t). Called from any application
 * thread; a failure line is one fprintf/one append, so lines of two threads do not interleave.
 */
#define _GNU_SOURCE
#include "kc_log.h"
#include "kc_process.h"
#include <stdarg.h>
#include <stdio.h>

static kc_base_t *base;

void kc_log_init(kc_base_t *b) { base = b; }

void kc_log(const char *fmt, ...) {
  if (!base || !base->verbose) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[kerncap] %s\n", msg);
}

void kc_fail_at(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (base) {
    base->enabled = 0; /* first: other threads' callbacks stop capturing */
    if (base->on_fail) base->on_fail();
  }
  fprintf(stderr, "[kerncap] capture disabled: %s (%s:%d)\n", msg, file, line);
  if (!base) return;
  if (!base->out[0]) return;
  char p[4200];
  kc_proc_file(base->out, p, sizeof p, "error", "txt"); /* per process: error.<pid>.txt */
  FILE *f = fopen(p, "a");
  if (f) {
    fprintf(f, "%s (%s:%d)\n", msg, file, line);
    fclose(f);
  }
}
