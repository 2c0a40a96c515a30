/* The common matcher alone (c/common/kc_settings.c, kc_census.c, kc_match.c, built with plain
 * gcc): reads the KERNCAP_* settings from the environment as both capture libraries do, takes one
 * launch per NAME argument, in order, and prints one JSON line per launch the libraries would
 * capture ({"name","launch_index","match_index","target"}), each capture taken as written at once,
 * until every capture the settings ask for is written. test/cpu/c-match.test.ts compares its
 * output with what the CUDA and the HSA libraries capture. */
#include <stdio.h>
#include "../common/kc_census.h"
#include "../common/kc_json.h"
#include "../common/kc_match.h"
#include "../common/kc_settings.h"

int main(int argc, char **argv) {
  kc_settings_t s;
  char err[1200] = "";
  if (kc_settings_read(&s, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
  kc_census_t c = {.demangle = kc_find_demangler()};
  kc_match_t m = {.s = &s, .census = &c};
  for (int i = 1; i < argc; i++) {
    kc_kstat_t *k = kc_census_get(&c, argv[i]);
    c.launches++;
    if (!k) return 1;
    k->count++;
    if (!s.capture || !kc_match_mask(&m, k)) continue;
    long mi;
    int t = kc_match_pick(&m, k, &mi);
    if (t < 0) continue;
    fputs("{\"name\":", stdout);
    kc_json_str(stdout, argv[i]);
    printf(",\"launch_index\":%d,\"match_index\":%ld,\"target\":%d}\n", i - 1, mi, kc_settings_several(&s) && !s.capture_all ? t : -1);
    if (kc_match_captured(&m, t)) break;
  }
  return 0;
}
