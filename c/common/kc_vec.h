/* kc_vec.h — the one growable array of both capture libraries.
 *
 * KC_VEC(T) declares a struct {T *v; size_t n, cap;} (zero-initialized: empty). KC_VEC_PUSH appends
 * one element (capacity doubles from 16) and evaluates to 0, or -1 when the host is out of memory
 * (the array is then unchanged: the caller reports it through KC_FAIL). KC_VEC_FREE releases it.
 * Header-only; GNU C (statement expressions, __typeof__).
 */
#ifndef KC_VEC_H
#define KC_VEC_H
#include <stddef.h>
#include <stdlib.h>

#define KC_VEC(T) struct { T *v; size_t n, cap; }

#define KC_VEC_PUSH(vec, ...)                                                         \
  __extension__({                                                                     \
    int kc_bad_ = 0;                                                                  \
    if ((vec).n == (vec).cap) {                                                       \
      size_t kc_cap_ = (vec).cap ? (vec).cap * 2 : 16;                                \
      __typeof__((vec).v) kc_p_ = realloc((vec).v, kc_cap_ * sizeof *(vec).v);        \
      if (kc_p_) { (vec).v = kc_p_; (vec).cap = kc_cap_; } else kc_bad_ = -1;         \
    }                                                                                 \
    if (!kc_bad_) (vec).v[(vec).n++] = (__VA_ARGS__);                                 \
    kc_bad_;                                                                          \
  })

#define KC_VEC_FREE(vec) do { free((vec).v); (vec).v = NULL; (vec).n = (vec).cap = 0; } while (0)
#endif
