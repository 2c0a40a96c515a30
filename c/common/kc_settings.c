/*
 * kc_settings.c — the KERNCAP_* settings of both capture libraries (contract in
 * c/common/kc_settings.h). Exports nothing outside the library. Called once, at set-up, before
 * any callback can run.
 */
#define _GNU_SOURCE
#include "kc_settings.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_one(const char *v) { return v && !strcmp(v, "1"); }

int kc_settings_read(kc_settings_t *s, char *err, size_t errn) {
  memset(s, 0, sizeof *s);
  s->out = getenv("KERNCAP_OUT");
  const char *mode = getenv("KERNCAP_MODE");
  s->mode = mode ? mode : "";
  s->capture = mode && !strcmp(mode, "capture");
  s->verbose = is_one(getenv("KERNCAP_LOG"));
  s->exit_after = is_one(getenv("KERNCAP_EXIT_AFTER_CAPTURE"));
  s->count_benchmarks = is_one(getenv("KERNCAP_COUNT_BENCHMARKS"));
  s->capture_all = is_one(getenv("KERNCAP_CAPTURE_ALL"));
  const char *d = getenv("KERNCAP_DISPATCH");
  s->dispatch = d ? strtol(d, NULL, 10) : 0;
  const char *mc = getenv("KERNCAP_MAX_CAPTURES");
  s->max_captures = mc && atoi(mc) > 0 ? atoi(mc) : 64;
  const char *lc = getenv("KERNCAP_LAUNCH_COUNT");
  s->launch_count = lc && strtol(lc, NULL, 10) > 0 ? strtol(lc, NULL, 10) : 1;
  s->kernel = getenv("KERNCAP_KERNEL");
  if (!s->kernel || !*s->kernel) return 0;
  /* one regex per line (kerncap joins several --kernel with newlines); empty lines are skipped */
  char *copy = strdup(s->kernel), *save = NULL;
  if (!copy) { snprintf(err, errn, "out of host memory reading KERNCAP_KERNEL"); return -1; }
  int bad = 0;
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (s->ntargets == KC_MAX_TARGETS) { snprintf(err, errn, "more than %d --kernel targets", KC_MAX_TARGETS); bad = 1; break; }
    int rc = regcomp(&s->re[s->ntargets], line, REG_EXTENDED | REG_NOSUB);
    if (rc) {
      char msg[256];
      regerror(rc, &s->re[s->ntargets], msg, sizeof msg);
      snprintf(err, errn, "invalid --kernel regex %.1000s: %s", line, msg);
      bad = 1;
      break;
    }
    s->ntargets++;
  }
  free(copy);
  if (bad) {
    for (int t = 0; t < s->ntargets; t++) regfree(&s->re[t]);
    s->ntargets = 0;
    return -1;
  }
  return 0;
}
