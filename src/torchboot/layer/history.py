"""PyTorch's allocation history, which names the Python line of every live
block (torch.cuda.memory._record_memory_history), so that every view says
which tensors hold the memory, not only which line created each cached
segment.  On by default; CUMEMTRACE_TORCH_HISTORY=0 turns it off."""
import os
import sys
import threading

# enabled="state" keeps each live block's stack and no trace of alloc/free
# events: the cheapest mode that still names each live block's line
# (measured by tests/torch/scenarios/history_cost.py; docs/performance.md).
HISTORY_MODE = dict(enabled="state", context="alloc", stacks="python")
# The default (HISTORY_MODE only under CUMEMTRACE_TORCH_PEAK=0): the same
# with a trace of alloc/free events, which the peak's tensors replay (peak.py);
# context="alloc" (no stack a free: "all" is what makes memory_viz's own
# setting cost more a step), bounded: each reading of the trace turns every
# entry into Python objects, so its length is the dump's cost; 16,384
# entries still hold a step of some 4,000 allocations (three or four
# entries each), replayed at its end (docs/performance.md, "The tensor
# model's cost").
PEAK_ENTRIES = 16384
PEAK_MODE = dict(enabled="all", context="alloc", stacks="python", max_entries=PEAK_ENTRIES)
TOP_SITES = 5        # the library keeps 5
FRAMES_PER_SITE = 12  # innermost first: the outer ones say little
recording = False    # PyTorch records its history (ours or the user's)
users = False        # the program turned it on itself: its settings stand
tracing = False      # the peak's tensors: replay the trace (ours, or the program's)
_enabled = None      # torch._C._cuda_isHistoryEnabled, where PyTorch has it


def _on(torch):
    """Whether PyTorch records its history now; None when it cannot say."""
    fn = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    try:
        return bool(fn()) if fn is not None else None
    except Exception:
        return None


def start(torch):
    global recording, users, _enabled, tracing
    _enabled = torch
    if os.environ.get("CUMEMTRACE_TORCH_HISTORY", "") == "0":
        return
    try:
        if torch.cuda.get_allocator_backend() == "cudaMallocAsync":
            return  # it keeps no history (nor observers: the layer says so once)
    except Exception:
        pass
    want = os.environ.get("CUMEMTRACE_TORCH_PEAK", "")
    if _on(torch):
        # The program records its own history (PyTorch's documented
        # _record_memory_history workflow): turning ours on would replace
        # its settings - its trace, its stacks.  Read what it gives; its
        # trace (unbounded by PyTorch's default) is replayed only when asked.
        recording = users = True
        tracing = want == "1"
        if tracing:
            _count_resets(torch)
        return
    try:
        peak = want != "0"
        mode = PEAK_MODE if peak else HISTORY_MODE
        if peak and _entries() is not None:
            mode = dict(mode, max_entries=_entries())
        torch.cuda.memory._record_memory_history(**dict(mode, stacks=_stacks()))
        recording = True
        tracing = peak
        if tracing:
            _count_resets(torch)
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: PyTorch refused to record its allocation "
                         f"history ({type(e).__name__}: {e}); snapshots name call sites, "
                         f"not tensors (CUMEMTRACE_TORCH_HISTORY=0 skips the attempt)\n")


def _stacks():
    """CUMEMTRACE_TORCH_STACKS: "python" (the default) or "all", PyTorch's
    C++ frames too, which name the autograd node of each block made in
    backward at a cost a step and a dump (docs/pytorch.md)."""
    v = os.environ.get("CUMEMTRACE_TORCH_STACKS", "")
    if v in ("", "python", "all"):
        return v or "python"
    sys.stderr.write(f"cumemtrace: warning: CUMEMTRACE_TORCH_STACKS={v!r} is not "
                     f"'python' or 'all'; recording Python stacks (unset it or "
                     f"set one of those)\n")
    return "python"


def _entries():
    """CUMEMTRACE_TORCH_PEAK_ENTRIES, for the tests: a trace shorter than
    the default, so that a peak falls out of it in a few steps."""
    v = os.environ.get("CUMEMTRACE_TORCH_PEAK_ENTRIES", "")
    return int(v) if v.isdigit() and int(v) > 0 else None


def _count_resets(torch):
    try:
        part("peak").start(torch)  # noqa: F821 (set by cumemtrace_torch.part)
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: PyTorch's peak resets are not seen "
                         f"({type(e).__name__}: {e}); the peak's tensors are read "
                         f"at dumps only\n")


def _read(torch, traces):
    """PyTorch's memory snapshot, its trace of events only with `traces`
    (a trace of a million events costs its symbolization at every dump)."""
    try:
        return torch._C._cuda_memorySnapshot((0, 0, traces))
    except (TypeError, AttributeError, RuntimeError):
        return torch.cuda.memory._snapshot()  # an older torch: always with it


def snapshot(torch, traces=False):
    """torch.cuda.memory._snapshot() (without its trace of events unless
    `traces`), without the import of torch._inductor that PyTorch's
    symbolizer triggers by asking `hasattr(torch, "_inductor")` (torch's lazy
    module __getattr__ imports it: the bulk of a small script's exit under
    the tracer).  It asks only to map frames of code inductor generated (its
    codecache); a program that never imported torch._inductor has none, so
    the frames are the same.
    During the call, and on this thread only, torch's module __getattr__
    answers "no such attribute" for "_inductor"; every other name, and every
    other thread, gets torch's own answer; it is put back after."""
    mod = torch.__dict__
    orig = mod.get("__getattr__")
    if orig is None or "torch._inductor" in sys.modules or "_inductor" in mod:
        return _read(torch, traces)
    me = threading.get_ident()

    def lazy_but_not_inductor(name):
        if name == "_inductor" and threading.get_ident() == me:
            raise AttributeError(name)
        return orig(name)
    mod["__getattr__"] = lazy_but_not_inductor
    try:
        return _read(torch, traces)
    finally:
        if mod.get("__getattr__") is lazy_but_not_inductor:
            mod["__getattr__"] = orig


def reading():
    """Whether live blocks carry their stacks now: our history, or the
    program's while it keeps it on (it may turn it off or on at will)."""
    if _enabled is None:
        return False
    on = _on(_enabled)
    return on if on is not None else recording


def from_the_start():
    """Whether every live block was allocated while a history recorded:
    ours, on since torch's CUDA started (before its first allocation), and
    on now.  A block without frames then came from a thread running no
    Python; under the program's own history (it may have started it late)
    it may also predate the history, which PyTorch's snapshot does not
    tell apart.  Not seen: a program that turned ours off and on again in
    between (PyTorch keeps no record of it)."""
    return recording and not users and bool(_on(_enabled))


def _torch_dir():
    torch = sys.modules.get("torch")
    f = getattr(torch, "__file__", None)
    return os.path.dirname(f) + os.sep if f else None


def _from_user_code(frames, torch_dir):
    """The frames outside torch's own package (the user's lines, not
    module.py's _call_impl or _apply chains between them); all of
    them when every frame is torch's."""
    if not torch_dir:
        return frames
    user = [fr for fr in frames if not str(fr.get("filename", "")).startswith(torch_dir)]
    return user or frames


def top_tensors(snapshot_segments, device):
    """[(stack text, bytes, count)] of the live blocks' allocation stacks
    from the user's code on, largest first (bytes as PyTorch counts them in
    allocated_bytes)."""
    sites = {}
    torch_dir = _torch_dir()
    for seg in snapshot_segments:
        if seg.get("device") != device:
            continue
        for b in seg.get("blocks", []):
            if b.get("state") != "active_allocated":
                continue
            frames = _from_user_code(b.get("frames") or [], torch_dir)
            key = "\n".join(f"{fr.get('filename', '?')}:{fr.get('line', 0)}:"
                            f"{fr.get('name', '?')}" for fr in frames[:FRAMES_PER_SITE])
            site = sites.setdefault(key, [0, 0])
            site[0] += b.get("size", 0)
            site[1] += 1
    return sorted(((k, v[0], v[1]) for k, v in sites.items()),
                  key=lambda t: (-t[1], t[0]))[:TOP_SITES]
