"""Holds simulated device memory until stopped, for tests/e2e/test_ending.py.
MODE: "default" (Python's own SIGINT handler only), "handler" (a SIGTERM/
SIGHUP handler that ends the loop and exits 3, as training frameworks do).
Prints "ready" once the memory is held."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from model import Runtime  # noqa: E402

stop = False


def graceful(sig, frame):
    global stop
    stop = True


def main():
    mode = sys.argv[1]
    rt = Runtime(sys.argv[2])
    held = [rt.malloc(32 << 20)]
    if mode == "handler":
        signal.signal(signal.SIGTERM, graceful)
        signal.signal(signal.SIGHUP, graceful)
    print("ready", flush=True)
    end = time.monotonic() + 60
    while not stop and time.monotonic() < end:
        held.append(rt.malloc(1 << 20))
        rt.free(held.pop())
        time.sleep(0.001)
    sys.exit(3 if stop else 0)


main()
