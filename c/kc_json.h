/* kc_json.h — the JSON string writer both capture libraries use for raw.json and kernels.json. */
#ifndef KC_JSON_H
#define KC_JSON_H
#include <stdio.h>

/* Write s as a JSON string literal: quotes and backslashes escaped, control bytes as \u00XX. */
static inline void kc_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}
#endif
