"""App for the shim's unit test, run against testdata/fake_triton (no GPU): an autotuned kernel
that calls a @triton.jit helper and reads module constants."""
import sys

import triton
import triton.language as tl
from triton.runtime.jit import FakeTensor

SCALE = tl.constexpr(2)
OFFSET = 3


@triton.jit
def helper(x, K: tl.constexpr):
    return x * K + OFFSET


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 32}, num_warps=2),
        triton.Config({"BLOCK": 64}, num_warps=4),
        triton.Config({"BLOCK": 128}, num_warps=8, num_stages=2),
    ],
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, DT: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    return helper(offs, SCALE)


x, o = FakeTensor(), FakeTensor()
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    scale_kernel[(1,)](x, o, 1000, DT=tl.float32)
print("app done")
