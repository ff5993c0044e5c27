"""cumemtrace: who holds the GPU memory, when it peaked, why the OOM.

The pip package of the cumemtrace tracer.  Its native files (the preloaded
libcumemtrace.so, the `cumemtrace` command, the PyTorch bootstrap and the
simulated GPU) live in prefix/ beside this file, laid out as `make install`
lays out a prefix (docs/install.md); the `cumemtrace` and `simgpu` commands
and `python -m cumemtrace` run them from there.
"""
from ._native import library, prefix

try:
    from ._version import version as __version__  # written by setup.py at build time
except ImportError:  # a source checkout, not an installed package
    from ._native import source_version as _source_version
    __version__ = _source_version()

__all__ = ["library", "prefix", "__version__"]
