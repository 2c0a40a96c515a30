/*
 * kc_nvtx_filter.c — the NVTX range expressions of --nvtx-include / --nvtx-exclude: parser and
 * matcher (grammar and meaning in c/cuda/kc_nvtx.h). Pure C over plain strings, no NVTX or CUDA
 * type, no global state: c/cuda/kc_nvtx.c calls it at each launch with the thread's open ranges,
 * c/test/nvtx_main.c with ranges from its command line (test/cpu/nvtx.test.ts).
 * Exports nothing outside the library.
 */
#define _GNU_SOURCE
#include "kc_nvtx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The characters "\" escapes; any other escaped character stands for itself too. */
static int special(char c) { return c == '/' || c == ',' || c == '@' || c == '[' || c == ']' || c == '\\'; }

/* Whether s[i] is escaped: an odd number of backslashes before it. */
static int escaped_at(const char *s, size_t i) {
  size_t b = 0;
  while (b < i && s[i - 1 - b] == '\\') b++;
  return b & 1;
}

/* The index of the first unescaped c in s[0..n), or -1. */
static long find_unescaped(const char *s, size_t n, char c) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\') { i++; continue; }
    if (s[i] == c) return (long)i;
  }
  return -1;
}

/* A copy of s[0..n) with the escapes of the grammar's characters removed (any other backslash
 * stays: a regex's "\." is its own); NULL out of memory. */
static char *unescape(const char *s, size_t n) {
  char *o = malloc(n + 1), *p = o;
  if (!o) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 1 < n && special(s[i + 1])) i++; /* "\." stays for a regex */
    *p++ = s[i];
  }
  *p = 0;
  return o;
}

static int compile(regex_t *re, const char *pat, const char *what, char *err, size_t errn) {
  int rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
  if (!rc) return 0;
  char msg[256];
  regerror(rc, re, msg, sizeof msg);
  snprintf(err, errn, "invalid regex in %s \"%.200s\": %s", what, pat, msg);
  return -1;
}

void kc_nvtx_expr_free(kc_nvtx_expr_t *e) {
  for (int i = 0; i < e->nitems; i++) {
    if (e->items[i].kind != KC_NVTX_NAME) continue;
    if (e->regex && e->items[i].name) regfree(&e->items[i].re);
    free(e->items[i].name);
  }
  if (e->domain) {
    if (e->regex) regfree(&e->domain_re);
    free(e->domain);
  }
  memset(e, 0, sizeof *e);
}

/* Split s[0..n) at unescaped `sep` into e's items. */
static int split_items(kc_nvtx_expr_t *e, const char *s, size_t n, char sep, const char *text, char *err, size_t errn) {
  size_t start = 0;
  for (;;) {
    long at = find_unescaped(s + start, n - start, sep);
    size_t len = at < 0 ? n - start : (size_t)at;
    if (!len) {
      snprintf(err, errn, "NVTX expression \"%.200s\": empty range name (two '%c' in a row, or one at an end)", text, sep);
      return -1;
    }
    if (e->nitems == KC_NVTX_MAX_ITEMS) { snprintf(err, errn, "NVTX expression \"%.200s\": more than %d ranges", text, KC_NVTX_MAX_ITEMS); return -1; }
    kc_nvtx_item_t *it = &e->items[e->nitems];
    const char *p = s + start;
    if (e->pushpop && len == 1 && (*p == '*' || *p == '+')) {
      it->kind = *p == '*' ? KC_NVTX_ANY : KC_NVTX_ONE;
      e->nitems++;
    } else {
      it->kind = KC_NVTX_NAME;
      it->name = unescape(p, len);
      if (!it->name) { snprintf(err, errn, "out of host memory"); return -1; }
      e->nitems++;
      if (e->regex && compile(&it->re, it->name, "NVTX range name", err, errn)) { free(it->name); it->name = NULL; return -1; }
    }
    if (at < 0) return 0;
    start += len + 1;
  }
}

int kc_nvtx_parse(const char *text, kc_nvtx_expr_t *e, char *err, size_t errn) {
  memset(e, 0, sizeof *e);
  const char *s = text;
  if (!strncmp(s, "regex:", 6)) { e->regex = 1; s += 6; }
  size_t n = strlen(s);
  if (!n) { snprintf(err, errn, "empty NVTX expression \"%.200s\": name a range (\"A/\" push/pop, \"A\" start/end)", text); return -1; }
  long at = find_unescaped(s, n, '@');
  if (at == 0) { snprintf(err, errn, "NVTX expression \"%.200s\": empty domain before '@'", text); return -1; }
  if (at > 0) {
    e->domain = unescape(s, (size_t)at);
    if (!e->domain) { snprintf(err, errn, "out of host memory"); return -1; }
    if (e->regex && compile(&e->domain_re, e->domain, "NVTX domain", err, errn)) { free(e->domain); e->domain = NULL; return -1; }
    s += at + 1;
    n -= (size_t)at + 1;
    if (find_unescaped(s, n, '@') >= 0) { snprintf(err, errn, "NVTX expression \"%.200s\": more than one '@' (escape a literal one as \\@)", text); kc_nvtx_expr_free(e); return -1; }
  }
  /* push/pop: a leading "[", or an unescaped trailing "/" or "]" */
  int trailing_slash = s[n - 1] == '/' && !escaped_at(s, n - 1);
  if (s[0] == '[') { e->bottom = 1; s++; n--; }
  if (trailing_slash) n--;
  if (n > 0 && s[n - 1] == ']' && !escaped_at(s, n - 1)) { e->top = 1; n--; }
  e->pushpop = e->bottom || e->top || trailing_slash;
  if (!n) { snprintf(err, errn, "NVTX expression \"%.200s\": no range name", text); kc_nvtx_expr_free(e); return -1; }
  if (e->pushpop && find_unescaped(s, n, ',') >= 0) {
    snprintf(err, errn, "NVTX expression \"%.200s\": ',' separates start/end ranges, '/' push/pop ranges: not both (escape a literal one as \\,)", text);
    kc_nvtx_expr_free(e);
    return -1;
  }
  for (const char *c = s; c < s + n; c++) {
    if (*c == '\\') { c++; continue; }
    if ((!e->regex && (*c == '[' || *c == ']')) || (!e->pushpop && *c == '/')) { /* a regex's own brackets stay */
      snprintf(err, errn, "NVTX expression \"%.200s\": '%c' is only allowed %s (escape a literal one as \\%c)", text, *c,
               *c == '/' ? "in a push/pop expression, which ends with '/'" : *c == '[' ? "at the start" : "at the end", *c);
      kc_nvtx_expr_free(e);
      return -1;
    }
  }
  if (split_items(e, s, n, e->pushpop ? '/' : ',', text, err, errn)) { kc_nvtx_expr_free(e); return -1; }
  return 0;
}

/* Whether the canonical spelling escapes *c of name: a grammar character (a regex's brackets too,
 * so that the spelling parses back alike; a backslash only where the parser would take it as an
 * escape), or a lone "*"/"+" push/pop name. */
static int needs_escape(const kc_nvtx_expr_t *e, const char *name, const char *c) {
  if (*c == '\\') return !c[1] || special(c[1]);
  if (special(*c)) return 1;
  return e->pushpop && (*c == '*' || *c == '+') && c == name && !c[1];
}

void kc_nvtx_expr_format(const kc_nvtx_expr_t *e, char *out, size_t n) {
  size_t l = 0;
#define PUT(...) do { if (l < n) { int w = snprintf(out + l, n - l, __VA_ARGS__); if (w > 0) l += (size_t)w; } } while (0)
  out[0] = 0;
  if (e->regex) PUT("regex:");
  if (e->domain) PUT("%s@", e->domain);
  if (e->bottom) PUT("[");
  for (int i = 0; i < e->nitems; i++) {
    const kc_nvtx_item_t *it = &e->items[i];
    if (i) PUT("%c", e->pushpop ? '/' : ',');
    if (it->kind == KC_NVTX_ANY) PUT("*");
    else if (it->kind == KC_NVTX_ONE) PUT("+");
    else
      for (const char *c = it->name; *c; c++) PUT(needs_escape(e, it->name, c) ? "\\%c" : "%c", *c);
  }
  if (e->top) PUT("]");
  else if (e->pushpop) PUT("/");
#undef PUT
}

int kc_nvtx_filter_parse(kc_nvtx_filter_t *f, const char *include, const char *exclude, char *err, size_t errn) {
  memset(f, 0, sizeof *f);
  const char *lists[2] = {include, exclude};
  for (int w = 0; w < 2; w++) {
    if (!lists[w] || !*lists[w]) continue;
    char *copy = strdup(lists[w]), *save = NULL;
    if (!copy) { snprintf(err, errn, "out of host memory"); return -1; }
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      int *cnt = w ? &f->nexclude : &f->ninclude;
      if (*cnt == KC_NVTX_MAX_EXPRS) {
        snprintf(err, errn, "more than %d --nvtx-%s expressions", KC_NVTX_MAX_EXPRS, w ? "exclude" : "include");
        free(copy);
        goto fail;
      }
      if (kc_nvtx_parse(line, &(w ? f->exclude : f->include)[*cnt], err, errn)) { free(copy); goto fail; }
      (*cnt)++;
    }
    free(copy);
  }
  return 0;
fail:
  for (int i = 0; i < f->ninclude; i++) kc_nvtx_expr_free(&f->include[i]);
  for (int i = 0; i < f->nexclude; i++) kc_nvtx_expr_free(&f->exclude[i]);
  f->ninclude = f->nexclude = 0;
  return -1;
}

/* ---- matching ---- */

static int name_is(const kc_nvtx_expr_t *e, const kc_nvtx_item_t *it, const char *name) {
  if (!name) return 0;
  return e->regex ? regexec(&it->re, name, 0, NULL, 0) == 0 : strcmp(it->name, name) == 0;
}

static int domain_is(const kc_nvtx_expr_t *e, const char *domain) {
  if (!e->domain) return domain == NULL;
  if (!domain) return 0;
  return e->regex ? regexec(&e->domain_re, domain, 0, NULL, 0) == 0 : strcmp(e->domain, domain) == 0;
}

/* Items [i..) against the ranges [j..n) of `r` (the expression's domain only), "*" taking any
 * number, "+" exactly one; `top`: the last item must take the innermost range. */
static int glob(const kc_nvtx_expr_t *e, int i, const char *const *r, size_t j, size_t n) {
  if (i == e->nitems) return !e->top || j == n;
  const kc_nvtx_item_t *it = &e->items[i];
  if (it->kind == KC_NVTX_ANY) {
    for (size_t k = j; k <= n; k++)
      if (glob(e, i + 1, r, k, n)) return 1;
    return 0;
  }
  if (j == n) return 0;
  if (it->kind == KC_NVTX_NAME && !name_is(e, it, r[j])) return 0;
  return glob(e, i + 1, r, j + 1, n);
}

static int expr_matches(const kc_nvtx_expr_t *e, const kc_nvtx_range_t *stack, size_t nstack, const kc_nvtx_range_t *open, size_t nopen) {
  if (!e->pushpop) {
    for (int i = 0; i < e->nitems; i++) {
      int found = 0;
      for (size_t k = 0; k < nopen && !found; k++) found = domain_is(e, open[k].domain) && name_is(e, &e->items[i], open[k].name);
      if (!found) return 0;
    }
    return 1;
  }
  /* the stack of the expression's domain, outermost first */
  const char *small[64];
  const char **r = nstack <= 64 ? small : malloc(nstack * sizeof *r);
  if (!r) return 0;
  size_t n = 0;
  for (size_t k = 0; k < nstack; k++)
    if (domain_is(e, stack[k].domain)) r[n++] = stack[k].name;
  int hit = 0;
  for (size_t start = 0; start <= n && !hit; start++) {
    hit = glob(e, 0, r, start, n);
    if (e->bottom) break;
  }
  if (r != small) free(r);
  return hit;
}

int kc_nvtx_filter_pass(const kc_nvtx_filter_t *f, const kc_nvtx_range_t *stack, size_t nstack, const kc_nvtx_range_t *open, size_t nopen) {
  for (int i = 0; i < f->nexclude; i++)
    if (expr_matches(&f->exclude[i], stack, nstack, open, nopen)) return 0;
  if (!f->ninclude) return 1;
  for (int i = 0; i < f->ninclude; i++)
    if (expr_matches(&f->include[i], stack, nstack, open, nopen)) return 1;
  return 0;
}
