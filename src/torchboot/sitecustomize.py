"""cumemtrace's start-up hook, put first on PYTHONPATH by `cumemtrace run`.

It gives the program back the sys.path and PYTHONPATH it would have had
without us, then runs the sitecustomize this one hides (the next one on
sys.path, as `coverage` and `ddtrace-run` do).  It loads nothing of the
PyTorch layer: the preloaded library does, when the program imports
torch.cuda (src/preload/life/torch_layer.c, an audit hook in C that runs no
Python until then), so that no Python function of ours is called at each
audited event of the process, as a Python audit hook was.  The host
must see what it would see without us: its sys.path,
PYTHONPATH, sys.modules (no `sitecustomize` when it has none, no module of
ours, nothing imported that it did not import), sys.meta_path, and what site
prints when its own sitecustomize raises.  So this file imports only modules
every interpreter has loaded before site runs and leaves by the ImportError
that site takes for "there is no sitecustomize".
"""
import os
import sys


def _restore_environment(here):
    # This directory served its purpose: the program sees the sys.path and
    # PYTHONPATH it would have had without us.  Child processes keep the
    # preloaded library, which loads the layer there too (torch_layer.c).
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    was = os.environ.pop("CUMEMTRACE_PYTHONPATH", None)
    if was is not None:
        os.environ["PYTHONPATH"] = was[1:]  # "=<value>", or "-" when unset
        if was == "-":
            del os.environ["PYTHONPATH"]


def _outer_frames():
    """The frames that import this module, innermost first: importlib's,
    then site's execsitecustomize - those a traceback from the host's
    sitecustomize shows above it without us."""
    f = sys._getframe(1)
    while f is not None and not (f.f_code.co_name == "<module>" and
                                 f.f_code.co_filename == __file__):
        f = f.f_back
    out = []
    f = f.f_back if f is not None else None
    while f is not None:
        out.append(f)
        if f.f_code.co_name == "execsitecustomize":
            return out
        f = f.f_back
    return []  # not imported by site: no traceback to imitate


def _report_like_site(err, origin):
    """What site.execsitecustomize prints when the host's sitecustomize
    raises `err`, without our frames in the traceback."""
    if isinstance(err, ImportError) and err.name == "sitecustomize":
        return  # site says nothing about that one
    if not sys.flags.verbose:
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                         "%s: %s\n" % (err.__class__.__name__, err))
        return
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != origin:
        tb = tb.tb_next
    frames = _outer_frames()
    if tb is not None and frames:
        # importlib's exec_module and its _call_with_frames_removed, which
        # ran the host's module in our frame, stand where ours did.
        for f in frames:
            tb = type(tb)(tb, f, f.f_lasti, f.f_lineno)
    else:
        tb = err.__traceback__
    # The interpreter's excepthook prints the exception's own traceback.
    sys.excepthook(type(err), err.with_traceback(tb), tb)


def _run_hosts_sitecustomize():
    external = sys.modules["_frozen_importlib_external"]
    spec = external.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return False
    module = sys.modules["_frozen_importlib"].module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules["sitecustomize"]
        _report_like_site(err, spec.origin)
        return False
    return True


def _boot():
    here = os.path.dirname(os.path.abspath(__file__))
    _restore_environment(here)
    return _run_hosts_sitecustomize()


if not _boot():
    # site.py ignores exactly this error: the host has no sitecustomize (or
    # its own failed and was reported above), and none stays in sys.modules.
    raise ImportError("no sitecustomize", name="sitecustomize")
