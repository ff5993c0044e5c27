"""Phases: forward, backward and the optimizer's step, with the module's
qualified name, for the device's peak and each OOM, and the optimizer step
number.  By default no hook runs per module call:
  forward   at a dump, the library hands over who reached each device's
            peak (cumemtrace_peak_context): the `self` of each Python
            frame running then.  Those of Module.__call__'s frames
            (_wrapped_call_impl, _call_impl) and forward() that are live
            modules (the collector's scan, roles.scan) name it: "forward",
            the outermost module's class, then each running module's name
            under it (`transformer.h.1.mlp`), given back to the peak
            (cumemtrace_peak_phase).  At an OOM the observer runs on the
            failing thread: its own frames say the same, pushed as the
            phase while it reports.
  backward  the peak's (or the OOM's) thread is one of autograd's device
            threads (PyTorch names them pt_autograd_N): "backward" (the
            node is in the peak's stack: "autograd: MmBackward0").
  step      PyTorch's global optimizer step pre/post hooks: "optimizer
            step" pushed around each step() (so allocations in it carry
            it), and the step count (the most any optimizer stepped).
            A step() that raises runs no post hook: its "optimizer step"
            is closed as the exception leaves PyTorch's step wrapper.
            The wrapper runs each step inside `with record_function(...)`,
            whose bound __exit__ only the wrapper's value stack holds, and
            drops as the with-block is left; the pre hook reads it from
            the wrapper's frame (CPython 3.11-3.13's frame layout, checked
            first; no host code runs) and keeps a weak reference whose
            call back closes the step - during the unwinding, before any
            except clause runs, with the exception and its traceback
            untouched.  Where that exit cannot be read (another CPython, a
            PyTorch without the with), the step is closed at the thread's
            next step hook or dump, whichever comes first (the step
            wrappers on its stack say which steps still run); allocations
            before that still carry it, but not the peak: at a dump, a
            peak whose innermost phase is "optimizer step" while none of
            its frames is a step's (an optimizer's method or PyTorch's
            step wrapper) has it taken off (cumemtrace_peak_phase_ended),
            where the peak's frames are known in full (read directly, at
            most the 32 kept) and no other phase was opened inside it.
A module whose address was freed and taken by another module since the
peak would lend it its name; the peak's frames are read directly only on
CPython 3.11-3.13 (elsewhere the peak is not named by module).
Cost of the default: two hooks a step; two ctypes calls into the library
(push; the step's end, which pops and notes the step of each device whose
peak moved), the wrapper's frame mapped as two structs, and
a few audited events a host's audit hooks see (scripts/bench_torch_phases.py
and docs/performance.md measure it).
CUMEMTRACE_TORCH_PHASES=1 adds PyTorch's global module hooks instead, so
that every allocation carries its phase and module (report --by range,
and backward named by module): every module call then pays PyTorch's
hooked call path and two hooks (docs/performance.md);
CUMEMTRACE_TORCH_PHASES=0 turns phases off."""
import ctypes
import functools
import os
import sys
import threading
import types

library = part("library")  # noqa: F821 (set by cumemtrace_torch.part)
roles = part("roles")  # noqa: F821
Usage = library.Usage

_phase_push = _phase_pop = None
_steps = {}          # id(optimizer) -> steps taken
_step = [0]          # the most steps any optimizer took
_stepping = [0]      # optimizer.step() calls under way
_wrapper = [None]    # the code of PyTorch's step wrapper, which calls the step hooks
_usage_fn = _peak_step_fn = None
_mode = None         # None: off; "frames": the default; "hooks": =1
_context_fn = _peak_phase_fn = _ended_fn = None
_exit = None         # record_function.__exit__: what PyTorch's step wrapper leaves
TORCH = b"torch"
# Frames whose `self` is the module being called: Module.__call__'s own
# and forward()'s (a module's helper called from forward has the same self)
_CALLS = ("_wrapped_call_impl", "_call_impl", "forward")


class PeakContext(ctypes.Structure):
    """struct cumemtrace_peak_context (src/preload/life/torch_protocol.h)."""
    _fields_ = [("peak_time_ns", ctypes.c_int64), ("thread", ctypes.c_char * 16),
                ("nselves", ctypes.c_uint32), ("selves", ctypes.c_uint64 * 32),
                ("names", ctypes.c_uint64 * 32)]


class _Thread(threading.local):
    depth = 0          # modules open in forward on this thread
    names = None       # id(module) -> bytes name, under the outermost module
    root = None
    backward = False   # "backward" open on this thread (autograd's)

    def __init__(self):
        # One per "optimizer step" open on this thread, innermost last: the
        # weak reference to its wrapper's with-exit that ends it, or None.
        self.steps = []


def _names_of(root):
    """id(module) -> bytes name of `root` (its class's name) and of each
    module under it, as root.named_modules() names them (the first path to
    each), read from the modules' _modules fields: none of the host's code
    runs (a module's own __getattribute__ or named_modules)."""
    names = {}
    todo = [("", root)]
    while todo:  # depth first, children in order: named_modules' order
        prefix, m = todo.pop()
        if id(m) in names:
            continue
        names[id(m)] = (prefix or type(m).__name__).encode(errors="replace")
        kids = roles.fields(m).get("_modules")
        if issubclass(type(kids), dict):
            for n, k in reversed(list(dict.items(kids))):
                if k is not None:
                    todo.append((f"{prefix}.{n}" if prefix else str(n), k))
    return names


# CPython 3.11-3.13's _PyInterpreterFrame (Include/internal/pycore_frame.h):
# the offsets of its code and its frame object (which must be the frame's
# own before anything else is read), of stacktop and of localsplus (the
# locals, then the value stack up to stacktop); PyFrameObject.f_frame is
# after the object header and f_back.
_FRAME_LAYOUT = {(3, 11): (32, 40), (3, 12): (0, 48), (3, 13): (0, 48)}
_F_FRAME, _STACKTOP, _LOCALSPLUS = 24, 64, 72
# this interpreter's layout; None where unknown, or where a debug or
# free-threaded build has a larger object header
_LAYOUT = _FRAME_LAYOUT.get(sys.version_info[:2]) if sys.getsizeof(object()) == 16 else None


_slots = {}  # code of a step wrapper -> (its frame's struct, the slot its exit was in)
_HEAD = ctypes.c_void_p * (_F_FRAME // 8 + 1)  # a frame object up to f_frame


def _frame_struct(most):
    """An interpreter frame with `most` slots: its first words (code and
    frame object among them), stacktop, then the locals and the value stack
    as objects (a NULL slot reads as ValueError)."""
    class Frame(ctypes.Structure):
        _fields_ = [("head", ctypes.c_void_p * (_STACKTOP // 8)), ("stacktop", ctypes.c_int),
                    ("pad", ctypes.c_int), ("slots", ctypes.py_object * most)]
    return Frame


def _with_exit(frame, code):
    """The bound __exit__ of the record_function that PyTorch's step
    wrapper, running in `frame` (whose code is `code`; it is calling the
    pre hook), entered with `with`; None where the layout is not CPython
    3.11-3.13's with a plain object header, or there is none.  Read from
    the frame's memory: no attribute of the host's objects is looked up.
    Each from_address is an audited ctypes event the host's own audit
    hooks would see: two a call, each mapping a struct whose fields then
    read without one, and the slot the exit was in last is looked at
    first (the same wrapper keeps it in the same slot)."""
    at = _LAYOUT
    if at is None or _exit is None:
        return None
    me = id(frame)
    iframe = _HEAD.from_address(me)[_F_FRAME // 8]
    got = _slots.get(code)
    if got is None:
        most = len(code.co_varnames) + len(code.co_cellvars) + len(code.co_freevars) + \
            code.co_stacksize
        got = _slots[code] = (_frame_struct(most), most, -1, id(code))
    struct, most, last, code_id = got
    if not iframe:
        return None
    f = struct.from_address(iframe)
    head = f.head
    if head[at[0] // 8] != code_id or head[at[1] // 8] != me:
        return None
    top = f.stacktop
    if not 0 < top <= most:
        return None
    slots = f.slots
    method = types.MethodType
    for i in ([last] if 0 <= last < top else []) + list(range(top)):
        try:
            m = slots[i]
        except ValueError:
            continue  # an empty slot
        if type(m) is method and m.__func__ is _exit:
            if i != last:
                _slots[code] = (struct, most, i, code_id)
            return m
    return None


def start(torch):
    global _phase_push, _phase_pop, _usage_fn, _peak_step_fn, _exit
    global _mode, _context_fn, _peak_phase_fn, _ended_fn, _close_raised_steps
    mode = os.environ.get("CUMEMTRACE_TORCH_PHASES", "")
    if mode == "0":
        return
    lib = ctypes.CDLL(None)
    # No argtypes on the calls made at every step (their own ctypes
    # objects): each takes bytes, or an int and a byref(Usage), which ctypes
    # passes as such, and returns an int; argtypes' conversions would add
    # a third to each call.  Callers pass bytes only.
    push, pop = lib.cumemtrace_phase_push, lib.cumemtrace_phase_pop
    _phase_push, _phase_pop = push, pop
    step_end = lib.cumemtrace_step_end  # (source, pop, step, devices)
    devices = torch.cuda.device_count()  # fixed once CUDA started
    _usage_fn = lib.cumemtrace_usage
    _peak_step_fn = lib.cumemtrace_peak_step
    _peak_step_fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    _peak_step_fn.restype = ctypes.c_int
    _mode = "hooks" if mode == "1" else "frames"
    ctx, named = lib.cumemtrace_peak_context, lib.cumemtrace_peak_phase
    ctx.argtypes, ctx.restype = [ctypes.c_int, ctypes.POINTER(PeakContext)], ctypes.c_int
    named.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p]
    named.restype = ctypes.c_int
    _context_fn, _peak_phase_fn = ctx, named
    ended = lib.cumemtrace_peak_phase_ended
    ended.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p]
    ended.restype = ctypes.c_int
    _ended_fn = ended
    try:
        _exit = torch.autograd.profiler.record_function.__exit__
    except AttributeError:
        pass  # the step wrapper's with cannot be found: closed at the next hook
    here = _Thread()
    Tensor = torch.Tensor
    quiet = getattr(torch._C, "DisableTorchFunction", None)
    if quiet is None and _mode == "hooks":
        library.missing("torch._C.DisableTorchFunction", library.NO_QUIET)
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
        # type(), not isinstance: that reads __class__ of what is not a tensor
        if not issubclass(type(output), Tensor):
            if type(output) in (tuple, list) and output and issubclass(type(output[0]), Tensor):
                output = output[0]
            else:
                output = None
        node = None
        if output is not None and quiet is not None:  # an older torch: not named
            with quiet():  # no __torch_function__ of the host's sees the read
                node = output.grad_fn
        if node is not None:
            name = here.names.get(id(module)) if here.names else None
            node.register_prehook(functools.partial(enter_backward, name or
                                                    type(module).__name__.encode()))
        if here.depth == 0:
            pop(TORCH)
            here.root = here.names = None

    def step_pre(optimizer, args, kwargs):
        # Called by PyTorch's step wrapper: its code is the mark of a step
        # under way on a thread's stack.
        caller = sys._getframe(1)
        # The wrapper's code as last seen (its frame's memory says whether
        # it is this frame's): f_code is read, an audited event, only at
        # the first step or where it is not.
        code = _wrapper[0]
        ref = watch(caller, code) if code is not None else None
        if ref is None:
            code = _wrapper[0] = caller.f_code
            ref = watch(caller, code)
        _close_raised_steps(1)
        _stepping[0] += 1
        push(TORCH, b"optimizer step")
        here.steps.append(ref)

    def step_post(optimizer, args, kwargs):
        _close_raised_steps(0)
        key = id(optimizer)  # each id() an audited event
        n = _steps[key] = _steps.get(key, 0) + 1
        if n > _step[0]:
            _step[0] = n  # the library notes each device's peak in step n
        else:
            n = 0
        if here.steps:
            here.steps.pop()  # its weak reference goes with it: no call back
            _stepping[0] -= 1
            step_end(TORCH, 1, n, devices)
        elif n:
            step_end(TORCH, 0, n, devices)

    def end_step():
        here.steps.pop()
        _stepping[0] -= 1
        pop(TORCH)

    def watch(frame, code):
        """A weak reference to the with-exit of the step wrapper running in
        `frame` (its code `code`), whose call back ends this step when the
        wrapper leaves its with-block without the post hook (it raised);
        None when that exit is not found."""
        try:
            m = _with_exit(frame, code)
        except Exception:
            m = None
        if m is None:
            return None
        tid = threading.get_ident()

        def left(ref):
            try:
                if threading.get_ident() == tid:
                    for i in range(len(here.steps) - 1, -1, -1):
                        if here.steps[i] is ref:  # with the steps opened inside it
                            while len(here.steps) > i:
                                end_step()
                            break
            except BaseException:
                pass  # runs in the host's unwinding: never raises into it
        return weakref.ref(m, left)

    def close_raised_steps(calling):
        """Pops the "optimizer step" of each step() that raised on this
        thread (PyTorch runs no post hook then): those open beyond the step
        wrappers on the stack (`calling`: the one calling a pre hook, not
        open yet)."""
        if None not in here.steps:
            # none open, or each one's with-exit watched: a step that
            # raised was closed as its exit went; no frame to read
            return
        running = -calling
        f = sys._getframe(2)
        while f is not None and running < len(here.steps):  # past it none closes
            if f.f_code is _wrapper[0]:
                running += 1
            f = f.f_back
        while len(here.steps) > max(running, 0):
            end_step()

    _close_raised_steps = close_raised_steps

    if _mode == "hooks":
        _add_module_hooks(pre, post)
    roles.optim_module().register_optimizer_step_pre_hook(step_pre)
    roles.optim_module().register_optimizer_step_post_hook(step_post)


def _add_module_hooks(pre, post):
    """PyTorch's global module hooks, both or neither: a pre hook alone
    would push a phase that nothing pops.  The post hook needs always_call
    (PyTorch 2.1 on), so that a forward that raises still pops: without it
    the phases come from the frames, as by default."""
    global _mode
    from torch.nn.modules import module as m
    try:
        added = m.register_module_forward_hook(post, always_call=True)
    except TypeError:
        _mode = "frames"
        library.missing("register_module_forward_hook(always_call=True)",
                        "CUMEMTRACE_TORCH_PHASES=1 adds no module hooks; the peak and "
                        "each OOM are named from the frames running then, as by default, "
                        "and allocations carry no module's phase")
        return
    try:
        m.register_module_forward_pre_hook(pre)
    except BaseException:
        added.remove()
        raise


def step_count():
    """The most steps any optimizer took (0: none, or phases off)."""
    return _step[0]


def _close_raised_steps(calling):
    pass  # phases off (start() sets the real one)


def _peak_step(device):
    """(the step noted for `device`'s peak at a step's end, the peak's time
    then), or (-1, None)."""
    if _peak_step_fn is None:
        return -1, None
    t = ctypes.c_int64()
    step = _peak_step_fn(device, ctypes.byref(t))
    return (step, t.value) if step > 0 else (-1, None)


def steps(device, alloc, scanned):
    """(step, peak_step) of the facts of `device` at an OOM of `alloc` bytes
    (alloc < 0: another moment), with `scanned` from roles.scan or None;
    -1 where phases are off or no optimizer exists."""
    _close_raised_steps(0)  # this thread's steps that raised since
    if _phase_push is not None and _step[0] == 0 and scanned is not None and scanned[1]:
        # An optimizer that has not stepped yet: before the first step (0),
        # or in it while its first step() runs.
        return (1 if alloc >= 0 and _stepping[0] else 0), 0
    if _phase_push is not None and _step[0] > 0:
        # At an OOM the step under way; at other moments the steps done.
        step = _step[0] + (1 if alloc >= 0 else 0)
        peak_step, seen = _peak_step(device)
        if alloc < 0 and _usage_fn is not None:
            u = Usage()  # a peak after the last step's end: the step under way
            if _usage_fn(device, ctypes.byref(u)) == 1 and u.peak_time_ns != seen:
                peak_step = _step[0] + 1
        return step, peak_step
    return -1, -1


def _backward_thread(name):
    """True for the name of one of autograd's device threads."""
    return name.startswith("pt_autograd")


def _path(running):
    """The phase path of `running` (modules, innermost first, consecutive
    repeats allowed): forward / the outermost one's class / each module's
    name under it, outer to inner; None when none is a module."""
    mods = []
    for mod in running:
        if not mods or mods[-1] is not mod:
            mods.append(mod)
    if not mods:
        return None
    root = mods[-1]
    names = _names_of(root)
    parts = ["forward", type(root).__name__]
    for mod in reversed(mods[:-1]):
        name = names.get(id(mod))
        if name:
            parts.append(name.decode(errors="replace"))
    return "/".join(p.replace("/", "_") for p in parts)


def _in_no_step(c, scanned):
    """True when the peak of context `c` ran in no optimizer step: its
    frames, all kept, hold no optimizer's method (its `self`) nor PyTorch's
    step wrapper."""
    n = min(c.nselves, len(c.selves))
    if n == 0 or n == len(c.selves) or scanned is None or \
            _backward_thread(c.thread.decode(errors="replace")):
        return False  # not known in full; autograd's threads run no step frames
    optimizers = {id(o) for o in scanned[1]}
    wrapper = id(_wrapper[0].co_name) if _wrapper[0] is not None else None
    return not any(c.selves[i] in optimizers or c.names[i] == wrapper for i in range(n))


def name_peak(torch, device, scanned):
    """At a dump: takes off device `device`'s peak an "optimizer step" that
    had ended (a step() that raised, see the top); in the default mode gives
    the peak its phase from what the library kept when it was reached;
    `scanned`: roles.scan's (modules, optimizers), or None."""
    if _mode is None or _context_fn is None:
        return
    c = PeakContext()
    if _context_fn(device, ctypes.byref(c)) != 1:
        return
    if _ended_fn is not None and _in_no_step(c, scanned):
        _ended_fn(device, c.peak_time_ns, TORCH, b"optimizer step")
    if _mode != "frames":
        return
    if _backward_thread(c.thread.decode(errors="replace")):
        path = "backward"
    else:
        calls = {id(sys.intern(n)) for n in _CALLS}
        by_id = {id(mod): mod for mod in (scanned[0] if scanned else ())}
        running = [by_id[c.selves[i]] for i in range(min(c.nselves, len(c.selves)))
                   if c.names[i] in calls and c.selves[i] in by_id]
        path = _path(running)
    if path:
        _peak_phase_fn(device, c.peak_time_ns, TORCH, path.encode())


class at_oom:
    """Default mode, around the OOM observer's report (on the failing
    thread, before the library takes the phase it has open): the phase of
    that thread's running frames, pushed, popped after."""

    def __init__(self, torch):
        self.depth = 0
        if _mode != "frames" or _phase_push is None:
            return
        try:
            with open("/proc/thread-self/comm") as f:
                thread = f.read().strip()
        except OSError:
            thread = ""
        if _backward_thread(thread):
            path = "backward"
        else:
            Module = torch.nn.Module
            running = []
            f = sys._getframe(1)
            while f is not None:
                code = f.f_code
                if code.co_name in _CALLS and code.co_argcount > 0:
                    me = f.f_locals.get(code.co_varnames[0])
                    if issubclass(type(me), Module):  # not isinstance: no __class__ read
                        running.append(me)
                f = f.f_back
            path = _path(running)
        for part in (path.split("/") if path else ()):
            _phase_push(TORCH, part.encode(errors="replace"))
            self.depth += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for _ in range(self.depth):
            _phase_pop(TORCH)
        return False
