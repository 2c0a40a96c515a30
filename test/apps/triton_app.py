"""Test app: a Triton kernel launched by Triton's own launcher (cuLaunchKernelEx). argv[1]: rounds
(default 3); argv[2]: log2 of the element count (default 20; scripts/bench-timing.sh uses 24)."""
import sys
import torch
import triton
import triton.language as tl


@triton.jit
def fused_add_relu(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=m)


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.manual_seed(0)
n = 1 << (int(sys.argv[2]) if len(sys.argv) > 2 else 20)
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
out = torch.empty_like(x)
for r in range(rounds):
    fused_add_relu[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    x += 0.01
torch.cuda.synchronize()
print(f"checksum {out.sum().item():.4f}")
