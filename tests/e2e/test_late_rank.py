"""A rank set by the process itself before its first CUDA call names its
file (torch.multiprocessing.spawn children set RANK in os.environ)."""
import re


def test_rank_set_before_the_first_cuda_call(run):
    r = run(["rt_late_rank"])
    assert len(r.files) == 1
    assert re.fullmatch(r"cumemtrace\.rt_late_rank\.\d+\.5\.json", r.files[0].name), r.files
    assert r.snapshots[0]["process"]["rank"] == 5
