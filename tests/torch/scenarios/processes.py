"""Scenario 7: processes - a DataLoader with two workers (CPU-only
children: they must write nothing) feeding a CUDA main process, then
torch.multiprocessing spawn children that each use CUDA under their own
RANK."""
import json
import os
import sys

import torch
import torch.multiprocessing as mp

MiB = 1 << 20


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((1024,), float(i))


def child(index, world):
    os.environ["RANK"] = str(index)  # read by the tracer at its first CUDA call
    x = torch.empty((index + 1) * 8 * MiB, dtype=torch.uint8, device="cuda")  # CHILD
    with open(f"child{index}.json", "w") as f:  # the parent prints them in order
        json.dump({"reserved": torch.cuda.memory_reserved(), "pid": os.getpid()}, f)
    del x


def main():
    loader = torch.utils.data.DataLoader(Numbers(), batch_size=16, num_workers=2)
    total = torch.zeros(1024, device="cuda")  # MAIN
    for batch in loader:
        total += batch.to("cuda").sum(0)
    workers = 2
    mp.spawn(child, args=(workers,), nprocs=workers, join=True)
    children = {}
    for i in range(workers):
        with open(f"child{i}.json") as f:
            children[i] = json.load(f)
    # Pids differ from run to run: on stderr, which the bare/traced
    # comparison leaves out.
    print(f"PIDS {os.getpid()} {' '.join(str(c['pid']) for c in children.values())}",
          file=sys.stderr)
    print("TORCH " + json.dumps({
        "reserved": torch.cuda.memory_reserved(),
        "children": {i: c["reserved"] for i, c in children.items()},
    }, sort_keys=True))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
