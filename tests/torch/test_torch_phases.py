"""PyTorch's phases (docs/snapshot-format.md, "phases" with source "torch",
devices[].peak_phase, allocator.step and peak_step): the phase - forward,
backward, the optimizer step - the module and the training step of the
device's peak and of an out-of-memory failure, with no change to the
program.  By default from the frames running at the peak and at the OOM
(no module hook); with CUMEMTRACE_TORCH_PHASES=1 from PyTorch's global
module hooks (every allocation carries its phase); =0 turns them off
(src/torchboot/layer/phases.py; the cost: docs/performance.md)."""
import subprocess

import pytest

from conftest import CLI, line_of

ON = {"CUMEMTRACE_TORCH_PHASES": "1"}
OFF = {"CUMEMTRACE_TORCH_PHASES": "0"}


def path_of(snap, pid):
    ps = {p["id"]: p for p in snap["phases"]["list"]}
    parts = []
    while pid:
        assert ps[pid]["source"] == "torch", ps[pid]
        parts.append(ps[pid]["name"])
        pid = ps[pid]["parent"]
    return "/".join(reversed(parts))


def report(path):
    r = subprocess.run([str(CLI), "report", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


def oom_report(r):
    return report([f for f in r.files if ".oom." in f.name][0])


def exit_peak(r):
    """The exit snapshot and its device, whose peak is PyTorch's max_reserved."""
    snap = r.only("exit")
    dev = r.device()
    assert dev["peak_bytes"] == r.torch["max_reserved"]
    return snap, dev


def phase_names(snap):
    return {path_of(snap, p["id"]) for p in snap["phases"]["list"] if p["id"] > 1}


def test_the_peak_is_named_by_phase_module_and_step(scenario):
    r = scenario("phases_train.py", env=ON)
    snap, dev = exit_peak(r)
    # The 64 MiB gradient of wide's weight is allocated in wide's backward,
    # in step 2 (step 1 had no AdamW state yet; step 3 repeats step 2).
    assert path_of(snap, dev["peak_phase"]) == "backward/wide"
    assert dev["allocator"]["peak_step"] == 2
    assert dev["allocator"]["step"] == 3
    names = phase_names(snap)
    assert {"forward/Net/inp", "forward/Net/wide", "forward/Net/out", "backward/out",
            "backward/wide", "backward/inp", "optimizer step"} <= names, names
    assert snap["phases"]["unbalanced_pops"] == 0
    text = report(r.files[-1])
    assert "the peak was reached during backward of module `wide`, step 2" in text, text


def test_an_oom_in_a_modules_forward_names_it(scenario):
    r = scenario("phases_train.py", "oom", env=ON)
    snap = r.only("oom")
    oom = snap["oom"]
    assert path_of(snap, oom["phase"]) == "forward/Net/huge"
    assert oom["allocator"]["step"] == 4  # three steps done, the fourth under way
    text = oom_report(r)
    assert "during: forward of module `huge`, step 4" in text, text
    # The failing line is the module's own.
    assert f"phases_train.py:{line_of('phases_train.py', 'HUGE')}" in text, text


def test_an_oom_before_the_first_optimizer_step_says_so(scenario):
    r = scenario("phases_train.py", "oom0", env=ON)
    oom = r.only("oom")["oom"]
    assert path_of(r.only("oom"), oom["phase"]) == "forward/Net/huge"
    assert oom["allocator"]["step"] == 0  # an optimizer exists, none of its steps ran
    text = oom_report(r)
    assert "during: forward of module `huge`, before the first optimizer step" in text, text


def test_by_default_a_peak_in_backward_is_named_without_module_hooks(scenario):
    r = scenario("phases_train.py")
    snap, dev = exit_peak(r)
    # The same peak as with the hooks (wide's backward, step 2), reached on
    # autograd's thread: "backward"; no range was opened per module call.
    assert path_of(snap, dev["peak_phase"]) == "backward"
    assert dev["allocator"]["peak_step"] == 2
    assert dev["allocator"]["step"] == 3
    names = phase_names(snap)
    assert names == {"optimizer step", "backward"}, names
    assert "the peak was reached during backward, step 2" in report(r.files[-1])


def test_by_default_a_peak_in_forward_names_the_module_instance(scenario):
    r = scenario("phases_where.py", "forward")
    assert "HOOKS 0" in r.stderr  # the default hooks no module call
    snap, dev = exit_peak(r)
    # blocks.0.mlp and blocks.1.mlp are one class: the frame's `self` tells
    # them apart; the path is the one the hooks give (below).
    assert path_of(snap, dev["peak_phase"]) == "forward/Net/blocks.1/blocks.1.mlp"
    text = report(r.files[-1])
    assert "the peak was reached during forward of module `blocks.1.mlp`" in text, text
    hooked = scenario("phases_where.py", "forward", env=ON)
    assert "HOOKS 2" in hooked.stderr
    hsnap = hooked.only("exit")
    assert path_of(hsnap, hooked.device()["peak_phase"]) == "forward/Net/blocks.1/blocks.1.mlp"


def test_by_default_a_peak_in_the_optimizer_step_is_named(scenario):
    r = scenario("phases_where.py", "step")
    snap, dev = exit_peak(r)
    # AdamW's state (2 x 64 MiB) is made inside its first step.
    assert path_of(snap, dev["peak_phase"]) == "optimizer step"
    assert dev["allocator"]["peak_step"] == 1
    assert "the peak was reached during optimizer step, step 1" in report(r.files[-1])


def test_by_default_an_oom_in_a_modules_forward_names_it(scenario):
    r = scenario("phases_train.py", "oom")
    snap = r.only("oom")
    oom = snap["oom"]
    assert path_of(snap, oom["phase"]) == "forward/Net/huge"
    assert oom["allocator"]["step"] == 4
    text = oom_report(r)
    assert "during: forward of module `huge`, step 4" in text, text
    assert f"phases_train.py:{line_of('phases_train.py', 'HUGE')}" in text, text
    r0 = scenario("phases_train.py", "oom0")
    oom0 = r0.only("oom")["oom"]
    assert path_of(r0.only("oom"), oom0["phase"]) == "forward/Net/huge"
    assert oom0["allocator"]["step"] == 0
    assert "during: forward of module `huge`, before the first optimizer step" in oom_report(r0)


def test_by_default_an_oom_in_backward_says_so(scenario):
    r = scenario("phases_where.py", "oom_backward")
    assert r.torch["oom"]
    snap = r.only("oom")
    assert path_of(snap, snap["oom"]["phase"]) == "backward"
    assert "during: backward" in oom_report(r)


def test_phases_are_off_with_0(scenario):
    r = scenario("phases_train.py", env=OFF)
    snap = r.only("exit")
    assert "phases" not in snap or not any(p["source"] == "torch"
                                           for p in snap["phases"]["list"])
    assert r.device()["peak_phase"] == 0


@pytest.mark.parametrize("which", ["second", "last"])
def test_a_step_that_raised_is_closed(scenario, which):
    # PyTorch runs no step post hook when step() raises.  The second: the
    # next step's pre hook closes it.  The last: no step hook runs before
    # the peak after the loop, which the peak's frames place in no step.
    # Either way that peak is in no step.
    r = scenario("step_raises.py", *(["last"] if which == "last" else []))
    assert r.torch["raised"] == 1
    snap = r.only("exit")
    dev = r.device()
    assert dev["peak_bytes"] == r.torch["max_reserved"]
    assert dev["peak_phase"] == 0 or "optimizer step" not in path_of(snap, dev["peak_phase"])
    assert "during optimizer step" not in report(r.files[-1])
    assert snap["phases"]["unbalanced_pops"] == 0


def warnings(r):
    return [l for l in r.stderr.splitlines() if l.startswith("cumemtrace: warning")]


def test_without_always_call_phases_1_adds_neither_module_hook(scenario):
    # PyTorch 2.0's register_module_forward_hook has no always_call: the
    # pre hook alone would push a phase per module call that nothing pops.
    r = scenario("phases_old_torch.py", env=ON)
    assert r.torch["pre_hooks"] == r.torch["hooks"] == 0  # and the bare run's (the fixture)
    [warning] = warnings(r)
    assert warning.startswith("cumemtrace: warning: PyTorch ")
    assert (" has no register_module_forward_hook(always_call=True): "
            "CUMEMTRACE_TORCH_PHASES=1 adds no module hooks") in warning, warning
    # named from the frames instead, as by default
    snap, dev = exit_peak(r)
    assert path_of(snap, dev["peak_phase"]) == "backward"
    assert dev["allocator"]["peak_step"] == 2
    assert phase_names(snap) == {"optimizer step", "backward"}


def test_without_disable_torch_function_the_roles_say_so_once(scenario):
    r = scenario("phases_old_torch.py", "no_quiet")
    [warning] = warnings(r)
    assert " has no torch._C.DisableTorchFunction: the live tensors are not sorted into " \
           "parameters" in warning, warning
    alloc = r.device()["allocator"]
    assert "parameter_bytes" not in alloc, alloc
    assert alloc["peak_step"] == 2  # the rest of the layer goes on


def by_phase(snap, dev):
    """Path -> at_peak_bytes of the device's ranges at its peak (none: no
    allocation was made in any range)."""
    return {path_of(snap, row["phase"]) if row["phase"] else "": row["at_peak_bytes"]
            for row in dev.get("by_phase", ())}


def test_what_a_step_that_raised_leaves_is_in_no_step(scenario):
    # The step's "optimizer step" ends as the exception leaves PyTorch's
    # step wrapper: the segment the except clause makes (96 MiB) and the
    # peak's 256 MiB after the loop carry no step, in the by-range view as
    # in the peak's phase, with no step hook or dump between.
    r = scenario("step_raises.py", "last", "handler")
    assert r.torch["raised"] == 1
    snap = r.only("exit")
    dev = r.device()
    assert dev["peak_phase"] == 0
    ranges = by_phase(snap, dev)
    assert ranges.get("optimizer step", 0) < 96 << 20, ranges
    rep = subprocess.run([str(CLI), "report", "--by", "range", str(r.files[-1])],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    for row in rep.stdout.splitlines():  # "352 MiB  86.3% ... optimizer step" before
        if row.rstrip().endswith("optimizer step"):
            at_peak, unit = row.split()[:2]
            assert unit not in ("MiB", "GiB") or float(at_peak) < 96, rep.stdout


def test_a_step_that_raised_in_a_short_program_is_closed(scenario):
    # No segment made from a function before the steps: the library has not
    # read a frame directly when the peak is reached, so the peak's frames
    # cannot say it ran in no step; the step's own end says it.
    r = scenario("step_raises.py", "last", "short")
    assert r.torch["raised"] == 1
    snap = r.only("exit")
    dev = r.device()
    assert dev["peak_phase"] == 0 or "optimizer step" not in path_of(snap, dev["peak_phase"])
    assert "during optimizer step" not in report(r.files[-1])
    assert by_phase(snap, dev).get("optimizer step", 0) < 256 << 20
