// Umbrella header: every TU of the kernels library includes only this file.
#pragma once
#include "umb/config.h"
#include "kernels/tiled_gemm.cuh"
#include "kernels/row_reduce.cuh"
#include "kernels/elementwise.cuh"
#include "launch.h"
