"""The tensor model: a Hugging Face GPT-2 (GPT2LMHeadModel from a tiny
config, random weights, nothing downloaded) runs out of memory in its
forward; PyTorch's own snapshot is taken from its out-of-memory observer
(truth.dump_at_oom), where our post-mortem reads the tensors.  Every live
block is allocated deep inside transformers and torch: only the whole
stack reaches this file's lines."""
import json
import os
import sys

import torch

import truth

os.environ["HF_HUB_OFFLINE"] = "1"
import transformers  # noqa: E402

torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=2048,
                                 n_positions=1024, bos_token_id=0, eos_token_id=0)
config._attn_implementation = "eager"
model = transformers.GPT2LMHeadModel(config).cuda()  # MODEL
batch = int(sys.argv[1]) if len(sys.argv) > 1 else 48
ids = torch.randint(0, config.vocab_size, (batch, 1024), device="cuda")  # IDS
truth.dump_at_oom()
raised = False
try:
    out = model(input_ids=ids, labels=ids)  # FORWARD
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "allocated": torch.cuda.memory_allocated()}))
