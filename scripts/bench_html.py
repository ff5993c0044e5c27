#!/usr/bin/env python3
"""bench_html.py - size and time to interactive of `cumemtrace html` for a
generated 1M-allocation / 100k-stack snapshot (scripts/gen_big_snapshot.py),
in headless Chromium (tests/e2e/browser.py).  Part of `make bench`.

    scripts/bench_html.py --build build [--allocations N --stacks N --events N]

Prints the page size, the time `cumemtrace html` took, and from the page's
own performance marks when its model was parsed and each section drawn.
Targets: under 20 MB, interactive in under 3 s."""
import argparse
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from browser import CHROMIUM, Browser  # noqa: E402


def main_thread_cpu(b):
    """Ends the trace begun before the page was opened and returns the CPU
    seconds of the renderer's main thread in it (top-level tasks' thread
    durations), or None when the trace has no such thread."""
    b.call("Tracing.end")
    events, deadline = [], time.monotonic() + 120
    while True:
        m = b._recv(deadline)
        if m.get("method") == "Tracing.dataCollected":
            events += m["params"]["value"]
        elif m.get("method") == "Tracing.tracingComplete":
            break
    main = {(e["pid"], e["tid"]) for e in events
            if e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"}
    tasks = [e for e in events if (e["pid"], e["tid"]) in main and e.get("ph") == "X" and
             e.get("name") == "ThreadControllerImpl::RunTask"]
    return sum(e.get("tdur", 0) for e in tasks) / 1e6 if tasks else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--allocations", type=int, default=1_000_000)
    ap.add_argument("--stacks", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=1_000_000)
    a = ap.parse_args()
    build = pathlib.Path(a.build)
    out = build / "bench-html"
    out.mkdir(parents=True, exist_ok=True)
    snap, page = out / "big.json", out / "big.html"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_big_snapshot.py"),
                    "--allocations", str(a.allocations), "--stacks", str(a.stacks),
                    "--events", str(a.events), "--seed", "1", "-o", str(snap)],
                   check=True, capture_output=True)
    t = time.monotonic()
    subprocess.run([str(build / "cumemtrace"), "html", str(snap), "-o", str(page)],
                   check=True, capture_output=True)
    cli_s = time.monotonic() - t
    size = page.stat().st_size
    print(f"html page: {size / 1e6:.1f} MB for {a.allocations} allocations, {a.stacks} stacks, "
          f"{a.events} events (target < 20 MB: {'met' if size < 20e6 else 'missed'})")
    print(f"cumemtrace html: {cli_s:.2f} s")
    if CHROMIUM is None:
        print("chromium not installed: no time to interactive (scripts/install-deps.sh --ci)")
        return 0
    b = Browser(timeout=300)
    try:
        b.call("Tracing.start", categories="toplevel", transferMode="ReportEvents")
        t = time.monotonic()
        b.open(page.resolve().as_uri())
        load_s = time.monotonic() - t
        b.eval("new Promise(r => { (function w() { performance.getEntriesByName('cmt-interactive')"
               ".length ? r() : setTimeout(w, 20); })(); })")
        marks = dict(b.eval("performance.getEntriesByType('mark')"
                            ".map(m => [m.name, m.startTime])"))
        errors = b.errors()
        cpu_s = main_thread_cpu(b)
    finally:
        b.close()
    # Interactive: the first frame with every section drawn has been laid
    # out and painted (page.js marks cmt-interactive in a task queued
    # from that frame), so input is handled from then on.
    ready = marks.get("cmt-interactive", float("nan")) / 1000
    print(f"chromium: model parsed at {marks.get('cmt-parsed', 0) / 1000:.2f} s, timeline "
          f"{(marks['cmt-flame'] - marks['cmt-timeline']) / 1000:.2f} s, flame graph "
          f"{(marks['cmt-sites'] - marks['cmt-flame']) / 1000:.2f} s, call sites "
          f"{(marks['cmt-drawn'] - marks['cmt-sites']) / 1000:.2f} s, first layout and paint "
          f"{(marks['cmt-interactive'] - marks['cmt-drawn']) / 1000:.2f} s; interactive at "
          f"{ready:.2f} s (load event after {load_s:.2f} s; target < 3 s: "
          f"{'met' if ready < 3 else 'missed'}){'; console errors: ' + str(errors) if errors else ''}")
    if cpu_s is not None:
        print(f"chromium: the page's main thread ran {cpu_s:.2f} s of CPU until interactive "
              "(what a loaded machine does not inflate: wall time there is mostly waiting)")
    with open("/proc/loadavg") as f:
        print(f"machine load average while measuring: {f.read().split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
