"""Test app: PyTorch eager kernels kerncap must capture: an elementwise kernel, a softmax
reduction and the cuBLAS GEMM behind torch.matmul. Runs `rounds` rounds (argv[1], default 3);
argv[2] scales the sizes (default 1: 1024² GEMM operands, a 4096×1000 softmax input; scripts/bench-timing.sh
uses 4 so that each kernel runs ≥ 20 µs on an H200). Prints a checksum."""
import sys
import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.manual_seed(0)
dev = "cuda"
a = torch.randn(1024 * scale, 1024 * scale, device=dev)
b = torch.randn(1024 * scale, 1024 * scale, device=dev)
x = torch.randn(4096 * scale, 1000, device=dev)
acc = torch.zeros((), device=dev)
for r in range(rounds):
    y = a * 2.0 + b                    # elementwise
    s = torch.softmax(x, dim=-1)       # reduction
    c = torch.matmul(a, b)             # cuBLAS GEMM
    acc += y.sum() + s.sum() + c.float().abs().sum()
torch.cuda.synchronize()
print(f"checksum {acc.item():.4f}")
