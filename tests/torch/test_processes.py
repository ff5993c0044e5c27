"""Processes around real PyTorch: DataLoader workers (fork, CPU only) and
torch.multiprocessing spawn children with their own RANK."""
import re

from conftest import line_of, python_frames


def test_dataloader_workers_and_spawned_ranks(scenario):
    r = scenario("processes.py")
    t = r.torch
    pids = [int(p) for p in re.search(r"^PIDS ([\d ]+)$", r.stderr, re.M).group(1).split()]
    main_pid, child_pids = pids[0], pids[1:]
    # Only processes that touched CUDA wrote a file: the main one and the two
    # spawned children, not the two DataLoader workers.
    assert len(r.files) == 3, [f.name for f in r.files]
    main = [s for s in r.snapshots if s["process"]["pid"] == main_pid]
    assert len(main) == 1 and main[0]["process"]["rank"] is None
    assert main[0]["devices"][0]["current_bytes"] == t["reserved"]
    children = sorted((s for s in r.snapshots if s["process"]["pid"] != main_pid),
                      key=lambda s: s["process"]["rank"])
    assert sorted(s["process"]["pid"] for s in children) == sorted(child_pids)
    # Each child set RANK itself before its first CUDA call (as code under
    # mp.spawn does before init_process_group): its file carries the rank.
    assert [s["process"]["rank"] for s in children] == [0, 1]
    for s in children:
        rank = s["process"]["rank"]
        assert s["process"]["ppid"] == main_pid
        name = next(f.name for f in r.files if f.name.endswith(f".{s['process']['pid']}.{rank}.json"))
        assert name
        dev = s["devices"][0]
        assert dev["current_bytes"] == t["children"][str(rank)]
        want = line_of("processes.py", "CHILD")
        assert any(f["line"] == want and f["file"].endswith("processes.py")
                   for g in dev["live"] for f in python_frames(s, g["stack"]))
