"""Test app: PyTorch eager kernels kerncap must capture: an elementwise kernel, a softmax
reduction and the cuBLAS GEMM behind torch.matmul. Runs `rounds` rounds; prints a checksum."""
import sys
import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.manual_seed(0)
dev = "cuda"
a = torch.randn(1024, 1024, device=dev)
b = torch.randn(1024, 1024, device=dev)
x = torch.randn(4096, 1000, device=dev)
acc = torch.zeros((), device=dev)
for r in range(rounds):
    y = a * 2.0 + b                    # elementwise
    s = torch.softmax(x, dim=-1)       # reduction
    c = torch.matmul(a, b)             # cuBLAS GEMM
    acc += y.sum() + s.sum() + c.float().abs().sum()
torch.cuda.synchronize()
print(f"checksum {acc.item():.4f}")
