/* kc_symbols.h — names of the data objects (module globals: __device__ / __constant__ variables)
 * in a CUDA module image, for the capture library (kerncap_cuda.c). Header-only, no allocation
 * beyond one decompression buffer per call.
 *
 * Input: the image the application handed to the driver: a cubin (ELF64) or a fatbin container
 * (layout in src/codeobj/fatbin.ts, the TS reader of the same format). For a fatbin, the cubin
 * entries for the device's SM are read (uncompressed, LZ4-block or zstd; the decompressors are
 * libzstd.so.1 / liblz4.so.1 loaded at run time, and an entry they cannot read is skipped and
 * counted in *skipped).
 * Output: fn(name, ud) once per STT_OBJECT symbol with a size, any binding (static __device__
 * variables are local symbols); the caller asks the driver (cuModuleGetGlobal) which are globals.
 */
#ifndef KC_SYMBOLS_H
#define KC_SYMBOLS_H
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*kc_symbol_fn)(const char *name, void *ud);

static inline uint64_t kc_rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Every sized STT_OBJECT symbol of an ELF64 little-endian image. Returns how many were reported,
 * -1 when the bytes are not a well-formed ELF64 image. */
static inline int kc_elf_objects(const unsigned char *b, size_t n, kc_symbol_fn fn, void *ud) {
  if (n < 64 || memcmp(b, "\x7f" "ELF", 4) || b[4] != 2 || b[5] != 1) return -1;
  uint64_t shoff = kc_rd(b + 40, 8), shentsize = kc_rd(b + 58, 2), shnum = kc_rd(b + 60, 2);
  if (shentsize < 64 || shoff > n || shnum > (n - shoff) / shentsize) return -1;
  int found = 0;
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char *sh = b + shoff + i * shentsize;
    if (kc_rd(sh + 4, 4) != 2 /* SHT_SYMTAB */) continue;
    uint64_t off = kc_rd(sh + 24, 8), size = kc_rd(sh + 32, 8), link = kc_rd(sh + 40, 4), ent = kc_rd(sh + 56, 8);
    if (ent < 24 || off > n || size > n - off || link >= shnum) continue;
    const unsigned char *strsh = b + shoff + link * shentsize;
    uint64_t stroff = kc_rd(strsh + 24, 8), strsize = kc_rd(strsh + 32, 8);
    if (stroff > n || strsize > n - stroff || strsize == 0) continue;
    const char *strtab = (const char *)b + stroff;
    for (uint64_t s = 0; s + ent <= size; s += ent) {
      const unsigned char *sym = b + off + s;
      uint64_t name = kc_rd(sym, 4), info = sym[4], shndx = kc_rd(sym + 6, 2), ssize = kc_rd(sym + 16, 8);
      if ((info & 0xf) != 1 /* STT_OBJECT */ || ssize == 0 || shndx == 0 || name >= strsize) continue;
      if (!memchr(strtab + name, 0, strsize - name)) continue;
      fn(strtab + name, ud);
      found++;
    }
  }
  return found;
}

/* Decompress one fatbin payload into a malloc'd buffer of raw bytes (NULL when impossible). */
static inline unsigned char *kc_inflate(const unsigned char *src, size_t n, size_t raw, int zstd) {
  static void *zlib, *lz4lib;
  static size_t (*zstd_decompress)(void *, size_t, const void *, size_t);
  static unsigned (*zstd_is_error)(size_t);
  static int (*lz4_decompress)(const char *, char *, int, int);
  if (raw == 0 || raw > ((size_t)1 << 31) || n > ((size_t)1 << 31)) return NULL;
  unsigned char *out = malloc(raw);
  if (!out) return NULL;
  if (zstd) {
    if (!zlib && (zlib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL))) {
      zstd_decompress = (__typeof__(zstd_decompress))dlsym(zlib, "ZSTD_decompress");
      zstd_is_error = (__typeof__(zstd_is_error))dlsym(zlib, "ZSTD_isError");
    }
    if (zstd_decompress && zstd_is_error) {
      size_t r = zstd_decompress(out, raw, src, n);
      if (!zstd_is_error(r) && r == raw) return out;
    }
  } else {
    if (!lz4lib && (lz4lib = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL)))
      lz4_decompress = (__typeof__(lz4_decompress))dlsym(lz4lib, "LZ4_decompress_safe");
    if (lz4_decompress && lz4_decompress((const char *)src, (char *)out, (int)n, (int)raw) == (int)raw) return out;
  }
  free(out);
  return NULL;
}

/* Data objects of a module image for SM `sm` (e.g. 90). A fatbin may hold several cubins for
 * that SM (one per variant, or per linked object): all are read. Returns the symbols reported;
 * *skipped counts cubin entries for that SM that could not be read (compressed without a
 * decompressor, or malformed). */
static inline int kc_module_objects(const unsigned char *b, size_t n, unsigned sm, kc_symbol_fn fn, void *ud, int *skipped) {
  *skipped = 0;
  if (n >= 4 && !memcmp(b, "\x7f" "ELF", 4)) {
    int r = kc_elf_objects(b, n, fn, ud);
    if (r < 0) (*skipped)++;
    return r < 0 ? 0 : r;
  }
  int found = 0;
  size_t c = 0;
  while (c + 16 <= n) {
    if (b[c] == 0) { c++; continue; } /* padding between containers */
    if (kc_rd(b + c, 4) != 0xba55ed50u) break;
    uint64_t hdr = kc_rd(b + c + 6, 2), body = kc_rd(b + c + 8, 8);
    if (hdr > n - c || body > n - c - hdr) break;
    size_t e = c + hdr, end = c + hdr + body;
    while (e + 64 <= end) {
      uint64_t kind = kc_rd(b + e, 2), eh = kc_rd(b + e + 4, 4), payload = kc_rd(b + e + 8, 8);
      uint64_t csize = kc_rd(b + e + 16, 4), esm = kc_rd(b + e + 28, 4), flags = kc_rd(b + e + 40, 8), raw = kc_rd(b + e + 56, 8);
      if (eh < 64 || eh > end - e || payload > end - e - eh) break;
      const unsigned char *p = b + e + eh;
      if (kind == 2 && esm == sm) {
        int zstd = (flags & 0x8000) != 0, lz4 = (flags & 0x2000) != 0;
        int r = -1;
        if (!zstd && !lz4) r = kc_elf_objects(p, payload, fn, ud);
        else {
          unsigned char *img = kc_inflate(p, csize ? csize : payload, raw, zstd);
          if (img) { r = kc_elf_objects(img, raw, fn, ud); free(img); }
        }
        if (r < 0) (*skipped)++;
        else found += r;
      }
      e += eh + payload;
    }
    c = end;
  }
  return found;
}
#endif
