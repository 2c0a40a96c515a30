/*
 * kc_match.c — the kernel-name matcher and the --dispatch count of both capture libraries
 * (contract in c/common/kc_match.h). Exports nothing outside the library. Reads no environment
 * variable (c/common/kc_settings.c did). Called under the library's mutex.
 */
#define _GNU_SOURCE
#include "kc_match.h"
#include "kc_collective.h"
#include "kc_log.h"
#include <stdlib.h>

/* Targets matching a name: k its census entry (its demangled name is kept there), or NULL (the
 * demangled name is then returned in *tmp, to be freed). */
static uint64_t mask_of(kc_match_t *m, const char *name, kc_kstat_t *k, char **tmp) {
  if (kc_is_collective(name)) {
    /* it waits on its peers: no synchronize or snapshot may run around it (kerncap run says why) */
    kc_log("%s is a collective kernel: counted, never captured", name);
    return 0;
  }
  if (!m->s->ntargets) return 1;
  uint64_t mask = 0;
  const char *d = NULL;
  for (int t = 0; t < m->s->ntargets; t++) {
    if (regexec(&m->s->re[t], name, 0, NULL, 0) == 0) { mask |= 1ull << t; continue; }
    if (!d) {
      if (k) d = kc_census_demangled(m->census, k);
      else {
        kc_kstat_t scratch = {.name = (char *)name};
        d = kc_census_demangled(m->census, &scratch);
        *tmp = scratch.demangled;
      }
    }
    if (regexec(&m->s->re[t], d, 0, NULL, 0) == 0) mask |= 1ull << t;
  }
  return mask;
}

uint64_t kc_match_mask(kc_match_t *m, kc_kstat_t *k) {
  if (__atomic_load_n(&k->asked, __ATOMIC_ACQUIRE)) return k->mask;
  k->mask = mask_of(m, k->name, k, NULL);
  __atomic_store_n(&k->asked, 1, __ATOMIC_RELEASE); /* the launch path reads asked, then mask, without the mutex */
  return k->mask;
}

int kc_match_name(kc_match_t *m, const char *name) {
  char *tmp = NULL;
  uint64_t mask = mask_of(m, name, NULL, &tmp);
  free(tmp);
  return mask != 0;
}

int kc_match_pick(kc_match_t *m, kc_kstat_t *k, long *match_index) {
  const kc_settings_t *s = m->s;
  if (s->capture_all) {
    uint64_t n = k->own++;
    *match_index = (long)n;
    if (n != (uint64_t)s->dispatch || k->captured || m->ncaptures >= s->max_captures) return -1;
    k->captured = 1;
    return 0;
  }
  *match_index = s->ntargets > 1 ? s->dispatch : m->tmatches[0];
  int pick = -1;
  for (int t = 0; t < (s->ntargets ? s->ntargets : 1); t++) {
    if (!(k->mask >> t & 1)) continue;
    long n = m->tmatches[t]++;
    if (n >= s->dispatch && n < s->dispatch + s->launch_count && !m->tdone[t] && pick < 0) pick = t;
  }
  return pick;
}

int kc_match_captured(kc_match_t *m, int target) {
  const kc_settings_t *s = m->s;
  m->ncaptures++;
  if (!kc_settings_several(s)) return 1;
  if (s->capture_all) return m->ncaptures >= s->max_captures;
  if (s->launch_count > 1) return m->ncaptures >= s->launch_count;
  if (target >= 0 && target < KC_MAX_TARGETS) m->tdone[target] = 1;
  int all = 1;
  for (int t = 0; t < s->ntargets; t++) all &= m->tdone[t];
  return all;
}
