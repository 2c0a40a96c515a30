/* kc_fatbin.h — the application's fatbin that holds a loaded cubin, so that a capture keeps the
 * PTX of the module where the application's image had it. Header-only, for the capture library
 * (kerncap_cuda.c records images at load, kc_capture.c looks the kernel's cubin up at capture) and
 * its test (test/cpu/c-fatbin.test.ts, through c/test/launch_main.c).
 *
 * Why: CUPTI's module-loaded callback hands over the one cubin the driver picked for the GPU, not
 * the image the application handed it; PTX beside that cubin (what lets the module run on another
 * architecture) is only in the application's image. Two places hold such images: the images given
 * to cuModuleLoadData/Ex, cuModuleLoadFatBinary and cuLibraryLoadData (their address, recorded at
 * the call's entry when the image is a fatbin with PTX; for cuModuleLoad and cuLibraryLoadFromFile
 * a copy of the file), and the `.nv_fatbin` sections of the
 * loaded ELF objects (the CUDA runtime's registered fatbins, whatever path the runtime loads them
 * by). An image is read through process_vm_readv, so one the application freed since is an error
 * (EFAULT), never a crash.
 *
 * Fatbin layout: src/codeobj/fatbin.ts (the TS reader of the same format); the entry fields used
 * here are the ones c/cuda/kc_symbols.h reads.
 */
#ifndef KC_FATBIN_H
#define KC_FATBIN_H
/* needs _GNU_SOURCE (process_vm_readv, memmem), defined by the includer before any header */
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "kc_symbols.h"

#define KC_FATBIN_MAGIC 0xba55ed50u
#define KC_FATBIN_WRAPPER_MAGIC 0x466243b1u /* __fatBinC_Wrapper_t: magic, version, then the fatbin's address */
#define KC_FATBIN_MAX ((uint64_t)1 << 32)   /* a container larger than 4 GiB is taken for garbage */

/* Read n bytes at addr of this process; 0 when all were read (a freed or unmapped range: -1). */
static inline int kc_peek(uint64_t addr, void *buf, size_t n) {
  if (!n) return 0;
  struct iovec local = {buf, n}, remote = {(void *)(uintptr_t)addr, n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* The fatbin container an image handed to the driver starts with: its address, its size
 * (header + body) and whether an entry is PTX. Follows a __fatBinC_Wrapper_t to its fatbin.
 * Returns 0 when the image is no fatbin (a cubin, PTX text) or cannot be read. */
static inline uint64_t kc_fatbin_at(uint64_t image, uint64_t *addr, int *has_ptx) {
  unsigned char h[16];
  *has_ptx = 0;
  if (!image || kc_peek(image, h, 16)) return 0;
  if (kc_rd(h, 4) == KC_FATBIN_WRAPPER_MAGIC) {
    image = kc_rd(h + 8, 8);
    if (!image || kc_peek(image, h, 16)) return 0;
  }
  uint64_t hdr = kc_rd(h + 6, 2), body = kc_rd(h + 8, 8);
  if (kc_rd(h, 4) != KC_FATBIN_MAGIC || hdr < 16 || body > KC_FATBIN_MAX) return 0;
  for (uint64_t e = hdr; e + 64 <= hdr + body;) {
    unsigned char eh[64];
    if (kc_peek(image + e, eh, 64)) return 0;
    uint64_t kind = kc_rd(eh, 2), ehs = kc_rd(eh + 4, 4), payload = kc_rd(eh + 8, 8);
    if (ehs < 64 || payload > body) break;
    if (kind == 1) *has_ptx = 1;
    e += ehs + payload;
  }
  *addr = image;
  return hdr + body;
}

/* How the container at addr (size bytes) holds `cubin` (n bytes, as CUPTI handed it): 1 when an
 * ELF entry is that cubin byte for byte (decompressed where the entry is compressed); 2 when no
 * entry is, but an ELF entry of the same size names `kernel` in its symbols (the driver may touch
 * the image it loads); 0 when neither, or the container holds no PTX (nothing to keep). */
static inline int kc_fatbin_holds(uint64_t addr, uint64_t size, const unsigned char *cubin, size_t n, const char *kernel) {
  unsigned char h[16];
  if (size < 16 || kc_peek(addr, h, 16) || kc_rd(h, 4) != KC_FATBIN_MAGIC) return 0;
  uint64_t hdr = kc_rd(h + 6, 2), end = hdr + kc_rd(h + 8, 8);
  if (hdr < 16 || end > size) return 0;
  int ptx = 0, best = 0;
  size_t kl = kernel ? strlen(kernel) : 0;
  for (uint64_t e = hdr; e + 64 <= end;) {
    unsigned char eh[64];
    if (kc_peek(addr + e, eh, 64)) return 0;
    uint64_t kind = kc_rd(eh, 2), ehs = kc_rd(eh + 4, 4), payload = kc_rd(eh + 8, 8);
    uint64_t csize = kc_rd(eh + 16, 4), flags = kc_rd(eh + 40, 8), raw = kc_rd(eh + 56, 8);
    if (ehs < 64 || ehs > end - e || payload > end - e - ehs) break;
    if (kind == 1) ptx = 1;
    int zstd = (flags & 0x8000) != 0, lz4 = (flags & 0x2000) != 0;
    /* an uncompressed payload is padded (to 8 bytes): its size is the cubin's or a little more */
    uint64_t full = zstd || lz4 ? raw : payload;
    if (kind == 2 && best != 1 && full >= n && full - n < 64) {
      unsigned char *stored = malloc(payload ? payload : 1), *img = NULL;
      if (stored && !kc_peek(addr + e + ehs, stored, payload)) {
        img = zstd || lz4 ? kc_inflate(stored, csize ? csize : payload, raw, zstd) : stored;
        if (img && !memcmp(img, cubin, n)) best = 1;
        else if (img && kl && memmem(img, full, kernel, kl + 1)) best = 2; /* the name with its NUL, as in .strtab */
      }
      if (img && img != stored) free(img);
      free(stored);
    }
    e += ehs + payload;
  }
  return ptx ? best : 0;
}

/* The `.nv_fatbin` section of one loaded ELF object (read from its file on disk), as an address
 * range of this process. */
typedef struct {
  uint64_t addr, size;
} kc_range_t;
#define KC_MAX_SECTIONS 256 /* objects with a .nv_fatbin; out[] holds as many, zeroed by the caller */

static inline int kc_nv_fatbin_of(struct dl_phdr_info *info, size_t sz, void *ud) {
  (void)sz;
  kc_range_t *out = ud;
  const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  unsigned char eh[64];
  uint64_t shoff, shentsize, shnum, shstrndx;
  unsigned char *sh = NULL;
  char *names = NULL;
  if (pread(fd, eh, 64, 0) != 64 || memcmp(eh, "\x7f" "ELF", 4) || eh[4] != 2) goto done;
  shoff = kc_rd(eh + 40, 8), shentsize = kc_rd(eh + 58, 2), shnum = kc_rd(eh + 60, 2), shstrndx = kc_rd(eh + 62, 2);
  if (shentsize < 64 || shnum == 0 || shnum > 65535 || shstrndx >= shnum) goto done;
  sh = malloc(shnum * shentsize);
  if (!sh || pread(fd, sh, shnum * shentsize, (off_t)shoff) != (ssize_t)(shnum * shentsize)) goto done;
  uint64_t stroff = kc_rd(sh + shstrndx * shentsize + 24, 8), strsize = kc_rd(sh + shstrndx * shentsize + 32, 8);
  if (strsize == 0 || strsize > (1u << 24) || !(names = malloc(strsize + 1)) || pread(fd, names, strsize, (off_t)stroff) != (ssize_t)strsize) goto done;
  names[strsize] = 0;
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char *s = sh + i * shentsize;
    uint64_t name = kc_rd(s, 4), flags = kc_rd(s + 8, 8), va = kc_rd(s + 16, 8), size = kc_rd(s + 32, 8);
    if (name < strsize && !strcmp(names + name, ".nv_fatbin") && (flags & 2 /* SHF_ALLOC */) && size) {
      for (size_t k = 0; k < KC_MAX_SECTIONS; k++) /* the rest are left out */
        if (!out[k].addr) { out[k] = (kc_range_t){info->dlpi_addr + va, size}; break; }
    }
  }
done:
  free(names);
  free(sh);
  close(fd);
  return 0;
}

/* The containers of a `.nv_fatbin` range, back to back with zero padding between them: calls
 * fn(address, size, ud) for each until fn returns non-zero (returned). */
static inline int kc_each_container(kc_range_t r, int (*fn)(uint64_t, uint64_t, void *), void *ud) {
  uint64_t c = 0;
  while (c + 16 <= r.size) {
    unsigned char h[16];
    if (kc_peek(r.addr + c, h, 16)) return 0;
    if (kc_rd(h, 8) == 0) { c += 8; continue; } /* padding */
    uint64_t hdr = kc_rd(h + 6, 2), body = kc_rd(h + 8, 8);
    if (kc_rd(h, 4) != KC_FATBIN_MAGIC || hdr < 16 || body > r.size - c - hdr) return 0;
    int v = fn(r.addr + c, hdr + body, ud);
    if (v) return v;
    c += hdr + body;
  }
  return 0;
}
#endif
