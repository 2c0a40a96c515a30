/* json_main.c: writes one JSON document through c/common/kc_json.h for test/cpu/kc-json.test.ts.
 * argv[1..]: strings written as the array "args" (the test passes names with quotes, backslashes,
 * control bytes and UTF-8). Build: gcc -std=gnu11 -Wall -Wextra -Werror -Ic -o json_main json_main.c */
#include <math.h>
#include "kc_json.h"

int main(int argc, char **argv) {
  kc_json j, *w = &j;
  kc_json_init(w, stdout);
  kc_json_begin_object(w);
  kc_json_key(w, "args");
  kc_json_begin_array(w);
  for (int i = 1; i < argc; i++) kc_json_string(w, argv[i]);
  kc_json_end_array(w);
  kc_json_kstr(w, "control", "a\x01\x1f\t\n\r\"\\b");
  kc_json_kstr(w, "null_string", NULL);
  kc_json_ku64(w, "u64max", UINT64_MAX);
  kc_json_ki64(w, "i64min", INT64_MIN);
  kc_json_khex(w, "va", 0x7f00deadbeefull);
  unsigned char bytes[3] = {0x00, 0xab, 0x10};
  kc_json_key(w, "bytes");
  kc_json_hexbytes(w, bytes, sizeof bytes);
  kc_json_kbool(w, "yes", 1);
  kc_json_kbool(w, "no", 0);
  kc_json_key(w, "nothing");
  kc_json_null(w);
  kc_json_kdouble(w, "us", "%.1f", 12.345);
  kc_json_kdouble(w, "nan", "%.1f", NAN);
  kc_json_kdouble(w, "inf", "%.3f", INFINITY);
  kc_json_kdim3(w, "grid", 1, 2, 3);
  kc_json_key(w, "nested");
  kc_json_begin_array(w);
  kc_json_begin_object(w);
  kc_json_end_object(w);
  kc_json_begin_array(w);
  kc_json_end_array(w);
  kc_json_begin_object(w);
  kc_json_ku64(w, "a", 1);
  kc_json_key(w, "raw");
  fputs("{\"by\":\"another helper\"}", kc_json_value(w));
  kc_json_end_object(w);
  kc_json_end_array(w);
  kc_json_key(w, "empty_key_next");
  kc_json_string(w, "");
  kc_json_end_object(w);
  fputc('\n', stdout);
  return 0;
}
