"""A Hugging Face GPT-2 (GPT2LMHeadModel, built from a small config with
random weights: no download) runs out of memory in its training forward
at a batch that does not fit.  PyTorch's own snapshot is taken by its
out-of-memory observer (truth.py), where our post-mortem takes its view:
every view of the post-mortem must name the lines under transformers'
frames that hold the tensors (the user's FORWARD line; the parameters'
TO line) with PyTorch's bytes."""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"

import torch  # noqa: E402
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
import transformers  # noqa: E402

import truth  # noqa: E402

BATCH = int(sys.argv[1]) if len(sys.argv) > 1 else 64
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=4, n_head=4, n_embd=256, vocab_size=8192,
                                 n_positions=512)
config._attn_implementation = "eager"
model = transformers.GPT2LMHeadModel(config).to("cuda")  # TO
model.train()
ids = torch.randint(0, config.vocab_size, (BATCH, 512), device="cuda")  # IDS
truth.dump_at_oom()
raised = False
try:
    loss = model(input_ids=ids, labels=ids).loss  # FORWARD
    loss.backward()
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "allocated": torch.cuda.memory_allocated()}))
