/* Test driver for kc_sparse.h: for every size 1..40 and a few page-crossing sizes, writes a
 * buffer whose only non-zero byte is its last one at an odd file offset, reads the file back and
 * prints "ok" or the first failing size. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include "../kc_sparse.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  size_t sizes[48];
  size_t ns = 0;
  for (size_t s = 1; s <= 40; s++) sizes[ns++] = s;
  size_t big[] = {4095, 4096, 4097, 8191, 8193, 3 * 4096 + 5};
  for (size_t k = 0; k < sizeof big / sizeof *big; k++) sizes[ns++] = big[k];
  for (size_t k = 0; k < ns; k++) {
    size_t n = sizes[k];
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR, 0644);
    char *buf = calloc(n, 1), *back = calloc(n, 1);
    buf[n - 1] = 7;
    if (n > 4100) buf[100] = 3; /* a non-zero first page too */
    if (kc_write_sparse(fd, buf, n, 13) || ftruncate(fd, 13 + (off_t)n) || pread(fd, back, n, 13) != (ssize_t)n ||
        memcmp(buf, back, n)) {
      printf("size %zu: read back differs\n", n);
      return 1;
    }
    close(fd);
    free(buf);
    free(back);
  }
  printf("ok\n");
  return 0;
}
