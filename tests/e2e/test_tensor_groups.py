"""The tensor model's grouping (src/torchboot/layer/tensors.py), without
torch: which frames are the user's own code, how live blocks group under
them, and how the text stays within the library's bound.  The same module
runs inside PyTorch processes (tests/torch/test_tensor_model.py)."""
import importlib.util
import json
import os
import pathlib
import sysconfig

import pytest

RUNS_NO_C = True  # imports the layer's Python grouping alone

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def tensors():
    spec = importlib.util.spec_from_file_location(
        "tensors_under_test", ROOT / "src" / "torchboot" / "layer" / "tensors.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_the_users_code_is_what_no_installed_root_holds(tensors, tmp_path):
    assert not tensors.is_user(os.__file__)                      # the standard library
    assert not tensors.is_user(pytest.__file__)                  # an installed package
    assert not tensors.is_user(sysconfig.get_paths()["purelib"] + "/x/y.py")
    assert not tensors.is_user("<frozen importlib._bootstrap>")
    assert not tensors.is_user("/usr/lib/libtorch_cpu.so")      # a C++ frame
    assert tensors.is_user(str(tmp_path / "train.py"))
    assert tensors.is_user("train.py")                           # relative, as Python wrote it
    assert tensors.is_user("<string>")


def frame(f, line, name):
    return {"filename": f, "line": line, "name": name}


def test_blocks_group_under_the_first_user_frame_with_whole_stacks(tensors, tmp_path):
    user = str(tmp_path / "train.py")
    lib = [frame(os.__file__, i, "lib%d" % i) for i in range(300)]  # deeper than 256
    seg = {"device": 0, "total_size": 10 << 20, "blocks": [
        {"state": "active_allocated", "size": 4096, "frames": lib[:40] + [frame(user, 7, "fwd")]},
        {"state": "active_allocated", "size": 8192, "frames": lib[:3] + [frame(user, 7, "fwd"),
                                                                         frame(user, 20, "main")]},
        {"state": "active_allocated", "size": 512, "frames": [frame(user, 9, "loss")] + lib},
        {"state": "active_allocated", "size": 1024, "frames": []},
        {"state": "inactive", "size": 2 << 20},
        {"state": "active_pending_free", "size": 512},
    ]}
    other = {"device": 1, "total_size": 1 << 20, "blocks": [
        {"state": "active_allocated", "size": 1 << 20, "frames": []}]}
    t = tensors.read([seg, other], 0)
    assert t["allocated_bytes"] == 4096 + 8192 + 512 + 1024 and t["count"] == 4
    assert t["cache"] == {"bytes": (10 << 20) - t["allocated_bytes"], "segments": 1,
                          "largest_free_bytes": 2 << 20}
    g = t["groups"]
    assert [(x["site"] or {}).get("line") for x in g] == [7, None, 9]
    assert g[0]["bytes"] == 4096 + 8192 and g[0]["count"] == 2
    # the stack of the group's most bytes, whole: library frames kept
    assert [f["line"] for f in g[0]["stack"]] == [0, 1, 2, 7, 20]
    assert g[0]["site"] == {"file": user, "line": 7, "function": "fwd"}
    assert len(g[2]["stack"]) == tensors.STACK_FRAMES   # cut only past 256 frames
    assert g[1]["site"] is None and g[1]["stack"] == []


def test_the_text_is_bounded_by_folding_the_smallest_groups(tensors, tmp_path, monkeypatch):
    user = str(tmp_path / "train.py")
    blocks = [{"state": "active_allocated", "size": 512 * (i + 1),
               "frames": [frame(os.__file__, j, "f") for j in range(50)] +
               [frame(user, i, "g")]} for i in range(100)]
    t = tensors.read([{"device": 0, "total_size": 1 << 30, "blocks": blocks}], 0)
    monkeypatch.setattr(tensors, "GROUPS_MAX", 10)
    text = tensors.bounded({"tensors": t})
    got = json.loads(text)["tensors"]
    assert len(got["groups"]) == 10 and got["more"]["groups"] == 90
    assert got["allocated_bytes"] == sum(x["bytes"] for x in got["groups"]) + got["more"]["bytes"]
    monkeypatch.setattr(tensors, "TEXT_MAX", 4000)
    t = tensors.read([{"device": 0, "total_size": 1 << 30, "blocks": blocks}], 0)
    text = tensors.bounded({"tensors": t})
    assert len(text) <= 4000
    got = json.loads(text)["tensors"]
    assert got["count"] == sum(x["count"] for x in got["groups"]) + got["more"]["count"]
