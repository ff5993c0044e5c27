"""PyTorch's own account of who holds its memory, for the tensors tests:
torch.cuda.memory._dump_snapshot into torch_snapshot.pickle in
the working directory, taken where the scenario says: at exit, or from
PyTorch's out-of-memory observer at the first OOM - where our post-mortem
takes its view too (the request's own temporaries are freed before an
OutOfMemoryError handler runs).  Under `cumemtrace run` PyTorch records each
block's Python stack (our default); in the bare run the file exists too,
without frames.  Prints nothing: the bare and traced runs must print the
same."""
import torch

PATH = "torch_snapshot.pickle"


def dump():
    torch.cuda.memory._dump_snapshot(PATH)


def dump_at_oom():
    torch.cuda.init()
    done = []

    def observer(device, alloc, device_total, device_free):
        if not done:
            done.append(1)
            dump()
    torch._C._cuda_attach_out_of_memory_observer(observer)
