// Kernel parameter types shared by layouts.hip (device) and layouts_host.cpp (host), so the
// kernarg layout in the code object metadata can be checked against the host C++ ABI.
#pragma once
#include <stdint.h>

struct Pair { int32_t a; double b; char c; };          // 24 bytes, align 8
struct alignas(16) Vec4 { float x, y, z, w; };         // 16 bytes, align 16
struct Tiny { uint8_t tag; };                          // 1 byte

// Each list is the parameter list of one kernel, in declaration order.
#define KERNCAP_LAYOUT_KERNELS(X)                                                     \
  X(k_scalars, (float a, const float* x, float* y, int n), (float, const float*, float*, int)) \
  X(k_structs, (Pair p, long* out, short s, Vec4 v, Tiny t, double d),                 \
    (Pair, long*, short, Vec4, Tiny, double))
