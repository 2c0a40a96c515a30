// Host side of the layout fixture: prints the kernarg layout that the C++ ABI gives each kernel's
// explicit parameters (each at the next offset aligned to alignof(T)), as JSON.
#include <cstdio>
#include <cstddef>
#include "layouts.h"

template <typename... T> void print(const char* name, bool last) {
  size_t sizes[] = {sizeof(T)...}, aligns[] = {alignof(T)...};
  size_t off = 0;
  std::printf("\"%s\":[", name);
  for (size_t i = 0; i < sizeof...(T); i++) {
    off = (off + aligns[i] - 1) / aligns[i] * aligns[i];
    std::printf("%s{\"offset\":%zu,\"size\":%zu}", i ? "," : "", off, sizes[i]);
    off += sizes[i];
  }
  std::printf("]%s", last ? "" : ",");
}

int main() {
  std::printf("{");
#define X(name, params, types) print<KERNCAP_UNPAREN types>(#name, false);
#define KERNCAP_UNPAREN(...) __VA_ARGS__
  KERNCAP_LAYOUT_KERNELS(X)
#undef X
  std::printf("\"_\":[]}\n");
}
