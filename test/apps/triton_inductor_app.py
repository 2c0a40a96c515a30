"""Test app: torch.compile (Inductor) of a small transformer MLP block built from `transformers`
(random weights, no download). Inductor generates fused pointwise and reduction Triton kernels.
argv: rounds [mode] (mode: default | max-autotune)."""
import sys

import torch
import transformers

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
mode = sys.argv[2] if len(sys.argv) > 2 else "default"
torch.manual_seed(0)
cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=4,
                               num_hidden_layers=1, vocab_size=1024)
block = torch.nn.Sequential(
    transformers.models.llama.modeling_llama.LlamaRMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps),
    transformers.models.llama.modeling_llama.LlamaMLP(cfg),
).cuda().eval()
f = torch.compile(block, mode=None if mode == "default" else mode)
x = torch.randn(8, 64, cfg.hidden_size, device="cuda")
with torch.no_grad():
    for r in range(rounds):
        y = f(x)
        x = x + 0.01
torch.cuda.synchronize()
print(f"checksum {y.sum().item():.4f}")
