"""Under `cumemtrace fit` (CUMEMTRACE_FIT_REPORT names a file): at exit,
PyTorch's peak figures and where the first out-of-memory error was raised,
for fit's table (the format is in src/cli/views/fit.c)."""
import os
import sys
import time
import traceback

FIT = os.environ.get("CUMEMTRACE_FIT_REPORT")
_fit_oom = []  # (time.time(), "file:line (function)") of the first OOM observed
# This layer's directory (torchboot/, which holds layer/): its frames are
# never the user's.
_LAYER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def note_oom():
    """At an out-of-memory error (the observer): when and where the first
    one happened."""
    if FIT and not _fit_oom:
        try:
            _fit_oom.append((time.time(), user_frame(traceback.extract_stack())))
        except Exception:
            _fit_oom.append((time.time(), None))


def _library_dirs():
    """Where code that is not the user's lives: this layer, torch, the
    standard library and every site-packages (installed packages)."""
    import site
    import sysconfig
    dirs = {_LAYER_DIR}
    try:
        import torch
        dirs.add(os.path.dirname(os.path.abspath(torch.__file__)))
    except Exception:
        pass
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(sysconfig.get_paths()[key])
        except Exception:
            pass
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except Exception:
        pass
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs if d)


def user_frame(frames):
    """The innermost of `frames` (FrameSummary, outermost first) in the
    user's own code - not torch, the standard library, an installed package
    or this layer: the line of the user's script that failed, its path
    relative to the working directory when under it."""
    skip = _library_dirs()
    cwd = os.path.join(os.getcwd(), "")
    for f in reversed(frames):
        path = os.path.abspath(f.filename)
        if path.startswith(skip) or f.filename.startswith("<"):
            continue
        shown = path[len(cwd):] if path.startswith(cwd) else path
        return f"{shown}:{f.lineno} ({f.name})"
    return None


def report(torch):
    """Writes fit's report: PyTorch's own peaks of the current device and
    the first out-of-memory error (when, where)."""
    if not FIT:
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
        where = user_frame(traceback.extract_tb(err.__traceback__))
        lines.append("oom_message " + (str(err).splitlines() or [""])[0])
    if _fit_oom:
        lines.append(f"oom_time {_fit_oom[0][0]:.3f}")
        where = where or _fit_oom[0][1]
    if where:
        lines.append("oom_where " + where)
    with open(FIT, "w") as fh:
        fh.write("\n".join(l.replace("\n", " ") for l in lines) + "\n")
