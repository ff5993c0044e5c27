"""pytest-cumemtrace: GPU-memory limits for tests (see plugin.py).  Ships in
the cumemtrace package, whose version it carries."""
from cumemtrace import __version__  # noqa: F401
