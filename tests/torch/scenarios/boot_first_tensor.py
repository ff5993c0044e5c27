"""The program's first CUDA tensor, made on a marked line, kept to the end:
the PyTorch layer must be in before PyTorch's CUDA initialises for its
history to name that line, however the tracer came in (`cumemtrace run`, a
plain LD_PRELOAD, a Python that skips site), and when torch is imported and
used in a thread of the program while the main thread waits for it
(argument "thread").  An audit hook of the
program's own counts the events it sees in a loop of id() once the layer
is in (on stderr: stdout stays the same bare and traced)."""
import json
import sys
import threading

counts = [0, False]
kept = {}


def hook(event, args):
    if counts[1]:
        counts[0] += 1


def work():
    import torch
    sys.addaudithook(hook)
    first = torch.ones(1 << 20, device="cuda")  # FIRST
    counts[1] = True
    for _ in range(1000):
        id(first)
    counts[1] = False
    torch.cuda.synchronize()
    kept["first"] = first


if sys.argv[1:] == ["thread"]:
    t = threading.Thread(target=work)
    t.start()
    t.join()
else:
    work()
first = kept["first"]
sys.stderr.write(f"EVENTS {counts[0]}\n")
print("TORCH " + json.dumps({"bytes": first.numel() * first.element_size()}))
