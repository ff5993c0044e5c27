"""A training loop dumped while it runs (test_dumps.py): a signal, a
periodic or an API snapshot must carry PyTorch's figures of that moment.

After STEPS steps of elementwise layers with Adam, each keeping one more
12 MiB tensor (HISTORY), the loop stops changing its memory, takes
PyTorch's own snapshot (truth.py: torch_snapshot.pickle) and asks for our
dump, then waits for the file, in 10 ms sleeps (between which CPython runs
pending calls):
  signal    os.kill(self, SIGUSR1) (CUMEMTRACE_SIGNAL=USR1)
  periodic  the next two periodic snapshots (CUMEMTRACE_INTERVAL set)
  api       cumemtrace_dump("cumemtrace.api.json") from the main thread (ctypes)
  thread    the same from another Python thread
  blocked   periodic snapshots while the main thread sleeps 10 s in libc's
            sleep() called through ctypes.PyDLL, which keeps the GIL: our
            refresh cannot run, the dump must not wait for it past its bound
            (10 s: after an answered dump the next one waits 19 times its
            reading, seconds on a loaded machine - the 5 % pacing)
  subinterp cumemtrace_dump() from a sub-interpreter (PyDLL, then CDLL),
            then from the main interpreter
  exit      no dump asked: the script ends at once (CUMEMTRACE_INTERVAL
            short: dumps asked while the interpreter finalises)
Prints one TORCH line: PyTorch's allocated bytes at the dump."""
import ctypes
import glob
import json
import os
import signal
import sys
import threading
import time

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth
from elementwise import Elementwise

MiB = 1 << 20
N = 1 * MiB
KEEP = 12 * MiB // 4
STEPS = 4


def wait_for(pattern, count=1, before=(), timeout=60):
    """The files matching pattern that were not in `before`, once there are
    `count` of them (sorted by name)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = sorted(set(glob.glob(pattern)) - set(before))
        if len(new) >= count:
            return new
        time.sleep(0.01)
    sys.exit(f"no {pattern} after {timeout} s")


def dump_from_thread(path):
    done = []
    t = threading.Thread(target=lambda: done.append(ctypes.CDLL(None).cumemtrace_dump(path)))
    t.start()
    while t.is_alive():  # join() would block our pending call
        time.sleep(0.01)


mode = sys.argv[1]
model = Elementwise(2, N, bias=False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
x = torch.randn(N, device="cuda")
history = []
for step in range(STEPS):
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()
    history.append(torch.empty(KEEP, device="cuda"))  # HISTORY
if mode == "exit":
    print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated()}))
    sys.exit(0)
torch.cuda.synchronize()
truth.dump()  # from here on nothing is allocated or freed
periodic = "cumemtrace.*.periodic.*.json"
if mode == "signal":
    before = glob.glob("cumemtrace.*.signal.*.json")
    os.kill(os.getpid(), signal.SIGUSR1)
    wait_for("cumemtrace.*.signal.*.json", before=before)
elif mode == "periodic":
    wait_for(periodic, 2, before=glob.glob(periodic))
elif mode == "api":
    ctypes.CDLL(None).cumemtrace_dump(b"cumemtrace.api.json")
elif mode == "subinterp":
    # a dump asked from a sub-interpreter, with the GIL (PyDLL) and without
    # (CDLL); then one from the main interpreter, whose layer must still work
    import _xxsubinterpreters as interpreters
    for how in ("PyDLL", "CDLL"):
        sub = interpreters.create()
        interpreters.run_string(sub, f"import ctypes\nctypes.{how}(None).cumemtrace_dump("
                                     f"b'cumemtrace.sub-{how}.json')\n")
        interpreters.destroy(sub)
    ctypes.CDLL(None).cumemtrace_dump(b"cumemtrace.api.json")
elif mode == "thread":
    dump_from_thread(b"cumemtrace.api.json")
elif mode == "blocked":
    wait_for(periodic, 2, before=glob.glob(periodic))  # the last figures, read
    ctypes.PyDLL(None).sleep(10)  # the GIL held throughout
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated()}))
