"""Hugging Face's "Model training anatomy" runs (transformers docs,
docs/source/en/model_memory_anatomy.md): BERT-large (bert-large-uncased's
shape, random weights) for sequence classification, fp32, loaded to the GPU,
then trained with the Trainer's default step at batch 4 x 512 tokens.

The Trainer itself needs `accelerate`, which the test venv does not hold; the
step here is the Trainer's default work by hand: forward with labels, loss
backward, AdamW step, gradients cleared.

usage: bert_anatomy.py STEPS [eager|sdpa] [installed|published]
  installed (default): the step as this venv's PyTorch and today's Trainer
    do it: torch.optim.AdamW, gradients set to None after each step.
  published: the three things the published run's software (January 2022:
    PyTorch <= 1.10, the Trainer of transformers 4.15) did differently, each
    one a change to what this script does, none to PyTorch or the card:
    - softmax keeps its input for backward as well as its output: PyTorch
      saved `self` for _softmax_backward_data until pytorch/pytorch#66018
      (October 2021, first released in 1.11);
    - gradients are zeroed, not freed, after each step: the Trainer called
      model.zero_grad(), whose set_to_none defaulted to False before
      PyTorch 2.0, so they live through the next forward;
    - the Trainer's optimizer step: gradients clipped to norm 1.0, then
      transformers' own AdamW, one parameter at a time, its two moments
      created at that parameter's first update.

Prints "BERT {...}": what loading the model added to memory_reserved() (the
page's 2631 - 1343 MB, nvidia-smi's figures), memory_reserved() before it,
and the max allocated/reserved of the training steps."""
import json
import math
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
from transformers import BertConfig, BertForSequenceClassification

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ATTN = sys.argv[2] if len(sys.argv) > 2 else "sdpa"
MODE = sys.argv[3] if len(sys.argv) > 3 else "installed"
if ATTN not in ("eager", "sdpa") or MODE not in ("installed", "published"):
    sys.exit(__doc__.split("\n\n")[2])
BATCH, SEQ = 4, 512
LR, BETAS, EPS = 5e-5, (0.9, 0.999), 1e-8  # the Trainer's defaults


class SoftmaxKeepingInput(torch.autograd.Function):
    """softmax whose backward holds its input too, as PyTorch <= 1.10's did
    (the gradient needs only the output; the input was kept for its dtype)"""

    @staticmethod
    def forward(ctx, x, dim):
        y = torch.softmax(x, dim)
        ctx.save_for_backward(x, y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return torch._softmax_backward_data(grad, y, ctx.dim, x.dtype), None


def softmax_keeping_input(x, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return SoftmaxKeepingInput.apply(x, dim)


@torch.no_grad()
def adamw_per_parameter(params, state):
    # Adam with the Trainer's defaults (no weight decay), the bias corrections
    # folded into the step size as transformers' AdamW did; the only
    # temporary is the denominator of the parameter being updated
    b1, b2 = BETAS
    for p in params:
        if p.grad is None:
            continue
        s = state.setdefault(p, {})
        if not s:
            s.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
        s["step"] += 1
        s["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
        s["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
        denom = s["v"].sqrt().add_(EPS)
        size = LR * math.sqrt(1 - b2 ** s["step"]) / (1 - b1 ** s["step"])
        p.addcdiv_(s["m"], denom, value=-size)


# bert-large-uncased's config.json
cfg = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                 num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512,
                 type_vocab_size=2, num_labels=2, attn_implementation=ATTN)
if MODE == "published":
    # transformers' eager attention calls nn.functional.softmax at run time
    torch.nn.functional.softmax = softmax_keeping_input
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
if MODE == "installed":
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
else:
    adam_state = {}
x = torch.randint(100, 30000, (BATCH, SEQ), device="cuda")
y = torch.randint(0, 2, (BATCH,), device="cuda")
for _ in range(STEPS):
    out = model(input_ids=x, labels=y)
    out.loss.backward()
    if MODE == "installed":
        opt.step()
        opt.zero_grad(set_to_none=True)
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        adamw_per_parameter(model.parameters(), adam_state)
        model.zero_grad(set_to_none=False)
torch.cuda.synchronize()
print("BERT " + json.dumps({
    "params": params, "loaded_reserved": loaded, "before_reserved": before,
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
