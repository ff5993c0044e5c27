"""PyTorch's figures and its segment layout at the dumps without a failure:
at interpreter exit (Python's atexit), and fresh before every signal,
periodic, API or pytest-mark dump (a callable the library runs just before
it writes)."""
import ctypes
import sys

library = part("library")  # noqa: F821 (set by cumemtrace_torch.part)
layout = part("layout")  # noqa: F821
facts = part("facts")  # noqa: F821
history = part("history")  # noqa: F821
tensors = part("tensors")  # noqa: F821
growth = part("growth")  # noqa: F821
peak = part("peak")  # noqa: F821
fit = part("fit")  # noqa: F821


def report_state(torch, state, handoff=None):
    """PyTorch's figures now, for every device it used, through
    cumemtrace_allocator_state; with `handoff` (layout.segments_fn's, in a
    list: None there once it failed) also its segments and blocks
    (cumemtrace_allocator_layout), so that the snapshot draws PyTorch's own
    blocks (devices[].allocator_segments).  One memory._snapshot() serves
    both and every device."""
    if not torch.cuda.is_initialized():
        return
    snap = step = None
    used = [d for d in range(torch.cuda.device_count())
            if torch.cuda.memory_reserved(d) != 0 or torch.cuda.max_memory_reserved(d) != 0]
    peaks = {d: torch.cuda.max_memory_allocated(d) for d in used} if history.tracing else {}
    for device in used:
        if snap is None:
            # PyTorch's trace only for a device whose peak has no kept reading
            full = history.snapshot(torch, traces=history.reading() and peak.needs_trace(peaks))
            snap = full.get("segments", [])
        f = facts.facts(torch, device, -1, -1, -1, snap)
        if handoff is not None and handoff[0] is not None:
            try:
                layout.segments(torch, device, library.LAYOUT_STATE, handoff[0], snap)
            except Exception as e:
                handoff[0] = None
                library.warn(f"PyTorch segment layout: {type(e).__name__}: {e}")
        # No reading now (the program turned PyTorch's history off, or the
        # reading failed): an empty hand-over, so that no later dump carries
        # an earlier reading as if it were its own.
        members = {}
        if history.reading():
            try:
                if step is None:
                    step = growth.step_of_dump()
                grads = tensors.backward_gradients(device, snap)
                t = tensors.read(snap, device, grads)
                members = {"tensors": t, "growth": growth.at_dump(device, t, step),
                           "tensor_series": growth.series(device)}
                if history.tracing:
                    members["peak_tensors"] = peak.at_dump(full, device, peaks[device], grads)
            except Exception as e:
                members = {}
                tensors.warn(e)
        try:
            tensors.hand_over(device, library.LAYOUT_STATE, members)
        except Exception as e:
            tensors.warn(e)
        state(device, ctypes.byref(f))


def at_exit(torch, state, handoff):
    """PyTorch's figures at interpreter exit, so that what is live at exit is
    split into tensors (possible leaks) and the allocator's cache, and its
    segments and blocks (handoff[0], from layout.segments_fn), so that the
    exit snapshot draws PyTorch's own blocks (devices[].allocator_segments)."""
    try:
        fit.report(torch)
    except Exception as e:
        library.warn(f"fit report: {type(e).__name__}: {e}")
    try:
        report_state(torch, state, handoff)
    except Exception as e:
        library.warn(f"{type(e).__name__}: {e}")


# Fresh figures at every dump (signal, CUMEMTRACE_INTERVAL, cumemtrace_dump,
# the pytest plugin's marks): the library runs the callable registered here
# just before it writes (cumemtrace_allocator_refresher in
# src/preload/life/torch_protocol.h and torch_layer.c) - on Python's main
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


def register_refresh(torch, state, handoff):
    """Registers the refresh: PyTorch's figures and its layout (`handoff`,
    as report_state takes it) read again just before each dump."""
    reg = ctypes.PyDLL(None).cumemtrace_allocator_refresher  # keeps the GIL
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
            report_state(torch, state, handoff)
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


def exit_snapshot_at_program_end():
    """The exit snapshot as the script's own code ends (Python's atexit),
    before the interpreter's teardown frees the tensors it kept: with numpy
    loaded that teardown frees every one, and the library's own exit hooks
    (Py_AtExit, the C exit) come after it.  Registered before at_exit, so
    it runs after it (atexit runs in reverse order) and the snapshot holds
    the allocator's figures at exit."""
    fn = ctypes.CDLL(None).cumemtrace_exit_snapshot
    fn.restype = ctypes.c_int
    fn.argtypes = []
    import atexit
    atexit.register(fn)
