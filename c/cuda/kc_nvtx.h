/* kc_nvtx.h — NVTX range selection (`kerncap run|list --nvtx --nvtx-include EXPR --nvtx-exclude
 * EXPR`, in Nsight Compute's syntax): the expression parser and matcher (c/cuda/kc_nvtx_filter.c,
 * no NVTX or CUDA type: c/test/nvtx_main.c builds it with plain gcc) and the NVTX injection that
 * keeps the ranges open in each thread (c/cuda/kc_nvtx.c).
 *
 * The grammar (docs/verbs.md, "NVTX ranges"; the TypeScript check of it is src/capture/nvtx.ts):
 *   EXPR     := ["regex:"] [DOMAIN "@"] (PUSHPOP | STARTEND)
 *   PUSHPOP  := ["["] ITEM ("/" ITEM)* ("/" | "]" | "]/")     also "[" ITEM ("/" ITEM)* with no end mark
 *   ITEM     := NAME | "*" (any number of ranges, none included) | "+" (exactly one range)
 *   STARTEND := NAME ("," NAME)*
 *   "\" takes the next of / , @ [ ] \ literally ("\/", "\,", "\@", "\[", "\]", "\\"); before any other
 *   character it stays (a regex's "\."). In a regex, "[" and "]" inside a name are its brackets.
 * A push/pop expression matches a launch when its items match consecutive ranges of the launching
 * thread's push/pop stack in that domain, outermost first: "[" ties the first item to the
 * outermost range, "]" the last item to the innermost; without either the items may sit anywhere
 * in the stack ("A/" = inside A, at any depth). A start/end expression matches when every NAME is
 * an open start/end range of the domain (in any thread). No DOMAIN: NVTX's default domain (the
 * nvtxRangePush/nvtxRangeStart calls without a domain: torch.cuda.nvtx, record_function under
 * emit_nvtx). "regex:": DOMAIN and every NAME are POSIX extended regexes (regcomp, unanchored, as
 * --kernel), else compared whole.
 * A launch passes the filter when it matches any include (or no include was given) and no exclude.
 */
#ifndef KC_NVTX_H
#define KC_NVTX_H
#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define KC_NVTX_MAX_EXPRS 32
#define KC_NVTX_MAX_ITEMS 32

enum { KC_NVTX_NAME = 0, KC_NVTX_ANY = 1, KC_NVTX_ONE = 2 };

typedef struct {
  int kind;      /* KC_NVTX_NAME, KC_NVTX_ANY ("*"), KC_NVTX_ONE ("+") */
  char *name;    /* KC_NVTX_NAME: unescaped */
  regex_t re;    /* regex: compiled name */
} kc_nvtx_item_t;

typedef struct {
  int regex;         /* "regex:" */
  char *domain;      /* NULL: the default domain */
  regex_t domain_re;
  int pushpop;       /* else start/end */
  int bottom, top;   /* "[" and "]" (push/pop) */
  int nitems;
  kc_nvtx_item_t items[KC_NVTX_MAX_ITEMS];
} kc_nvtx_expr_t;

typedef struct {
  int ninclude, nexclude;
  kc_nvtx_expr_t include[KC_NVTX_MAX_EXPRS], exclude[KC_NVTX_MAX_EXPRS];
} kc_nvtx_filter_t;

/* Parse one expression into *e. Returns 0, or -1 with err filled (what is wrong and where). */
int kc_nvtx_parse(const char *text, kc_nvtx_expr_t *e, char *err, size_t errn);
void kc_nvtx_expr_free(kc_nvtx_expr_t *e);

/* Parse newline-separated includes and excludes (KERNCAP_NVTX_INCLUDE / KERNCAP_NVTX_EXCLUDE; NULL
 * or "": none) into *f. Returns 0, or -1 with err filled (*f then holds nothing). */
int kc_nvtx_filter_parse(kc_nvtx_filter_t *f, const char *include, const char *exclude, char *err, size_t errn);

/* Write the expression back in its canonical spelling (for logs and tests). */
void kc_nvtx_expr_format(const kc_nvtx_expr_t *e, char *out, size_t n);

/* One open range as the matcher sees it: its domain's name (NULL: the default domain) and message. */
typedef struct {
  const char *domain;
  const char *name;
} kc_nvtx_range_t;

/* Whether a launch passes: `stack` the launching thread's push/pop ranges (every domain, in push
 * order, outermost first), `open` the process's open start/end ranges. */
int kc_nvtx_filter_pass(const kc_nvtx_filter_t *f, const kc_nvtx_range_t *stack, size_t nstack, const kc_nvtx_range_t *open, size_t nopen);

/* ---- c/cuda/kc_nvtx.c: the injection (NVTX_INJECTION64_PATH names the capture library) ---- */

/* Read KERNCAP_NVTX_INCLUDE / KERNCAP_NVTX_EXCLUDE once (also when NVTX initializes before CUDA).
 * Returns 0, or -1 with err filled (an expression that does not parse: nothing is filtered). */
int kc_nvtx_setup(char *err, size_t errn);
/* Set once by kc_nvtx_setup, read at every launch: while both are 0 the launch path makes no NVTX
 * call at all (kc_nvtx_launch_passes, kc_nvtx_note_launch below). Not for use outside the library. */
extern int kc_nvtx_filter_on __attribute__((visibility("hidden")));
extern int kc_nvtx_summary_on __attribute__((visibility("hidden")));
/* Whether a filter is set (after kc_nvtx_setup). */
static inline int kc_nvtx_filtering(void) { return kc_nvtx_filter_on; }
/* Whether the calling thread's launch now passes the filter (1 when no filter is set). Cheap while
 * no range was pushed, popped, started or ended since this thread's last launch. */
int kc_nvtx_launch_passes_slow(void);
static inline int kc_nvtx_launch_passes(void) { return !kc_nvtx_filter_on || kc_nvtx_launch_passes_slow(); }
/* Launches that did not pass (the census's "nvtx": {"filtered_out"}). */
uint64_t kc_nvtx_filtered_out(void);
/* Whether the application's NVTX called InitializeInjectionNvtx2 (any NVTX call was made). */
int kc_nvtx_injected(void);
/* KERNCAP_NVTX_SUMMARY=1 (`list --print-summary per-nvtx`): count each launch by the launching
 * thread's open push/pop ranges ("A/B/", "dom@X/A/": outermost first, a named domain's ranges
 * with their domain) and kernel. */
static inline int kc_nvtx_summarizing(void) { return kc_nvtx_summary_on; }
/* Count one launch of `kernel` (a name that outlives the process's census: the census entry's) under
 * the calling thread's ranges; at most KC_NVTX_MAX_PATHS distinct (ranges, kernel) pairs, the
 * launches of any more only counted as dropped. */
#define KC_NVTX_MAX_PATHS 4096
void kc_nvtx_note_launch_slow(const char *kernel);
static inline void kc_nvtx_note_launch(const char *kernel) {
  if (kc_nvtx_summary_on) kc_nvtx_note_launch_slow(kernel);
}
/* The census's ,"ranges":[{"range","kernel","count"}…],"ranges_dropped":N of the counts above. */
void kc_nvtx_ranges_json(FILE *f);
#endif
