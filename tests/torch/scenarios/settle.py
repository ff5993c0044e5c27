"""PyTorch's exit race, for every scenario that runs backward(): backward()
returns before the autograd device thread drops its last reference to the
graph task, whose thread-local state holds a Python object; that thread then
waits for the GIL, and if the interpreter is finalising by the time it gets
it, CPython ends the thread through a noexcept destructor: "terminate called
without an active exception", exit 134 - in bare runs, no tracer (2 of 6
runs of tensors_backward_oom.py; once in CI's model_hf.py llama ckpt at load
4).  Importing this registers an exit handler that releases the GIL a few
times before finalising (atexit runs first in Py_FinalizeEx), so the device
thread gets it and finishes; a loaded machine gets several chances."""
import atexit
import time


@atexit.register
def _let_autograd_threads_finish():
    for _ in range(4):
        time.sleep(0.05)
