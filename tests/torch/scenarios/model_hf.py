"""Hugging Face models built from small configs with random weights (no
download): argv[1] "gpt2" (GPT2LMHeadModel, fp32) or "llama" (a
Llama-shaped LlamaForCausalLM: grouped-query attention, SwiGLU, RMSNorm,
bf16); argv[2] "ckpt" turns on activation checkpointing.  Two AdamW steps
of causal-LM training on random tokens; prints PyTorch's peaks."""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is fetched: the configs are here
os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"

import torch  # noqa: E402
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
import transformers  # noqa: E402

kind = sys.argv[1] if len(sys.argv) > 1 else "gpt2"
ckpt = len(sys.argv) > 2 and sys.argv[2] == "ckpt"
torch.manual_seed(0)
if kind == "gpt2":
    config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=2048,
                                     n_positions=512)
    model = transformers.GPT2LMHeadModel(config)
    dtype, batch, seq = torch.float32, 4, 512
else:
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=688,
                                      num_hidden_layers=2, num_attention_heads=8,
                                      num_key_value_heads=2, vocab_size=2048,
                                      max_position_embeddings=1024)
    model = transformers.LlamaForCausalLM(config)
    dtype, batch, seq = torch.bfloat16, 4, 512
config._attn_implementation = "sdpa"
model = model.to(device="cuda", dtype=dtype)
if ckpt:
    model.gradient_checkpointing_enable()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(2):
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss  # FORWARD
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("TORCH " + json.dumps({
    "model": kind, "checkpointing": ckpt,
    "parameters": sum(p.numel() for p in model.parameters()),
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
}, sort_keys=True))
