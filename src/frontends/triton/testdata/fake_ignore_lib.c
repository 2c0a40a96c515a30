/* Stands in for the CUDA capture library in the shim's CPU test: logs each
 * kerncap_set_ignore_launches(on) call as a line "on" to $FAKE_IGNORE_LOG. */
#include <stdio.h>
#include <stdlib.h>
void kerncap_set_ignore_launches(int on) {
  FILE *f = fopen(getenv("FAKE_IGNORE_LOG"), "a");
  if (f) { fprintf(f, "%d\n", on); fclose(f); }
}
