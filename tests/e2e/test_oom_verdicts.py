"""A post-mortem's cause and advice are true of the run.

- A driver refusal while more is free than requested is not called
  fragmentation (a GPU's MMU maps scattered pages): the cause says what the
  run's figures explain - page rounding, a margin the driver keeps, memory of
  other processes - or that nothing measured does.
- nvidia-smi is advised only for memory outside this process beyond what a
  CUDA context takes.
- Every sentence is grammatical and agrees with the chain it describes.
Each number checked is computed here from the snapshot's own figures."""
import json
import re
import subprocess

from conftest import CLI, MiB

GiB = 1 << 30
CONTEXT = 1 * GiB      # src/cli/text/oom_text.h OOM_TEXT_CONTEXT_BYTES
MARGIN = 64 * MiB      # OOM_TEXT_DRIVER_MARGIN
CARD = {"SIMCUDA_MEMORY": "256MiB"}


def fmt(n):
    """out_bytes: three significant digits, binary units."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            v = n / size
            return f"{v:.2f} {unit}" if v < 10 else f"{v:.1f} {unit}" if v < 100 \
                else f"{v:.0f} {unit}"
    return f"{n} B"


def report(path, *args):
    r = subprocess.run([str(CLI), "report", *args, str(path)], capture_output=True,
                       text=True, timeout=60, env={"NO_COLOR": "1", "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    return r.stdout


def flat(text):
    return " ".join(text.split())


def advice(path):
    return {a["id"]: flat(a["text"]) for a in
            json.loads(report(path, "--json"))["snapshots"][0]["advice"]}


def postmortem(r, cause=None):
    return next(f for f in r.files if ".oom." in f.name and
                (cause is None or json.loads(f.read_text())["oom"]["cause"] == cause))


def cause_line(text):
    out = flat(text)
    return out[out.index("cause:"):out.index("retries:")]


# ---- item 5: refused while free -------------------------------------------

def test_refusal_with_memory_free_is_not_called_fragmentation(run):
    r = run(["rt_oom", "fragment"], env=CARD)
    pm = postmortem(r, "refused_while_free")
    o = json.loads(pm.read_text())["oom"]
    assert o["free_bytes"] - o["requested_bytes"] >= MARGIN  # no rounding, no margin
    assert o["untracked_bytes"] <= CONTEXT                   # no other process
    text = report(pm)
    cause = cause_line(text)
    assert (f"free {fmt(o['free_bytes'])} >= request {fmt(o['requested_bytes'])}, and "
            "nothing measured explains it (not fragmentation") in cause, cause
    assert "fragmentation" not in flat(text).replace("not fragmentation", ""), text
    ids = advice(pm)
    assert set(ids) & {"fragmentation", "free-to-fit"} == set(), ids
    assert "MPS" in ids["refused-while-free"] and "nvidia-smi" in ids["refused-while-free"]
    assert "expandable_segments" not in " ".join(ids.values())
    assert "largest buffers first" not in " ".join(ids.values())
    # the layout stays as information, claiming nothing about the failure
    layout = flat(text)[flat(text).index("layout:"):flat(text).index("retries:")]
    assert "addresses only" in layout and "fits" not in layout, layout


def _edited(tmp_path, path, name, untracked=None, **oom):
    """The post-mortem with other figures, kept consistent: untracked =
    total - free - tracked (the total grows to hold `untracked`)."""
    doc = json.loads(path.read_text())
    o = doc["oom"]
    o.update(oom)
    if untracked is not None:
        o["total_bytes"] = o["free_bytes"] + o["tracked_bytes"] + untracked
    o["untracked_bytes"] = max(0, o["total_bytes"] - o["free_bytes"] - o["tracked_bytes"])
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return out, doc


def test_refusal_explained_by_what_was_measured(run, tmp_path):
    # The simulated device only refuses for lack of a contiguous range; the
    # other explanations are the same post-mortem with other figures.
    pm = postmortem(run(["rt_oom", "fragment"], env=CARD), "refused_while_free")
    req = json.loads(pm.read_text())["oom"]["requested_bytes"]
    # within the driver's margin: free is 10 MiB above the request
    close, _ = _edited(tmp_path, pm, "margin.json", free_bytes=req + 10 * MiB)
    cause = cause_line(report(close))
    assert f"free {fmt(req + 10 * MiB)} is only 10.0 MiB above the {fmt(req)} request" \
        in cause, cause
    assert f"free {fmt(MARGIN - 10 * MiB)} more" in advice(close)["refused-while-free"]
    # another process: 3 GiB outside this process, more than a context
    others, doc = _edited(tmp_path, pm, "others.json", untracked=3 * GiB)
    cause = cause_line(report(others))
    assert "with 3.00 GiB held outside this process: another process" in cause, cause
    a = advice(others)
    assert "nvidia-smi" in a["refused-while-free"] and "untracked" not in a, a
    # page rounding: free not a whole page, the request rounded past it
    g = doc["devices"][0]["fragmentation"]["granularity_bytes"]
    odd, _ = _edited(tmp_path, pm, "rounding.json", requested_bytes=req + 1,
                     free_bytes=req + 1 + (g - 1) // 2)
    need = (req + 1 + g - 1) // g * g
    cause = cause_line(report(odd))
    assert f"the {fmt(req + 1)} request needs {fmt(need)}, more than" in cause, cause


# ---- item 6: nvidia-smi only beyond a context ------------------------------

def test_a_cuda_context_is_not_another_process(run):
    # 500 MiB of untracked memory (a CUDA context) and a request 8 MiB short
    r = run(["rt_oom", "short", "8"], env={"SIMCUDA_MEMORY": "2GiB",
                                           "SIMCUDA_RESERVED": "500MiB"})
    pm = postmortem(r)
    o = json.loads(pm.read_text())["oom"]
    assert o["shortfall_bytes"] == 8 * MiB and o["untracked_bytes"] == 500 * MiB
    a = advice(pm)
    assert "untracked" not in a, a
    assert "nvidia-smi" not in " ".join(a.values())


def test_memory_beyond_a_context_sends_to_nvidia_smi(run):
    r = run(["rt_oom", "short", "8"], env={"SIMCUDA_MEMORY": "8GiB",
                                           "SIMCUDA_RESERVED": "3GiB"})
    pm = postmortem(r)
    o = json.loads(pm.read_text())["oom"]
    beyond = o["untracked_bytes"] - CONTEXT
    assert beyond >= o["shortfall_bytes"]
    a = advice(pm)["untracked"]
    assert f"{fmt(beyond)} beyond the 1.00 GiB a CUDA context" in a, a
    assert "nvidia-smi" in a


# ---- item 7: sentences ------------------------------------------------------

def test_footer_agrees_with_a_failed_chain(run):
    r = run(["rt_oom", "fail"], env=CARD)
    pm = postmortem(r)
    o = json.loads(pm.read_text())["oom"]
    assert o["released_bytes"] == 120 * MiB and o["recovered"] is False
    text = flat(report(pm, "--full"))  # the footer is one of --full's tables
    assert f"{fmt(o['released_bytes'])} released by {o['released_count']} frees" in text
    footer = text[text.index("OOMs: "):]
    assert footer.startswith("OOMs: 1 chain (2 failed attempts), none recovered"), footer
    assert "0 B released" not in text


def test_footer_agrees_with_a_recovered_chain(run):
    r = run(["rt_oom", "recover"], env=dict(CARD, CUMEMTRACE_OOM_DUMPS="all"))
    end = next(f for f in r.files if ".oom." not in f.name)
    ooms = json.loads(end.read_text())["ooms"]
    text = flat(report(end))
    footer = text[text.index("OOMs: "):]
    assert footer.startswith(
        f"OOMs: 1 chain (1 failed attempt), 1 recovered, after the application released "
        f"{fmt(ooms['retry_released_bytes'])} in its retries"), footer


def test_one_is_singular(run):
    # One live allocation, one chain of one failed attempt: no "1 allocations"
    r = run(["rt_oom", "exhaust"], env=CARD)
    text = flat(report(postmortem(r), "--full"))  # every table
    assert "Top holders at the failure (40.0 MiB in 1 allocation)" in text, text
    assert "1 live allocation" in text and "1 live allocations" not in text, text
    assert re.search(r"\b1 (allocations|frees|stacks|chains|failed attempts|segments)\b",
                     text) is None, text
