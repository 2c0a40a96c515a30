/* Test driver for c/common/kc_collective.h: prints 1 or 0 per argument (is it a collective kernel's name). */
#include <stdio.h>
#include "../common/kc_collective.h"
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) printf("%d\n", kc_is_collective(argv[i]));
  return 0;
}
