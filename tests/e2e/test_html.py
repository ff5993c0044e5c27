"""`cumemtrace html` and `diff --html` in a real headless Chromium: the
demo's OOM post-mortem, a two-rank run, a run killed after a signal dump,
a thinned log and a diff.  Each page must load without console errors,
draw every section from the snapshot's own numbers, and answer hover,
click, search and sort.  Screenshots go to build/test-artifacts/."""
import json
import os
import signal
import subprocess
import time

import pytest

from browser import CHROMIUM, Browser
from conftest import BUILD, CLI, PROGS, ROOT, base_env, run_env
from needs import DEPS, TORCH_VENV, missing, needs

TRAIN = BUILD / "examples" / "train_sim"
ARTIFACTS = BUILD / "test-artifacts"
INPUTS = ROOT / "tests" / "golden" / "inputs"
DEMO_ENV = {"SIMCUDA_MEMORY": "24GiB", "SIMCUDA_RESERVED": "700MiB"}

pytestmark = needs(TRAIN.exists(), f"{TRAIN}", "make test-bins builds it")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        missing("chromium", DEPS)
    b = Browser()
    yield b
    b.close()


def train(cwd, *args, env=None):
    cwd.mkdir(parents=True, exist_ok=True)
    e = base_env(dict(DEMO_ENV, **(env or {})))
    subprocess.run([str(TRAIN)] + list(args), cwd=cwd, env=e, capture_output=True,
                   timeout=120)
    return sorted(cwd.glob("cumemtrace.*.json"))


def html(out, *args):
    r = subprocess.run([str(CLI), "html", "-o", str(out)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return out


def top_site(path, ordinal=0):
    """The call site holding the most at the device's peak, as `report --json`
    names it."""
    r = subprocess.run([str(CLI), "report", "--json", str(path)], capture_output=True,
                       text=True, timeout=60, check=True)
    dev = [d for d in json.loads(r.stdout)["snapshots"][0]["devices"]
           if d["ordinal"] == ordinal][0]
    return max(dev["at_peak"], key=lambda g: g["bytes"])["site"]


def flame_nodes(path, at="peak", segments=True):
    """Nodes the page's icicle must have: a root and one node per distinct
    prefix of `cumemtrace flamegraph`'s folded lines (device frames first
    when there are several devices, the entry point last).  segments: the
    driver's allocations (--segments); else, for a file with PyTorch's
    tensors, what the page draws then: their lines, as flamegraph folds
    them."""
    r = subprocess.run([str(CLI), "flamegraph", *(["--segments"] if segments else []),
                        "--at", at, str(path)],
                       capture_output=True, text=True, timeout=60, check=True)
    prefixes = set()
    for line in r.stdout.splitlines():
        chain = line.rsplit(" ", 1)[0].split(";")
        for i in range(1, len(chain) + 1):
            prefixes.add(tuple(chain[:i]))
    return 1 + len(prefixes)


def page_model(page):
    text = page.read_text()
    start = text.index('<script type="application/json" id="cmt-data">') + 46
    return json.loads(text[start:text.index("</script>", start)])


@pytest.mark.parametrize("name", sorted(p.name for p in INPUTS.glob("*.json")
                                        if not p.name.startswith("bad_")))
def test_model_of_every_input(name, tmp_path):
    """Without a browser: the page's model agrees with the snapshot (a file
    with PyTorch's tensors: with its tensors, as `flamegraph` draws them)."""
    snap = json.loads((INPUTS / name).read_text())
    f = page_model(html(tmp_path / "p.html", INPUTS / name))["files"][0]
    tensors = any(d.get("tensors") for d in snap["devices"])
    assert f["tensor_model"] == tensors
    hp = snap.get("host_pinned") or {}
    peaks = sum(d["peak_bytes"] for d in snap["devices"]) + \
        (hp.get("peak_bytes") or 0 if hp.get("at_peak") else 0)
    live = sum(g["bytes"] for d in snap["devices"] for g in d["live"]) + \
        sum(g["bytes"] for g in hp.get("live", []))
    if tensors:  # what PyTorch held, and its cache: what it reserved
        peaks = sum(d["peak_tensors"]["allocated_bytes"] +
                    (d["peak_tensors"]["cache"] or {"bytes": 0})["bytes"]
                    for d in snap["devices"] if d.get("peak_tensors"))
        live = sum(d["tensors"]["allocated_bytes"] + d["tensors"]["cache"]["bytes"]
                   for d in snap["devices"] if d.get("tensors"))
    assert sum(f["sites"]["at_peak"] or [0]) == peaks
    assert sum(f["sites"]["live"]) == live
    # the tensor model's stacks follow the file's own
    assert len(f["stack_entry"]) == len(f["stack_len"]) >= len(snap["stacks"])
    assert tensors or len(f["stack_len"]) == len(snap["stacks"])
    assert all(len(col) == len(f["sites"]["stack"]) for col in f["sites"].values() if col)
    # Frames are base-64 digits, frame_width per frame, innermost first.
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    w = f["frame_width"]
    enc = f["stack_frames"]
    assert len(enc) == w * sum(f["stack_len"]) and set(enc) <= set(digits)
    for e, n, st in zip(f["stack_entry"], f["stack_len"],
                        sorted(snap["stacks"], key=lambda x: x["id"])):
        # The views' fold (interpreter, start-up and framework frames) keeps
        # at least one frame of a stack that has any.
        assert f["stack_entries"][e] == st["entry"] and \
            min(1, len(st["frames"])) <= n <= len(st["frames"])
    assert f["thinned"] == (snap["events"]["stride"] > 1 or snap["events"]["thinned"])
    # The page builds its flame graph lazily; the model counts its nodes.
    modes = ["peak", "live"] + (["oom"] if snap.get("oom") else [])
    assert {m: f["flame_nodes"][m] for m in modes} == \
        {m: flame_nodes(INPUTS / name, m, segments=not tensors) for m in modes}
    for d in f["devices"]:
        ts = [p[0] for p in d["points"]]
        assert ts == sorted(ts) and d["points"][-1][1] == d["current"]
        assert len(d["bands"]) <= 8 and all(0 <= b < len(f["sites"]["stack"]) for b in d["bands"])
        assert max(p[1] for p in d["points"]) <= d["peak"]


def test_model_decimates_keeping_extrema(tmp_path):
    """Over 4000 events a device is drawn from each slice's lowest and
    highest total: the points stay bounded and keep the log's extremes."""
    import sys
    big = tmp_path / "big.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_big_snapshot.py"),
                    "--allocations", "20000", "--stacks", "2000", "--events", "30000",
                    "--seed", "3", "-o", str(big)], check=True, capture_output=True)
    snap = json.loads(big.read_text())
    f = page_model(html(tmp_path / "big.html", big))["files"][0]
    for d in f["devices"]:
        rows = [r for r in snap["events"]["data"] if r[1] == d["ordinal"]]
        assert len(rows) > 4000
        pts = d["points"]
        assert len(pts) <= 2 * 2000 + 2
        totals = [p[1] for p in pts[1:-1]]
        assert max(totals) == max(r[5] for r in rows)
        assert min(totals) == min(r[5] for r in rows)
        assert [p[0] for p in pts] == sorted(p[0] for p in pts)


def open_page(b, page, shot):
    b.open(page.as_uri())
    assert b.errors() == [], f"console errors in {page}: {b.errors()}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    b.screenshot(ARTIFACTS / shot)
    return b.eval("window.cumemtrace.data")


def sections(b):
    return b.eval("[...document.querySelectorAll('main > section')].map(s => s.id)")


def check_timeline(b, model_file):
    devs = model_file["devices"]
    got = b.eval("""[...document.querySelectorAll('#timeline svg.timeline-svg')].map(s =>
        [...s.querySelectorAll('path.band')].map(p => p.getAttribute('d').length))""")
    assert len(got) == len(devs)
    for dev, paths in zip(devs, got):
        assert len(paths) == len(dev["bands"]) + 1
        assert all(n > 20 for n in paths)


def hover_band(b, chart, band):
    """Moves the mouse to a point inside band `band` of timeline chart
    `chart` and returns the tooltip's text."""
    b.eval(f"document.querySelectorAll('#timeline svg.timeline-svg')[{chart}].scrollIntoView()")
    pt = b.eval(f"""(() => {{
        const svg = document.querySelectorAll('#timeline svg.timeline-svg')[{chart}];
        const p = svg.querySelector('path.band[data-band="{band}"]');
        const r = svg.getBoundingClientRect();
        for (let x = svg.width.baseVal.value - 20; x > 60; x -= 2) {{
            const ys = [];
            for (let y = 10; y < svg.height.baseVal.value - 26; y += 1)
                if (p.isPointInFill(new DOMPoint(x, y))) ys.push(y);
            if (ys.length > 2)  // the middle of the band, away from its edges
                return [r.left + x, r.top + ys[ys.length >> 1], p.getAttribute('data-site')];
        }}
        return null; }})()""")
    assert pt is not None, "band has no visible area"
    b.mouse("mouseMoved", pt[0], pt[1])
    return b.eval("document.getElementById('tip').hidden ? null : "
                  "document.getElementById('tip').textContent"), pt[2]


def check_flame(b, path):
    n = flame_nodes(path)
    got = b.eval("""(() => { const s = document.querySelector('#flamegraph svg.fg');
        return [+s.dataset.nodes, +s.dataset.drawn, +s.dataset.hidden,
                s.querySelectorAll('rect').length]; })()""")
    assert got[0] == n, f"flame graph nodes {got[0]}, the snapshot has {n}"
    assert got[1] + got[2] == n and got[3] == got[1] and got[1] > 0


def click_zooms(b, name):
    b.eval("document.querySelector('#flamegraph').scrollIntoView()")
    r = b.eval(f"""(() => {{ const e = [...document.querySelectorAll('#flamegraph rect')]
        .find(r => r.dataset.name === {json.dumps(name)});
        const b = e.getBoundingClientRect(); return [b.left + 2, b.top + 5, b.width]; }})()""")
    width = b.eval("document.querySelector('#flamegraph svg.fg').width.baseVal.value")
    assert r[2] < width * 0.95, "frame already spans the graph: nothing to zoom"
    b.click(r[0], r[1])
    after = b.eval(f"""[...document.querySelectorAll('#flamegraph rect')]
        .find(r => r.dataset.name === {json.dumps(name)}).getBoundingClientRect().width""")
    assert after > width * 0.98, f"click did not zoom: {r[2]} -> {after} of {width}"


def check_sort(b):
    def column(i):
        return b.eval(f"""[...document.querySelectorAll('#sites-table tbody tr')]
            .map(r => r.children[{i}].textContent)""")
    heads = b.eval("[...document.querySelectorAll('#sites-table th')].map(t => t.dataset.key)")
    i = heads.index("allocs")
    b.eval(f"document.querySelectorAll('#sites-table th')[{i}].click()")
    desc = [int(x) for x in column(i)]
    assert desc == sorted(desc, reverse=True)
    b.eval(f"document.querySelectorAll('#sites-table th')[{i}].click()")
    asc = [int(x) for x in column(i)]
    assert asc == sorted(asc) and asc != desc


def test_oom_postmortem_page(browser, tmp_path):
    files = train(tmp_path / "oom", "--batch", "64")
    oom = [f for f in files if ".oom." in f.name][0]
    snap = json.loads(oom.read_text())
    page = html(tmp_path / "oom.html", oom)
    m = open_page(browser, page, "html_oom.png")
    assert browser.eval("document.title") == f"cumemtrace: train_sim (pid {snap['process']['pid']})"
    assert sections(browser) == ["postmortem", "timeline", "flamegraph", "sites"]
    # The post-mortem: the cause sentence, and the capacity bar with one
    # segment per live group plus the untracked and free parts.
    cause = browser.eval("document.querySelector('#postmortem .cause').textContent")
    assert "cudaMalloc of 1.00 GiB" in cause and "exhausted" in cause
    segs = browser.eval("document.querySelectorAll('#layout rect.seg-live').length")
    assert segs == len([g for g in snap["oom"]["live"] if g["bytes"]])
    held = browser.eval("[...document.querySelectorAll('#layout rect.seg-live')]"
                        ".reduce((a, r) => a + +r.dataset.bytes, 0)")
    assert held == sum(g["bytes"] for g in snap["oom"]["live"])
    assert browser.eval("document.querySelectorAll('#postmortem li[data-advice]').length") >= 1
    # Sites: the model's at-peak column sums to the snapshot's peaks.
    f = m["files"][0]
    peaks = sum(d["peak_bytes"] for d in snap["devices"]) + snap["host_pinned"]["peak_bytes"]
    assert sum(f["sites"]["at_peak"]) == peaks
    assert browser.eval("document.querySelectorAll('#sites-table tbody tr').length") == \
        len(f["sites"]["stack"])
    check_timeline(browser, f)
    # Hovering the biggest band names the biggest call site at the peak.
    top = top_site(oom)
    text, site = hover_band(browser, 0, 0)
    assert site == top and site in text.splitlines()[1]
    check_flame(browser, oom)
    # Search highlights exactly the frames whose name matches.
    browser.eval("const i = document.getElementById('fg-search'); i.value = 'forward';"
                 "i.dispatchEvent(new Event('input'))")
    hits = browser.eval("[...document.querySelectorAll('#flamegraph rect.match')].map(r => r.dataset.name)")
    assert hits and all("forward" in h for h in hits)
    click_zooms(browser, browser.eval(
        "[...document.querySelectorAll('#flamegraph rect')].filter(r => r.dataset.type === '0')"
        ".sort((a, b) => b.dataset.bytes - a.dataset.bytes || a.y.baseVal.value - b.y.baseVal.value)"
        ".find(r => r.width.baseVal.value < 600).dataset.name"))
    check_sort(browser)
    # The OOM toggle draws what was live at the failure.
    browser.eval("document.querySelector('#flamegraph button[data-mode=oom]').click()")
    assert browser.eval("+document.querySelector('#flamegraph svg.fg').dataset.nodes") == \
        flame_nodes(oom, "oom")
    browser.screenshot(ARTIFACTS / "html_oom_interacted.png")


def test_two_ranks_page(browser, tmp_path):
    a = train(tmp_path / "r0", "--batch", "16", env={"RANK": "0"})
    b = train(tmp_path / "r1", "--batch", "32", env={"RANK": "1"})
    snaps = [json.loads(f.read_text()) for f in a + b]
    page = html(tmp_path / "ranks.html", *(a + b))
    open_page(browser, page, "html_ranks.png")
    assert browser.eval("document.title") == "cumemtrace: train_sim - 2 processes"
    assert sections(browser) == ["ranks", "timeline", "flamegraph", "sites"]
    assert browser.eval("document.querySelectorAll('#ranks tbody tr').length") == 2
    assert browser.eval("document.querySelectorAll('#ranks-chart path.rank-line').length") == \
        sum(len(s["devices"]) for s in snaps)
    # The page opens on the bigger peak (rank 1) and the picker switches.
    assert "rank 1" in browser.eval("document.getElementById('meta').textContent")
    check_flame(browser, (a + b)[1])
    browser.eval("const p = document.getElementById('file-picker'); p.value = 0;"
                 "p.dispatchEvent(new Event('change'))")
    assert "rank 0" in browser.eval("document.getElementById('meta').textContent")
    check_flame(browser, (a + b)[0])
    assert browser.errors() == []


def test_killed_run_page(browser, tmp_path):
    """A run killed with SIGKILL after a CUMEMTRACE_SIGNAL dump: the only
    record is the signal snapshot taken mid-run."""
    cwd = tmp_path / "killed"
    cwd.mkdir()
    env = base_env({"CUMEMTRACE_SIGNAL": "USR1"})
    p = subprocess.Popen([str(BUILD / "tests" / "progs" / "rt_workload"), "timed"], cwd=cwd,
                         env=env)
    time.sleep(0.6)
    p.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not list(cwd.glob("cumemtrace.*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.kill()
    p.wait()
    files = list(cwd.glob("cumemtrace.*.json"))
    assert len(files) == 1
    snap = json.loads(files[0].read_text())
    assert snap["reason"] == "signal"
    page = html(tmp_path / "killed.html", files[0])
    m = open_page(browser, page, "html_killed.png")
    assert sections(browser) == ["timeline", "flamegraph", "sites"]
    check_timeline(browser, m["files"][0])
    check_flame(browser, files[0])
    text, site = hover_band(browser, 0, 0)
    assert site in text


def test_killed_stream_page(browser, tmp_path):
    """A run killed with SIGKILL and nothing else: its stream is the only
    record, and the page draws it as the reader recovers it."""
    cwd = tmp_path / "stream"
    cwd.mkdir()
    p = subprocess.Popen([str(BUILD / "tests" / "progs" / "rt_workload"), "timed"], cwd=cwd,
                         env=base_env({"CUMEMTRACE_FLUSH_MS": "40"}))
    time.sleep(0.8)  # well past the first checkpoint (the first flush after an allocation)
    p.kill()
    p.wait()
    streams = list(cwd.glob("cumemtrace.*.stream"))
    assert len(streams) == 1 and not list(cwd.glob("cumemtrace.*.json"))
    r = subprocess.run([str(CLI), "report", "--json", str(streams[0])], capture_output=True,
                       text=True, timeout=60, check=True)
    snap = json.loads(r.stdout)["snapshots"][0]
    page = html(tmp_path / "stream.html", streams[0])
    m = open_page(browser, page, "html_stream.png")
    f = m["files"][0]
    assert browser.eval("document.title") == f"cumemtrace: rt_workload (pid {f['pid']})"
    assert sections(browser) == ["timeline", "flamegraph", "sites"]
    # The page says the file was recovered, and how stale it is, as the
    # reader says on stderr.
    assert f["reason"] == snap["reason"] == "killed"
    note = browser.eval("document.getElementById('recovered').textContent")
    assert note.startswith("Recovered from the stream of a process that was killed: ")
    assert f["recovered"] and f["recovered"] in r.stderr
    assert sum(f["sites"]["live"]) == sum(sum(g["bytes"] for g in d["live"])
                                                 for d in snap["devices"]) > 0
    check_timeline(browser, f)
    check_flame(browser, streams[0])
    text, site = hover_band(browser, 0, 0)
    assert site in text


def test_thinned_log_page(browser, tmp_path):
    """A thinned log has an exact total but no per-site split: the page
    draws the total alone and says why."""
    page = html(tmp_path / "thinned.html", INPUTS / "thinned.json")
    m = open_page(browser, page, "html_thinned.png")
    f = m["files"][0]
    assert f["thinned"] and all(d["bands"] == [] for d in f["devices"])
    check_timeline(browser, f)
    assert "thinned" in browser.eval("document.getElementById('timeline').textContent")
    col = browser.eval("[...document.querySelectorAll('#sites-table th')].map(t => t.dataset.key)"
                       ".indexOf('allocs')")
    assert browser.eval(f"document.querySelector('#sites-table tbody tr').children[{col}]"
                        ".textContent") == "?"


def test_diff_page(browser, tmp_path):
    base = [f for f in train(tmp_path / "fits", "--batch", "16") if ".oom." not in f.name][0]
    new = [f for f in train(tmp_path / "oom", "--batch", "64") if ".oom." in f.name][0]
    out = tmp_path / "diff.html"
    r = subprocess.run([str(CLI), "diff", str(base), str(new), "--html", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Peak per device" in r.stdout  # the text diff still prints
    open_page(browser, out, "html_diff.png")
    assert browser.eval("document.title") == "cumemtrace diff: train_sim"
    assert sections(browser) == ["diffsummary", "flamegraph", "timeline"]
    # Width is the new file's bytes; grown frames red, none shrank here
    # (every site of batch 16 holds at least as much at batch 64).
    snap_new = json.loads(new.read_text())
    check_flame(browser, new)
    fills = browser.eval("[...document.querySelectorAll('#flamegraph rect')].map(r => r.getAttribute('fill'))")
    assert any(f.startswith("rgb(255,") for f in fills)
    # Both timelines share one time axis.
    doms = browser.eval("[...document.querySelectorAll('#timeline svg.timeline-svg')].length")
    assert doms == len(json.loads(base.read_text())["devices"]) + \
        (1 if json.loads(base.read_text())["host_pinned"]["peak_bytes"] else 0) + \
        len(snap_new["devices"]) + (1 if snap_new["host_pinned"]["peak_bytes"] else 0)


def test_allocator_postmortem_page(browser, tmp_path):
    """When PyTorch's allocator spoke (oom.allocator), the post-mortem adds
    its sentence and a bar of its segments: allocated, cached, the largest
    free block against the request."""
    GiB = 1 << 30
    doc = json.loads((INPUTS / "oom_fragmentation.json").read_text())
    doc["oom"]["cause"] = "allocator_fragmentation"
    doc["oom"]["allocator"] = {
        "name": "pytorch", "version": "2.15.0", "requested_bytes": doc["oom"]["requested_bytes"],
        "allocated_bytes": 10 * GiB, "reserved_bytes": 18 * GiB, "active_bytes": 10 * GiB,
        "reserved_unallocated_bytes": 8 * GiB, "inactive_split_bytes": 8 * GiB,
        "segments": 37, "num_alloc_retries": 1, "num_ooms": 1, "limit_bytes": None,
        "device_total_bytes": 24 * GiB, "device_free_bytes": 0,
        "largest_free_block_bytes": {"small": 1 << 20, "large": 380 << 20}, "config": {}}
    src = tmp_path / "alloc.json"
    src.write_text(json.dumps(doc))
    open_page(browser, html(tmp_path / "alloc.html", src), "html_allocator.png")
    assert browser.eval("document.getElementById('allocator-sentence').textContent")
    got = browser.eval("""Object.fromEntries([...document.querySelectorAll('#allocator-layout rect[data-bytes]')]
        .map(r => [r.getAttribute('class'), +r.dataset.bytes]))""")
    assert got == {"seg-allocated": 10 * GiB, "seg-cached": 8 * GiB, "seg-largest": 380 << 20}


def test_make_demo_ends_with_the_html_report(browser, tmp_path):
    """`make demo-c` (scripts/demo-c.sh) ends by writing the post-mortem's page
    and saying where it is."""
    build = tmp_path / "build"
    build.mkdir()
    for name in ("cumemtrace", "sim", "examples"):
        (build / name).symlink_to(BUILD / name)
    r = subprocess.run(["sh", str(ROOT / "scripts" / "demo-c.sh"), str(build)],
                       capture_output=True, text=True, timeout=300, env=run_env())
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    page = build / "demo-c" / "report.html"
    assert last == f"open {page} in a browser (self-contained: no network needed)"
    open_page(browser, page, "html_demo.png")
    assert sections(browser)[0] == "postmortem"
    assert "cudaMalloc of 1.00 GiB" in browser.eval(
        "document.querySelector('#postmortem .cause').textContent")


def sim_run(cwd, prog, *args, env=None):
    cwd.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(PROGS / prog)] + list(args), cwd=cwd, env=base_env(env),
                   capture_output=True, timeout=120)
    return [f for f in sorted(cwd.glob("cumemtrace.*.json")) if ".oom." in f.name]


def test_address_layout_page(browser, tmp_path):
    """A driver-fragmentation post-mortem (oom.layout) draws where this
    process's allocations sat: one block per listed allocation at its
    offset, one hole per listed gap, the free that makes room outlined."""
    [oom] = sim_run(tmp_path / "holes", "rt_holes", env={"SIMCUDA_MEMORY": "256MiB"})
    lay = json.loads(oom.read_text())["oom"]["layout"]
    open_page(browser, html(tmp_path / "holes.html", oom), "html_addr_layout.png")
    q = "[...document.querySelectorAll('#addr-layout rect.%s')]"
    allocs = browser.eval((q % "alloc") + ".map(r => [+r.dataset.offset, +r.dataset.bytes])")
    assert allocs == [[a["offset"], a["bytes"]] for a in lay["allocations"]]
    gaps = browser.eval((q % "gap") + ".map(r => [+r.dataset.offset, +r.dataset.bytes])")
    assert gaps == [[g["offset"], g["bytes"]] for g in lay["gaps"]] and len(gaps) == 3
    assert browser.eval((q % "unlisted") + ".length") == 0  # all 109 are drawn
    assert browser.eval((q % "best-free") + ".map(r => +r.dataset.bytes)") == \
        [lay["best_free"]["bytes"]]
    # every hole is narrower than the request drawn to the same scale
    req = browser.eval("document.querySelector('#addr-layout rect.seg-request').width.baseVal.value")
    widths = browser.eval((q % "gap") + ".map(r => r.width.baseVal.value)")
    assert all(w < req for w in widths)
    browser.eval("document.getElementById('addr-layout').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "html_addr_layout_zoom.png")
    # 512 allocations: only the notable ones are listed, the rest is drawn
    # as unlisted stretches between them
    frag = sim_run(tmp_path / "many", "rt_oom", "fragment", env={"SIMCUDA_MEMORY": "2GiB"})
    [big] = [f for f in frag if json.loads(f.read_text())["oom"]["requested_bytes"] == 4 << 20]
    lay = json.loads(big.read_text())["oom"]["layout"]
    open_page(browser, html(tmp_path / "many.html", big), "html_addr_layout_many.png")
    assert browser.eval((q % "alloc") + ".length") == len(lay["allocations"]) < lay["count"]
    assert browser.eval((q % "gap") + ".length") == 16
    assert browser.eval((q % "unlisted") + ".length") > 0
    drawn = browser.eval("[...document.querySelectorAll('#addr-layout rect.alloc, #addr-layout "
                         "rect.gap, #addr-layout rect.unlisted')].reduce((a, r) => a + +r.dataset.bytes, 0)")
    assert drawn == lay["span_bytes"]


def test_flame_count_with_two_devices(tmp_path):
    """With several devices the icicle has a node per device under the
    root; the model's count follows."""
    doc = json.loads((INPUTS / "exit_train.json").read_text())
    second = json.loads(json.dumps(doc["devices"][0]))
    second["ordinal"] = 1
    doc["devices"].append(second)
    doc["counters"]["live_allocations"] *= 2
    src = tmp_path / "two.json"
    src.write_text(json.dumps(doc))
    f = page_model(html(tmp_path / "two.html", src))["files"][0]
    assert len([d for d in f["devices"] if d["ordinal"] >= 0]) == 2
    for m in ("peak", "live"):
        assert f["flame_nodes"][m] == flame_nodes(src, m)


def test_flame_graph_flips(browser, tmp_path):
    """The icicle (root on top) turns into a flame graph (root at the
    bottom) and back; the same frames are drawn."""
    open_page(browser, html(tmp_path / "f.html", INPUTS / "exit_train.json"), "html_exit.png")
    rows = """(() => { const r = [...document.querySelectorAll('#flamegraph svg.fg rect')];
        return [r.length, r.find(e => e.dataset.name === 'all').y.baseVal.value,
                Math.max(...r.map(e => e.y.baseVal.value)),
                Math.max(...r.filter(e => e.dataset.type === '3').map(e => e.y.baseVal.value))]; })()"""
    n, root_y, max_y, entry_y = browser.eval(rows)
    assert root_y == 0 and entry_y > 0
    browser.eval("document.getElementById('fg-flip').click()")
    n2, root_y2, max_y2, entry_y2 = browser.eval(rows)
    assert n2 == n and root_y2 == max_y2 == max_y and entry_y2 < root_y2
    browser.screenshot(ARTIFACTS / "html_exit_flame.png")
    browser.eval("document.getElementById('fg-flip').click()")
    assert browser.eval(rows)[1] == 0


def test_one_process_files_are_one_process_and_each_largest_is_named(browser, tmp_path):
    """One process's OOM and exit files are not "2 processes"; the post-mortem's
    two "largest" figures - the largest address gap between this process's
    allocations (the driver's view) and PyTorch's largest free block inside
    its segments - each say which they are."""
    d = tmp_path / "holes"
    sim_run(d, "rt_holes", env={"SIMCUDA_MEMORY": "256MiB"})
    files = sorted(d.glob("cumemtrace.*.json"))
    oom = next(f for f in files if ".oom." in f.name)
    assert len(files) == 2 and len({json.loads(f.read_text())["process"]["pid"]
                                    for f in files}) == 1, files
    doc = json.loads(oom.read_text())
    pid, MiB = doc["process"]["pid"], 1 << 20
    doc["oom"]["allocator"] = {
        "name": "pytorch", "version": "2.15.0", "requested_bytes": doc["oom"]["requested_bytes"],
        "allocated_bytes": 64 * MiB, "reserved_bytes": 96 * MiB, "active_bytes": 64 * MiB,
        "reserved_unallocated_bytes": 32 * MiB, "inactive_split_bytes": 32 * MiB,
        "segments": 3, "num_alloc_retries": 1, "num_ooms": 1, "limit_bytes": None,
        "device_total_bytes": None, "device_free_bytes": None,
        "largest_free_block_bytes": {"small": 0, "large": 6 * MiB}, "config": {}}
    withal = d / "cumemtrace.withal.oom.json"
    withal.write_text(json.dumps(doc))
    exit_file = next(f for f in files if ".oom." not in f.name)
    open_page(browser, html(tmp_path / "one.html", withal, exit_file), "html_one_process.png")
    title = browser.eval("document.title")
    assert title.endswith(f"(pid {pid}) - 2 snapshots"), title
    assert "processes" not in title
    assert browser.eval("document.querySelector('#ranks h2').textContent") == \
        "2 snapshots of 1 process"
    browser.eval("document.getElementById('file-picker').value = 0;"
                 "document.getElementById('file-picker').dispatchEvent(new Event('change'))")
    addr = browser.eval("document.getElementById('addr-layout').textContent")
    assert "vs largest address gap between this process's allocations" in addr, addr
    al = browser.eval("document.getElementById('allocator-layout').textContent")
    assert "vs PyTorch's largest free block (inside its segments) 6.00 MiB" in al, al
    # the diff page of the two files names the one process too
    dp = tmp_path / "diff.html"
    subprocess.run([str(CLI), "diff", "--html", str(dp), str(withal), str(exit_file)],
                   capture_output=True, text=True, timeout=60)
    assert f"<title>cumemtrace diff: rt_holes (pid {pid}, 2 snapshots)</title>" in \
        dp.read_text()
    # two processes stay two processes
    other = d / "other.json"
    o = json.loads(exit_file.read_text())
    o["process"]["pid"] = pid + 1
    other.write_text(json.dumps(o))
    open_page(browser, html(tmp_path / "two.html", exit_file, other), "html_two_processes.png")
    assert browser.eval("document.title").endswith(" - 2 processes")


def test_allocator_segments_page(browser, tmp_path):
    """When PyTorch's allocator reported its segments (oom.layout's
    allocator_segments), the post-mortem draws one row per segment cut into
    its blocks: one rect per block, free blocks outlined against the
    request."""
    [oom] = sim_run(tmp_path / "holes", "rt_holes", env={"SIMCUDA_MEMORY": "256MiB"})
    doc = json.loads(oom.read_text())
    lay = doc["oom"]["layout"]
    base, MiB = int(lay["base"], 16), 1 << 20
    segs = []
    eights = [a for a in lay["allocations"] if a["bytes"] == 8 * MiB][:3]
    for a in eights:  # three 8 MiB buffers as PyTorch segments
        n = a["bytes"]
        segs.append({"address": hex(base + a["offset"]), "bytes": n, "pool": "large",
                     "blocks": [[0, n // 2, "allocated"], [n // 2, n // 4, "free"],
                                [3 * n // 4, n // 4, "pending"]]})
    lay["allocator_segments"] = {"count": 3, "blocks": 9, "segments": segs}
    src = tmp_path / "segs.json"
    src.write_text(json.dumps(doc))
    open_page(browser, html(tmp_path / "segs.html", src), "html_allocator_segments.png")
    q = "[...document.querySelectorAll('#allocator-segments rect.%s')]"
    assert browser.eval((q % "segment") + ".map(r => +r.dataset.bytes)") == [8 * MiB] * 3
    assert browser.eval((q % "block") + ".length") == 9
    assert browser.eval((q % "block.free") + ".map(r => +r.dataset.bytes)") == [2 * MiB] * 3
    assert browser.eval((q % "block.allocated") + ".length") == 3
    assert browser.eval((q % "block.pending") + ".length") == 3
    # a free block smaller than the 12 MiB request is outlined red
    assert browser.eval((q % "block.free") + ".every(r => r.getAttribute('stroke') === '#cf222e')")
    browser.eval("document.getElementById('allocator-segments').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "html_allocator_segments_zoom.png")


NVTX_PROG = PROGS / "rt_nvtx"


@needs(NVTX_PROG.exists(), "rt_nvtx, built only where an NVTX 3 header is (tests/nvtx.mk)",
       TORCH_VENV + ", then make test-bins")
def test_ranges_under_the_timeline(browser, tmp_path):
    """The program's NVTX ranges are drawn under the device's timeline, on
    its time axis, one row per nesting level, each bar titled by its path."""
    cwd = tmp_path / "nvtx"
    cwd.mkdir()
    subprocess.run([str(NVTX_PROG), "nested"], cwd=cwd, timeout=60, check=True,
                   env=base_env({"NVTX_INJECTION64_PATH": str(BUILD / "libcumemtrace.so")}),
                   capture_output=True)
    [snap] = sorted(cwd.glob("cumemtrace.*.json"))
    page = html(tmp_path / "ranges.html", snap)
    m = open_page(browser, page, "html_ranges.png")
    f = m["files"][0]
    assert f["ranges"]["paths"][0] == "" and "validation/step 1200" in f["ranges"]["paths"]
    check_timeline(browser, f)
    bars = browser.eval("""[...document.querySelectorAll('#timeline svg.timeline-svg rect.range')]
        .map(r => [r.dataset.path, +r.getAttribute('y'), +r.getAttribute('x'),
                   r.querySelector('title').textContent])""")
    by = {b[0]: b for b in bars}
    assert set(by) == {"train", "train/step 1", "validation", "validation/step 1200",
                       "load batch", "wide \u00e9t\u00e9"}
    assert by["validation/step 1200"][1] > by["validation"][1]   # nested: one row lower
    assert by["train"][2] < by["validation"][2]                   # in time order
    assert by["validation/step 1200"][3].startswith("validation/step 1200: ")
    marks = browser.eval("[...document.querySelectorAll('#timeline line.range-mark')]"
                         ".map(l => l.dataset.path)")
    assert marks == ["checkpoint"]


def hostile_snapshot(src, dst):
    """src with an argv that opens an HTML comment and a script tag, and
    one stack 10 000 Python frames deep."""
    s = json.loads(src.read_text())
    s["process"]["cmdline"].append("--note=<!--<script>")
    st = next(x for x in s["stacks"] if x["id"] == s["devices"][0]["live"][0]["stack"])
    st["frames"] = [{"module": "python", "file": f"/w/deep{i}.py", "line": i + 1,
                     "function": f"f{i}"} for i in range(10000)]
    dst.write_text(json.dumps(s))
    return dst


def test_hostile_strings_and_deep_stacks_still_draw_the_page(browser, tmp_path):
    snap = hostile_snapshot(INPUTS / "exit_train.json", tmp_path / "hostile.json")
    other = tmp_path / "other.json"
    other.write_text(snap.read_text().replace('"pid": 4242', '"pid": 4243', 1))
    pages = {"one": html(tmp_path / "one.html", snap),
             "two": html(tmp_path / "two.html", snap, other)}
    r = subprocess.run([str(CLI), "diff", "--html", str(tmp_path / "diff.html"),
                        str(INPUTS / "exit_train.json"), str(snap)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    pages["diff"] = tmp_path / "diff.html"
    for name, page in pages.items():
        open_page(browser, page, f"hostile-{name}.png")
        got = sections(browser)
        if name == "diff":
            assert {"diffsummary", "flamegraph", "timeline"} <= set(got), got
            continue
        assert {"timeline", "flamegraph", "sites"} <= set(got), (name, got)
        assert browser.eval("document.querySelectorAll('#sites tbody tr').length") > 0, name
        assert "<!--<script>" in browser.eval("document.body.innerText"), name


def test_timeline_zooms_to_the_allocation_activity(browser, tmp_path):
    """A process that dumps long after its last allocation (a torch script:
    seconds of import, then exit) gets a timeline of its activity, not of
    the idle tail; a double-click shows the whole run."""
    s = json.loads((INPUTS / "exit_train.json").read_text())
    times = [e[0] for e in s["events"]["data"]]
    s["process"]["dump_time_ns"] = 20 * max(times)
    src = tmp_path / "idle_tail.json"
    src.write_text(json.dumps(s))
    open_page(browser, html(tmp_path / "p.html", src), "timeline-zoomed.png")

    def axis():
        return browser.eval("""[...document.querySelectorAll('#timeline svg.timeline-svg')][0]
            .querySelectorAll('g.axis text').length ? [...[...document.querySelectorAll(
            '#timeline svg.timeline-svg')][0].querySelectorAll('g.axis text')].slice(-6)
            .map(t => t.textContent) : []""")
    assert browser.eval("document.querySelector('#timeline svg.timeline-svg')"
                        ".dataset.zoomed") == "1"
    zoomed = axis()
    assert "Zoomed to the allocation activity" in browser.eval("document.body.innerText")
    browser.eval("document.querySelector('#timeline svg.timeline-svg').dispatchEvent("
                 "new MouseEvent('dblclick', {bubbles: true}))")
    whole = axis()
    assert zoomed and whole and zoomed[-1] != whole[-1], (zoomed, whole)


BOX_LABELS = """(() => {
    /* every label drawn in a box against the box: a flame-graph frame's
       text and its rect, a range's and a gap's text and the rect before it,
       a segment's row name and the picture's left edge and first column */
    const out = {bad: [], cut: [], untitled: [], n: 0};
    const inside = (t, lo, hi) => {
        const b = t.getBBox();
        out.n++;
        if (b.x < lo - 0.5 || b.x + b.width > hi + 0.5)
            out.bad.push([t.textContent, +b.x.toFixed(1), +(b.x + b.width).toFixed(1), lo, hi]);
    };
    for (const t of document.querySelectorAll('svg.fg g > text')) {
        const r = t.parentNode.querySelector('rect').getBBox();
        inside(t, r.x, r.x + r.width);
    }
    for (const t of document.querySelectorAll('text.range-label, text.gap-label')) {
        const r = t.previousElementSibling.getBBox();
        inside(t, r.x, r.x + r.width);
    }
    for (const t of document.querySelectorAll('svg.timeline-svg text.mark-label')) {
        const r = t.closest('svg').querySelector('rect.hit').getBBox();  /* the plot */
        inside(t, r.x, r.x + r.width);
    }
    for (const svg of document.querySelectorAll('#allocator-segments')) {
        const first = svg.querySelector('rect.segment');
        for (const t of svg.querySelectorAll('text.mono'))
            inside(t, 0, first.getBBox().x);
    }
    for (const t of document.querySelectorAll('svg text')) {
        const shown = t.firstChild ? t.firstChild.nodeValue : '';  /* not its <title> */
        if (!shown || !shown.includes('\\u2026')) continue;
        const title = t.querySelector('title'), full = t.dataset.full;
        if (!title || title.textContent !== full) out.untitled.push(shown);
        else out.cut.push([shown, full]);
    }
    return out; })()"""


def check_box_labels(b):
    """No label drawn in a box is wider than it; a cut label keeps its
    whole text as a tooltip.  Returns the cut labels."""
    got = b.eval(BOX_LABELS)
    assert got["n"] > 0, "no box labels drawn"
    assert got["bad"] == [], f"labels wider than their boxes: {got['bad'][:8]}"
    assert got["untitled"] == [], f"cut labels without their full text: {got['untitled'][:8]}"
    for shown, full in got["cut"]:
        head, _, tail = shown.partition("\u2026")
        assert full.startswith(head) and full.endswith(tail) and len(shown) <= len(full), \
            (shown, full)
    return got["cut"]


def test_box_labels_fit_their_boxes(browser, tmp_path):
    """Labels were cut by a fixed width per character
    (6.5 px at 11 px: wide letters ran past their frame) and a segment's
    row name was right-aligned in a fixed 118 px margin (a small-pool
    segment's 48-bit address ran off the picture's left edge).  Now each is
    measured in its font and fits its box, or is cut with an ellipsis and
    its whole text in a tooltip.  The peak's and the OOM's marks are
    labelled on the side where they stay inside the plot (which clips)."""
    src = json.loads((INPUTS / "exit_train.json").read_text())
    wide = "W" * 40 + "_forward_with_a_very_long_name"
    for st in src["stacks"]:
        for f in st["frames"]:
            if f.get("function") == "forward":
                f["function"] = wide
    long_src = tmp_path / "wide.json"
    long_src.write_text(json.dumps(src))
    open_page(browser, html(tmp_path / "plain.html", INPUTS / "exit_train.json"), "labels-plain.png")
    check_box_labels(browser)
    open_page(browser, html(tmp_path / "wide.html", long_src), "labels-wide.png")
    cut = check_box_labels(browser)
    assert any(wide in full for _, full in cut), cut
    # PyTorch's segments, one of them in the small pool at a 48-bit address
    [oom] = sim_run(tmp_path / "holes", "rt_holes", env={"SIMCUDA_MEMORY": "256MiB"})
    doc = json.loads(oom.read_text())
    lay, MiB = doc["oom"]["layout"], 1 << 20
    segs = [{"address": "0x7f3e2c000000", "bytes": 2 * MiB, "pool": "small",
             "blocks": [[0, MiB, "allocated"], [MiB, MiB, "free"]]},
            {"address": "0x7f3e2e000000", "bytes": 20 * MiB, "pool": "large",
             "blocks": [[0, 20 * MiB, "allocated"]]}]
    lay["allocator_segments"] = {"count": 2, "blocks": 3, "segments": segs}
    seg_src = tmp_path / "segs.json"
    seg_src.write_text(json.dumps(doc))
    open_page(browser, html(tmp_path / "segs.html", seg_src), "labels-segments.png")
    check_box_labels(browser)
    # a timeline zoomed into 30 ms of a 3 s run: every tick its own time
    open_page(browser, html(tmp_path / "zoom.html", INPUTS / "torch" / "history_oom.json"),
              "labels-zoomed-axis.png")
    ticks = browser.eval("[...document.querySelector('#timeline svg.timeline-svg')"
                         ".querySelectorAll('g.axis text')].map(t => t.textContent)"
                         ".filter(t => / [mµ]?s$/.test(t))")
    assert len(ticks) == 6 and len(set(ticks)) == 6, ticks
    open_page(browser, html(tmp_path / "segs2.html", seg_src), "labels-segments.png")
    names = browser.eval("[...document.querySelectorAll('#allocator-segments text.mono')]"
                         ".map(t => t.textContent)")
    assert names == ["0x7f3e2c000000 s", "0x7f3e2e000000"], names


def test_tensors_and_their_peak_on_the_page(browser, tmp_path):
    """The page names PyTorch's live tensors by the
    Python line that allocated them (its history's top_tensors) and its
    tensors' peak (max_memory_allocated) under the device's peak, which
    counts what it reserved; the call-site table says its rows are cached
    segments."""
    s = json.loads((INPUTS / "torch" / "exit_cache.json").read_text())
    al = s["devices"][0]["allocator"]
    MiB = 1 << 20
    al["top_tensors"] = [
        {"stack": [{"file": "train.py", "line": 24, "function": "step"},
                   {"file": "train.py", "line": 30, "function": "<module>"}],
         "bytes": 20 * MiB, "count": 2},
        {"stack": [], "bytes": 10 * MiB, "count": 1}]
    al["peak_allocated_bytes"] = 52 * MiB
    src = tmp_path / "tensors.json"
    src.write_text(json.dumps(s))
    open_page(browser, html(tmp_path / "tensors.html", src), "html_tensors.png")
    assert "tensors" in sections(browser)
    rows = browser.eval("""[...document.querySelectorAll('#tensors table.tensors tbody tr')]
        .map(r => [+r.dataset.bytes, +r.dataset.count, r.children[3].dataset.where,
                   r.children[3].textContent])""")
    assert rows == [[20 * MiB, 2, "train.py:24:step < train.py:30:<module>",
                     "train.py:24:step< train.py:30:<module>"],
                    [10 * MiB, 1, "",
                     "no Python stack (allocated off the Python thread, e.g. by autograd's "
                     "backward)"]], rows
    peak = browser.eval("[...document.querySelectorAll('#timeline .tensor-peak')]"
                        ".map(p => [+p.dataset.bytes, p.textContent])")
    assert peak == [[52 * MiB, "PyTorch's tensors peaked at 52.0 MiB (max_memory_allocated); "
                     "the peak above is what it reserved from the driver."]], peak
    assert browser.eval("document.querySelector('#sites h2').textContent") == \
        "Call sites: cached segments, by the line that created them"
    # the diff page's peak table has the same line
    r = subprocess.run([str(CLI), "diff", "--html", str(tmp_path / "d.html"),
                        str(INPUTS / "torch" / "exit_cache.json"), str(src)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    open_page(browser, tmp_path / "d.html", "html_tensors_diff.png")
    cells = browser.eval("[...document.querySelectorAll('#diffsummary tr.tensor-peak td')]"
                         ".map(c => c.textContent)")
    assert cells == ["device 0: PyTorch's tensors (max_memory_allocated)", "?", "52.0 MiB", ""], \
        cells


def test_the_page_names_pytorchs_holders_by_line(browser, tmp_path):
    """The tensor model on the page: at the failure, every line holding
    PyTorch's tensors with report --json's bytes and counts (the same
    holders), the stack outward of each line, autograd's blocks by their
    node, and the cache as its own row; per device the peak's tensors."""
    src = INPUTS / "tensors_oom.json"
    open_page(browser, html(tmp_path / "holders.html", src), "html_holders.png")
    assert "tensors" in sections(browser)
    tables = browser.eval("""[...document.querySelectorAll('#tensors h3')].map(x => x.textContent)""")
    assert tables[0].startswith("At the failure on device 0: "), tables
    assert any("at the peak (max_memory_allocated" in t for t in tables), tables
    rows = browser.eval("""[...document.querySelector('#tensors table.holders')
        .querySelectorAll('tbody tr')].map(r => [+r.dataset.bytes, +r.dataset.count,
        r.children[3].dataset.where, r.className])""")
    rep = json.loads(subprocess.run([str(CLI), "report", "--json", str(src)], capture_output=True,
                                    text=True, timeout=60, check=True).stdout)["snapshots"][0]
    want = [[g["bytes"], g["count"]] for g in rep["oom"]["holders"]["groups"]]
    assert [r[:2] for r in rows if r[3] == ""] == want, (rows, want)
    assert any(r[2].startswith("[backward of ") for r in rows), rows
    cache = [r for r in rows if r[3] == "cache"]
    snap = json.loads(src.read_text())
    assert cache and cache[0][0] == snap["oom"]["allocator"]["tensors"]["cache"]["bytes"]


def test_the_page_says_how_old_pytorchs_figures_are(browser, tmp_path):
    """Where `report` says PyTorch's figures are older
    than the snapshot or missing, the page says the same sentence under the
    device's heading (timeline) and over its tensors; a dump whose figures
    were read for it says nothing."""
    s = json.loads((INPUTS / "torch" / "exit_cache.json").read_text())
    s["devices"][0]["allocator"]["top_tensors"] = [
        {"stack": [{"file": "train.py", "line": 24, "function": "step"}],
         "bytes": 1 << 20, "count": 1}]
    dump = s["process"]["dump_time_ns"]

    def page(name, doc):
        src = tmp_path / f"{name}.json"
        src.write_text(json.dumps(doc))
        r = subprocess.run([str(CLI), "report", "--json", str(src)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        said = json.loads(r.stdout)["snapshots"][0]["devices"][0]["pytorch_figures_age"]
        out = html(tmp_path / f"{name}.html", src)
        open_page(browser, out, f"html_age_{name}.png")
        shown = browser.eval("[...document.querySelectorAll('.figures-age')]"
                             ".map(p => [p.closest('section').id, p.textContent])")
        return said, page_model(out)["files"][0]["devices"][0]["figures_age"], shown

    # read for this dump: no sentence
    s["allocator_refresh"] = {"answered": True, "direct": False, "asked_ns": dump - 5_000_000,
                              "waited_ns": 4_000_000, "wait_ms": 200}
    s["devices"][0]["allocator"]["reported_ns"] = dump - 1_000_000
    assert page("fresh", s) == (None, None, [])
    # the layer did not answer in time: its last figures, 2.5 s old
    s["allocator_refresh"].update(answered=False, waited_ns=200_000_000)
    s["devices"][0]["allocator"]["reported_ns"] = dump - 2_500_000_000
    said, model, shown = page("late", s)
    assert said.startswith("PyTorch's figures here are 2.50 s older than this snapshot: the "
                           "PyTorch layer did not answer within 200.0 ms"), said
    assert model == said and shown == [["tensors", said], ["timeline", said]], shown
    # none at all: the device's heading says they are missing
    s["devices"][0]["allocator"] = None
    said, model, shown = page("missing", s)
    assert said.startswith("PyTorch's figures are missing: the PyTorch layer did not answer"), said
    assert model == said and shown == [["timeline", said]], shown


def test_flame_graph_sites_and_timeline_draw_pytorchs_tensors(browser, tmp_path):
    """In a PyTorch process the page's flame graph, its site table and its
    timeline's bands are PyTorch's live tensors by the user's line, with
    report --json's holders' bytes (not the driver's segments, which stay
    behind --segments); the flame graph has flamegraph's nodes and no CUDA
    entry point under a tensor's stack."""
    src = INPUTS / "tensors_exit.json"
    rep = json.loads(subprocess.run([str(CLI), "report", "--json", str(src)], capture_output=True,
                                    text=True, timeout=60, check=True).stdout)
    held = rep["snapshots"][0]["devices"][0]["holders"]
    want = {g["display"]: g["bytes"] for g in held["groups"]}
    want["[PyTorch's cache]"] = held["cache"]["bytes"]
    open_page(browser, html(tmp_path / "t.html", src), "html_tensor_model.png")
    assert browser.eval("document.querySelector('#sites h2').textContent") == \
        "PyTorch's tensors by the user's line"
    rows = browser.eval("""[...document.querySelectorAll('#sites-table tbody tr')].map(r =>
        [r.querySelector('a').textContent, r.children[2].textContent])""")
    f = page_model(tmp_path / "t.html")["files"][0]
    live = {f["labels"][f["sites"]["label"][i]]: f["sites"]["live"][i]
            for i in range(len(f["sites"]["label"])) if f["sites"]["live"][i]}
    assert live == want, (live, want)
    # every line of the dump is a row, beside those only the peak had
    assert set(want) <= {r[0] for r in rows}, rows
    browser.eval("document.querySelector('#flamegraph button[data-mode=\"live\"]').click()")
    got = browser.eval("""(() => { const s = document.querySelector('#flamegraph svg.fg');
        return [+s.dataset.nodes, [...s.querySelectorAll('rect')].map(r =>
            [r.dataset.name, +r.dataset.type, +r.dataset.bytes])]; })()""")
    assert got[0] == flame_nodes(src, "live", segments=False)
    names = {n: b for n, _, b in got[1]}
    assert names["model.py:57:__init__"] == want["model.py:57:__init__"], names
    assert names["[PyTorch's cache]"] == want["[PyTorch's cache]"], names
    assert not [r for r in got[1] if r[1] == 3], "a CUDA entry point under PyTorch's tensors"
    note = browser.eval("document.querySelector('#flamegraph p.note').textContent")
    assert "PyTorch's live tensors" in note, note
    # the timeline's bands are those lines, at the dump as report has them
    [dev] = f["devices"]
    assert dev["bands"], dev
    last = dev["points"][-1]
    for b, pos in enumerate(dev["bands"]):
        line = f["labels"][f["sites"]["label"][pos]]
        assert last[2 + b] == want.get(line, 0), (line, last, want)
    # --segments: the driver's segments, as before
    seg = page_model(html(tmp_path / "s.html", "--segments", src))["files"][0]
    assert not seg["tensor_model"]
    assert sum(seg["sites"]["live"]) == sum(g["bytes"] for g in
                                           json.loads(src.read_text())["devices"][0]["live"])


def test_diff_page_matches_pytorchs_lines_across_runs(browser, tmp_path):
    """diff --html of an fp32 run and a gradient-checkpointing run, both
    with PyTorch's tensors at the peak: the differential flame graph draws
    their lines merged by line across the files - the checkpointed
    forward's line (model.py:66, new only) with its bytes and a base of
    none, the activations checkpointing dropped (model.py:72:block,
    model.py:88:mlp) with no width in the new file."""
    fp32, ckpt = INPUTS / "tensors" / "fp32.json", INPUTS / "tensors" / "ckpt.json"
    out = tmp_path / "diff.html"
    r = subprocess.run([str(CLI), "diff", "--html", str(out), str(fp32), str(ckpt)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    m = open_page(browser, out, "html_diff_tensors.png")
    assert all(f["tensor_model"] for f in m["files"])
    assert "PyTorch's live tensors" in \
        browser.eval("document.querySelector('#flamegraph p.note').textContent")
    peak = {g["site"]["line"]: g["bytes"] for g in json.loads(ckpt.read_text())
            ["devices"][0]["peak_tensors"]["groups"]}

    def rect(name):
        return browser.eval(f"""(() => {{ const e = [...document.querySelectorAll('#flamegraph rect')]
            .find(r => r.dataset.name === {json.dumps(name)});
            if (!e) return null;
            const x = e.getBoundingClientRect(); return [x.left + 1, x.top + 5, +e.dataset.bytes]; }})()""")
    got = rect("model.py:66:forward")
    assert got is not None and got[2] == peak[66], (got, peak)
    browser.mouse("mouseMoved", got[0], got[1])
    tip = browser.eval("document.getElementById('tip').textContent")
    assert "base 0 B" in tip, tip
    assert rect("model.py:72:block") is None and rect("model.py:88:mlp") is None
