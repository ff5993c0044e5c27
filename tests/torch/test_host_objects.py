"""The PyTorch layer reads the host's modules, optimizers and tensors at
each dump (roles, phases) and hooks every optimizer's step: none of those
objects may notice - no hash, no comparison, no __torch_function__, no
__getattribute__ - and one odd object must not cost the rest of the dump
its figures.  Each mode of scenarios/host_objects.py runs bare and traced
(the fixture requires the same stdout and exit status); what the host's
objects saw is in its TORCH line."""
import pytest


@pytest.mark.parametrize("mode", ["eq", "dataclass"])
def test_an_unhashable_optimizer_steps(scenario, mode):
    r = scenario("host_objects.py", mode)
    assert "stepped " + mode in r.stdout
    roles = r.device()["allocator"]["roles"]
    assert roles is not None and roles["parameters"] == roles["gradients"] > 0


@pytest.mark.parametrize("mode", ["subclass", "mode", "getattr"])
def test_the_scan_runs_none_of_the_hosts_python(scenario, mode):
    r = scenario("host_objects.py", mode)
    assert r.torch["seen"] > 0  # the host's objects did see the script's own calls
    # The scan still saw the model: the same figures as without the hooks.
    roles = r.device()["allocator"]["roles"]
    assert roles is not None and roles["parameters"] > 0 and roles["gradients"] > 0
    assert r.only("oom")["oom"]["allocator"]["roles"] is not None


@pytest.mark.parametrize("mode", ["subclass", "mode"])
def test_the_module_hooks_run_none_of_the_hosts_python(scenario, mode):
    # CUMEMTRACE_TORCH_PHASES=1: the layer's global module hooks read each
    # module's output (its grad_fn) at every call.
    r = scenario("host_objects.py", mode, env={"CUMEMTRACE_TORCH_PHASES": "1"})
    assert r.torch["seen"] > 0
    assert r.device()["allocator"]["roles"] is not None


def test_a_half_built_module_costs_only_itself(scenario):
    r = scenario("host_objects.py", "half")
    for roles in (r.device()["allocator"]["roles"], r.only("oom")["oom"]["allocator"]["roles"]):
        assert roles is not None
        assert roles["parameters"] == 2 * (256 * 256 * 4 + 1024)
        assert roles["optimizer_state"] == 2 * roles["parameters"]  # Adam's two moments
