"""The autograd node behind an OOM in backward, on real PyTorch on the
simulated GPU: the post-mortem (report, report --json, the HTML page)
names the node whose request failed - the one PyTorch's own
torch._C._current_autograd_node() gives in the scenario's observer - and,
under anomaly mode, the forward line of that node exactly; without it,
says why that line is not known.  The scenario fixture runs each one bare
and traced and requires the same stdout, which carries the
OutOfMemoryError's type and whole message."""
import json
import os

from conftest import SCENARIOS, cli, line_of, markers
from test_html_tensors import page_model
from test_holders import cli_text, snapshot_file

SCRIPT = "autograd_node_oom.py"
WHY = ("its forward line is not known: PyTorch records a node's forward line only "
       "under torch.autograd.set_detect_anomaly(True)")


def post_mortem(r, tmp_path):
    """(the snapshot's oom.allocator.origin, the report's text flattened,
    report --json's oom, the HTML page's allocator origin sentence)."""
    path = snapshot_file(r, "oom")
    snap = json.loads(path.read_text())
    text = " ".join(cli_text("report", path).split())
    rep = json.loads(cli_text("report", "--json", path))["snapshots"][0]["oom"]
    page = tmp_path / "pm.html"
    cli("html", "-o", page, path, check=True)
    html = page_model(page)["files"][0]["oom"]["allocator"]
    return snap["oom"]["allocator"]["origin"], text, rep, html


def test_backward_oom_names_a_custom_functions_node_and_why_no_forward_line(scenario, tmp_path):
    r = scenario(SCRIPT, "plain", memory="1536MiB")
    assert r.torch["raised"].startswith("OutOfMemoryError: CUDA out of memory."), r.torch
    [node] = r.torch["nodes"]
    assert node == "WidenBackward", r.torch
    origin, text, rep, html = post_mortem(r, tmp_path)
    assert origin == {"thread": "backward", "node": node, "forward_site": None}, origin
    sentence = f"{node} on autograd's backward thread; {WHY}"
    assert f"node: {sentence}" in text, text
    assert rep["origin"] == {"thread": "backward", "node": node, "forward_line": None,
                             "sentence": sentence}, rep["origin"]
    assert html["origin"] == sentence, html


def test_backward_oom_in_pytorchs_own_node_has_no_python_and_says_so(scenario, tmp_path):
    r = scenario(SCRIPT, "builtin", memory="1536MiB")
    assert r.torch["raised"], r.torch
    [node] = r.torch["nodes"]
    assert node == "MulBackward0", r.torch
    origin, text, rep, _ = post_mortem(r, tmp_path)
    assert origin == {"thread": "backward", "node": node, "forward_site": None}, origin
    assert f"node: {node} on autograd's backward thread; {WHY}" in text, text
    snap = r.only("oom")
    # the failing stack's words: a thread with no Python, never "GIL not held"
    assert "autograd's backward thread: no Python frames" in markers(snap, snap["oom"]["stack"])
    assert "GIL not held" not in text, text


def test_backward_oom_under_anomaly_mode_names_the_nodes_forward_line(scenario, tmp_path):
    r = scenario(SCRIPT, "anomaly", memory="1536MiB")
    assert r.torch["raised"], r.torch
    [node] = r.torch["nodes"]
    origin, text, rep, html = post_mortem(r, tmp_path)
    fwd = line_of(SCRIPT, "FWD")
    assert origin["node"] == node == "WidenBackward", (origin, r.torch)
    site = origin["forward_site"]
    assert (os.path.realpath(site["file"]), site["line"], site["function"]) == \
        (str(SCENARIOS / SCRIPT), fwd, "<module>"), site
    sentence = f"{node} on autograd's backward thread, the backward of {SCRIPT}:{fwd}:<module>"
    assert f"node: {sentence}" in text, text
    assert rep["origin"]["forward_line"].endswith(f"{SCRIPT}:{fwd}:<module>"), rep["origin"]
    assert rep["origin"]["sentence"] == sentence and html["origin"] == sentence, (rep, html)
    assert WHY not in text


def test_forward_oom_names_no_node(scenario, tmp_path):
    r = scenario(SCRIPT, "forward", memory="1536MiB")
    assert r.torch["raised"] and r.torch["nodes"] == [None], r.torch
    origin, text, rep, html = post_mortem(r, tmp_path)
    assert origin is None and rep["origin"] is None and html.get("origin") is None
    assert "node:" not in text and "autograd's" not in text, text


def torch_blocks(r):
    """address -> (size, frames) of PyTorch's own live blocks (truth.py)."""
    import pickle
    snap = pickle.loads((r.files[0].parent / "torch_snapshot.pickle").read_bytes())
    return {b["address"]: (b["size"], b.get("frames") or [])
            for seg in snap["segments"] for b in seg["blocks"]
            if b["state"] == "active_allocated"}


ACCUMULATE_GRAD = {"thread": "backward", "node": "AccumulateGrad", "forward_site": None}


def test_gradients_made_in_backward_name_accumulate_grad(scenario):
    r = scenario("autograd_grads.py")
    grads = json.loads((r.files[0].parent / "grads.json").read_text())
    blocks = torch_blocks(r)
    made = [blocks[a] for a in grads["backward"]]
    assert all(frames == [] for _, frames in made), made  # no Python ran there
    groups = r.device("exit")["tensors"]["groups"]
    named = [g for g in groups if g["origin"] is not None]
    assert len(named) == 1 and named[0]["origin"] == ACCUMULATE_GRAD, groups
    assert named[0]["site"] is None and named[0]["stack"] == []
    assert (named[0]["bytes"], named[0]["count"]) == (sum(s for s, _ in made), 2), (named, made)
    # the gradient the program set itself is named by its own line
    [user] = [blocks[a] for a in grads["user"]]
    line = line_of("autograd_grads.py", "USER_GRAD")
    [mine] = [g for g in groups if g["site"] and g["site"]["line"] == line]
    assert (mine["bytes"], mine["origin"]) == (user[0], None), mine
    path = snapshot_file(r, "exit")
    text = " ".join(cli_text("report", "--bytes", path).split())
    assert f"{named[0]['bytes']} B" in text and "[autograd's backward thread, AccumulateGrad]" \
        in text, text


def test_under_the_programs_own_history_no_frameless_block_is_called_backwards(scenario):
    """The program's history may have started after a block was made: a
    block with no frames is then not known to come from autograd's thread."""
    r = scenario("autograd_grads.py", "own")
    groups = r.device("exit")["tensors"]["groups"]
    assert all(g["origin"] is None for g in groups), groups
    frameless = [g for g in groups if g["site"] is None]
    assert frameless and sum(g["bytes"] for g in frameless) >= 6 << 22, groups



def test_the_peaks_gradients_made_in_backward_name_accumulate_grad(scenario):
    """At the peak (in backward) w2's gradient was already made and is the
    very block kept in w2.grad now: the peak's tensors name it as the dump's
    do.  w1's gradient came after the peak, at an address that held another
    tensor then: that block of the peak is no gradient known, and stays
    unnamed."""
    r = scenario("autograd_grads.py")
    grads = json.loads((r.files[0].parent / "grads.json").read_text())
    blocks = torch_blocks(r)
    w1_grad, w2_grad = grads["backward"]
    dev = r.device("exit")
    peak = dev["peak_tensors"]
    assert peak is not None, dev
    named = [g for g in peak["groups"] if g["origin"] is not None]
    assert len(named) == 1 and named[0]["origin"] == ACCUMULATE_GRAD, peak["groups"]
    assert (named[0]["site"], named[0]["stack"]) == (None, [])
    assert (named[0]["bytes"], named[0]["count"]) == (blocks[w2_grad][0], 1), \
        (named, blocks[w2_grad], blocks[w1_grad])
    # the dump names both gradients: the same group, the same words
    [now] = [g for g in dev["tensors"]["groups"] if g["origin"] is not None]
    assert now["bytes"] == blocks[w1_grad][0] + blocks[w2_grad][0], now
    path = snapshot_file(r, "exit")
    text = " ".join(cli_text("report", "--bytes", path).split())
    at_peak = text[text.index("At the peak"):]
    assert f"{named[0]['bytes']} B" in at_peak and \
        "[autograd's backward thread, AccumulateGrad]" in at_peak, text


def engine_node(frames):
    """The node PyTorch's own C++ frames name for a block made by autograd's
    engine: the innermost "...::<Node>::apply(" frame."""
    for fr in frames:
        name = fr["name"]
        if name.startswith("torch::autograd::") and "::apply(" in name \
                and not name.startswith("torch::autograd::Engine::"):
            return name.split("::apply(")[0].rsplit("::", 1)[-1]
    return None


def test_with_cpp_stacks_each_block_made_in_backward_names_its_node(scenario):
    """CUMEMTRACE_TORCH_STACKS=all: torch.autograd.grad's two outputs,
    made by MmBackward0 and MulBackward0 on autograd's thread, are two
    groups named by their node - the node PyTorch's own snapshot's C++
    frames give for the same blocks, with the same bytes."""
    r = scenario("autograd_nodes.py", env={"CUMEMTRACE_TORCH_STACKS": "all"})
    grads = json.loads((r.files[0].parent / "grads.json").read_text())
    blocks = torch_blocks(r)
    theirs = {}
    for name, addr in grads.items():
        size, frames = blocks[addr]
        assert not any(f["filename"].endswith(".py") for f in frames), frames
        theirs[engine_node(frames)] = theirs.get(engine_node(frames), 0) + size
    assert set(theirs) == {"MmBackward0", "MulBackward0"}, theirs
    groups = r.device("exit")["tensors"]["groups"]
    ours = {g["origin"]["node"]: g["bytes"] for g in groups
            if g["origin"] and g["origin"]["node"] in theirs}
    assert ours == theirs, (ours, theirs, groups)
    for g in groups:
        if g["origin"] and g["origin"]["node"] in theirs:
            assert g["origin"]["thread"] == "backward" and g["site"] is None, g
    text = " ".join(cli_text("report", "--bytes", snapshot_file(r, "exit")).split())
    for node, size in theirs.items():
        assert f"[autograd's backward thread, {node}]" in text, text


def test_a_malformed_stacks_value_is_said_once_and_records_python_stacks(scenario):
    r = scenario("autograd_nodes.py", env={"CUMEMTRACE_TORCH_STACKS": "cpp"})
    said = [l for l in r.stderr.splitlines() if "CUMEMTRACE_TORCH_STACKS" in l]
    assert said == ["cumemtrace: warning: CUMEMTRACE_TORCH_STACKS='cpp' is not 'python' "
                    "or 'all'; recording Python stacks (unset it or set one of those)"], \
        r.stderr
    groups = r.device("exit")["tensors"]["groups"]
    assert all(g["origin"] is None or g["origin"]["node"] == "AccumulateGrad"
               for g in groups), groups
    assert any(g["site"] is None for g in groups), groups
