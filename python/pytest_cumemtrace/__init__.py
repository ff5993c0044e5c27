"""pytest-cumemtrace: GPU-memory limits for tests (see plugin.py)."""
__version__ = "0.1.0"
