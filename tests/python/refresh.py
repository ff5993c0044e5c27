"""The library's refresh of an allocator layer's figures before a dump
(src/preload/life/torch_layer.c), without PyTorch, for
tests/e2e/test_refresh.py.

    python3 refresh.py BUILD MODE

A stand-in layer registers a callable (cumemtrace_allocator_refresher) that
reports allocated_bytes = how often it ran, then one dump is asked for:
  api        cumemtrace_dump from the main thread (through ctypes.CDLL)
  thread     the same from another thread while the main thread sleeps in
             10 ms steps (between which CPython runs pending calls)
  error      as thread, the callable raising ValueError: the host sees nothing
  interrupt  as thread, the callable raising KeyboardInterrupt: the host gets
             it on its main thread, where a signal handler's would have come
  none       no callable registered: no refresh asked
Prints what the host saw, one line."""
import ctypes
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Runtime  # noqa: E402


build, mode = sys.argv[1], sys.argv[2]
# struct cumemtrace_allocator_facts as the layer declares it (the library
# takes no other size); the layer's library part needs no torch
sys.path.insert(0, os.path.join(build, "share", "cumemtrace", "torchboot"))
import cumemtrace_torch  # noqa: E402
Facts = cumemtrace_torch.part("library").Facts
rt = Runtime(build)
rt.malloc(1 << 20)  # the process uses CUDA: our thread runs
lib = ctypes.CDLL(None)
state = lib.cumemtrace_allocator_state
state.argtypes = [ctypes.c_int, ctypes.POINTER(Facts)]
calls = []


def refresh():
    calls.append(threading.current_thread() is threading.main_thread())
    if mode == "error":
        raise ValueError("a layer's own bug")
    if mode == "interrupt":
        raise KeyboardInterrupt
    f = Facts(size=ctypes.sizeof(Facts), name=b"stand-in", requested_bytes=-1,
              allocated_bytes=len(calls), reserved_bytes=64 << 20)
    state(0, ctypes.byref(f))
    return True


if mode != "none":
    reg = ctypes.PyDLL(None).cumemtrace_allocator_refresher
    reg.argtypes = [ctypes.py_object]
    assert reg(refresh) == 0
dump = lib.cumemtrace_dump
dump.argtypes = [ctypes.c_char_p]
saw = "nothing"
try:
    if mode == "api":
        dump(b"cumemtrace.asked.json")
    else:
        t = threading.Thread(target=dump, args=(b"cumemtrace.asked.json",))
        t.start()
        while t.is_alive():
            time.sleep(0.01)
        time.sleep(0.05)  # a KeyboardInterrupt handed over comes at a bytecode
except KeyboardInterrupt:
    saw = "KeyboardInterrupt"
if mode != "none":
    reg(ctypes.py_object())
print(f"host saw {saw}; refresh ran {len(calls)} time(s), on the main thread: "
      f"{all(calls) if calls else None}")
