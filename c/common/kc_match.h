/* kc_match.h — which launch is captured: the kernel-name matcher and the --dispatch count of both
 * capture libraries (c/common/kc_match.c), over the settings (c/common/kc_settings.h) and the
 * census entries (c/common/kc_census.h). One code for both runtimes, so that `--kernel A
 * --kernel B --dispatch N` picks the same launches under CUDA and HSA (test/cpu/c-match.test.ts
 * runs one table through both libraries and through c/test/match_main.c).
 *
 * The rules:
 *  - a kernel matches target t when target t's regex matches its mangled or its demangled name
 *    (asked once per name: kc_match_mask); with no --kernel every kernel matches target 0;
 *  - a collective kernel (c/common/kc_collective.h) matches nothing: it is only counted;
 *  - one target: its matching launches dispatch .. dispatch+launch_count-1 are captured, counted
 *    across every kernel name it matches; several targets: each target's matching launch number
 *    `dispatch`, each counted on its own (a launch that matches two targets counts for both and is
 *    the capture of the first that wants it); capture_all: launch number `dispatch` of every
 *    distinct matching kernel, up to max_captures.
 * Threads: called under the library's mutex. No CUDA or HSA type here.
 */
#ifndef KC_MATCH_H
#define KC_MATCH_H
#include "kc_census.h"
#include "kc_settings.h"

typedef struct {
  const kc_settings_t *s;
  kc_census_t *census;           /* for the demangled names */
  long tmatches[KC_MAX_TARGETS]; /* matching launches seen, per target */
  char tdone[KC_MAX_TARGETS];    /* that target's capture is written */
  int ncaptures;                 /* captures written so far */
} kc_match_t;

/* Which targets match entry k's name (bit t: target t), asked once per entry (k->asked is set
 * with release order after k->mask: a reader without the mutex loads asked with acquire first). */
uint64_t kc_match_mask(kc_match_t *m, kc_kstat_t *k);

/* Whether any target matches a name that has no census entry (yet): a graph's kernel nodes at
 * instantiation, before any of them ran. */
int kc_match_name(kc_match_t *m, const char *name);

/* Count one launch of entry k (its mask non-zero) toward --dispatch; returns the target this
 * launch is the capture of, or -1. *match_index: the index recorded in raw.json (the launch's
 * number among its target's matches; several targets: dispatch). */
int kc_match_pick(kc_match_t *m, kc_kstat_t *k, long *match_index);

/* The capture of `target` is written: 1 when every capture the settings ask for is written (the
 * run's capture is done), else 0 (several captures: the next matching launch starts afresh). */
int kc_match_captured(kc_match_t *m, int target);
#endif
