"""Test app: torch.compile(mode="reduce-overhead") of a GEMM followed by a fused pointwise tail.
Inductor makes one Triton kernel for the tail (the GEMM stays cuBLAS, an ancestor of it in the
graph); CUDA graph trees run the first call eagerly (warm-up), record the second into a CUDA graph
and replay it from then on, so after the warm-up the Triton kernel executes only from the graph.
Prints a checksum of the last result, so a run under kerncap can be compared with one without."""
import torch

torch.manual_seed(0)
w = torch.randn(256, 256, device="cuda")
b = torch.randn(256, device="cuda")


def block(x):
    return torch.sin(torch.relu(x @ w + b)) * 2.0 + x


f = torch.compile(block, mode="reduce-overhead")
xs = [torch.randn(64, 256, device="cuda") for _ in range(6)]
with torch.no_grad():
    for x in xs:
        torch.compiler.cudagraph_mark_step_begin()
        y = f(x)
    y = y.clone()
torch.cuda.synchronize()
print(f"checksum {y.double().sum().item():.6f}")
