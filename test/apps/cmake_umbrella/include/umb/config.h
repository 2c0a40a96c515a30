// Build configuration of the test app: the accumulator type comes only from the build system
// (CMake's target_compile_definitions), so a compile without the project's flags fails here.
#pragma once
#ifndef UMB_ACC_TYPE
#error "UMB_ACC_TYPE is set by the build (CMakeLists.txt: target_compile_definitions)"
#endif
typedef UMB_ACC_TYPE umb_acc_t;
#define UMB_WARP 32
