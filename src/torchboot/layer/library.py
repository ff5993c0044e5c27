"""The preloaded library as the PyTorch layer sees it through ctypes - the
entry points kept for this layer (src/preload/life/torch_protocol.h, not
installed) and the public API (include/cumemtrace.h): their structs, the
one warning the layer gives when it turns itself off, and the one it gives
for each private PyTorch API it needs and this PyTorch lacks."""
import ctypes
import sys

_warned = False
_missing = set()   # the private PyTorch APIs said missing once already
# What stops without torch._C.DisableTorchFunction (roles.py and phases.py
# read tensors with __torch_function__ off, never with the host's dispatch)
NO_QUIET = ("the live tensors are not sorted into parameters, buffers, gradients and "
            "optimizer state, and with CUMEMTRACE_TORCH_PHASES=1 a module's backward "
            "is not named")


def missing(api, stops):
    """Says once per `api` (one line on stderr) that this PyTorch lacks a
    private API the layer needs, and what stops working (`stops`) while the
    rest goes on; never raises."""
    if api in _missing:
        return
    _missing.add(api)
    version = getattr(sys.modules.get("torch"), "__version__", "?")
    try:
        sys.stderr.write(f"cumemtrace: warning: PyTorch {version} has no {api}: {stops}\n")
    except Exception:
        pass  # a closed stderr is the host's; nothing else to do


def warn(what):
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"cumemtrace: warning: PyTorch layer off: {what}; "
                         f"post-mortems show driver-level figures only\n")


class TensorSite(ctypes.Structure):
    """struct cumemtrace_tensor_site (torch_protocol.h)."""
    _fields_ = [("stack", ctypes.c_char_p), ("bytes", ctypes.c_int64),
                ("count", ctypes.c_int64)]


class Facts(ctypes.Structure):
    """struct cumemtrace_allocator_facts (torch_protocol.h)."""
    _fields_ = [
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
    ]


class Block(ctypes.Structure):
    """struct cumemtrace_allocator_block."""
    _fields_ = [("offset", ctypes.c_int64), ("size", ctypes.c_int64),
                ("state", ctypes.c_int32), ("stack", ctypes.c_int32)]


# The pointer type made once and kept: ctypes.POINTER() looks it up in a
# cache that a sub-interpreter importing ctypes clears (CPython 3.11 shares
# _ctypes between interpreters), after which a fresh POINTER(Block) is
# another type, refused by the field made with the first.
BlockPointer = ctypes.POINTER(Block)


class Segment(ctypes.Structure):
    """struct cumemtrace_allocator_segment."""
    _fields_ = [("address", ctypes.c_uint64), ("size", ctypes.c_int64),
                ("pool", ctypes.c_int32), ("nblocks", ctypes.c_uint32),
                ("blocks", BlockPointer)]


class Usage(ctypes.Structure):
    """struct cumemtrace_usage (include/cumemtrace.h)."""
    _fields_ = [("current_bytes", ctypes.c_uint64), ("mark_bytes", ctypes.c_uint64),
                ("peak_bytes", ctypes.c_uint64), ("mark_time_ns", ctypes.c_int64),
                ("peak_time_ns", ctypes.c_int64)]


# The tag that hands over the layout at a moment without a failure (the
# exit): torch_protocol.h's CUMEMTRACE_LAYOUT_STATE.
LAYOUT_STATE = -1


def facts_fn(name="cumemtrace_allocator_oom"):
    """The library's entry point `name` taking (device, struct
    cumemtrace_allocator_facts *): cumemtrace_allocator_oom or
    cumemtrace_allocator_state; None when not traced."""
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None  # not traced: nothing to tell
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(Facts)]
    return fn
