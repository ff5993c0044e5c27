"""PyTorch's figures of one device at one moment (an OOM, the exit, a
dump), as struct cumemtrace_allocator_facts: memory_stats(), the largest
free blocks, the limit, the live tensors by Python line (history), the
roles and the optimizer step (phases)."""
import ctypes
import os

library = part("library")  # noqa: F821 (set by cumemtrace_torch.part)
history = part("history")  # noqa: F821
roles = part("roles")  # noqa: F821
phases = part("phases")  # noqa: F821


def facts(torch, device, alloc, device_total, device_free, snap=None):
    """PyTorch's view of device `device` at an OOM of `alloc` bytes (its
    rounded request), from memory_stats() and the segment snapshot (`snap`,
    memory._snapshot()'s segments, when the caller took it)."""
    s = torch.cuda.memory_stats(device)
    largest = {"small": 0, "large": 0}
    segments = 0
    if snap is None:
        snap = history.snapshot(torch).get("segments", [])
    for seg in snap:
        if seg.get("device") != device:
            continue
        segments += 1
        pool = seg.get("segment_type", "large")
        for b in seg.get("blocks", []):
            if b.get("state") == "inactive" and b.get("size", 0) > largest.get(pool, 0):
                largest[pool] = b["size"]
    limit = -1
    try:
        total = torch.cuda.get_device_properties(device).total_memory
        fraction = torch.cuda.get_per_process_memory_fraction(device)
        if fraction < 1.0:
            limit = int(fraction * total)  # PyTorch's own rounding
            # Under a fraction PyTorch hands its observer the cap as
            # "device_total": the card's total is what a fraction is of.
            if device_total >= 0:
                device_total = total
    except Exception:
        pass
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""
    f = library.Facts()
    f.size = ctypes.sizeof(library.Facts)
    f.name = b"pytorch"
    f.version = torch.__version__.encode()
    f.config = conf.encode()
    f.requested_bytes = alloc
    f.allocated_bytes = s.get("allocated_bytes.all.current", -1)
    f.reserved_bytes = s.get("reserved_bytes.all.current", -1)
    f.active_bytes = s.get("active_bytes.all.current", -1)
    f.inactive_split_bytes = s.get("inactive_split_bytes.all.current", -1)
    f.largest_free_small_bytes = largest["small"]
    f.largest_free_large_bytes = largest["large"]
    f.segments = segments
    f.num_alloc_retries = s.get("num_alloc_retries", -1)
    f.num_ooms = s.get("num_ooms", -1)
    f.limit_bytes = limit
    f.device_total_bytes = device_total
    f.device_free_bytes = device_free
    f.ntop_tensors = -1
    f.peak_allocated_bytes = s.get("allocated_bytes.all.peak", -1)
    for field in ("parameter_bytes", "buffer_bytes", "gradient_bytes",
                  "optimizer_state_bytes", "other_tensor_bytes"):
        setattr(f, field, -1)
    scanned = None
    try:
        scanned = roles.scan(torch)
        r = roles.roles(torch, device, snap, f.allocated_bytes, scanned)
    except Exception:
        r = None  # never a reason to lose the rest of the facts
    if r is not None:
        (f.parameter_bytes, f.buffer_bytes, f.gradient_bytes, f.optimizer_state_bytes,
         f.other_tensor_bytes) = r[0]
        f.optimizers = r[1].encode()
    f.step, f.peak_step = phases.steps(device, alloc, scanned)
    try:
        phases.name_peak(torch, device, scanned)
    except Exception:
        pass  # the peak stays unnamed; the rest of the facts stand
    if history.recording:
        top = history.top_tensors(snap, device)
        arr = (library.TensorSite * max(len(top), 1))()
        for i, (stack, size, count) in enumerate(top):
            arr[i].stack = stack.encode(errors="replace")
            arr[i].bytes = size
            arr[i].count = count
        f.top_tensors = arr
        f.ntop_tensors = len(top)
        f.keep = arr  # alive until the library copied it
    return f
