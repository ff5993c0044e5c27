"""The PyTorch layer of cumemtrace: PyTorch's own view of
its memory in every snapshot, read where reading it is safe.

Our C hooks run inside cudaMalloc while PyTorch's caching allocator holds
its device mutex, so they must never call into torch.  PyTorch calls its
out-of-memory observers after releasing that mutex, with the GIL held, for
every OutOfMemoryError it is about to raise (also for refusals by
set_per_process_memory_fraction, which never reach CUDA).  There,
torch.cuda.memory_stats() and torch.cuda.memory._snapshot() are safe: we
take PyTorch's own figures and hand them to the preloaded library through
the entry points it keeps for this layer (cumemtrace_allocator_oom in
src/preload/life/torch_protocol.h, not the user's API), which
writes them into the post-mortem of the failing request.  The same figures
are handed over at exit and before every other dump (layer/dumps.py).

This file finds torch.cuda and attaches the observer; the rest is in
layer/, one module per concern, each loaded by part() below:
  library.py  the library's public API through ctypes (structs, entry points)
  history.py  PyTorch's allocation history: the live tensors by Python line
  tensors.py  those tensors grouped by the user's line, handed over as JSON
  autograd.py the autograd node behind a request made in backward
  growth.py   the lines whose tensors grow step over step
  roles.py    parameters, buffers, gradients, optimizer state, other
  phases.py   forward / backward / optimizer step and the module's name
  layout.py   PyTorch's segments and blocks, handed to the library
  facts.py    PyTorch's figures of one device at one moment
  dumps.py    those figures at exit and fresh before every dump
  fit.py      `cumemtrace fit`'s report

Nothing here runs unless the program imports torch; nothing here raises.
"""
import ctypes
import os
import sys

_PARTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layer")
_parts = {}


def part(name):
    """The layer's module layer/<name>.py, loaded once (per copy of this
    module) without registering it in sys.modules, like this one: the host
    sees no module of ours, and the layer's directory is not on sys.path.
    Each part is given `part` before it runs, to reach the others."""
    m = _parts.get(name)
    if m is not None:
        return m
    spec = sys.modules["_frozen_importlib_external"].spec_from_file_location(
        "cumemtrace_torch_" + name, os.path.join(_PARTS_DIR, name + ".py"))
    m = sys.modules["_frozen_importlib"].module_from_spec(spec)
    m.part = part
    _parts[name] = m  # before it runs, as an import would
    try:
        spec.loader.exec_module(m)
    except BaseException:
        del _parts[name]
        raise
    return m


def _attach(torch, report):
    library, dumps, layout = part("library"), part("dumps"), part("layout")
    facts, fit = part("facts"), part("fit")
    dumps.exit_snapshot_at_program_end()
    fit.start(torch)
    part("history").start(torch)
    part("roles").watch_optimizers(torch)
    try:
        part("phases").start(torch)
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: PyTorch phases off ({type(e).__name__}: "
                         f"{e}); peaks and OOMs are not named by module\n")
    try:
        part("growth").start(torch)
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: growth by line off ({type(e).__name__}: "
                         f"{e}); snapshots read growth between dumps only\n")
    handoff = [layout.segments_fn()]

    def observer(device, alloc, device_total, device_free):
        fit.note_oom()
        try:
            snap = part("history").snapshot(torch).get("segments", [])
            f = facts.facts(torch, device, alloc, device_total, device_free, snap)
            if handoff[0] is not None:
                try:
                    layout.segments(torch, device, f.num_ooms, handoff[0], snap)
                except Exception as e:
                    handoff[0] = None
                    sys.stderr.write(f"cumemtrace: warning: PyTorch segment layout off: "
                                     f"{type(e).__name__}: {e}; post-mortems draw the "
                                     f"driver-level layout only\n")
            t = part("tensors")
            members = {}
            try:
                members["origin"] = part("autograd").oom_origin(torch)
            except Exception as e:
                library.warn(f"autograd's node at the failure: {type(e).__name__}: {e}")
            if part("history").reading():
                try:
                    members["tensors"] = t.read(snap, device, t.backward_gradients(device, snap))
                except Exception as e:
                    t.warn(e)
            if members:
                try:
                    t.hand_over(device, f.num_ooms, members)
                except Exception as e:
                    t.warn(e)
            with part("phases").at_oom(torch):
                report(device, ctypes.byref(f))
        except Exception as e:  # an observer must never raise
            library.warn(f"{type(e).__name__}: {e}")
    try:
        torch._C._cuda_attach_out_of_memory_observer(observer)
    except Exception as e:
        # backend:cudaMallocAsync has no observers (nor segment snapshots):
        # the driver-level view stands.
        library.warn(f"PyTorch refused the out-of-memory observer ({e})")
        return
    state = library.facts_fn("cumemtrace_allocator_state")
    if state is not None:
        import atexit
        atexit.register(dumps.at_exit, torch, state, handoff)
        dumps.register_refresh(torch, state, handoff)


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
        return True  # loaded already
    report = part("library").facts_fn()
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
            part("library").warn(f"{type(e).__name__}: {e}")
    sys.addaudithook(hook)


def install(watch=True):
    """Queues the observer once torch.cuda is there: True when done (or
    nothing to do), False when torch.cuda is not there yet.  Then, with
    `watch`, an audit hook waits for it.  Called by the preloaded library
    (torch_layer.c): from its own audit hook in C once torch.cuda is there
    (watch=False), or, where it could not add that hook, from the first
    allocation; safe to call twice."""
    cuda = _cuda_module()
    if cuda is not None:
        return _queue(cuda)
    if watch:
        _watch()
    return False
