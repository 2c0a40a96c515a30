# PyTorch holding one large tensor (GiB from argv, default 100) of which the kernel uses a few MiB.
import sys, time, torch
t = time.time()
gib = float(sys.argv[1]) if len(sys.argv) > 1 else 100
big = torch.empty(int(gib * (1 << 30)) // 4, dtype=torch.float32, device="cuda")
big[: 1 << 20].uniform_()
small = big[: 1 << 20]
out = torch.softmax(small.view(1024, 1024), dim=1)
torch.cuda.synchronize()
print("torch done", float(out[3, 5]), f"{time.time() - t:.2f} s")
