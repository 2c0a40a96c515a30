/* kc_settings.h — the KERNCAP_* settings both capture libraries read from the application's
 * environment (c/common/kc_settings.c), parsed once at set-up by one function, so that the CUDA
 * and the HSA library cannot read them differently. What each variable means: docs/raw-capture.md
 * and src/env.ts (kerncap sets them: captureLibraryEnv).
 *
 * Reads: KERNCAP_OUT, KERNCAP_MODE, KERNCAP_LOG, KERNCAP_KERNEL (one POSIX ERE per line; several
 * lines: one capture per target), KERNCAP_DISPATCH, KERNCAP_CAPTURE_ALL, KERNCAP_MAX_CAPTURES,
 * KERNCAP_LAUNCH_COUNT, KERNCAP_COUNT_BENCHMARKS, KERNCAP_EXIT_AFTER_CAPTURE. (KERNCAP_RANK and
 * KERNCAP_PROCESS: c/common/kc_process.c; KERNCAP_CHUNK_BYTES: c/common/kc_raw.c.)
 * No CUDA or HSA type here: c/test/match_main.c builds it with plain gcc.
 */
#ifndef KC_SETTINGS_H
#define KC_SETTINGS_H
#include <regex.h>
#include <stddef.h>

#define KC_MAX_TARGETS 64

typedef struct {
  const char *out;     /* KERNCAP_OUT; NULL or "": not started by kerncap (the library stays inert) */
  const char *mode;    /* KERNCAP_MODE as given ("list", "capture"), repeated in the census; "" when unset */
  int capture;         /* KERNCAP_MODE=capture (else the library only counts: list) */
  int verbose;         /* KERNCAP_LOG=1 */
  int exit_after;      /* KERNCAP_EXIT_AFTER_CAPTURE=1: _exit(0) once every capture is written */
  int count_benchmarks; /* KERNCAP_COUNT_BENCHMARKS=1: --dispatch counts autotuner benchmark launches too */
  int capture_all;     /* KERNCAP_CAPTURE_ALL=1: the Nth launch of every distinct matching kernel */
  int max_captures;    /* KERNCAP_MAX_CAPTURES (capture_all; default 64) */
  long dispatch;       /* KERNCAP_DISPATCH: 0-based index among the matching launches (default 0) */
  long launch_count;   /* KERNCAP_LAUNCH_COUNT: one target's matches dispatch .. dispatch+launch_count-1 (default 1) */
  const char *kernel;  /* KERNCAP_KERNEL as given (for the log); NULL when unset */
  int ntargets;        /* lines of KERNCAP_KERNEL; 0: any kernel matches */
  regex_t re[KC_MAX_TARGETS]; /* regcomp(REG_EXTENDED | REG_NOSUB) of each line */
} kc_settings_t;

/* Read every setting above from the environment into *s. Returns 0, or -1 with err filled (an
 * invalid regex, with regcomp's message; more than KC_MAX_TARGETS lines); *s is then usable for
 * counting but no target is set. */
int kc_settings_read(kc_settings_t *s, char *err, size_t errn);

/* More than one capture in this run (several targets, every kernel, or consecutive launches of
 * one): each goes to a folder of its own (kc_raw_capture_dir), and graph executions are not taken. */
static inline int kc_settings_several(const kc_settings_t *s) {
  return s->ntargets > 1 || s->capture_all || s->launch_count > 1;
}
#endif
