"""Hugging Face's "Model training anatomy" runs (transformers docs,
docs/source/en/model_memory_anatomy.md): BERT-large (bert-large-uncased's
shape, random weights) for sequence classification, fp32, loaded to the GPU,
then trained with the Trainer's default step at batch 4 x 512 tokens.

The Trainer itself needs `accelerate`, which the test venv does not hold; the
step here is the Trainer's default work by hand: forward with labels, loss
backward, AdamW step, gradients set to None.

usage: bert_anatomy.py STEPS [eager|sdpa]
Prints "BERT {...}": what loading the model added to memory_reserved() (the
page's 2631 - 1343 MB, nvidia-smi's figures), memory_reserved() before it,
and the max allocated/reserved of the training steps."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
from transformers import BertConfig, BertForSequenceClassification

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ATTN = sys.argv[2] if len(sys.argv) > 2 else "sdpa"
BATCH, SEQ = 4, 512

# bert-large-uncased's config.json
cfg = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                 num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512,
                 type_vocab_size=2, num_labels=2, attn_implementation=ATTN)
torch.manual_seed(0)
# the page's first step: a tiny tensor, to load the kernels; its nvidia-smi
# figure (1343 MB) is the baseline the model's 2631 MB is read against, and
# it already holds the small-tensor segment this tensor took
torch.ones((1, 1)).to("cuda")
before = torch.cuda.memory_reserved()
model = BertForSequenceClassification(cfg).to("cuda")
loaded = torch.cuda.memory_reserved() - before
params = sum(p.numel() for p in model.parameters())

model.train()
opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
x = torch.randint(100, 30000, (BATCH, SEQ), device="cuda")
y = torch.randint(0, 2, (BATCH,), device="cuda")
for _ in range(STEPS):
    out = model(input_ids=x, labels=y)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("BERT " + json.dumps({
    "params": params, "loaded_reserved": loaded, "before_reserved": before,
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
