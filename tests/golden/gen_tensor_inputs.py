#!/usr/bin/env python3
"""gen_tensor_inputs.py - writes tests/golden/inputs/tensors/*.json: PyTorch
processes' snapshots with the tensor model (docs/snapshot-format.md:
devices[].tensors, peak_tensors, growth; oom.allocator.tensors), for the
golden cases of the views that compare or draw them (diff, flamegraph,
export, timeline, html).  Run it after changing a scenario below, then
regenerate the expected outputs and review `git diff tests/golden`.

The driver's rows (live, at_peak: segments by the line that created them)
deliberately name other lines than the tensors do: PyTorch's cache reuses a
segment made by the training forward for the eval pass's logits, so a view
that reads segments names the wrong line.

Scenarios:
  dump_1, dump_2  two api dumps of one run (pid 7001): an eval pass keeps
                  its logits (eval.py:41) across steps, +96 MiB a step; the
                  training forward's activations (model.py:60) come and go
  fp32, ckpt      two runs of one script: the peak's tensors of fp32 and of
                  gradient checkpointing (the attention and MLP activations
                  of model.py:72 / :88 went; the checkpoint's recompute line
                  is new)
"""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapgen import (GiB, MiB, C10_ALLOC, C10_MALLOC, EMPTY, PYGLUE,  # noqa: E402
                     Device, Stack, dump, py, snapshot)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inputs", "tensors")

TRAIN = "train.py"
MODEL = "model.py"
EVAL = "eval.py"
TORCH_MOD = "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"
TORCH_LIN = "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"
HF = "/venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py"
CKPT = "/venv/lib/python3.12/site-packages/torch/utils/checkpoint.py"


def f(file, line, function):
    return {"file": file, "line": line, "function": function}


# Python stacks, innermost first, whole (library frames kept): the user's
# line is below several frames of torch and transformers.
CALL = [f(TORCH_MOD, 1762, "_call_impl"), f(TORCH_MOD, 1751, "_wrapped_call_impl")]
ST_FWD = [f(TORCH_LIN, 125, "forward")] + CALL + [
    f(HF, 612, "forward")] + CALL + [f(MODEL, 60, "forward")] + CALL + [
    f(TRAIN, 30, "train_step"), f(TRAIN, 52, "main"), f(TRAIN, 60, "<module>")]
ST_ATTN = [f(HF, 301, "_attn"), f(HF, 355, "forward")] + CALL + [
    f(MODEL, 72, "block")] + CALL + [f(MODEL, 61, "forward")] + CALL + [
    f(TRAIN, 30, "train_step"), f(TRAIN, 52, "main"), f(TRAIN, 60, "<module>")]
ST_MLP = [f(TORCH_LIN, 125, "forward")] + CALL + [f(MODEL, 88, "mlp"),
                                                  f(MODEL, 73, "block")] + CALL + [
    f(MODEL, 61, "forward")] + CALL + [
    f(TRAIN, 30, "train_step"), f(TRAIN, 52, "main"), f(TRAIN, 60, "<module>")]
ST_RECOMP = [f(CKPT, 496, "checkpoint"), f(MODEL, 66, "forward")] + CALL + [
    f(TRAIN, 30, "train_step"), f(TRAIN, 52, "main"), f(TRAIN, 60, "<module>")]
ST_EVAL = [f(TORCH_LIN, 125, "forward")] + CALL + [f(HF, 1320, "forward")] + CALL + [
    f(EVAL, 41, "evaluate"), f(TRAIN, 55, "main"), f(TRAIN, 60, "<module>")]
ST_PARAMS = [f(TORCH_MOD, 1343, "convert"), f(TORCH_MOD, 942, "_apply"),
             f(TORCH_MOD, 1355, "to"), f(TRAIN, 18, "main"), f(TRAIN, 60, "<module>")]
ST_ADAM = [f("/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 140, "_init_group"),
           f("/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 220, "step"),
           f(TRAIN, 34, "train_step"), f(TRAIN, 52, "main"), f(TRAIN, 60, "<module>")]


def site_of(stack):
    for fr in stack:
        if "site-packages" not in fr["file"]:
            return dict(fr)
    return None


def group(stack, nbytes, count, origin=None):
    return {"site": site_of(stack) if stack else None, "stack": stack, "bytes": nbytes,
            "count": count, "origin": origin}


def tensors(groups, cache=(64 * MiB, 3, 20 * MiB), **extra):
    gs = sorted(groups, key=lambda g: (-g["bytes"], site_text(g["site"])))
    t = {"allocated_bytes": sum(g["bytes"] for g in gs),
         "count": sum(g["count"] for g in gs), "groups": gs, "more": None,
         "cache": {"bytes": cache[0], "segments": cache[1], "largest_free_bytes": cache[2]}}
    t.update(extra)
    return t


def site_text(s):
    return "" if s is None else "%s:%d:%s" % (s["file"], s["line"], s["function"])


def allocator(t, peak):
    alloc = t["allocated_bytes"]
    reserved = alloc + t["cache"]["bytes"]
    return {"name": "pytorch", "version": "2.5.1+cu124", "requested_bytes": None,
            "allocated_bytes": alloc, "reserved_bytes": reserved, "active_bytes": alloc,
            "reserved_unallocated_bytes": t["cache"]["bytes"], "inactive_split_bytes": 0,
            "segments": t["cache"]["segments"] + 4, "num_alloc_retries": 0, "num_ooms": 0,
            "limit_bytes": None, "device_total_bytes": None, "device_free_bytes": None,
            "peak_allocated_bytes": peak,
            "largest_free_block_bytes": {"small": 0, "large": t["cache"]["largest_free_bytes"]},
            "config": {}, "top_tensors": None}


# Driver stacks: each cached segment named by the call that created it.
TORCHN = [C10_MALLOC, C10_ALLOC, EMPTY, PYGLUE]


def dstack(sid, pystack):
    return Stack(sid, "cudaMalloc", TORCHN + [
        {"module": "python", "file": fr["file"], "line": fr["line"], "function": fr["function"]}
        for fr in pystack])


D_FWD, D_PARAMS, D_ADAM = dstack(1, ST_FWD), dstack(2, ST_PARAMS), dstack(3, ST_ADAM)
D_ATTN, D_MLP = dstack(4, ST_ATTN), dstack(5, ST_MLP)


def with_tensors(doc, t, peak_t, growth, step=None):
    d = doc["devices"][0]
    d["allocator"] = allocator(t, peak_t["allocated_bytes"])
    d["allocator"]["step"] = step
    d["tensors"] = t
    d["peak_tensors"] = peak_t
    d["growth"] = growth
    return doc


def leak_dump(n):
    """An api dump after step 4*n: the eval logits kept, 96 MiB a step."""
    step = 4 * n
    logits = 96 * MiB * step
    live_t = [group(ST_PARAMS, 498 * MiB, 148), group(ST_ADAM, 996 * MiB, 296),
              group(ST_EVAL, logits, step)]
    peak_t = [group(ST_PARAMS, 498 * MiB, 148), group(ST_ADAM, 996 * MiB, 296),
              group(ST_EVAL, logits - 96 * MiB, step - 1), group(ST_FWD, 1200 * MiB, 40)]
    t = tensors(live_t)
    pt = tensors(peak_t, time_ns=n * 9_000_000_000 - 500_000_000, step=step)
    growth = [{"site": site_of(ST_EVAL), "stack": ST_EVAL, "bytes": logits,
               "bytes_per_step": 96 * MiB, "first_step": 1, "last_step": step, "steps": step}]
    seg = 20 * MiB * ((t["allocated_bytes"] + t["cache"]["bytes"]) // (20 * MiB) + 1)
    # The segments the logits sit in were made by the training forward.
    live = [(D_PARAMS, "device", 500 * MiB, 2), (D_ADAM, "device", 1000 * MiB, 2),
            (D_FWD, "device", seg - 1500 * MiB, 12 + n)]
    at_peak = [(D_PARAMS, "device", 500 * MiB, 2), (D_ADAM, "device", 1000 * MiB, 2),
               (D_FWD, "device", seg - 1500 * MiB + 1200 * MiB, 20 + n)]
    dev = Device(0, n * 9_000_000_000 - 500_000_000, at_peak, live, total=80 * GiB,
                 free=60 * GiB)
    doc = snapshot(reason="api", pid=7001, exe="python3", cmdline=["python3", "train.py"],
                   dump_time=n * 9_000_000_000, devices=[dev],
                   stacks=[D_FWD, D_PARAMS, D_ADAM], sequence=n)
    return with_tensors(doc, t, pt, growth, step)


def peak_run(ckpt):
    """Exit of one training run; the peak's tensors differ by checkpointing."""
    base = [group(ST_PARAMS, 498 * MiB, 148), group(ST_ADAM, 996 * MiB, 296)]
    if ckpt:
        acts = [group(ST_RECOMP, 512 * MiB, 24), group(ST_FWD, 384 * MiB, 12)]
    else:
        acts = [group(ST_ATTN, 3 * GiB, 144), group(ST_MLP, 2 * GiB, 96),
                group(ST_FWD, 384 * MiB, 12)]
    peak_t = tensors(base + acts, time_ns=6_000_000_000, step=3)
    t = tensors(base, cache=(sum(g["bytes"] for g in acts), 9, 200 * MiB))
    pid = 7102 if ckpt else 7101
    segs = [(D_PARAMS, "device", 500 * MiB, 2), (D_ADAM, "device", 1000 * MiB, 2)]
    # PyTorch's cache: every activation segment named by the first line
    # that made it (the training forward), whatever fills it later.
    act_seg = 20 * MiB * (sum(g["bytes"] for g in acts) // (20 * MiB) + 1)
    at_peak = segs + [(D_FWD, "device", act_seg, 30)]
    live = segs + [(D_FWD, "device", act_seg, 30)]
    dev = Device(0, 6_000_000_000, at_peak, live, total=80 * GiB, free=60 * GiB)
    doc = snapshot(reason="exit", pid=pid, exe="python3",
                   cmdline=["python3", "train.py"] + (["--checkpointing"] if ckpt else []),
                   dump_time=12_000_000_000, devices=[dev], stacks=[D_FWD, D_PARAMS, D_ADAM])
    return with_tensors(doc, t, peak_t, [], 2)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, doc in [("dump_1", leak_dump(1)), ("dump_2", leak_dump(2)),
                      ("fp32", peak_run(False)), ("ckpt", peak_run(True))]:
        dump(copy.deepcopy(doc), os.path.join(OUT, name + ".json"))


if __name__ == "__main__":
    main()
