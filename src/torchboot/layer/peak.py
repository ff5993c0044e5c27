"""The peak's tensors (docs/snapshot-format.md devices[].peak_tensors): the
live tensors at the moment of the device's max_memory_allocated, grouped as
tensors.py groups them, found by replaying PyTorch's trace of allocator
events (torch.cuda.memory._snapshot()["device_traces"], history with
enabled="all") backward from the live blocks now, as memory_viz does:
an "alloc" undone takes its block out, a "free_requested" undone puts it
back, until the allocated bytes equal max_memory_allocated.  A block freed
since the peak has only its requested size in the trace: it counts with
PyTorch's rounding (512-byte multiples), and the result is kept only when
the replayed bytes equal max_memory_allocated exactly; else (a block that
was not split, roundup_power2_divisions, a peak older than the trace's
max_entries) there is no reading - never an estimate.

It is read only with CUMEMTRACE_TORCH_PEAK=1 (history.py: ours, bounded,
or the program's own); otherwise peak_tensors is null.  Not the trace's
cost a step (docs/performance.md: in instructions, PyTorch's trace with
context="alloc" costs a step what enabled="state" does) but every dump's:
memory._snapshot() then turns the whole trace into Python objects, at each
dump the layer makes and at every _snapshot() the program makes itself,
whose device_traces would then carry our trace."""
tensors = part("tensors")  # noqa: F821 (set by cumemtrace_torch.part)

MIN_BLOCK = 512  # PyTorch's kMinBlockSize: every block a multiple of it


def _rounded(size):
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def read(snap, device, max_allocated, step):
    """peak_tensors of `device` from a full memory._snapshot() `snap`, or
    None when its trace does not reach the peak exactly."""
    traces = snap.get("device_traces") or []
    if device >= len(traces) or max_allocated is None or max_allocated < 0:
        return None
    trace = traces[device]
    live = {}
    for seg in snap.get("segments", ()):
        if seg.get("device") != device:
            continue
        for b in seg.get("blocks", ()):
            if b.get("state") == "active_allocated":
                live[b["address"]] = [b["size"], b.get("frames") or (), None]
    allocated = sum(v[0] for v in live.values())
    at = len(trace)  # the peak lies just before trace[at]
    while allocated != max_allocated and at > 0:
        at -= 1
        e = trace[at]
        action = e.get("action")
        if action == "alloc":
            got = live.pop(e.get("addr"), None)
            allocated -= got[0] if got is not None else _rounded(e.get("size", 0))
        elif action == "free_requested":
            live[e.get("addr")] = [_rounded(e.get("size", 0)), None, e]
            allocated += live[e.get("addr")][0]
    if allocated != max_allocated:
        return None
    # the blocks freed since the peak: their stacks from their allocation,
    # further back in the trace
    missing = {a for a, v in live.items() if v[1] is None}
    for e in reversed(trace[:at]):
        if not missing:
            break
        if e.get("action") == "alloc" and e.get("addr") in missing:
            live[e["addr"]][1] = e.get("frames") or ()
            missing.discard(e["addr"])
    blocks = [{"size": v[0], "frames": v[1] or (), "state": "active_allocated"}
              for v in live.values()]
    t = tensors.read([{"device": device, "total_size": 0, "blocks": blocks}], device)
    t.pop("cache", None)
    t["cache"] = None
    when = trace[at - 1].get("time_us") if at > 0 else None
    t["time_ns"] = None  # the trace's clock (Unix us) is not the snapshot's
    t["time_unix_us"] = when
    t["step"] = step
    return t
