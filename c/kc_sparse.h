/* kc_sparse.h — write a buffer into a file at an offset, leaving all-zero pages as holes (the
 * memory images of a capture are sparse: untouched allocations cost no disk). Header-only.
 * Tested by src/format/sparse-write.test.ts through c/test/sparse_main.c. */
#ifndef KC_SPARSE_H
#define KC_SPARSE_H
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define KC_SPARSE_PAGE 4096u

/* 1 when all n bytes are zero (any n, any alignment: a 4-byte tail counts too). */
static int kc_all_zero(const char *p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    if (w) return 0;
  }
  for (; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* Write buf[0..n) at file offset off; runs of all-zero pages are skipped (they read back as zero
 * once the file is extended past them). Returns 0, or -1 with errno set. */
static int kc_write_sparse(int fd, const char *buf, size_t n, uint64_t off) {
  size_t i = 0;
  while (i < n) {
    size_t len = n - i < KC_SPARSE_PAGE ? n - i : KC_SPARSE_PAGE;
    if (kc_all_zero(buf + i, len)) { i += len; continue; }
    size_t j = i + len; /* extend the run of non-zero pages */
    while (j < n) {
      size_t l2 = n - j < KC_SPARSE_PAGE ? n - j : KC_SPARSE_PAGE;
      if (kc_all_zero(buf + j, l2)) break;
      j += l2;
    }
    size_t done = 0;
    while (done < j - i) {
      ssize_t w = pwrite(fd, buf + i + done, j - i - done, (off_t)(off + i + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      done += (size_t)w;
    }
    i = j;
  }
  return 0;
}
#endif
