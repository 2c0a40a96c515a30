/*
 * repro_common.h: what the exported program does the same on every GPU runtime: the export's files
 * (-d), the memory images' stored chunks, the before state restored into a range, the chunks the
 * app changed (put back between timed launches), and each range judged against the app's after
 * state (bit for bit, or element-wise within ATOL + RTOL * |expected| for float types, or as a
 * multiset of its elements: the same elements in any order).
 *
 * Written by `kerncap export`, included by repro.c after capture.h. The program defines the three
 * device accesses below with its runtime's copies; every call here either completes or exits 2
 * (verify_data: 3, a data file that differs from what the export recorded).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Device memory at `va` (a captured VA, or a module global's address): zero n bytes, copy n bytes
 * from or to the host. Defined by repro.c. */
static void dev_zero(unsigned long long va, unsigned long long n);
static void dev_write(unsigned long long va, const void *src, size_t n);
static void dev_read(void *dst, unsigned long long va, size_t n);

static const char *root_dir = "."; /* the export folder: -d */

/* Text from the capture (the kernel's and the device's names, a global's name, a file name) as it
 * may reach a terminal: printable ASCII as it is, every other byte as \xNN, so that an escape
 * sequence, a C1 control or a bidi override in a received capture is shown, never obeyed. Up to
 * four results live at once (one printf's arguments); a longer text is cut with "...". */
static const char *shown(const char *s) {
  static char ring[4][1024];
  static unsigned k;
  char *o = ring[k++ & 3];
  size_t n = 0;
  for (; *s && n + 8 < sizeof ring[0]; s++) {
    unsigned char c = (unsigned char)*s;
    if (c >= 0x20 && c < 0x7f) o[n++] = (char)c;
    else n += (size_t)snprintf(o + n, 5, "\\x%02x", c);
  }
  if (*s) memcpy(o + n, "...", 3), n += 3;
  o[n] = 0;
  return o;
}

static void die(const char *what, const char *detail) {
  fprintf(stderr, "error: %s%s%s\n", what, detail ? ": " : "", detail ? shown(detail) : "");
  exit(2);
}

static char *data_path(const char *rel) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", root_dir, rel);
  return path;
}

/* A whole number from 0 to 1000000 given to an option (-n, -g): anything else is a usage error (exit 2),
 * said before the driver is asked for anything. */
static int count_arg(const char *opt, const char *text) {
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (!*text || *end || v < 0 || v > 1000000) {
    fprintf(stderr, "error: %s %s: give a whole number from 0 to 1000000\n", opt, shown(text));
    exit(2);
  }
  return (int)v;
}

/* A command-line argument the program does not take, named on stderr before the usage: an option
 * of `with_value` (the letters of -X VALUE options) given last without its value, another option,
 * or a stray word. */
static void bad_argument(const char *a, const char *with_value) {
  int needs_value = a[0] == '-' && a[1] && !a[2] && strchr(with_value, a[1]);
  fprintf(stderr, "error: %s: %s\n", shown(a), needs_value ? "the option needs a value" : a[0] == '-' ? "unknown option" : "unexpected argument");
}

/* The export's data files are there and readable (-d): said before the driver is asked for anything. */
static void check_data(const char *const *rels, int n) {
  for (int i = 0; i < n; i++) {
    FILE *f = fopen(data_path(rels[i]), "rb");
    if (!f) {
      fprintf(stderr, "error: cannot open %s: not an export folder? (-d EXPORT_DIR: the folder kerncap export wrote, which holds data/)\n", shown(data_path(rels[i])));
      exit(2);
    }
    fclose(f);
  }
}

static FILE *open_data(const char *rel) {
  FILE *f = fopen(data_path(rel), "rb");
  if (!f) die("cannot open", data_path(rel));
  return f;
}

static void read_at(FILE *f, unsigned long long off, void *buf, size_t n, const char *name) {
  if (n && (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, f) != n)) die("short read in", name);
}

static unsigned char *scratch_buf;
static size_t scratch_bytes;
/* One reusable host buffer of at least n bytes. */
static unsigned char *scratch(size_t n) {
  if (n > scratch_bytes) {
    free(scratch_buf);
    scratch_buf = malloc(n);
    scratch_bytes = n;
    if (!scratch_buf) die("out of host memory", NULL);
  }
  return scratch_buf;
}

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  fseeko(f, 0, SEEK_END);
  *n = (size_t)ftello(f);
  fseeko(f, 0, SEEK_SET);
  char *b = malloc(*n + 1);
  if (!b || fread(b, 1, *n, f) != *n) die("cannot read", path);
  b[*n] = 0; /* PTX text must end with a NUL */
  fclose(f);
  return b;
}

/* ---- the data files' checksums ------------------------------------------------------------ */

/* kc64, kerncap's chunk checksum (kerncap's c/common/kc_hash.h, "kc64/1"): words w_j, the
 * little-endian u32 of bytes [4j, 4j+4) zero-padded past len; t_j = fmix32(w_j ^ (j*0x9E3779B1 +
 * 0x7F4A7C15)); A = sum t_j, B = sum t_j*(2j+1) (mod 2^32); kc64 = fmix32(A ^ len) << 32 |
 * fmix32(B + len*0x85EBCA6B). Against accidental damage, not a cryptographic hash. */
static uint32_t kc_fmix32(uint32_t h) {
  h ^= h >> 16, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
  return h;
}
static unsigned long long kc_hash64(const unsigned char *b, size_t len) {
  uint32_t A = 0, B = 0;
  for (size_t j = 0; j < (len + 3) / 4; j++) {
    uint32_t w = 0;
    for (size_t k = 0; k < 4 && j * 4 + k < len; k++) w |= (uint32_t)b[j * 4 + k] << (8 * k);
    uint32_t t = kc_fmix32(w ^ ((uint32_t)j * 0x9E3779B1u + 0x7F4A7C15u));
    A += t;
    B += t * (uint32_t)(2 * j + 1);
  }
  return ((unsigned long long)kc_fmix32(A ^ (uint32_t)len) << 32) | kc_fmix32(B + (uint32_t)len * 0x85EBCA6Bu);
}

/* Exit status of a data file that differs from what the export recorded (README.md). */
#define EXIT_DAMAGED 3

static void damaged(const char *rel, const char *what) {
  fprintf(stderr, "error: %s is damaged: %s (the export recorded its size and checksums; a damaged file would replay into a false MISMATCH)\n", shown(rel), what);
  fprintf(stderr, "  Copy or unpack the export again from its source; `kerncap inspect data --verify` checks the capture in data/ the same way.\n");
  exit(EXIT_DAMAGED);
}

/* Every data file against the size and kc64 checksums recorded at the export (capture.h
 * DATA_FILES, DATA_DIGESTS), before the GPU is asked for anything: exit EXIT_DAMAGED naming the
 * first file that differs. Reads every stored byte once. */
static void verify_data(void) {
  char what[256];
  for (int i = 0; i < N_DATA_FILES; i++) {
    FILE *f = fopen(data_path(DATA_FILES[i].path), "rb");
    if (!f && DATA_FILES[i].bytes == 0) continue; /* an empty memory image may be absent */
    if (!f) die("cannot open", data_path(DATA_FILES[i].path));
    unsigned long long size = fseeko(f, 0, SEEK_END) == 0 ? (unsigned long long)ftello(f) : 0;
    if (size != DATA_FILES[i].bytes) {
      snprintf(what, sizeof what, "%llu bytes, the export recorded %llu (%s)", size, DATA_FILES[i].bytes, size < DATA_FILES[i].bytes ? "truncated" : "appended to");
      damaged(DATA_FILES[i].path, what);
    }
    for (int k = 0; k < N_DATA_DIGESTS; k++) {
      const struct kc_digest *d = &DATA_DIGESTS[k];
      if (d->file != i) continue;
      unsigned char *b = scratch(d->length ? (size_t)d->length : 1);
      read_at(f, d->offset, b, (size_t)d->length, DATA_FILES[i].path);
      if (kc_hash64(b, (size_t)d->length) != d->kc64) {
        snprintf(what, sizeof what, "bytes %llu..%llu differ from their checksum (kc64 %016llx, recorded %016llx)", d->offset, d->offset + d->length,
                 kc_hash64(b, (size_t)d->length), d->kc64);
        damaged(DATA_FILES[i].path, what);
      }
    }
    fclose(f);
  }
}

/* ---- the before state ---------------------------------------------------------------- */

/* Bytes of a stored run: its chunks, the range's last chunk cut at the range's end. */
static unsigned long long run_bytes(const struct kc_range *r, const struct kc_extent *e) {
  unsigned long long start = e->chunk * CHUNK_BYTES, end = (e->chunk + e->count) * CHUNK_BYTES;
  return (end < r->size ? end : r->size) - start;
}

/* Zero [dst, dst + size), then copy the range's stored before chunks (64 MiB at a time). */
static void restore_range(FILE *before, const struct kc_range *r, unsigned long long dst) {
  dev_zero(dst, r->size);
  for (int k = r->before; k < r->before + r->n_before; k++) {
    unsigned long long bytes = run_bytes(r, &EXTENTS[k]);
    for (unsigned long long done = 0; done < bytes;) {
      size_t n = bytes - done < (64u << 20) ? (size_t)(bytes - done) : (64u << 20);
      unsigned char *b = scratch(n);
      read_at(before, EXTENTS[k].offset + done, b, n, BEFORE_FILE);
      dev_write(dst + EXTENTS[k].chunk * CHUNK_BYTES + done, b, n);
      done += n;
    }
  }
}

/* ---- the chunks the app changed ---------------------------------------------------------- */

/* Bytes of every stored after run of the regions: the device copy that puts them back between timed launches. */
static unsigned long long changed_bytes(void) {
  unsigned long long bytes = 0;
  for (int i = 0; i < N_REGIONS; i++)
    for (int k = REGIONS[i].after; k < REGIONS[i].after + REGIONS[i].n_after; k++) bytes += run_bytes(&REGIONS[i], &EXTENTS[k]);
  return bytes;
}

/* BODY once per stored after run of the regions, in order, with `va` (the run's first byte on the
 * device, unsigned long long), `n` (its bytes) and `off` (where it lies in the changed_bytes() copy). */
#define EACH_CHANGED_RUN(BODY)                                                                     \
  do {                                                                                             \
    unsigned long long off = 0;                                                                    \
    for (int i = 0; i < N_REGIONS; i++)                                                            \
      for (int k = REGIONS[i].after; k < REGIONS[i].after + REGIONS[i].n_after; k++) {             \
        unsigned long long va = REGIONS[i].va + EXTENTS[k].chunk * CHUNK_BYTES;                   \
        unsigned long long n = run_bytes(&REGIONS[i], &EXTENTS[k]);                               \
        BODY;                                                                                      \
        off += n;                                                                                  \
      }                                                                                            \
  } while (0)

/* ---- judging ----------------------------------------------------------------------------- */

static float half_to_float(unsigned short h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

static double element(const unsigned char *p, int dtype) {
  float f;
  double d;
  unsigned short h;
  unsigned int u;
  switch (dtype) {
    case DT_F32: memcpy(&f, p, 4); return f;
    case DT_F64: memcpy(&d, p, 8); return d;
    case DT_F16: memcpy(&h, p, 2); return half_to_float(h);
    case DT_BF16: memcpy(&h, p, 2); u = (unsigned int)h << 16; memcpy(&f, &u, 4); return f;
  }
  return 0;
}

static const int DT_WIDTH[] = {[DT_BYTES_EXACT] = 1, [DT_F32] = 4, [DT_F64] = 8, [DT_F16] = 2, [DT_BF16] = 2};

struct verdict { unsigned long long differing, over, first_diff; double max_abs; int same_as_before; };

/* Compare n bytes got[] with want[] at byte offset `at` of a range of element type dtype. */
static void judge(struct verdict *v, const unsigned char *got, const unsigned char *want, size_t n, unsigned long long at, int dtype) {
  if (!memcmp(got, want, n)) return;
  int w = DT_WIDTH[dtype];
  for (size_t i = 0; i < n; i += w) {
    size_t k = i + w <= n ? (size_t)w : n - i;
    if (!memcmp(got + i, want + i, k)) continue;
    if (v->differing++ == 0) v->first_diff = at + i;
    if (dtype == DT_BYTES_EXACT || k < (size_t)w) { v->over++; continue; }
    double g = element(got + i, dtype), e = element(want + i, dtype), err = fabs(g - e);
    if (!(err <= ATOL + RTOL * fabs(e))) v->over++; /* NaN against a number is over */
    if (err > v->max_abs || err != err) v->max_abs = err;
  }
}

/* The state a chunk must hold: after.bin where the app changed it, else before.bin, else zeros. */
static void expected_chunk(const struct kc_range *r, unsigned long long c, size_t len, int after_state, FILE *before, FILE *after, unsigned char *out) {
  memset(out, 0, len);
  for (int pass = after_state ? 1 : 0; pass >= 0; pass--) {
    int first = pass ? r->after : r->before, n = pass ? r->n_after : r->n_before;
    for (int k = first; k < first + n; k++) {
      const struct kc_extent *e = &EXTENTS[k];
      if (c < e->chunk || c >= e->chunk + e->count) continue;
      read_at(pass ? after : before, e->offset + (c - e->chunk) * CHUNK_BYTES, out, len, pass ? AFTER_FILE : BEFORE_FILE);
      return;
    }
  }
}

/* Compare one range on the device with the app's after state; print and return 1 on a mismatch. */
static int compare_range(const struct kc_range *r, unsigned long long at, FILE *before, FILE *after, const char *what) {
  struct verdict v = {0, 0, 0, 0, 1};
  unsigned char *got = scratch(3 * CHUNK_BYTES), *want = got + CHUNK_BYTES, *prior = want + CHUNK_BYTES;
  for (unsigned long long c = 0; c * CHUNK_BYTES < r->size; c++) {
    size_t len = (size_t)(r->size - c * CHUNK_BYTES < CHUNK_BYTES ? r->size - c * CHUNK_BYTES : CHUNK_BYTES);
    dev_read(got, at + c * CHUNK_BYTES, len);
    expected_chunk(r, c, len, 1, before, after, want);
    judge(&v, got, want, len, c * CHUNK_BYTES, r->dtype);
    if (r->changed && v.same_as_before) {
      expected_chunk(r, c, len, 0, before, after, prior);
      v.same_as_before = !memcmp(got, prior, len);
    }
  }
  /* a region the app changed that the replay left as it was is no match, whatever the tolerance */
  int unchanged = r->changed && v.same_as_before;
  int bad = v.over > 0 || unchanged;
  if (bad) {
    printf("  MISMATCH %s 0x%llx (%llu bytes, %s): ", shown(what), r->va, r->size, shown(r->type));
    if (unchanged) printf("the app changed it, the replay left it as it was\n");
    else printf("%llu elements differ, the first at byte %llu; %llu over tolerance, max abs error %g\n", v.differing, v.first_diff, v.over, v.max_abs);
  } else if (v.differing) {
    printf("  within tolerance %s 0x%llx (%llu bytes, %s): %llu elements differ, max abs error %g\n", shown(what), r->va, r->size, shown(r->type), v.differing, v.max_abs);
  }
  return bad;
}

/* Element comparisons by bit pattern (unsigned, of 1, 2, 4 or 8 bytes), for qsort. */
#define KC_CMP(NAME, T)                                   \
  static int NAME(const void *a, const void *b) {         \
    T x, y;                                               \
    memcpy(&x, a, sizeof x);                              \
    memcpy(&y, b, sizeof y);                              \
    return (x > y) - (x < y);                             \
  }
KC_CMP(cmp_bits8, unsigned char)
KC_CMP(cmp_bits16, unsigned short)
KC_CMP(cmp_bits32, unsigned int)
KC_CMP(cmp_bits64, unsigned long long)

/* Elements of a without a partner in b plus those of b without one in a, both n bytes of elements
 * of w bytes compared as bit patterns (-0 is not +0; a NaN equals the same NaN bits); a trailing
 * partial element is compared bytewise and counts as one element of each. Sorts a and b in place.
 * kerncap's own multiset judging, the same count (src/replay/envelope.ts multisetDifference). */
static unsigned long long multiset_difference(unsigned char *a, unsigned char *b, size_t n, int w) {
  size_t count = n / (size_t)w, tail = n - count * (size_t)w, i = 0, j = 0;
  unsigned long long unmatched = 0;
  if (tail && memcmp(a + count * w, b + count * w, tail)) unmatched += 2;
  int (*cmp)(const void *, const void *) = w == 8 ? cmp_bits64 : w == 4 ? cmp_bits32 : w == 2 ? cmp_bits16 : cmp_bits8;
  qsort(a, count, (size_t)w, cmp);
  qsort(b, count, (size_t)w, cmp);
  while (i < count && j < count) {
    int c = cmp(a + i * w, b + j * w);
    if (!c) i++, j++;
    else if (c < 0) unmatched++, i++;
    else unmatched++, j++;
  }
  return unmatched + (count - i) + (count - j);
}

/* Compare one range as a multiset of its elements with the app's after state (the whole range on
 * the host twice); print and return 1 on a mismatch. The same elements in another order match. */
static int compare_multiset(const struct kc_range *r, unsigned long long at, FILE *before, FILE *after, const char *what) {
  size_t size = (size_t)r->size;
  unsigned char *got = malloc(size ? size : 1), *want = malloc(size ? size : 1);
  if (!got || !want) die("out of host memory", NULL);
  for (unsigned long long c = 0; c * CHUNK_BYTES < r->size; c++) {
    size_t len = (size_t)(r->size - c * CHUNK_BYTES < CHUNK_BYTES ? r->size - c * CHUNK_BYTES : CHUNK_BYTES);
    dev_read(got + c * CHUNK_BYTES, at + c * CHUNK_BYTES, len);
    expected_chunk(r, c, len, 1, before, after, want + c * CHUNK_BYTES);
  }
  unsigned long long unmatched = 0;
  if (memcmp(got, want, size)) {
    unmatched = multiset_difference(got, want, size, r->width > 0 ? r->width : 1);
    if (unmatched)
      printf("  MISMATCH %s 0x%llx (%llu bytes, %s, as a multiset): %llu elements without a partner in the app's\n", shown(what), r->va, r->size,
             shown(r->type), unmatched);
    else printf("  multiset-equal %s 0x%llx (%llu bytes, %s): the app's elements in another order\n", shown(what), r->va, r->size, shown(r->type));
  }
  free(got);
  free(want);
  return unmatched > 0;
}

/* Every region, and every module global at its address in the loaded module (`global_at`; 0: left
 * out), judged against the app's after state; 1 when one differs. */
static int compare_all(FILE *before, FILE *after, const unsigned long long *global_at) {
  int bad = 0;
  for (int i = 0; i < N_REGIONS; i++)
    bad |= (REGIONS[i].multiset ? compare_multiset : compare_range)(&REGIONS[i], REGIONS[i].va, before, after, "region");
  for (int i = 0; i < N_GLOBALS; i++)
    if (global_at[i]) bad |= compare_range(&GLOBALS[i], global_at[i], before, after, GLOBALS[i].name);
  return bad;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}
