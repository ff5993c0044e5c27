"""Under `cumemtrace fit` (CUMEMTRACE_FIT_REPORT names a file): at exit,
PyTorch's peak figures (the run's whole peaks, whatever the script reset),
the tracer's peak of the device, the PyTorch version, and where the first
out-of-memory error was raised, for fit's table (the format is in
src/cli/views/fit.c); and generate() stopping at its max_length."""
import os
import sys
import threading
import time
import traceback

FIT = os.environ.get("CUMEMTRACE_FIT_REPORT")
_fit_oom = []  # (time.time(), "file:line (function)") of the first OOM observed
# PyTorch's peaks as they were before each reset_peak_memory_stats(), by
# device: {device: [max allocated, max reserved, resets]}
_before_reset = {}


def start(torch):
    """Under fit only: keeps PyTorch's peaks across the script's resets, so
    that fit's figures are the run's whole peaks.  reset_peak_memory_stats()
    (and reset_max_memory_allocated/cached, which call it) reach
    torch._C._cuda_resetPeakMemoryStats: ours reads the two peaks, then
    calls it with the same argument and returns what it returns, raising
    what it raises.  Also makes Hugging Face generate() stop at its
    max_length (_watch_generate)."""
    if not FIT:
        return
    real = getattr(torch._C, "_cuda_resetPeakMemoryStats", None)
    if real is None:
        part("library").missing(  # noqa: F821 (set by cumemtrace_torch.part)
            "torch._C._cuda_resetPeakMemoryStats",
            "fit's PyTorch peaks are those since the script's last reset_peak_memory_stats()")
        _watch_generate()
        return

    def reset_peak_memory_stats(device, *rest):
        try:
            d = torch.cuda.current_device() if device is None else int(device)
            kept = _before_reset.setdefault(d, [0, 0, 0])
            s = torch.cuda.memory_stats(d)
            kept[0] = max(kept[0], s.get("allocated_bytes.all.peak", 0))
            kept[1] = max(kept[1], s.get("reserved_bytes.all.peak", 0))
            kept[2] += 1
        except Exception:
            pass
        return real(device, *rest)
    torch._C._cuda_resetPeakMemoryStats = reset_peak_memory_stats
    _watch_generate()


# Hugging Face generate()'s stopping test is a device flag that kernels
# compute; the simulated card computes none, so decoding would go on until
# fit's timeout.  Under fit only, the decision is the one a card makes when
# no EOS comes early (the longest generation, the worst case for memory):
# stop once the sequence reaches the stopping criteria's max_length, which
# the host knows.  Without a max_length the real decision stands.
_GEN_MODULE = "transformers.generation.utils"
_gen = threading.local()


def _patch_generate(utils):
    """Wraps the stopping criteria (to note, on the host, whether max_length
    is reached) and StopCheck (to return that instead of the device's
    flag).  The real ones still run: their reads, streamer and errors are
    the host's own."""
    check = getattr(utils, "StopCheck", None)
    crit = getattr(utils, "StoppingCriteriaList", None)
    if check is None or crit is None or getattr(check, "_cumemtrace_fit", False):
        return
    real_crit, real_check = crit.__call__, check.__call__

    def criteria(self, input_ids, *args, **kwargs):
        out = real_crit(self, input_ids, *args, **kwargs)
        try:
            ml = self.max_length
            _gen.done = None if ml is None else input_ids.shape[-1] >= ml
        except Exception:
            _gen.done = None
        return out

    def stop_check(self, *args, **kwargs):
        out = real_check(self, *args, **kwargs)
        done, _gen.done = getattr(_gen, "done", None), None
        return out if done is None else done
    crit.__call__, check.__call__ = criteria, stop_check
    check._cumemtrace_fit = True


class _GenerateFinder:
    """On sys.meta_path under fit only: finds transformers' generation
    module as the other finders do, and patches it once it has run."""

    def find_spec(self, name, path=None, target=None):
        if name != _GEN_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and \
                    hasattr(spec.loader, "exec_module"):
                real = spec.loader.exec_module

                def exec_module(module):
                    real(module)
                    try:
                        _patch_generate(module)
                    except Exception:
                        pass
                spec.loader.exec_module = exec_module
                return spec
            if spec is not None:
                return spec
        return None


def _watch_generate():
    mod = sys.modules.get(_GEN_MODULE)
    if mod is not None:
        _patch_generate(mod)
    else:
        sys.meta_path.insert(0, _GenerateFinder())


def _device_peak(d):
    """The tracer's peak of device memory held by the process on device d
    (everything it allocated through CUDA), or None."""
    try:
        import ctypes
        fn = ctypes.CDLL(None).cumemtrace_usage
        u = part("library").Usage()
        if fn(d, ctypes.byref(u)) == 1:
            return u.peak_bytes
    except Exception:
        pass
    return None
# This layer's directory (torchboot/, which holds layer/): its frames are
# never the user's.
_LAYER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def note_oom():
    """At an out-of-memory error (the observer): when and where the first
    one happened."""
    if FIT and not _fit_oom:
        try:
            _fit_oom.append((time.time(), user_frame(traceback.extract_stack())))
        except Exception:
            _fit_oom.append((time.time(), None))


def user_frame(frames):
    """The innermost of `frames` (FrameSummary, outermost first) in the
    user's own code - not torch, the standard library, an installed package
    or this layer: the line of the user's script that failed, its path
    relative to the working directory when under it."""
    skip = (_LAYER_DIR,) + part("tensors").installed_roots()  # noqa: F821
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
    lines.append("torch_version " + str(getattr(torch, "__version__", "")))
    if torch.cuda.is_initialized():
        d = torch.cuda.current_device()
        s = torch.cuda.memory_stats(d)
        kept = _before_reset.get(d, [0, 0, 0])
        lines += [f"max_allocated {max(torch.cuda.max_memory_allocated(d), kept[0])}",
                  f"max_reserved {max(torch.cuda.max_memory_reserved(d), kept[1])}",
                  f"peak_resets {kept[2]}",
                  f"num_ooms {s.get('num_ooms', 0)}",
                  f"total {torch.cuda.get_device_properties(d).total_memory}"]
        try:  # cuDNN attention can be picked: its workspace is not modelled
            cc = torch.cuda.get_device_capability(d)
            if cc >= (9, 0) and torch.backends.cuda.cudnn_sdp_enabled():
                lines.append("cudnn_attention 1")
        except Exception:
            pass
        peak = _device_peak(d)
        if peak is not None:
            lines.append(f"device_peak {peak}")
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
    # a rank of a job fit started (--nproc): a report of its own, named by
    # its RANK; a RANK fit did not ask for (a scheduler's) changes nothing
    rank = os.environ.get("RANK", "")
    ranks = os.environ.get("CUMEMTRACE_FIT_RANKS") == "1"
    path = f"{FIT}.rank{rank}" if ranks and rank.isdigit() else FIT
    with open(path, "w") as fh:
        fh.write("\n".join(l.replace("\n", " ") for l in lines) + "\n")
