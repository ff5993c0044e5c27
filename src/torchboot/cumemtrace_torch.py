"""The PyTorch layer of cumemtrace's post-mortem (issue 12).

Our C hooks run inside cudaMalloc while PyTorch's caching allocator holds
its device mutex, so they must never call into torch.  PyTorch calls its
out-of-memory observers after releasing that mutex, with the GIL held, for
every OutOfMemoryError it is about to raise (also for refusals by
set_per_process_memory_fraction, which never reach CUDA).  There,
torch.cuda.memory_stats() and torch.cuda.memory._snapshot() are safe: we
take PyTorch's own figures and hand them to the preloaded library through
its public API (cumemtrace_allocator_oom in include/cumemtrace.h), which
writes them into the post-mortem of the failing request.

Under `cumemtrace fit` (CUMEMTRACE_FIT_REPORT names a file) it also writes,
at exit, PyTorch's peak figures and where the first out-of-memory error was
raised, for fit's table (the format is in src/cli/views/fit.c).

Nothing here runs unless the program imports torch; nothing here raises.
"""
import ctypes
import functools
import os
import sys
import threading
import time
import traceback

_warned = False
_FIT = os.environ.get("CUMEMTRACE_FIT_REPORT")
_fit_oom = []  # (time.time(), "file:line (function)") of the first OOM observed


def _warn(what):
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"cumemtrace: warning: PyTorch layer off: {what}; "
                         f"post-mortems show driver-level figures only\n")


class TensorSite(ctypes.Structure):
    """struct cumemtrace_tensor_site (include/cumemtrace.h)."""
    _fields_ = [("stack", ctypes.c_char_p), ("bytes", ctypes.c_int64),
                ("count", ctypes.c_int64)]


class Facts(ctypes.Structure):
    """struct cumemtrace_allocator_facts (include/cumemtrace.h)."""
    _fields_ = [(n, t) for n, t in [
        ("size", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("version", ctypes.c_char_p),
        ("config", ctypes.c_char_p),
        ("requested_bytes", ctypes.c_int64),
        ("allocated_bytes", ctypes.c_int64),
        ("reserved_bytes", ctypes.c_int64),
        ("active_bytes", ctypes.c_int64),
        ("inactive_split_bytes", ctypes.c_int64),
        ("largest_free_small_bytes", ctypes.c_int64),
        ("largest_free_large_bytes", ctypes.c_int64),
        ("segments", ctypes.c_int64),
        ("num_alloc_retries", ctypes.c_int64),
        ("num_ooms", ctypes.c_int64),
        ("limit_bytes", ctypes.c_int64),
        ("device_total_bytes", ctypes.c_int64),
        ("device_free_bytes", ctypes.c_int64),
        ("top_tensors", ctypes.POINTER(TensorSite)),
        ("ntop_tensors", ctypes.c_int64),
        ("peak_allocated_bytes", ctypes.c_int64),
        ("parameter_bytes", ctypes.c_int64),
        ("buffer_bytes", ctypes.c_int64),
        ("gradient_bytes", ctypes.c_int64),
        ("optimizer_state_bytes", ctypes.c_int64),
        ("other_tensor_bytes", ctypes.c_int64),
        ("optimizers", ctypes.c_char_p),
        ("step", ctypes.c_int64),
        ("peak_step", ctypes.c_int64),
    ]]


class Block(ctypes.Structure):
    """struct cumemtrace_allocator_block."""
    _fields_ = [("offset", ctypes.c_int64), ("size", ctypes.c_int64),
                ("state", ctypes.c_int32), ("stack", ctypes.c_int32)]


class Segment(ctypes.Structure):
    """struct cumemtrace_allocator_segment."""
    _fields_ = [("address", ctypes.c_uint64), ("size", ctypes.c_int64),
                ("pool", ctypes.c_int32), ("nblocks", ctypes.c_uint32),
                ("blocks", ctypes.POINTER(Block))]


_STATES = {"inactive": 0, "active_allocated": 1, "active_pending_free": 2}


# The tag that hands over the layout at a moment without a failure (the
# exit): include/cumemtrace.h's CUMEMTRACE_LAYOUT_STATE.
LAYOUT_STATE = -1
FRAMES_PER_BLOCK = 64  # of a live block's Python frames, innermost first


def _block_stack(frames):
    return "\n".join(f"{fr.get('filename', '?')}:{fr.get('line', 0)}:{fr.get('name', '?')}"
                     .replace("\n", " ") for fr in frames[:FRAMES_PER_BLOCK])


def segments(torch, device, tag, fn, snap=None):
    """Hands the library where PyTorch's memory on `device` lies (its
    segments and their blocks, from memory._snapshot()), tagged with the
    num_ooms of the facts that follow (an OOM) or LAYOUT_STATE (the exit),
    with the Python frames of each block where PyTorch's history has them
    and the library takes them (fn from _segments_fn)."""
    fn, with_stacks = fn
    if snap is None:
        snap = torch.cuda.memory._snapshot().get("segments", [])
    segs = sorted((g for g in snap if g.get("device") == device), key=lambda g: g["address"])
    arr = (Segment * len(segs))()
    keep = []  # the block arrays must outlive the call
    stacks = {}
    for i, g in enumerate(segs):
        blocks = g.get("blocks", [])
        b = (Block * len(blocks))()
        for j, k in enumerate(blocks):
            b[j].offset = k["address"] - g["address"]
            b[j].size = k["size"]
            b[j].state = _STATES.get(k.get("state"), 3)
            frames = k.get("frames") if with_stacks and k.get("state") != "inactive" else None
            if frames:
                b[j].stack = stacks.setdefault(_block_stack(frames), len(stacks) + 1)
        keep.append(b)
        arr[i].address = g["address"]
        arr[i].size = g.get("total_size", 0)
        arr[i].pool = 0 if g.get("segment_type") == "small" else 1
        arr[i].nblocks = len(blocks)
        arr[i].blocks = ctypes.cast(b, ctypes.POINTER(Block))
    if not with_stacks:
        fn(device, tag, arr, len(segs))
        return
    text = (ctypes.c_char_p * max(len(stacks), 1))()
    for t, k in stacks.items():
        text[k - 1] = t.encode(errors="replace")
    fn(device, tag, arr, len(segs), text, len(stacks))


def _segments_fn():
    """(the library's layout hand-off, whether it takes stacks), or None."""
    lib = ctypes.CDLL(None)
    try:
        fn = lib.cumemtrace_allocator_layout
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(Segment), ctypes.c_uint32,
                       ctypes.POINTER(ctypes.c_char_p), ctypes.c_uint32]
        return fn, True
    except (AttributeError, OSError):
        pass
    try:
        fn = lib.cumemtrace_allocator_segments
    except (AttributeError, OSError):
        return None  # an older library: the driver-level layout stands
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(Segment), ctypes.c_uint32]
    return fn, False


# PyTorch's allocation history names the Python line of every live block
# (torch.cuda.memory._record_memory_history), so that every view says which
# tensors hold the memory, not only which line created each cached segment.
# On by default; CUMEMTRACE_TORCH_HISTORY=0 turns it off.
# enabled="state" keeps each live block's stack and no trace of alloc/free
# events: the cheapest mode that still names each live block's line
# (measured by tests/torch/scenarios/history_cost.py; docs/performance.md).
HISTORY_MODE = dict(enabled="state", context="alloc", stacks="python")
TOP_SITES = 5        # the library keeps 5
FRAMES_PER_SITE = 12  # innermost first: the outer ones say little
_history = False


def _start_history(torch):
    global _history
    if os.environ.get("CUMEMTRACE_TORCH_HISTORY", "") == "0":
        return
    try:
        if torch.cuda.get_allocator_backend() == "cudaMallocAsync":
            return  # it keeps no history (nor observers: _attach says so once)
    except Exception:
        pass
    try:
        torch.cuda.memory._record_memory_history(**HISTORY_MODE)
        _history = True
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: PyTorch refused to record its allocation "
                         f"history ({type(e).__name__}: {e}); snapshots name call sites, "
                         f"not tensors (CUMEMTRACE_TORCH_HISTORY=0 skips the attempt)\n")


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


def _top_tensors(snapshot_segments, device):
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


# Roles: whose tensor each live block is.  Modules and optimizers are
# found by a scan of the garbage collector's objects at the dump (a dump is
# rare: the exit, an OOM); the optimizers PyTorch's global step hook saw
# are added (one not tracked by the collector would be missed otherwise).
_optimizers = None  # weakref.WeakSet of the optimizers seen stepping
PARAMETERS, BUFFERS, GRADIENTS, OPTIMIZER, OTHER = range(5)


def _optim_module():
    # torch.optim's submodule: torch may load torch.optim lazily, and at
    # CUDA's initialisation its attribute is not there yet.
    import importlib
    return importlib.import_module("torch.optim.optimizer")


def _watch_optimizers(torch):
    global _optimizers
    import weakref
    _optimizers = weakref.WeakSet()
    add = _optimizers.add

    def seen(optimizer, args, kwargs):
        add(optimizer)
    try:
        _optim_module().register_optimizer_step_pre_hook(seen)
    except Exception:
        pass  # an older torch: the scan finds them


def _scan(torch):
    """The live modules and optimizers: the collector's objects, and the
    optimizers seen stepping."""
    import gc
    Module, Optimizer = torch.nn.Module, torch.optim.Optimizer
    modules, optimizers = [], {}
    for o in gc.get_objects():
        t = type(o)  # not isinstance: it reads __class__, which some objects warn about
        if issubclass(t, Module):
            modules.append(o)
        elif issubclass(t, Optimizer):
            optimizers[id(o)] = o
    for o in list(_optimizers or ()):
        optimizers.setdefault(id(o), o)
    return modules, list(optimizers.values())


def roles(torch, device, snapshot_segments, allocated, scanned=None):
    """[parameters, buffers, gradients, optimizer state, other] bytes of
    `allocated` (memory_allocated of `device`) and the optimizers' class
    names: each live block (PyTorch's active_allocated blocks) gets the role
    of the tensor whose storage it is - a block holds one storage, at its
    start - parameters first, then buffers, gradients and optimizer state;
    what no role claims is "other" (activations kept for backward, inputs,
    temporaries).  None when the blocks do not add up to `allocated`."""
    blocks = {}
    for seg in snapshot_segments:
        if seg.get("device") != device:
            continue
        for b in seg.get("blocks", []):
            if b.get("state") == "active_allocated":
                blocks[b["address"]] = b["size"]
    if sum(blocks.values()) != allocated:
        return None  # a tensor came or went between the two reads
    out = [0] * 5
    Tensor = torch.Tensor

    def claim(t, role):
        if not isinstance(t, Tensor) or not t.is_cuda or t.device.index != device:
            return
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:
            return  # a tensor without storage (sparse, meta, subclass)
        size = blocks.pop(ptr, None)
        if size is not None:
            out[role] += size
    modules, optimizers = scanned if scanned is not None else _scan(torch)
    params = []
    for m in modules:
        params.extend(m._parameters.values())
    for o in optimizers:
        for g in o.param_groups:
            params.extend(g.get("params", ()))
    for p in params:
        claim(p, PARAMETERS)
    for m in modules:
        for b in m._buffers.values():
            claim(b, BUFFERS)
    for p in params:
        if p is not None:
            claim(p.grad, GRADIENTS)
    names = []
    for o in optimizers:
        held = out[OPTIMIZER]
        for state in o.state.values():
            if isinstance(state, dict):
                for v in state.values():
                    claim(v, OPTIMIZER)
        if out[OPTIMIZER] > held and type(o).__name__ not in names:
            names.append(type(o).__name__)
    out[OTHER] = sum(blocks.values())
    return out, ", ".join(names)


# Phases: forward, backward and the optimizer's step, with the module's
# qualified name, pushed to the library (cumemtrace_phase_push, source
# "torch") from PyTorch's global hooks, so that every allocation carries
# them and the device's peak and each OOM name where they happened.
#   forward   a global forward pre-hook pushes "forward" at the outermost
#             module of a thread, then each module's name (relative to
#             that outermost one, whose own name is its class); the global
#             forward hook (always_call: also when forward raises) pops.
#   backward  the forward hook puts a pre-hook on the module's output's
#             autograd node: when backward reaches it, on autograd's thread,
#             the phase becomes "backward" / the module's name (backward
#             runs the graph in reverse, so a module's nodes follow its
#             output's); a final callback of the pass closes it.
#   step      PyTorch's global optimizer step pre/post hooks: "optimizer
#             step", and the step count (the most any optimizer stepped).
# Off by default, CUMEMTRACE_TORCH_PHASES=1 turns it on: every module call
# then pays PyTorch's hooked call path and two hooks - +16 % wall, +21 %
# instructions of a small model's step where kernels take no time (make
# bench: scripts/bench_torch_phases.py, docs/performance.md), 8 times the
# 2 % a default may cost.
_phase_push = _phase_pop = None
_steps = {}          # id(optimizer) -> steps taken
_step = [0]          # the most steps any optimizer took
_stepping = [0]      # optimizer.step() calls under way
_peak_seen = {}      # device -> peak_time_ns the library reported at a step's end
_peak_step = {}      # device -> the step in which its peak was reached
_usage_fn = None
TORCH = b"torch"


class Usage(ctypes.Structure):
    """struct cumemtrace_usage (include/cumemtrace.h)."""
    _fields_ = [("current_bytes", ctypes.c_uint64), ("mark_bytes", ctypes.c_uint64),
                ("peak_bytes", ctypes.c_uint64), ("mark_time_ns", ctypes.c_int64),
                ("peak_time_ns", ctypes.c_int64)]


class _Thread(threading.local):
    depth = 0          # modules open in forward on this thread
    names = None       # id(module) -> bytes name, under the outermost module
    root = None
    backward = False   # "backward" open on this thread (autograd's)


def _names_of(root):
    names = {id(m): (n or type(m).__name__).encode(errors="replace")
             for n, m in root.named_modules()}
    return names


def _start_phases(torch):
    global _phase_push, _phase_pop, _usage_fn
    if os.environ.get("CUMEMTRACE_TORCH_PHASES", "") != "1":
        return
    try:
        lib = ctypes.CDLL(None)
        push, pop = lib.cumemtrace_phase_push, lib.cumemtrace_phase_pop
    except (AttributeError, OSError):
        return  # an older library: no phases
    push.argtypes, push.restype = [ctypes.c_char_p, ctypes.c_char_p], ctypes.c_int
    pop.argtypes, pop.restype = [ctypes.c_char_p], ctypes.c_int
    _phase_push, _phase_pop = push, pop
    try:
        usage = lib.cumemtrace_usage
        usage.argtypes, usage.restype = [ctypes.c_int, ctypes.POINTER(Usage)], ctypes.c_int
        _usage_fn = usage
    except AttributeError:
        pass
    here = _Thread()
    Tensor = torch.Tensor
    engine = torch.autograd.Variable._execution_engine
    names_cache = {}  # id(root) -> (weakref to root, names)
    import weakref

    def leave_backward():
        if here.backward:
            here.backward = False
            pop(TORCH)
            pop(TORCH)

    def enter_backward(name, grad_outputs):
        if here.backward:
            pop(TORCH)
        else:
            here.backward = True
            push(TORCH, b"backward")
            try:
                engine.queue_callback(leave_backward)
            except Exception:
                pass  # closed at the next backward instead
        push(TORCH, name)

    def names_for(root):
        got = names_cache.get(id(root))
        if got is None or got[0]() is not root:
            got = (weakref.ref(root), _names_of(root))
            names_cache[id(root)] = got
        return got[1]

    def pre(module, args):
        if here.depth == 0:
            here.root = module
            here.names = names = names_for(module)
            push(TORCH, b"forward")
        else:
            names = here.names
        name = names.get(id(module))
        if name is None:  # added since: name the modules again
            names_cache.pop(id(here.root), None)
            here.names = names = names_for(here.root)
            name = names.get(id(module)) or type(module).__name__.encode()
        here.depth += 1
        push(TORCH, name)

    def post(module, args, output):
        if here.depth == 0:
            return  # its pre-hook ran before ours was registered
        here.depth -= 1
        pop(TORCH)
        if type(output) is not Tensor and not isinstance(output, Tensor):
            if type(output) in (tuple, list) and output and isinstance(output[0], Tensor):
                output = output[0]
            else:
                output = None
        node = output.grad_fn if output is not None else None
        if node is not None:
            name = here.names.get(id(module)) if here.names else None
            node.register_prehook(functools.partial(enter_backward, name or
                                                    type(module).__name__.encode()))
        if here.depth == 0:
            pop(TORCH)
            here.root = here.names = None

    def step_pre(optimizer, args, kwargs):
        _stepping[0] += 1
        push(TORCH, b"optimizer step")

    def step_post(optimizer, args, kwargs):
        _stepping[0] -= 1
        pop(TORCH)
        n = _steps[id(optimizer)] = _steps.get(id(optimizer), 0) + 1
        if n > _step[0]:
            _step[0] = n
            _note_peak_step(torch, n)

    from torch.nn.modules import module as m
    m.register_module_forward_pre_hook(pre)
    m.register_module_forward_hook(post, always_call=True)
    _optim_module().register_optimizer_step_pre_hook(step_pre)
    _optim_module().register_optimizer_step_post_hook(step_post)


def _note_peak_step(torch, step):
    """At the end of step `step`: a device whose peak moved since the last
    step's end reached it during this step."""
    if _usage_fn is None:
        return
    u = Usage()
    for d in range(torch.cuda.device_count()):
        if _usage_fn(d, ctypes.byref(u)) == 1 and u.peak_time_ns != _peak_seen.get(d):
            _peak_seen[d] = u.peak_time_ns
            _peak_step[d] = step


def _library(name="cumemtrace_allocator_oom"):
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None  # not traced: nothing to tell
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(Facts)]
    return fn


def _user_frame(frames):
    """The innermost of `frames` (FrameSummary, outermost first) outside
    torch and this layer: the line of the user's script that failed."""
    skip = (os.path.dirname(os.path.abspath(__file__)),)
    try:
        import torch
        skip += (os.path.dirname(os.path.abspath(torch.__file__)),)
    except Exception:
        pass
    for f in reversed(frames):
        path = os.path.abspath(f.filename)
        if not path.startswith(skip) and not f.filename.startswith("<"):
            return f"{f.filename}:{f.lineno} ({f.name})"
    return None


def _fit_report(torch):
    """Writes fit's report: PyTorch's own peaks of the current device and
    the first out-of-memory error (when, where)."""
    if not _FIT:
        return
    lines = ["cumemtrace-fit 1"]
    if torch.cuda.is_initialized():
        d = torch.cuda.current_device()
        s = torch.cuda.memory_stats(d)
        lines += [f"max_allocated {torch.cuda.max_memory_allocated(d)}",
                  f"max_reserved {torch.cuda.max_memory_reserved(d)}",
                  f"num_ooms {s.get('num_ooms', 0)}",
                  f"total {torch.cuda.get_device_properties(d).total_memory}"]
    err = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    where = None
    if err is not None and isinstance(err, torch.OutOfMemoryError):
        where = _user_frame(traceback.extract_tb(err.__traceback__))
        lines.append("oom_message " + (str(err).splitlines() or [""])[0])
    if _fit_oom:
        lines.append(f"oom_time {_fit_oom[0][0]:.3f}")
        where = where or _fit_oom[0][1]
    if where:
        lines.append("oom_where " + where)
    with open(_FIT, "w") as fh:
        fh.write("\n".join(l.replace("\n", " ") for l in lines) + "\n")


def _report_state(torch, state, layout=None):
    """PyTorch's figures now, for every device it used, through
    cumemtrace_allocator_state; with `layout` (at exit) also its segments
    and blocks (cumemtrace_allocator_layout)."""
    if not torch.cuda.is_initialized():
        return
    for device in range(torch.cuda.device_count()):
        if torch.cuda.memory_reserved(device) == 0 and \
                torch.cuda.max_memory_reserved(device) == 0:
            continue
        f = facts(torch, device, -1, -1, -1)
        if layout is not None and layout[0] is not None:
            try:
                segments(torch, device, LAYOUT_STATE, layout[0])
            except Exception as e:
                layout[0] = None
                _warn(f"PyTorch segment layout at exit: {type(e).__name__}: {e}")
        state(device, ctypes.byref(f))


def _at_exit(torch, state, layout):
    """PyTorch's figures at interpreter exit, so that what is live at exit is
    split into tensors (possible leaks) and the allocator's cache, and its
    segments and blocks (layout[0], from _segments_fn), so that the exit
    snapshot draws PyTorch's own blocks (devices[].allocator_segments)."""
    try:
        _fit_report(torch)
    except Exception as e:
        _warn(f"fit report: {type(e).__name__}: {e}")
    try:
        _report_state(torch, state, layout)
    except Exception as e:
        _warn(f"{type(e).__name__}: {e}")


# Fresh figures at every dump (signal, CUMEMTRACE_INTERVAL, cumemtrace_dump,
# the pytest plugin's marks): the library runs the callable registered here
# just before it writes (cumemtrace_allocator_refresher in
# include/cumemtrace.h; src/preload/life/torch_layer.c) - on Python's main
# thread between two bytecodes, or on the thread that asked for the dump.
# It must never raise nor print on stdout: a failure is said once on stderr
# and the dump keeps the figures it had.  Unregistered from Python's atexit,
# while the interpreter is whole (a call queued during its teardown then
# finds nothing to run).
_refresh_warned = False
_refreshing = [False]


def _importing(frame):
    """True when `frame` or a caller runs inside importlib: the refresh may
    interrupt the main thread anywhere, and PyTorch's first memory snapshot
    imports torch._inductor, which inside an import of torch._dynamo (the
    first optimizer's construction) broke the host's import."""
    while frame is not None:
        name = frame.f_code.co_filename
        if "importlib" in name and "_bootstrap" in name:
            return True
        frame = frame.f_back
    return False


def _register_refresh(torch, state):
    try:
        reg = ctypes.PyDLL(None).cumemtrace_allocator_refresher  # keeps the GIL
    except (AttributeError, OSError):
        return  # an older library: its dumps carry the exit's figures
    reg.restype = ctypes.c_int
    reg.argtypes = [ctypes.py_object]

    def refresh():
        """True when it read PyTorch's figures, False for "not now"."""
        global _refresh_warned
        if _refreshing[0]:
            return True  # asked again while it reads: that reading reports
        if _importing(sys._getframe(1)):
            return False  # the library asks again in 10 ms
        _refreshing[0] = True
        try:
            _report_state(torch, state)
        except Exception as e:
            if not _refresh_warned:
                _refresh_warned = True
                sys.stderr.write(f"cumemtrace: warning: PyTorch's figures could not be "
                                 f"read for a snapshot ({type(e).__name__}: {e}); it holds "
                                 f"the last ones read\n")
        finally:
            _refreshing[0] = False
        return True

    if reg(refresh) != 0:
        return

    def unregister():
        try:
            reg(ctypes.py_object())
        except Exception:
            pass
    import atexit
    atexit.register(unregister)


def facts(torch, device, alloc, device_total, device_free):
    """PyTorch's view of device `device` at an OOM of `alloc` bytes (its
    rounded request), from memory_stats() and the segment snapshot."""
    s = torch.cuda.memory_stats(device)
    largest = {"small": 0, "large": 0}
    segments = 0
    snap = torch.cuda.memory._snapshot().get("segments", [])
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
    f = Facts()
    f.size = ctypes.sizeof(Facts)
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
        scanned = _scan(torch)
        r = roles(torch, device, snap, f.allocated_bytes, scanned)
    except Exception:
        r = None  # never a reason to lose the rest of the facts
    if r is not None:
        (f.parameter_bytes, f.buffer_bytes, f.gradient_bytes, f.optimizer_state_bytes,
         f.other_tensor_bytes) = r[0]
        f.optimizers = r[1].encode()
    f.step = f.peak_step = -1
    if _phase_push is not None and _step[0] == 0 and scanned is not None and scanned[1]:
        # An optimizer that has not stepped yet: before the first step (0),
        # or in it while its first step() runs.
        f.step = 1 if alloc >= 0 and _stepping[0] else 0
        f.peak_step = 0
    elif _phase_push is not None and _step[0] > 0:
        # At an OOM the step under way; at other moments the steps done.
        f.step = _step[0] + (1 if alloc >= 0 else 0)
        peak_step = _peak_step.get(device, -1)
        if alloc < 0 and _usage_fn is not None:
            u = Usage()  # a peak after the last step's end: the step under way
            if _usage_fn(device, ctypes.byref(u)) == 1 and \
                    u.peak_time_ns != _peak_seen.get(device):
                peak_step = _step[0] + 1
        f.peak_step = peak_step
    if _history:
        top = _top_tensors(snap, device)
        arr = (TensorSite * max(len(top), 1))()
        for i, (stack, size, count) in enumerate(top):
            arr[i].stack = stack.encode(errors="replace")
            arr[i].bytes = size
            arr[i].count = count
        f.top_tensors = arr
        f.ntop_tensors = len(top)
        f.keep = arr  # alive until the library copied it
    return f


def _exit_snapshot_at_program_end():
    """The exit snapshot as the script's own code ends (Python's atexit),
    before the interpreter's teardown frees the tensors it kept: with numpy
    loaded that teardown frees every one, and the library's own exit hooks
    (Py_AtExit, the C exit) come after it.  Registered before _at_exit, so
    it runs after it (atexit runs in reverse order) and the snapshot holds
    the allocator's figures at exit."""
    try:
        fn = ctypes.CDLL(None).cumemtrace_exit_snapshot
    except (AttributeError, OSError):
        return  # not traced, or an older library: its own exit hooks stand
    fn.restype = ctypes.c_int
    fn.argtypes = []
    import atexit
    atexit.register(fn)


def _attach(torch, report):
    _exit_snapshot_at_program_end()
    _start_history(torch)
    _watch_optimizers(torch)
    try:
        _start_phases(torch)
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: PyTorch phases off ({type(e).__name__}: "
                         f"{e}); peaks and OOMs are not named by module\n")
    layout = [_segments_fn()]

    def observer(device, alloc, device_total, device_free):
        if _FIT and not _fit_oom:
            try:
                _fit_oom.append((time.time(), _user_frame(traceback.extract_stack())))
            except Exception:
                _fit_oom.append((time.time(), None))
        try:
            f = facts(torch, device, alloc, device_total, device_free)
            if layout[0] is not None:
                try:
                    segments(torch, device, f.num_ooms, layout[0])
                except Exception as e:
                    layout[0] = None
                    sys.stderr.write(f"cumemtrace: warning: PyTorch segment layout off: "
                                     f"{type(e).__name__}: {e}; post-mortems draw the "
                                     f"driver-level layout only\n")
            report(device, ctypes.byref(f))
        except Exception as e:  # an observer must never raise
            _warn(f"{type(e).__name__}: {e}")
    try:
        torch._C._cuda_attach_out_of_memory_observer(observer)
    except Exception as e:
        # backend:cudaMallocAsync has no observers (nor segment snapshots):
        # the driver-level view stands.
        _warn(f"PyTorch refused the out-of-memory observer ({e})")
        return
    state = _library("cumemtrace_allocator_state")
    if state is not None:
        import atexit
        atexit.register(_at_exit, torch, state, layout)
        _register_refresh(torch, state)


def _cuda_module():
    """torch.cuda once it defines _lazy_call (it may still be importing its
    own submodules: the queued call runs at CUDA's initialisation, when
    torch is whole), else None."""
    cuda = sys.modules.get("torch.cuda")
    if cuda is None:
        return None
    d = getattr(cuda, "__dict__", {})
    if not all(k in d for k in ("_lazy_call", "is_initialized", "_queued_calls")):
        return None
    return cuda


def _queue(cuda):
    """Queues the observer for when torch's CUDA initialises (its device
    allocators exist only from then on); True when queued."""
    if getattr(cuda, "_cumemtrace_layer", False):
        return True  # the other way in (torch_layer.c or sitecustomize) was first
    report = _library()
    if report is None:
        return True  # not traced: nothing to tell, nothing to wait for
    cuda._cumemtrace_layer = True
    torch = sys.modules["torch"]
    cuda._lazy_call(lambda: _attach(torch, report))
    return True


def _watch():
    """Waits for torch.cuda without a finder in sys.meta_path (the host's
    view stays as without us; a finder also saw
    importlib.util.find_spec's probe as the import): an audit hook
    sees every real import, and torch.cuda's own imports come after the
    names _queue needs.  Audit hooks cannot be removed: once done, ours
    returns at its first comparison."""
    done = [False]

    def hook(event, args):
        if event != "import" or done[0]:
            return
        try:
            cuda = _cuda_module()
            if cuda is not None:
                done[0] = True
                _queue(cuda)
        except Exception as e:  # an audit hook's error would fail the import
            done[0] = True
            _warn(f"{type(e).__name__}: {e}")
    sys.addaudithook(hook)


def install(watch=True):
    """Queues the observer once torch.cuda is there: True when done (or
    nothing to do), False when torch.cuda is not there yet.  Then, with
    `watch`, an audit hook waits for it.  Called by our sitecustomize
    (watch=False: it waits itself, without importing ctypes into a process
    that may never import torch) and by the library's own hook under a plain
    LD_PRELOAD (torch_layer.c); safe to call twice."""
    cuda = _cuda_module()
    if cuda is not None:
        return _queue(cuda)
    if watch:
        _watch()
    return False
