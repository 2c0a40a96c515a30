/* kc_json.h — the small JSON writer both capture libraries write raw.json (and kernels.json's
 * strings) with: objects, arrays, keys, escaped strings, numbers, hex, bool, null, with the commas
 * placed by the writer. Values written by other helpers (kc_proc_json, kc_json_item) go after
 * kc_json_value(w), which places the comma and returns the FILE*.
 * Shapes: nesting up to KC_JSON_DEPTH levels; numbers as given (u64, i64, printf formats for doubles).
 * Escaping (kc_json_str): '"' and '\\' with a backslash, bytes below 0x20 as \u00XX, every other
 * byte as is (UTF-8 kernel names stay UTF-8). Tested by test/cpu/kc-json.test.ts. */
#ifndef KC_JSON_H
#define KC_JSON_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* Write s as a JSON string literal: quotes and backslashes escaped, control bytes as \u00XX. */
static inline void kc_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

#define KC_JSON_DEPTH 16
typedef struct {
  FILE *f;
  int depth;
  int after_key;                        /* a key was written: the next value needs no comma */
  unsigned char count[KC_JSON_DEPTH + 1]; /* values written so far at each level (saturating at 1) */
} kc_json;

static inline void kc_json_init(kc_json *w, FILE *f) {
  w->f = f;
  w->depth = 0;
  w->after_key = 0;
  w->count[0] = 0;
}

/* Before any value or key: the comma when a sibling came before. */
static inline void kc_json_sep(kc_json *w) {
  if (w->after_key) { w->after_key = 0; return; }
  if (w->count[w->depth]) fputc(',', w->f);
  w->count[w->depth] = 1;
}

static inline void kc_json_open(kc_json *w, char c) {
  kc_json_sep(w);
  fputc(c, w->f);
  if (w->depth < KC_JSON_DEPTH) w->depth++;
  w->count[w->depth] = 0;
}
static inline void kc_json_close(kc_json *w, char c) {
  if (w->depth > 0) w->depth--;
  fputc(c, w->f);
}
static inline void kc_json_begin_object(kc_json *w) { kc_json_open(w, '{'); }
static inline void kc_json_end_object(kc_json *w) { kc_json_close(w, '}'); }
static inline void kc_json_begin_array(kc_json *w) { kc_json_open(w, '['); }
static inline void kc_json_end_array(kc_json *w) { kc_json_close(w, ']'); }

static inline void kc_json_key(kc_json *w, const char *k) {
  kc_json_sep(w);
  kc_json_str(w->f, k);
  fputc(':', w->f);
  w->after_key = 1;
}

/* A value another helper writes: the separator, then the FILE* to write it to. */
static inline FILE *kc_json_value(kc_json *w) {
  kc_json_sep(w);
  return w->f;
}

static inline void kc_json_string(kc_json *w, const char *s) { kc_json_str(kc_json_value(w), s); }
static inline void kc_json_u64(kc_json *w, uint64_t v) { fprintf(kc_json_value(w), "%llu", (unsigned long long)v); }
static inline void kc_json_i64(kc_json *w, int64_t v) { fprintf(kc_json_value(w), "%lld", (long long)v); }
static inline void kc_json_bool(kc_json *w, int v) { fputs(v ? "true" : "false", kc_json_value(w)); }
static inline void kc_json_null(kc_json *w) { fputs("null", kc_json_value(w)); }
/* "0x…" lowercase hex string (VAs, handles). */
static inline void kc_json_hex(kc_json *w, uint64_t v) { fprintf(kc_json_value(w), "\"0x%llx\"", (unsigned long long)v); }
/* n bytes as one string of 2n lowercase hex digits. */
static inline void kc_json_hexbytes(kc_json *w, const void *bytes, size_t n) {
  FILE *f = kc_json_value(w);
  fputc('"', f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%02x", ((const unsigned char *)bytes)[i]);
  fputc('"', f);
}
/* A number printed with a printf format of one double ("%.1f", "%.3f"); a non-finite value is written as null. */
static inline void kc_json_double(kc_json *w, const char *fmt, double v) {
  FILE *f = kc_json_value(w);
  if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308) fputs("null", f);
  else fprintf(f, fmt, v);
}

/* key + value in one call */
static inline void kc_json_kstr(kc_json *w, const char *k, const char *s) { kc_json_key(w, k); kc_json_string(w, s); }
static inline void kc_json_ku64(kc_json *w, const char *k, uint64_t v) { kc_json_key(w, k); kc_json_u64(w, v); }
static inline void kc_json_ki64(kc_json *w, const char *k, int64_t v) { kc_json_key(w, k); kc_json_i64(w, v); }
static inline void kc_json_kbool(kc_json *w, const char *k, int v) { kc_json_key(w, k); kc_json_bool(w, v); }
static inline void kc_json_khex(kc_json *w, const char *k, uint64_t v) { kc_json_key(w, k); kc_json_hex(w, v); }
static inline void kc_json_kdouble(kc_json *w, const char *k, const char *fmt, double v) { kc_json_key(w, k); kc_json_double(w, fmt, v); }
/* [a, b, c] of unsigned ints (grid, block, cluster) */
static inline void kc_json_kdim3(kc_json *w, const char *k, unsigned a, unsigned b, unsigned c) {
  kc_json_key(w, k);
  fprintf(kc_json_value(w), "[%u,%u,%u]", a, b, c);
}
#endif
