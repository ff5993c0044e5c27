"""cumemtrace's start-up hook, put first on PYTHONPATH by `cumemtrace run`.

It does two things and nothing else: asks cumemtrace_torch to attach
PyTorch's out-of-memory observer if and when the program imports torch, then
runs the sitecustomize this one hides (the next one on sys.path, as
`coverage` and `ddtrace-run` do; its errors reach site.py as they would have
without us).  A process that never imports torch is untouched; a failure of
our own disables the layer with one warning, never the program.
"""
import os
import sys


def _boot():
    here = os.path.dirname(os.path.abspath(__file__))
    # This directory served its purpose: the program sees the sys.path it
    # would have had without us (children inherit PYTHONPATH and boot too).
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        sys.path.insert(0, here)
        try:
            import cumemtrace_torch
        finally:
            del sys.path[0]
        cumemtrace_torch.install()
    except Exception as e:
        sys.stderr.write(f"cumemtrace: warning: the PyTorch layer is off "
                         f"({type(e).__name__}: {e}); post-mortems show "
                         f"driver-level figures only\n")
    import importlib.machinery
    import importlib.util
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_boot()
