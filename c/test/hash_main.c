/* Prints kc64 (c/common/kc_hash.h) of the file named by argv[1] taken at offset argv[2], length argv[3]:
 * "<16 hex> <nz>". test/cpu/format/kc64.test.ts compares it with the TypeScript implementation. */
#include "../common/kc_hash.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 2;
  long off = atol(argv[2]), len = atol(argv[3]);
  unsigned char *b = malloc(len ? len : 1);
  fseek(f, off, SEEK_SET);
  if (fread(b, 1, len, f) != (size_t)len) return 2;
  int nz = 0;
  uint64_t h = kc_hash64(b, len, &nz);
  printf("%016" PRIx64 " %d\n", h, nz);
  return 0;
}
