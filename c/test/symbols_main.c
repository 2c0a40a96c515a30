/* Test driver for kc_symbols.h: prints the data-object symbols of a module image for an SM,
 * one per line, then "skipped N". Usage: symbols_main FILE SM */
#include <stdio.h>
#include "../cuda/kc_symbols.h"

static void print_name(const char *name, void *ud) {
  (void)ud;
  printf("%s\n", name);
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 2;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n);
  if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) return 2;
  int skipped = 0;
  kc_module_objects(b, (size_t)n, (unsigned)atoi(argv[2]), print_name, NULL, &skipped);
  printf("skipped %d\n", skipped);
  return 0;
}
