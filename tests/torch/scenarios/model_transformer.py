"""A TransformerEncoder (self-attention through scaled_dot_product_attention)
trained for two steps under bf16 autocast, with one SDPA backend allowed
(argv[1]: flash, efficient, cudnn, math; "default" lets PyTorch choose, as
it does on the imitated card).  Prints PyTorch's peaks and which backends
PyTorch would pick."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
from torch.nn.attention import SDPBackend, sdpa_kernel

which = sys.argv[1] if len(sys.argv) > 1 else "default"
backends = {"flash": [SDPBackend.FLASH_ATTENTION], "efficient": [SDPBackend.EFFICIENT_ATTENTION],
            "cudnn": [SDPBackend.CUDNN_ATTENTION], "math": [SDPBackend.MATH],
            "default": [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                        SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]}[which]
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                         batch_first=True, dropout=0.0)
model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(8, 512, 256, device="cuda")
with sdpa_kernel(backends):
    for step in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, is_causal=True,
                         mask=torch.nn.Transformer.generate_square_subsequent_mask(
                             512, device="cuda")).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("TORCH " + json.dumps({
    "backend": which,
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
}, sort_keys=True))
