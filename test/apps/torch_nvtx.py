"""NVTX ranges as PyTorch users set them, for test/gpu/nvtx.test.ts: `torch.cuda.nvtx.range` around
x.sin(), `record_function` under `emit_nvtx` around x.exp(); x.cos() and x.tanh() run outside
those ranges (tanh inside emit_nvtx's own per-op range only)."""
import torch

torch.cuda.nvtx.range_push("setup")  # before the first CUDA call
x = torch.randn(1 << 16, device="cuda")
torch.cuda.nvtx.range_pop()
y = x.cos()
with torch.cuda.nvtx.range("fwd"):
    z = x.sin()
with torch.autograd.profiler.emit_nvtx():
    with torch.autograd.profiler.record_function("blk"):
        w = x.exp()
    v = x.tanh()
torch.cuda.synchronize()
print("torch_nvtx: ok", float((y + z + w + v).sum()))
