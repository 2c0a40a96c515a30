"""Benchmark app: fills GIB GiB of device memory with random data (several tensors), then runs an
elementwise kernel that writes a small output. Used by scripts/bench-snapshot.sh."""
import sys
import torch

gib = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
torch.manual_seed(0)
n = int(gib * (1 << 30) / 4 / 4)
bufs = [torch.rand(n, device="cuda") for _ in range(4)]   # 4 tensors of gib/4 GiB each
small = bufs[0][: 1 << 20]
for _ in range(2):
    out = small * 3.0                                        # elementwise: reads 4 MiB, writes 4 MiB
torch.cuda.synchronize()
print(f"checksum {out.sum().item():.4f}")
