"""On real PyTorch, the post-mortem speaks PyTorch's terms with
PyTorch's own numbers (oom.allocator, from its out-of-memory observer, which
`cumemtrace run` attaches without a code change), names the cause, and gives
only advice a measurement supports."""
import json
import subprocess

import pytest

from conftest import CLI, REAL, GiB, MiB, line_of, python_frames


def post_mortems(run):
    return [s for s in run.snapshots if s["reason"] == "oom"]


def report_json(path):
    r = subprocess.run([str(CLI), "report", "--json", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["snapshots"][0]


def report_text(path, *args):
    r = subprocess.run([str(CLI), "report", *args, str(path)], capture_output=True, text=True,
                       timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


def joined_free(pm):
    """The largest run of free bytes in the large pool's segments, in address
    order, once free blocks at adjacent segments' edges join."""
    runs, cur = [0], 0
    for g in pm["oom"]["layout"]["allocator_segments"]["segments"]:
        if g["pool"] != "large":
            continue
        for b in g["blocks"]:
            cur = cur + b[1] if b[2] == "free" else 0
            runs.append(cur)
    return max(runs)


def test_fragmentation_inside_pytorchs_segments(scenario):
    r = scenario("pm_fragmentation.py", memory="1GiB")
    t = r.torch
    assert t["raised"]
    pms = post_mortems(r)
    frag = [s for s in pms if s["oom"]["cause"] == "allocator_fragmentation"]
    assert len(frag) == 1, [s["oom"]["cause"] for s in pms]
    a = frag[0]["oom"]["allocator"]
    seen = t["observed"][-1]  # the script's own observer, at that failure
    assert a["name"] == "pytorch"
    assert a["allocated_bytes"] == seen["allocated_bytes.all.current"]
    assert a["reserved_bytes"] == seen["reserved_bytes.all.current"]
    assert a["active_bytes"] == seen["active_bytes.all.current"]
    assert a["inactive_split_bytes"] == seen["inactive_split_bytes.all.current"]
    assert a["num_alloc_retries"] == seen["num_alloc_retries"]
    assert a["num_ooms"] == seen["num_ooms"]
    assert a["requested_bytes"] == seen["alloc"]
    assert a["reserved_unallocated_bytes"] == a["reserved_bytes"] - a["allocated_bytes"]
    assert a["largest_free_block_bytes"]["large"] == 4 * MiB  # the holes
    assert a["reserved_unallocated_bytes"] >= a["requested_bytes"]
    # the failing line is the script's
    lines = {f["line"] for f in python_frames(frag[0], frag[0]["oom"]["stack"])}
    assert line_of("pm_fragmentation.py", "FRAGMENTED") in lines
    pm = [f for f in r.files if f.name.endswith(".json") and ".oom." in f.name]
    path = next(f for f in pm if json.loads(f.read_text())["oom"]["cause"] ==
                "allocator_fragmentation")
    ids = [x["id"] for x in report_json(path)["advice"]]
    # The holes lie between live tensors: even joined across
    # segment edges no free run fits, so expandable segments do not help -
    # the next test proves it - and neither setting is advised.
    assert joined_free(frag[0]) < a["requested_bytes"]
    assert "live-holes" in ids and "expandable-segments" not in ids, ids
    assert "fragmentation" not in ids and "whole-run" not in ids and "exhausted" not in ids
    text = report_text(path)
    assert "is reserved by PyTorch but unallocated, in" in text
    assert "the largest free block is 4.00 MiB, less than the 20.0 MiB requested" in text


def test_expandable_segments_do_not_heal_holes_between_live_tensors(scenario):
    # Belief tested: "expandable_segments:True makes this fit".  It does not
    # here: the holes lie between live tensors of one segment, PyTorch does
    # not unmap them on its retry (reserved stays the same), so the request
    # fails again.  The post-mortem must then not advise the setting that is
    # already on.
    r = scenario("pm_fragmentation.py", memory="1GiB",
                 env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert r.torch["raised"]
    frag = [s for s in post_mortems(r) if s["oom"]["cause"] == "allocator_fragmentation"]
    assert len(frag) == 1
    a = frag[0]["oom"]["allocator"]
    assert a["config"] == {"expandable_segments": "True"}
    assert a["reserved_bytes"] == r.torch["observed"][-1]["reserved_bytes.all.current"]
    path = next(f for f in r.files if ".oom." in f.name and
                json.loads(f.read_text())["oom"]["cause"] == "allocator_fragmentation")
    ids = [x["id"] for x in report_json(path)["advice"]]
    assert "live-holes" in ids and "expandable-segments" not in ids, ids
    assert "max_split_size" not in report_text(path)


def test_expandable_segments_cause_and_advice_name_the_users_request(scenario):
    # PyTorch asks for 64 MiB; what fails is a 20 MiB
    # cuMemCreate step.  The cause and the advice speak of the 64 MiB, and
    # advise nothing that cannot close holes between live tensors.
    r = scenario("pm_fragmentation.py", "64", memory="1GiB",
                 env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert r.torch["raised"]
    [(path, pm)] = [(f, s) for f, s in zip(r.files, r.snapshots) if s["reason"] == "oom" and
                    s["oom"]["cause"] == "allocator_fragmentation"]
    o = pm["oom"]
    assert o["allocator"]["requested_bytes"] == 64 * MiB == r.torch["observed"][-1]["alloc"]
    assert o["entry_point"] == "cuMemCreate" and o["requested_bytes"] == 20 * MiB
    text = report_text(path)
    cause = text[text.index("cause:"):text.index("retries:")]
    assert "the 64.0 MiB request" in cause and "20.0 MiB" not in cause, cause
    assert "64.0 MiB from PyTorch; the call that failed: cuMemCreate of 20.0 MiB" in text
    assert "max_split_size" not in text
    holes = [b[1] for g in o["layout"]["allocator_segments"]["segments"]
             for b in g["blocks"] if b[2] == "free"]
    [adv] = [a for a in report_json(path)["advice"] if a["id"] == "live-holes"]
    assert f"holes of at most {max(holes) >> 20:.2f} MiB between live tensors" in \
        " ".join(adv["text"].split()), adv
    assert "64.0 MiB request" in " ".join(adv["text"].split())


@pytest.mark.skipif(REAL, reason="sized for the simulated 1 GiB card")
def test_split_segments_advice_names_the_setting_that_fits(scenario):
    # Two segments, each a live tensor and a free block, and a request larger
    # than either block: the free blocks lie between live tensors, yet
    # expandable segments give their whole pages back and map new ones, so
    # the advice must name that setting, not say that none helps.
    r = scenario("pm_split_segments.py", memory="1GiB")
    assert r.torch["raised"]
    [(path, pm)] = [(f, s) for f, s in zip(r.files, r.snapshots) if s["reason"] == "oom"]
    assert pm["oom"]["cause"] == "allocator_fragmentation"
    assert pm["oom"]["allocator"]["largest_free_block_bytes"]["large"] == 100 * MiB
    ids = [a["id"] for a in report_json(path)["advice"]]
    assert "expandable-segments" in ids and "live-holes" not in ids, ids
    text = report_text(path)
    assert "no allocator setting" not in text
    assert ("200 MiB of these blocks lies in whole pages, which with the device's "
            "4.00 MiB free covers the 160 MiB the request takes in pages") in text, text
    # What the advice predicts, run: the same script with the setting fits.
    fits = scenario("pm_split_segments.py", memory="1GiB",
                    env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert not fits.torch["raised"]
    assert not [s for s in fits.snapshots if s["reason"] == "oom"]
    # The exit report's fragmentation section: the driver's rounding wastes
    # nothing here, and PyTorch's cache (reserved - allocated) is said too.
    exit_path = next(f for f, s in zip(r.files, r.snapshots) if s["reason"] == "exit")
    a = next(s for s in r.snapshots if s["reason"] == "exit")["devices"][0]["allocator"]
    cached = (a["reserved_bytes"] - a["allocated_bytes"]) >> 20
    frag = report_text(exit_path)
    frag = frag[frag.index("Fragmentation"):]
    assert (f"PyTorch's cache: {a['reserved_bytes'] >> 20} MiB reserved, "
            f"{a['allocated_bytes'] >> 20} MiB in tensors - {cached} MiB") in frag, frag
    assert cached == 200


def test_memory_fraction_refusal_gets_a_post_mortem(scenario):
    r = scenario("pm_fraction.py", memory="1GiB")
    t = r.torch
    assert t["raised"]
    [pm] = post_mortems(r)
    o = pm["oom"]
    assert o["cause"] == "allocator_limit"
    assert o["entry_point"] == "pytorch" and o["attempts"] == 1  # no CUDA call
    end = r.only("exit")["ooms"]
    assert (end["count"], end["failed_attempts"]) == (1, 1)
    a = o["allocator"]
    assert a["limit_bytes"] == int(0.25 * t["total"])
    assert a["reserved_bytes"] == t["reserved"]
    assert a["reserved_bytes"] + a["requested_bytes"] > a["limit_bytes"]
    path = next(f for f in r.files if ".oom." in f.name)
    ids = [x["id"] for x in report_json(path)["advice"]]
    assert ids[0] == "memory-fraction", ids
    text = report_text(path)
    assert "set_per_process_memory_fraction" in text
    # Grammatical for one, and PyTorch named as PyTorch
    assert "1 retry, 1 OOM so far" in text and "1 failed attempt;" in text, text
    full = report_text(path, "--full")  # the footer is one of --full's tables
    assert "OOMs: 1 chain (1 failed attempt), none recovered" in full, full
    # PyTorch named the tensors: the driver-level table says what it is
    assert "Cached segments at the failure, by the line that created them (200 MiB in " \
        "1 allocation)" in full, full
    assert ("PyTorch refused 200 MiB on GPU 0 by itself, without a CUDA call "
            "(allocator_limit)") in r.stderr, r.stderr
    # The three-line summary once, not again at exit
    assert r.stderr.count("out of memory (pid") == 1, r.stderr
    assert r.stderr.count("  post-mortem: ") == 1, r.stderr
    assert "200 MiB of device memory, refused by PyTorch itself (no CUDA call)" in text
    page = path.with_suffix(".html")
    subprocess.run([str(CLI), "html", "-o", str(page), str(path)], check=True,
                   capture_output=True, timeout=60)
    html = page.read_text()
    start = html.index('<script type="application/json" id="cmt-data">') + 46
    model = json.loads(html[start:html.index("</script>", start)])
    sentence = model["files"][0]["oom"]["sentence"]
    assert sentence.startswith("PyTorch refused 200 MiB of device memory on device 0 "
                               "without a CUDA call: allocator limit"), sentence


def fraction_advice(path):
    [a] = [x for x in report_json(path)["advice"] if x["id"] == "memory-fraction"]
    return " ".join(a["text"].split())


def test_memory_fraction_advice_names_a_fraction_that_fits(scenario):
    # The fraction that would have let the request through
    # is (reserved + request) / the device's total - PyTorch's own figures,
    # not its cap (which its observer hands over as "device_total").
    import math
    r = scenario("pm_fraction.py", memory="1GiB")
    t = r.torch
    path = next(f for f in r.files if ".oom." in f.name)
    a = json.loads(path.read_text())["oom"]["allocator"]
    assert a["device_total_bytes"] == t["total"]  # the card, not the 256 MiB cap
    need = a["reserved_bytes"] + a["requested_bytes"]
    assert need == 400 * MiB and need <= t["total"]
    frac = math.ceil(need * 1000 / t["total"]) / 1000
    assert int(frac * t["total"]) >= need  # PyTorch's own cap would let it through
    text = fraction_advice(path)
    assert f"set_per_process_memory_fraction({frac:.3f})" in text, text
    assert "1.0" not in text.split("fraction(")[1][:5], text


def test_memory_fraction_advice_says_when_no_fraction_fits(scenario):
    r = scenario("pm_fraction.py", "1000", memory="1GiB")  # 200 MiB + 1000 MiB > 1 GiB
    t = r.torch
    assert t["raised"]
    path = next(f for f in r.files if ".oom." in f.name)
    a = json.loads(path.read_text())["oom"]["allocator"]
    assert a["reserved_bytes"] + a["requested_bytes"] > t["total"]
    text = fraction_advice(path)
    assert "no fraction up to 1" in text, text
    assert "set_per_process_memory_fraction(" not in text, text


def test_recovered_retry_is_quiet(scenario):
    r = scenario("pm_recover.py", memory="1GiB")
    assert r.torch["retries"] == 1 and r.torch["ooms"] == 0
    assert post_mortems(r) == []
    end = r.only("exit")["ooms"]
    assert (end["count"], end["recovered"], end["dumps"]) == (1, 1, [])
    assert "error" not in r.stderr, r.stderr
    assert "no post-mortem kept" in r.stderr


def test_live_at_exit_splits_tensors_from_cache(scenario):
    r = scenario("pm_exit.py")
    t = r.torch
    dev = r.device()
    a = dev["allocator"]
    assert (a["allocated_bytes"], a["reserved_bytes"]) == (t["allocated"], t["reserved"])
    assert dev["current_bytes"] == t["reserved"]
    path = next(f for f in r.files if ".oom." not in f.name)
    text = report_text(path)
    assert "Live at exit (possible leaks): 30.0 MiB of PyTorch's tensors" in text, text
    assert "PyTorch's cache: 40.0 MiB in " in text, text


def test_cumemtrace_limit_is_named_not_a_full_device(tmp_path):
    """Under --limit the device is not full: the sentence
    names the limit and the device's own free memory."""
    import os
    import sys
    from conftest import BUILD, SCENARIOS, SIMGPU
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_"))}
    p = subprocess.run([str(SIMGPU), "--build", str(BUILD), "--memory", "24GiB", "--",
                        str(CLI), "run", "--limit", "2GiB", "--output", f"{tmp_path}/", "--",
                        sys.executable, str(SCENARIOS / "pm_other.py"), "0"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    path = next(f for f in tmp_path.glob("cumemtrace.*.oom.*.json")
                if json.loads(f.read_text())["oom"]["cause"] == "limit")
    o = json.loads(path.read_text())["oom"]
    assert o["free_bytes"] > o["requested_bytes"]  # the device itself had room
    text = report_text(path)
    assert "The device is full" not in text, text
    assert ("The cumemtrace limit (2.00 GiB) refused it, not the device: PyTorch holds"
            in text), text
    assert f"the device itself had {o['free_bytes'] / GiB:.1f} GiB free" in text, text


def test_plain_ld_preload_gets_the_pytorch_layer_too(tmp_path):
    """No `cumemtrace run`: the library loads the layer itself (Py_AddPendingCall)."""
    import os
    import sys
    from conftest import BUILD, SCENARIOS
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_", "PYTHONPATH"))}
    env.update(LD_PRELOAD=f"{BUILD}/libcumemtrace.so {BUILD}/sim/libcudart.so.13",
               LD_LIBRARY_PATH=str(BUILD / "sim"), SIMCUDA_MEMORY="1GiB")
    r = subprocess.run([sys.executable, str(SCENARIOS / "pm_fraction.py")], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    [pm] = [json.loads(f.read_text()) for f in tmp_path.glob("cumemtrace.*.oom.*.json")]
    assert pm["oom"]["cause"] == "allocator_limit"
    assert pm["oom"]["allocator"]["name"] == "pytorch"


def test_layout_shows_pytorchs_segments_at_their_addresses(scenario):
    # The post-mortem carries where PyTorch's memory lies (its
    # segments and blocks, as memory._snapshot() lists them at the failure)
    # beside the driver-level layout of the same cudaMalloc'd segments.
    r = scenario("pm_fragmentation.py", memory="1GiB")
    [pm] = [s for s in post_mortems(r) if s["oom"]["cause"] == "allocator_fragmentation"]
    seen = r.torch["observed"][-1]["segments"]  # the script's own observer
    lay = pm["oom"]["layout"]
    segs = lay["allocator_segments"]
    assert segs["count"] == len(seen) == pm["oom"]["allocator"]["segments"]
    assert segs["blocks"] == sum(len(g[2]) for g in seen)
    states = {"inactive": "free", "active_allocated": "allocated",
              "active_pending_free": "pending"}
    assert [[int(g["address"], 16), g["bytes"], [list(b[:3]) for b in g["blocks"]]]
            for g in segs["segments"]] == \
        [[a, n, [[o, sz, states[st]] for o, sz, st in bl]] for a, n, bl in seen]
    # each live block names its Python stack (PyTorch's history), a free one none
    for g in segs["segments"]:
        for b in g["blocks"]:
            assert (len(b) == 4) == (b[2] != "free"), b
            if len(b) == 4:
                assert segs["stacks"][b[3]], b
    assert sum(g["bytes"] for g in segs["segments"]) == pm["oom"]["allocator"]["reserved_bytes"]
    # each segment is one of this process's cudaMalloc'd ranges, at the same place
    base = int(lay["base"], 16)
    ranges = {(base + a["offset"], a["bytes"]) for a in lay["allocations"]}
    assert {(int(g["address"], 16), g["bytes"]) for g in segs["segments"]} <= ranges
    free = [b for g in segs["segments"] for b in g["blocks"] if b[2] == "free"]
    assert free and max(b[1] for b in free) == 4 * MiB < pm["oom"]["allocator"]["requested_bytes"]
    # the html page's model carries every segment and block for the picture
    path = next(f for f in r.files if ".oom." in f.name and
                json.loads(f.read_text())["oom"]["cause"] == "allocator_fragmentation")
    page = path.with_suffix(".html")
    subprocess.run([str(CLI), "html", "-o", str(page), str(path)], check=True,
                   capture_output=True, timeout=60)
    text = page.read_text()
    start = text.index('<script type="application/json" id="cmt-data">') + 46
    model = json.loads(text[start:text.index("</script>", start)])
    got = model["files"][0]["oom"]["layout"]["segments"]
    assert (got["count"], got["blocks"]) == (segs["count"], segs["blocks"])
    assert sum(len(g[3]) for g in got["list"]) == segs["blocks"]


def test_another_process_holding_memory_is_named_first(scenario):
    # 2 GiB held by a second process on the same (simulated) device: the
    # request lacked ~0.5 GiB, far less than what the other process holds.
    r = scenario("pm_other.py", str(2 * GiB), memory="4GiB")
    assert r.torch["raised"]
    [pm] = post_mortems(r)
    o = pm["oom"]
    assert o["cause"] == "other_processes", o["cause"]
    assert o["untracked_bytes"] >= 2 * GiB > o["shortfall_bytes"] > 0
    assert o["allocator"]["name"] == "pytorch"
    path = next(f for f in r.files if ".oom." in f.name)
    advice = report_json(path)["advice"]
    assert advice[0]["id"] == "untracked", [a["id"] for a in advice]
    assert "nvidia-smi" in advice[0]["text"]
    assert all("precision" not in a["text"] for a in advice), advice
    text = report_text(path)
    assert "held outside this process" in text and "it would have fit" in text


def test_no_other_process_keeps_the_cause_exhausted(scenario):
    # The same job alone on a card too small for it: nobody else to blame.
    r = scenario("pm_other.py", "0", memory="2GiB")
    assert r.torch["raised"]
    [pm] = post_mortems(r)
    assert pm["oom"]["cause"] == "exhausted"
    path = next(f for f in r.files if ".oom." in f.name)
    ids = [a["id"] for a in report_json(path)["advice"]]
    assert "untracked" not in ids and "exhausted" in ids, ids


def test_history_names_the_lines_holding_the_largest_tensors(scenario):
    r = scenario("pm_history.py", memory="1GiB", env={"CUMEMTRACE_TORCH_HISTORY": "1"})
    assert r.torch["raised"]
    [pm] = post_mortems(r)
    a = pm["oom"]["allocator"]
    top = a["top_tensors"]
    assert [(t["bytes"], t["count"]) for t in top] == [(200 * MiB, 1), (192 * MiB, 3)], top
    assert sum(t["bytes"] for t in top) == a["allocated_bytes"] == r.torch["allocated"]
    here = [[(f["file"].rsplit("/", 1)[-1], f["line"]) for f in t["stack"]] for t in top]
    assert ("pm_history.py", line_of("pm_history.py", "ACTS")) in here[0], here
    assert ("pm_history.py", line_of("pm_history.py", "WEIGHTS")) in here[1], here
    assert top[1]["stack"][0]["function"] in ("weights", "<listcomp>"), top[1]["stack"]
    path = next(f for f in r.files if ".oom." in f.name)
    text = report_text(path)
    # the holders at the failure: PyTorch's tensors by line, every line
    assert "Holders at the failure: 392 MiB of PyTorch's tensors, by line" in text, text
    assert (f"200 MiB 51.0% 1 pm_history.py:"
            f"{line_of('pm_history.py', 'ACTS')}:<module>") in text, text
    assert "192 MiB 49.0% 3 pm_history.py:" in text


def test_without_history_there_are_no_top_tensors(scenario):
    r = scenario("pm_history.py", memory="1GiB", env={"CUMEMTRACE_TORCH_HISTORY": "0"})
    [pm] = post_mortems(r)
    assert pm["oom"]["allocator"]["top_tensors"] is None
    assert "tensors:" not in report_text(next(f for f in r.files if ".oom." in f.name))


def test_history_is_on_by_default(scenario):
    r = scenario("pm_history.py", memory="1GiB")
    [pm] = post_mortems(r)
    assert sum(t["bytes"] for t in pm["oom"]["allocator"]["top_tensors"]) == \
        r.torch["allocated"]


def test_history_cost_is_measured(tmp_path):
    """The ratio docs/performance.md quotes: one process, history off and
    in each mode alternately, the recording our layer turns on first."""
    import os
    import sys
    from conftest import BUILD, REAL, ROOT, SCENARIOS, SIMGPU
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_"))}
    boot = BUILD / "share" / "cumemtrace" / "torchboot"
    cmd = [] if REAL else [str(SIMGPU), "--build", str(BUILD), "--memory", "4GiB", "--"]
    p = subprocess.run(cmd + [sys.executable, str(SCENARIOS / "history_cost.py"), str(boot)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    t = json.loads(next(l for l in p.stdout.splitlines() if l.startswith("TORCH "))[6:])
    assert not any(t["recorded_off"]) and all(t["recorded_on"]), t
    print(f"\nPyTorch history (our default) cost: {t['ratio']:.2f}x the loop's time "
          f"({t['steps']} steps: {t['off_s'] * 1e3:.1f} ms off, {t['on_s'] * 1e3:.1f} ms on); "
          + ", ".join(f"{m} {r:.2f}x" for m, r in t["modes"].items()))
    assert t["ratio"] < 20, t  # far above what was measured: a regression, not noise


def test_diff_shows_why_expandable_segments_fit(scenario):
    # The failing run (default segments) against the same script with
    # expandable segments, which fits: the diff's allocator section shows
    # the free space that could not serve 24 MiB and the block that can.
    fail = scenario("pm_segments.py", memory="1GiB")
    assert fail.torch["raised"]
    frag = [(f, s) for f, s in zip(fail.files, fail.snapshots)
            if s["reason"] == "oom" and s["oom"]["cause"] == "allocator_fragmentation"]
    assert len(frag) == 1, [s["oom"]["cause"] for s in post_mortems(fail)]
    path, pm = frag[0]
    a = pm["oom"]["allocator"]
    assert a["largest_free_block_bytes"]["large"] == 16 * MiB
    assert a["reserved_unallocated_bytes"] >= 24 * MiB
    fit = scenario("pm_segments.py", memory="1GiB",
                   env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert not fit.torch["raised"] and fit.torch["kept"] == fail.torch["kept"]
    end = fit.only("exit")
    b = end["devices"][0]["allocator"]
    assert b["largest_free_block_bytes"]["large"] >= 24 * MiB
    d = subprocess.run([str(CLI), "diff", str(path), str(fit.files[fit.snapshots.index(end)])],
                       capture_output=True, text=True, timeout=60,
                       env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert d.returncode == 0, d.stderr
    out = d.stdout
    assert "PyTorch's caching allocator (base at its OOM, new at exit)" in out, out
    big = b["largest_free_block_bytes"]["large"] >> 20
    [row] = [x for x in out.splitlines() if x.strip().startswith("largest free block")]
    assert row.split()[3:] == ["16.0", "MiB", f"{big:.1f}", "MiB", f"+{big - 16:.1f}",
                               "MiB"], out
    [row] = [x for x in out.splitlines() if x.strip().startswith("segments")]
    assert row.split()[1:3] == [str(a["segments"]), str(b["segments"])], out
    assert "PYTORCH_CUDA_ALLOC_CONF: base unset, new expandable_segments:True" in out
    # This layout is the one expandable segments cure - the
    # free tail of one segment and the free head of the next join - and the
    # advice says into how much, from the segments of the run.
    joined = joined_free(pm)
    assert joined >= 24 * MiB > a["largest_free_block_bytes"]["large"]
    [adv] = [x for x in report_json(path)["advice"] if x["id"] == "expandable-segments"]
    assert f"join into {joined >> 20:.1f} MiB" in " ".join(adv["text"].split()), adv
