"""Phases: forward, backward and the optimizer's step, with the module's
qualified name, pushed to the library (cumemtrace_phase_push, source
"torch") from PyTorch's global hooks, so that every allocation carries
them and the device's peak and each OOM name where they happened.
  forward   a global forward pre-hook pushes "forward" at the outermost
            module of a thread, then each module's name (relative to
            that outermost one, whose own name is its class); the global
            forward hook (always_call: also when forward raises) pops.
  backward  the forward hook puts a pre-hook on the module's output's
            autograd node: when backward reaches it, on autograd's thread,
            the phase becomes "backward" / the module's name (backward
            runs the graph in reverse, so a module's nodes follow its
            output's); a final callback of the pass closes it.
  step      PyTorch's global optimizer step pre/post hooks: "optimizer
            step", and the step count (the most any optimizer stepped).
Off by default, CUMEMTRACE_TORCH_PHASES=1 turns it on: every module call
then pays PyTorch's hooked call path and two hooks - +16 % wall, +12 %
instructions of a GPT-2-shaped model's step (31 module calls), +26 % /
+21 % of an MLP's, where kernels take no time (make bench:
scripts/bench_torch_phases.py, docs/performance.md), 6 to 13 times the 2 %
a default may cost."""
import ctypes
import functools
import os
import threading

library = part("library")  # noqa: F821 (set by cumemtrace_torch.part)
roles = part("roles")  # noqa: F821
Usage = library.Usage

_phase_push = _phase_pop = None
_steps = {}          # id(optimizer) -> steps taken
_step = [0]          # the most steps any optimizer took
_stepping = [0]      # optimizer.step() calls under way
_peak_seen = {}      # device -> peak_time_ns the library reported at a step's end
_peak_step = {}      # device -> the step in which its peak was reached
_usage_fn = None
TORCH = b"torch"


class _Thread(threading.local):
    depth = 0          # modules open in forward on this thread
    names = None       # id(module) -> bytes name, under the outermost module
    root = None
    backward = False   # "backward" open on this thread (autograd's)


def _names_of(root):
    names = {id(m): (n or type(m).__name__).encode(errors="replace")
             for n, m in root.named_modules()}
    return names


def start(torch):
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
    roles.optim_module().register_optimizer_step_pre_hook(step_pre)
    roles.optim_module().register_optimizer_step_post_hook(step_post)


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


def steps(device, alloc, scanned):
    """(step, peak_step) of the facts of `device` at an OOM of `alloc` bytes
    (alloc < 0: another moment), with `scanned` from roles.scan or None;
    -1 where phases are off or no optimizer exists."""
    if _phase_push is not None and _step[0] == 0 and scanned is not None and scanned[1]:
        # An optimizer that has not stepped yet: before the first step (0),
        # or in it while its first step() runs.
        return (1 if alloc >= 0 and _stepping[0] else 0), 0
    if _phase_push is not None and _step[0] > 0:
        # At an OOM the step under way; at other moments the steps done.
        step = _step[0] + (1 if alloc >= 0 else 0)
        peak_step = _peak_step.get(device, -1)
        if alloc < 0 and _usage_fn is not None:
            u = Usage()  # a peak after the last step's end: the step under way
            if _usage_fn(device, ctypes.byref(u)) == 1 and \
                    u.peak_time_ns != _peak_seen.get(device):
                peak_step = _step[0] + 1
        return step, peak_step
    return -1, -1
