"""Test app: torch.compile (Inductor) of a small pointwise function: one fused Triton kernel
(triton_poi_fused_…) over 2^N float32 elements. argv: rounds (default 3), log2 of the element
count (default 22)."""
import sys

import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
n = 1 << (int(sys.argv[2]) if len(sys.argv) > 2 else 22)


@torch.compile
def f(x, y):
    return torch.relu(x * y + 1.0) * torch.sin(x)


torch.manual_seed(0)
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
for r in range(rounds):
    out = f(x, y)
torch.cuda.synchronize()
print(f"checksum {out.sum().item():.4f}")
