/* kc_census.h — the launch census of both capture libraries (c/common/kc_census.c): one entry per
 * kernel name with its counts and last launch shape, written as KERNCAP_OUT/kernels.<pid>.json
 * (read by src/capture/census.ts).
 *
 * Entries live in an open-addressing table keyed by the name (FNV-1a), and never move once made:
 * a library may keep a pointer to one (the CUDA library caches it per function handle, so that a
 * launch neither hashes nor compares its kernel's name). The demangled name is computed once per
 * entry (kc_census_demangled), not at each census write or match.
 * Threads: kc_census_get and kc_census_write run under the library's mutex. The counters may be
 * bumped outside it with kc_census_add (relaxed atomics: the CUDA library's launch path); the
 * writer reads them with atomic loads.
 * No CUDA or HSA type here: c/test/match_main.c builds it with plain gcc.
 */
#ifndef KC_CENSUS_H
#define KC_CENSUS_H
#include "kc_process.h"
#include "kc_vec.h"
#include <stdint.h>
#include <stdio.h>

typedef char *(*kc_demangle_fn)(const char *, char *, size_t *, int *);

typedef struct {
  char *name;         /* as the runtime names the kernel (mangled) */
  char *demangled;    /* kc_census_demangled; NULL until asked */
  uint64_t count;     /* launches (executions) */
  uint64_t benchmark; /* of count, launches while a frontend said "benchmarking" (kerncap_set_ignore_launches) */
  uint64_t graph;     /* of count, executions as a kernel node of a CUDA graph launch (c/cuda/kc_graphs.c) */
  uint64_t recorded;  /* launches recorded into a graph by stream capture (not executions: not in count) */
  unsigned grid[3], block[3]; /* the last launch's shape */
  int64_t module;     /* the library's module id (CUDA: the CUmodule; HSA: index of the code object); 0/-1 unknown */
  /* the matcher's (c/common/kc_match.c), under the library's mutex */
  signed char asked;  /* mask is known */
  uint64_t mask;      /* bit t: target t's regex matches this name */
  uint64_t own;       /* launches counted toward --dispatch (capture_all: per kernel) */
  char captured;      /* capture_all: this kernel's capture is written */
} kc_kstat_t;

typedef struct {
  kc_kstat_t **slot;  /* open addressing, power-of-two size, at most half full */
  size_t cap;
  KC_VEC(kc_kstat_t *) order; /* every entry in order of first launch (the census lists them so) */
  kc_kstat_t *block;  /* entries are allocated in blocks, never moved or freed */
  size_t block_left;
  kc_demangle_fn demangle; /* __cxa_demangle (kc_find_demangler), or NULL */
  const char *module_fmt;  /* printf format of "module" (one long long): "0x%llx", "module-%lld" */
  uint64_t launches;       /* every launch counted (the CUDA library bumps it with atomics) */
} kc_census_t;

/* The application's __cxa_demangle, else libstdc++'s (loaded), else NULL. */
kc_demangle_fn kc_find_demangler(void);

/* The entry of kernel `name`, made (zero counts) on first sight. NULL when the host is out of memory. */
kc_kstat_t *kc_census_get(kc_census_t *c, const char *name);

/* The entry's demangled name (computed once), or the name itself when it is not a C++ name. */
const char *kc_census_demangled(kc_census_t *c, kc_kstat_t *k);

/* Add n to a counter of an entry (or to c->launches): safe outside the library's mutex. */
static inline void kc_census_add(uint64_t *counter, uint64_t n) { __atomic_fetch_add(counter, n, __ATOMIC_RELAXED); }
static inline uint64_t kc_census_read(const uint64_t *counter) { return __atomic_load_n(counter, __ATOMIC_RELAXED); }

/* What a census document says besides the kernels. */
typedef struct {
  int final;               /* written at exit (else a periodic snapshot) */
  const char *mode;        /* KERNCAP_MODE */
  const char *counting_off; /* why this process stopped counting, or NULL (counting: true) */
  const kc_proc_t *proc;
  const char *const *visible_vars;
  void (*extra)(FILE *f);  /* the library's own fields (",\"cupti\":…"), or NULL */
} kc_census_doc_t;

/* Write out/kernels.<pid>.json (through a .part file and a rename) unless this is a child forked
 * after set-up (it holds its parent's tables). */
void kc_census_write(kc_census_t *c, const char *out, const kc_census_doc_t *d);
#endif
