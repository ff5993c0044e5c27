#!/usr/bin/env python3
"""gen_inputs.py - writes tests/golden/inputs/*.json, the snapshots the CLI's
golden cases read.  Run it after changing snapgen.py or a scenario below,
then regenerate the expected outputs (test_cli_golden.py --update) and
review every change in `git diff` before committing.

Scenarios (realistic PyTorch-like stacks: mangled C++ frames of libc10_cuda,
a stripped libtorch_python frame, Python frames, a GIL marker):
  exit_train        a clean exit: peaks, leaks, VMM, pinned host memory,
                    one recovered OOM
  oom_exhausted     post-mortem, free < request, another process holds 26%
  oom_fragmentation post-mortem, free >= request, many small segments
  oom_limit         post-mortem refused by CUMEMTRACE_LIMIT
  rank{0,1,2}       three torchrun ranks, rank 1 an OOM post-mortem
  diff_base/new     one call site grows by exactly 3000000 bytes, one is new,
                    one gone; NEW was rebuilt (every offset moved)
  gate_*            peaks at, and one byte over, +5% of the base
  tensors_exit      an exit with PyTorch's tensors by user line: at exit (a
                    leak of logits), at the peak, growth per step
  tensors_oom       post-mortem whose tensors name eight lines, library-deep
  tensors_many      an exit whose tensors name 30 lines and 4100 folded
  thinned           an event log thinned to every 4th event (the peak's
                    event is not kept)
  bad_*             one file per malformed-input class (bad_contradiction:
                    well-typed, but at_peak sums past the peak)
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapgen import (GiB, MiB, C10_ALLOC, C10_MALLOC, CUBLAS_WS, EMPTY, NCCL, PYGLUE,  # noqa: E402
                     Device, Stack, dump, kind_stats, marker, native, py, snapshot)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inputs")

TRAIN = "/home/alice/proj/train.py"
MODEL = "/home/alice/proj/model.py"
OPTIM = "/home/alice/proj/optim.py"
DATA = "/home/alice/proj/data.py"

TORCH = [C10_MALLOC, C10_ALLOC, EMPTY, PYGLUE]
S_ACT = Stack(1, "cudaMalloc", TORCH + [py(MODEL, 142, "forward"), py(TRAIN, 88, "train_step"),
                                        py(TRAIN, 120, "main")])
S_WEIGHTS = Stack(2, "cudaMalloc", TORCH + [py(MODEL, 57, "__init__"), py(TRAIN, 110, "main")])
S_OPTIM = Stack(3, "cudaMalloc", TORCH + [py(OPTIM, 33, "step"), py(TRAIN, 95, "train_step"),
                                          py(TRAIN, 120, "main")])
S_CUBLAS = Stack(4, "cudaMallocAsync", [CUBLAS_WS, PYGLUE, py(MODEL, 150, "forward"),
                                        py(TRAIN, 88, "train_step"), py(TRAIN, 120, "main")])
S_VMM = Stack(5, "cuMemCreate", [
    native("libc10_cuda.so", 0x52000,
           "_ZN3c104cuda20CUDACachingAllocator6Native17ExpandableSegment3mapENS2_12SegmentRangeE"),
    marker("python frames unavailable: GIL not held")])
S_PINNED = Stack(6, "cudaHostAlloc", [
    native("libc10_cuda.so", 0x61230,
           "_ZN2at4cuda12_GLOBAL__N_117CUDAHostAllocator8allocateEm"),
    py(DATA, 71, "pin_memory"), py(TRAIN, 80, "train_step"), py(TRAIN, 120, "main")])
S_NCCL = Stack(7, "cudaMalloc", [NCCL, native("libtorch_cuda.so", 0x99AA10),
                                 py(TRAIN, 60, "setup"), py(TRAIN, 118, "main")])
S_ATTN = Stack(8, "cudaMalloc", TORCH + [py(MODEL, 200, "attention"), py(MODEL, 143, "forward"),
                                         py(TRAIN, 88, "train_step"), py(TRAIN, 120, "main")])
ALL = [S_ACT, S_WEIGHTS, S_OPTIM, S_CUBLAS, S_VMM, S_PINNED, S_NCCL]


def exit_train():
    at_peak = [(S_WEIGHTS, "device", 6 * GiB, 220), (S_ACT, "device", 3 * GiB + 512 * MiB, 96),
               (S_OPTIM, "device", 2 * GiB, 110), (S_CUBLAS, "async", 32 * MiB, 1),
               (S_VMM, "vmm", 640 * MiB, 32), (S_NCCL, "device", 80 * MiB, 2)]
    live = [(S_WEIGHTS, "device", 6 * GiB, 220), (S_NCCL, "device", 80 * MiB, 2),
            (S_CUBLAS, "async", 32 * MiB, 1)]
    dev = Device(0, 12_345_678_901, at_peak, live, total=80 * GiB, free=60 * GiB,
                 vmm={"reserved_bytes": 8 * GiB, "mapped_bytes": 0, "physical_bytes": 0,
                      "reserved_peak_bytes": 8 * GiB, "mapped_peak_bytes": 640 * MiB})
    pinned = {"current_bytes": 0, "peak_bytes": 256 * MiB, "peak_time_ns": 3_100_000_000,
              "allocs": 16, "frees": 16, "failures": 0, "live": [],
              "at_peak": [{"stack": 6, "bytes": 256 * MiB, "count": 16}]}
    host_ev = [[3_100_000_000, -1, "host_pinned", 256 * MiB, 6, 256 * MiB],
               [40_000_000_000, -1, "host_pinned", -256 * MiB, 6, 0]]
    from snapgen import events_for
    ev = events_for([dev], host_ev)
    doc = snapshot(devices=[dev], stacks=ALL, host_pinned=pinned, events=ev,
                   ooms={"count": 1, "failed_attempts": 2, "recovered": 1,
                         "retry_released_bytes": 1536 * MiB, "suppressed": 0, "dumps": [
                             "/home/alice/proj/cumemtrace.python3.4242.oom.1.json"]},
                   counters={"unknown_frees": 3, "failed_frees": 0, "stacks": 7,
                             "live_allocations": 223})
    return doc


def oom_doc(cause, total, free, tracked_live, request, limit=None, attempts=3, recovered=False,
            released=(1536 * MiB, 4), frag=None, pid=4242, rank=None, dump_time=31_400_000_000,
            limits=(), ordinal=0):
    held = sum(b for _, _, b, _ in tracked_live)
    dev = Device(ordinal, dump_time - 400_000_000, tracked_live, tracked_live, total=total, free=free,
                 limit=limit, frag=frag)
    untracked = max(0, total - free - held)
    oom = {
        "requested_bytes": request, "device": ordinal, "kind": "device", "entry_point": "cudaMalloc",
        "thread": pid + 8, "time_ns": dump_time - 1_000_000, "stack": 1, "phase": 0,
        "total_bytes": total, "free_bytes": free, "limit_bytes": limit, "tracked_bytes": held,
        "untracked_bytes": untracked,
        "by_kind": {"device": held, "managed": 0, "async": 0, "vmm": 0},
        "cause": cause, "shortfall_bytes": request - free if cause == "exhausted" else 0,
        "attempts": attempts, "recovered": recovered,
        "released_bytes": released[0], "released_count": released[1],
        "live": [{"stack": s.id, "kind": k, "bytes": b, "count": c}
                 for s, k, b, c in sorted(tracked_live, key=lambda g: -g[2])],
    }
    return snapshot(reason="oom", pid=pid, rank=rank, devices=[dev], stacks=ALL, oom=oom,
                    dump_time=dump_time, sequence=1, limits=limits,
                    ooms={"count": 3, "failed_attempts": attempts + 4, "recovered": 0,
                          "retry_released_bytes": 0, "suppressed": 2 if cause == "exhausted" else 0,
                          "dumps": ["cumemtrace.python3.%d.oom.0.json" % pid],
                          # this chain's attempts, 0.1 ms apart from its first failure
                          "attempts": [{"t_ns": oom["time_ns"] + i * 100_000, "device": ordinal,
                                        "requested_bytes": request, "chain": 1, "attempt": i + 1,
                                        "outcome": "failed"} for i in range(attempts)]})


def oom_exhausted():
    live = [(S_ACT, "device", 35 * GiB, 400), (S_WEIGHTS, "device", 14 * GiB, 220),
            (S_OPTIM, "device", 8 * GiB + 512 * MiB, 110), (S_NCCL, "device", 512 * MiB, 2)]
    return oom_doc("exhausted", 80 * GiB, 1229 * MiB, live, 2 * GiB)


def oom_fragmentation():
    live = [(S_WEIGHTS, "device", 12 * GiB, 220), (S_ACT, "device", 7 * GiB, 1800),
            (S_OPTIM, "device", 1 * GiB, 110)]
    frag = {"granularity_bytes": 2 * MiB, "requested_bytes": 20 * GiB,
            "rounded_bytes": 20 * GiB + 2600 * MiB, "small_count": 1500,
            "small_bytes": 440 * MiB}
    return oom_doc("refused_while_free", 24 * GiB, 3174 * MiB, live, 2 * GiB, attempts=2,
                   released=(0, 0), frag=frag)


def oom_limit():
    live = [(S_WEIGHTS, "device", 8 * GiB, 220), (S_ACT, "device", 6 * GiB + 200 * MiB, 300),
            (S_OPTIM, "device", 1 * GiB, 110)]
    return oom_doc("limit", 80 * GiB, 60 * GiB, live, 2 * GiB, limit=16 * GiB, attempts=1,
                   released=(0, 0), limits=[(0, 16 * GiB)])


def rank(r, scale, oom=False):
    pid = 5001 + r
    at_peak = [(S_WEIGHTS, "device", 6 * GiB, 220), (S_ACT, "device", int(scale * GiB), 96),
               (S_NCCL, "device", 512 * MiB, 2)]
    if oom:
        doc = oom_doc("exhausted", 80 * GiB, 1 * GiB, at_peak, 2 * GiB, pid=pid, rank=r,
                      ordinal=r)
    else:
        dev = Device(r, 20_000_000_000 + r * 1_000_000, at_peak,
                     [(S_WEIGHTS, "device", 6 * GiB, 220)])
        doc = snapshot(pid=pid, rank=r, devices=[dev], stacks=ALL)
    doc["process"]["cmdline"] = ["python3", "-m", "torch.distributed.run", "train.py"]
    return doc


def job_rank(r, scale, world=4, oom_at=None, start_skew=0):
    """One rank of a torchrun job of `world` ranks on two hosts (local rank r % 2);
    with oom_at, the (post-mortem, exit) pair of a rank that failed at that time."""
    pid = 7001 + r
    act = int(scale * GiB)
    at_peak = [(S_WEIGHTS, "device", 6 * GiB, 220), (S_ACT, "device", act, 96),
               (S_NCCL, "device", 512 * MiB, 2)]
    host = "gpu-node-%02d" % (7 + r // 2)
    docs = []
    if oom_at is not None:
        pm = oom_doc("exhausted", 80 * GiB, 1 * GiB, at_peak, 2 * GiB, pid=pid, rank=r,
                     ordinal=r % 2, dump_time=oom_at + 1_000_000)
        pm["ooms"]["attempts"] = [
            {"t_ns": oom_at - 2_000_000 + i * 1_000_000, "device": r % 2,
             "requested_bytes": 2 * GiB, "chain": 1, "attempt": i + 1, "outcome": "failed"}
            for i in range(3)]
        docs.append(("oom.0", pm))
    dev = Device(r % 2, 20_000_000_000 + r * 1_000_000, at_peak,
                 [(S_WEIGHTS, "device", 6 * GiB, 220)] if oom_at is None else at_peak)
    ooms = None
    if oom_at is not None:
        ooms = {"count": 1, "failed_attempts": 3, "recovered": 0, "retry_released_bytes": 0,
                "suppressed": 0, "dumps": ["cumemtrace.python3.%d.%d.oom.0.json" % (pid, r)],
                "attempts": docs[0][1]["ooms"]["attempts"]}
    docs.append(("", snapshot(pid=pid, rank=r, host=host, devices=[dev], stacks=ALL,
                              ooms=ooms, dump_time=oom_at + 5_000_000 if oom_at else 42_100_000_000)))
    for _, d in docs:
        d["process"].update(host=host, local_rank=r % 2, world_size=world,
                            cmdline=["python3", "train.py"])
        d["process"]["start_wall_ns"] += start_skew
    return [("cumemtrace.python3.%d.%d%s.json" % (pid, r, "." + tag if tag else ""), d)
            for tag, d in docs]


def job(name, scales, oom=None, world=4, skip=()):
    """A directory of rank files: scales[r] GiB of activations on rank r; oom maps
    rank -> time of its first failed attempt (ns since its start)."""
    for r, scale in enumerate(scales):
        if r in skip:
            continue
        skew = r * 50_000_000  # ranks start 50 ms apart
        for fname, doc in job_rank(r, scale, world, (oom or {}).get(r), skew):
            os.makedirs(os.path.join(OUT, name), exist_ok=True)
            write(os.path.join(name, fname), doc)


def rebuilt(stack, sid=None):
    """The same call site after a rebuild: every native offset moved."""
    frames = []
    for f in stack.frames:
        f = dict(f)
        if "offset" in f:
            f["offset"] += 0x1000
        frames.append(f)
    return Stack(sid or stack.id, stack.entry, frames)


def diff_pair():
    base_peak = [(S_WEIGHTS, "device", 40 * MiB, 20), (S_ACT, "device", 30 * MiB, 10),
                 (S_OPTIM, "device", 20 * MiB, 10), (S_CUBLAS, "async", 10 * MiB, 1)]
    base_live = [(S_WEIGHTS, "device", 40 * MiB, 20)]
    base = snapshot(devices=[Device(0, 9_000_000_000, base_peak, base_live)],
                    stacks=[S_ACT, S_WEIGHTS, S_OPTIM, S_CUBLAS])
    # NEW: rebuilt binaries, ids renumbered; activations +3000000 bytes,
    # optimizer state gone, attention new.
    n_w, n_a, n_c, n_att = (rebuilt(S_WEIGHTS, 11), rebuilt(S_ACT, 12), rebuilt(S_CUBLAS, 13),
                            rebuilt(S_ATTN, 14))
    new_peak = [(n_w, "device", 40 * MiB, 20), (n_a, "device", 30 * MiB + 3_000_000, 10),
                (n_c, "async", 10 * MiB, 1), (n_att, "device", 8 * MiB, 4)]
    new_live = [(n_w, "device", 40 * MiB, 20), (n_att, "device", 8 * MiB, 4)]
    new = snapshot(pid=4343, devices=[Device(0, 9_500_000_000, new_peak, new_live)],
                   stacks=[n_w, n_a, n_c, n_att], dump_time=43_000_000_000,
                   ooms={"count": 1, "failed_attempts": 3, "recovered": 1,
                         "retry_released_bytes": 4 * MiB, "dumps": []})
    return base, new


def gate(extra):
    peak = [(S_WEIGHTS, "device", 60 * MiB, 20), (S_ACT, "device", 40 * MiB + extra, 10)]
    return snapshot(devices=[Device(0, 5_000_000_000, peak, [])], stacks=[S_ACT, S_WEIGHTS])


def thinned():
    doc = exit_train()
    ev = doc["events"]
    rows = ev["data"]
    # keep every 4th event; make sure the event that set the peak is dropped
    peak_t = doc["devices"][0]["peak_time_ns"]
    kept = [r for i, r in enumerate(rows) if i % 4 == 0 and not (r[0] == peak_t and r[1] == 0)]
    ev.update({"recorded": len(rows), "stride": 4, "thinned": True, "data": kept})
    return doc


# ---- PyTorch's tensors by the user's line (tensors, peak_tensors, growth) ----

SITE_PKG = "/home/alice/venv/lib/python3.12/site-packages"
LINEAR = SITE_PKG + "/torch/nn/modules/linear.py"
MODULE = SITE_PKG + "/torch/nn/modules/module.py"
ADAMW = SITE_PKG + "/torch/optim/adamw.py"
HF_ATTN = SITE_PKG + "/transformers/models/gpt2/modeling_gpt2.py"


def pf(file, line, function):
    """A frame of the tensor members: {file, line, function} only."""
    return {"file": file, "line": line, "function": function}


def call_impl(n=1):
    """module.py's _call_impl / _wrapped_call_impl, n module calls deep."""
    out = []
    for _ in range(n):
        out += [pf(MODULE, 1784, "_call_impl"), pf(MODULE, 1773, "_wrapped_call_impl")]
    return out


def tgroup(stack, nbytes, count, origin=None):
    """A group: its site is the first frame outside torch, the stdlib and
    installed packages (None when every frame is library code)."""
    site = next((f for f in stack if SITE_PKG not in f["file"]), None)
    return {"site": site, "stack": stack, "bytes": nbytes, "count": count, "origin": origin}


T_WEIGHTS = [pf(MODEL, 57, "__init__"), pf(TRAIN, 110, "main")]
T_ACT = [pf(LINEAR, 125, "forward")] + call_impl(1) + [
    pf(MODEL, 142, "forward")] + call_impl(1) + [pf(TRAIN, 88, "train_step"),
                                                   pf(TRAIN, 120, "main")]
T_ATTN = [pf(HF_ATTN, 312, "_attn"), pf(HF_ATTN, 398, "forward")] + call_impl(3) + [
    pf(MODEL, 200, "attention"), pf(MODEL, 143, "forward")] + call_impl(1) + [
    pf(TRAIN, 88, "train_step"), pf(TRAIN, 120, "main")]
T_KV = [pf(HF_ATTN, 420, "forward")] + call_impl(4) + [pf(MODEL, 150, "forward")] + call_impl(1) + [
    pf(TRAIN, 88, "train_step"), pf(TRAIN, 120, "main")]
T_OPTIM = [pf(ADAMW, 412, "_init_group"), pf(ADAMW, 220, "step"), pf(OPTIM, 33, "step"),
           pf(TRAIN, 95, "train_step"), pf(TRAIN, 120, "main")]
T_LOGITS = [pf(LINEAR, 125, "forward")] + call_impl(1) + [pf(MODEL, 160, "head"),
                                                            pf(TRAIN, 140, "evaluate"),
                                                            pf(TRAIN, 122, "main")]
T_LIBONLY = [pf(SITE_PKG + "/torch/cuda/random.py", 40, "manual_seed")]
T_GRAD = []  # made on autograd's backward thread: no Python stack
BACKWARD = {"thread": "backward", "node": "MmBackward0",
            "forward_site": pf(MODEL, 142, "forward")}


def tensors_obj(groups, cache=(0, 0, 0), more=None):
    total = sum(g["bytes"] for g in groups) + (more["bytes"] if more else 0)
    count = sum(g["count"] for g in groups) + (more["count"] if more else 0)
    groups = sorted(groups, key=lambda g: (-g["bytes"], "%s:%s:%s" % (
        (g["site"] or {}).get("file", ""), (g["site"] or {}).get("line", ""),
        (g["site"] or {}).get("function", ""))))
    return {"allocated_bytes": total, "count": count, "groups": groups, "more": more,
            "cache": {"bytes": cache[0], "segments": cache[1], "largest_free_bytes": cache[2]}}


def torch_allocator(t, peak):
    """devices[].allocator / oom.allocator agreeing with a tensors object."""
    reserved = t["allocated_bytes"] + t["cache"]["bytes"]
    return {"name": "pytorch", "version": "2.9.0+cu130", "requested_bytes": None,
            "allocated_bytes": t["allocated_bytes"], "reserved_bytes": reserved,
            "active_bytes": t["allocated_bytes"],
            "reserved_unallocated_bytes": t["cache"]["bytes"], "inactive_split_bytes": 0,
            "largest_free_block_bytes": {"small": 0, "large": t["cache"]["largest_free_bytes"]},
            "segments": 40, "num_alloc_retries": 0, "num_ooms": 0, "limit_bytes": None,
            "device_total_bytes": 80 * GiB, "device_free_bytes": None,
            "peak_allocated_bytes": peak, "config": {}, "top_tensors": None, "roles": None}


def tensors_exit():
    """An exit of a training run that keeps each eval step's logits: the
    tensors at exit, at the peak, and the growth by line."""
    live_t = tensors_obj([tgroup(T_WEIGHTS, 6 * GiB, 220), tgroup(T_OPTIM, 2 * GiB, 110),
                          tgroup(T_LOGITS, 12 * 196 * MiB, 12),
                          tgroup(T_LIBONLY, 2 * MiB, 1)],
                         cache=(1 * GiB + 512 * MiB, 12, 512 * MiB))
    peak_t = tensors_obj([tgroup(T_WEIGHTS, 6 * GiB, 220), tgroup(T_ACT, 3 * GiB, 96),
                          tgroup(T_ATTN, 1 * GiB + 256 * MiB, 48),
                          tgroup(T_OPTIM, 2 * GiB, 110), tgroup(T_KV, 1200 * MiB, 24),
                          tgroup(T_LOGITS, 11 * 196 * MiB, 11),
                          tgroup(T_GRAD, 300 * MiB, 30, origin=BACKWARD),
                          tgroup(T_LIBONLY, 2 * MiB, 1)])
    peak_t["time_ns"] = 9_000_000_000
    peak_t["step"] = 11
    reserved_peak = peak_t["allocated_bytes"] + 512 * MiB
    reserved_now = live_t["allocated_bytes"] + live_t["cache"]["bytes"]
    at_peak = [(S_WEIGHTS, "device", 6 * GiB, 220), (S_ACT, "device", reserved_peak - 8 * GiB, 96),
               (S_OPTIM, "device", 2 * GiB, 110)]
    live = [(S_WEIGHTS, "device", 6 * GiB, 220), (S_OPTIM, "device", 2 * GiB, 110),
            (S_ACT, "device", reserved_now - 8 * GiB, 40)]
    dev = Device(0, 9_000_000_000, at_peak, live, total=80 * GiB, free=60 * GiB)
    doc = snapshot(devices=[dev], stacks=ALL, counters={
        "unknown_frees": 0, "failed_frees": 0, "stacks": 7, "live_allocations": 370})
    d = doc["devices"][0]
    d["allocator"] = torch_allocator(live_t, peak_t["allocated_bytes"])
    d["tensors"] = live_t
    d["peak_tensors"] = peak_t
    logits = tgroup(T_LOGITS, 12 * 196 * MiB, 12)
    logits.update(bytes_per_step=196 * MiB, first_step=1, last_step=12, steps=12)
    del logits["count"], logits["origin"]
    d["growth"] = [logits]
    return doc


def tensors_oom():
    """An OOM in a GPT-2-like forward: eight lines hold the tensors, one of
    them Hugging Face's key/value cache, one backward's, one no user line."""
    groups = [tgroup(T_ACT, 25 * GiB, 400), tgroup(T_WEIGHTS, 14 * GiB, 220),
              tgroup(T_OPTIM, 8 * GiB + 512 * MiB, 110), tgroup(T_ATTN, 6 * GiB, 96),
              tgroup(T_KV, 1200 * MiB, 24), tgroup(T_LOGITS, 800 * MiB, 4),
              tgroup(T_GRAD, 300 * MiB, 30, origin=BACKWARD), tgroup(T_LIBONLY, 2 * MiB, 1)]
    t = tensors_obj(groups, cache=(512 * MiB, 6, 256 * MiB))
    held = t["allocated_bytes"] + t["cache"]["bytes"]
    live = [(S_ACT, "device", held - 23 * GiB, 400), (S_WEIGHTS, "device", 14 * GiB, 220),
            (S_OPTIM, "device", 9 * GiB, 110)]
    doc = oom_doc("exhausted", 80 * GiB, 1229 * MiB, live, 2 * GiB)
    a = torch_allocator(t, t["allocated_bytes"])
    a["requested_bytes"] = 2 * GiB
    a["tensors"] = t
    doc["oom"]["allocator"] = a
    d = doc["devices"][0]
    d["allocator"] = torch_allocator(t, t["allocated_bytes"])
    d["tensors"] = t
    peak = copy.deepcopy(t)
    peak.update(time_ns=doc["oom"]["time_ns"], step=3)
    d["peak_tensors"] = peak
    d["growth"] = None
    return doc


def tensors_many():
    """An exit whose tensors at the dump name 30 lines, and the writer
    folded 4100 more: a screen of them, the rest in one row."""
    groups = [tgroup([pf(LINEAR, 125, "forward")] + call_impl(1) +
                     [pf(MODEL, 300 + i, "block"), pf(TRAIN, 88, "train_step")],
                     (40 - i) * MiB, 1) for i in range(30)]
    t = tensors_obj(groups, cache=(64 * MiB, 2, 32 * MiB),
                    more={"groups": 4100, "bytes": 4100 * 4096, "count": 4100})
    held = t["allocated_bytes"] + t["cache"]["bytes"]
    live = [(S_ACT, "device", held, 40)]
    dev = Device(0, 9_000_000_000, live, live, total=80 * GiB, free=60 * GiB)
    doc = snapshot(devices=[dev], stacks=ALL, counters={
        "unknown_frees": 0, "failed_frees": 0, "stacks": 7, "live_allocations": 40})
    d = doc["devices"][0]
    d["allocator"] = torch_allocator(t, t["allocated_bytes"])
    d["tensors"] = t
    d["peak_tensors"] = None
    d["growth"] = []
    return doc


def write(name, doc):
    dump(doc, os.path.join(OUT, name))


def main():
    os.makedirs(OUT, exist_ok=True)
    write("exit_train.json", exit_train())
    write("oom_exhausted.json", oom_exhausted())
    write("oom_fragmentation.json", oom_fragmentation())
    write("oom_limit.json", oom_limit())
    write("rank0.json", rank(0, 3.0))
    write("rank1.oom.json", rank(1, 3.5, oom=True))
    write("rank2.json", rank(2, 4.25))
    # A 4-rank job on two hosts, ranks 1 and 3 running out of memory (1 first
    # on the job's clock though later on its own: 3 started 100 ms after it),
    # and the same job after a change that grew rank 2's peak by 6.2%.
    job("job_a", [3.0, 3.5, 3.25, 3.0], oom={1: 30_000_000_000, 3: 29_950_000_000})
    job("job_b", [3.0, 3.5, 3.85, 3.0], oom={1: 30_000_000_000, 3: 29_950_000_000})
    # A job of 6 whose ranks 4 and 5 wrote nothing.
    job("job_missing", [3.0, 3.0, 3.0, 3.0], world=6)
    base, new = diff_pair()
    write("diff_base.json", base)
    write("diff_new.json", new)
    write("gate_base.json", gate(0))
    write("gate_at5pct.json", gate(5 * MiB))          # 100 MiB * 5% = 5242880 B
    write("gate_over5pct.json", gate(5 * MiB + 1))
    write("thinned.json", thinned())
    write("tensors_exit.json", tensors_exit())
    write("tensors_oom.json", tensors_oom())
    write("tensors_many.json", tensors_many())
    # malformed inputs, one per class
    with open(os.path.join(OUT, "bad_notjson.json"), "w") as f:
        f.write("cumemtrace ran out of disk space\n")
    with open(os.path.join(OUT, "bad_foreign.json"), "w") as f:
        json.dump({"traceEvents": [], "displayTimeUnit": "ms"}, f)
    newer = copy.deepcopy(gate(0))
    newer["version"] = 2
    write("bad_version.json", newer)
    with open(os.path.join(OUT, "exit_train.json"), "rb") as f:
        whole = f.read()
    with open(os.path.join(OUT, "bad_truncated.json"), "wb") as f:
        f.write(whole[:1024])
    wrong = gate(0)
    wrong["devices"][0]["peak_bytes"] = "104857600"
    write("bad_type.json", wrong)
    # JSON of the right types that contradicts itself: the call sites at the
    # peak hold far more than the peak (the format: they sum to it exactly)
    contra = gate(0)
    contra["devices"][0]["at_peak"][0]["bytes"] *= 10**10
    write("bad_contradiction.json", contra)


if __name__ == "__main__":
    main()
