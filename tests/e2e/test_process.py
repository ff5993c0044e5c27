"""Process-level behaviour: what the application keeps seeing, threads,
fork, files only when CUDA was touched, configuration and output files."""
import json
import os
import re
import subprocess

from conftest import LIB, MiB, base_env, device


def test_errors_reach_the_application_unchanged(run):
    bare = run(["rt_workload", "errors"], preload=False)
    traced = run(["rt_workload", "errors"])
    assert traced.stdout == bare.stdout
    snap = traced.only("exit")
    d = device(snap)
    assert d["by_kind"]["device"]["failures"] == 1   # the 1 PiB request
    # double free, foreign device pointer, foreign host pointer
    assert snap["counters"]["unknown_frees"] == 3
    assert d["current_bytes"] == 0


def test_threads_keep_counters_exact(run):
    snap = run(["rt_workload", "threads", "8"]).only("exit")
    d = device(snap)
    expected_peak = sum((t + 1) * 4096 + i * 512
                        for t in range(8) for i in range(50))
    assert d["current_bytes"] == 0
    assert d["peak_bytes"] == expected_peak
    k = d["by_kind"]["device"]
    assert k["allocs"] == k["frees"] == 8 * 50 + 8 * 2000
    assert sum(g["bytes"] for g in d["at_peak"]) == expected_peak
    assert snap["counters"]["live_allocations"] == 0


def test_fork_child_starts_empty(run):
    r = run(["rt_workload", "fork"])
    pids = {s["process"]["pid"]: s for s in r.snapshots}
    assert len(r.snapshots) == 2, [str(f) for f in r.files]
    parent = [s for s in r.snapshots if s["process"]["pid"] ==
              min(pids)][0]
    child = [s for s in r.snapshots if s is not parent][0]
    assert child["process"]["ppid"] == parent["process"]["pid"]
    assert device(child)["peak_bytes"] == 5 * MiB
    assert child["counters"]["unknown_frees"] == 1  # the parent's, freed first
    assert device(parent)["peak_bytes"] == 10 * MiB
    assert device(parent)["current_bytes"] == 0


def test_no_cuda_no_file(run, tmp_path):
    r = run(["plain"])
    assert r.files == []
    assert r.stderr == ""
    proc = subprocess.run(["sh", "-c", "true; echo hi"], cwd=tmp_path,
                          env=base_env(), capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "hi\n"
    assert list(tmp_path.glob("cumemtrace.*")) == []


def test_disable_is_pure_pass_through(run):
    r = run(["rt_workload", "basic"], env={"CUMEMTRACE_DISABLE": "1"})
    assert r.files == []
    assert "cumemtrace" not in r.stderr


def test_exit_line_names_the_file(run):
    r = run(["rt_workload", "basic"])
    name = r.files[0].name
    assert re.fullmatch(r"cumemtrace\.rt_workload\.\d+\.json", name)
    assert f"cumemtrace: wrote {name} (peak " in r.stderr


def test_output_pattern_and_rank(run, tmp_path):
    (tmp_path / "out").mkdir()
    r = run(["rt_workload", "basic"],
            env={"CUMEMTRACE_OUTPUT": str(tmp_path / "out/run-%e-%r-%p.json"),
                 "RANK": "3"})
    files = list((tmp_path / "out").iterdir())
    assert len(files) == 1
    assert re.fullmatch(r"run-rt_workload-3-\d+\.json", files[0].name)
    snap = json.loads(files[0].read_text())
    assert snap["process"]["rank"] == 3


def test_output_directory_and_never_clobber(run, tmp_path):
    out = tmp_path / "dir"
    out.mkdir()
    run(["rt_workload", "basic"], env={"CUMEMTRACE_OUTPUT": str(out)})
    first = list(out.iterdir())
    assert len(first) == 1
    # a symlink planted at the next name is neither followed nor replaced
    victim = tmp_path / "victim"
    victim.write_text("precious")
    r = run(["rt_workload", "basic"],
            env={"CUMEMTRACE_OUTPUT": str(tmp_path / "fixed.json")})
    (tmp_path / "link.json").symlink_to(victim)
    r = run(["rt_workload", "basic"],
            env={"CUMEMTRACE_OUTPUT": str(tmp_path / "link.json")})
    assert victim.read_text() == "precious"
    assert (tmp_path / "link.json.1").exists()
    assert os.stat(tmp_path / "link.json.1").st_mode & 0o777 <= 0o644
    r = run(["rt_workload", "basic"],
            env={"CUMEMTRACE_OUTPUT": str(tmp_path / "fixed.json")})
    assert (tmp_path / "fixed.json.1").exists()  # the first one is kept
    assert not list(tmp_path.glob(".cumemtrace-tmp*"))


def test_unwritable_output_warns_and_the_host_carries_on(run):
    # noticed at the first CUDA call, with the place files go instead
    # (tests/e2e/test_outputs.py has the fallbacks)
    r = run(["rt_workload", "basic"],
            env={"CUMEMTRACE_OUTPUT": "/nonexistent/dir/x.json"})
    assert r.returncode == 0
    lines = [l for l in r.stderr.splitlines() if "cumemtrace" in l]
    assert len(lines) == 2, r.stderr
    assert lines[0] == (f"cumemtrace: warning: cannot write snapshots to /nonexistent/dir/: "
                        f"No such file or directory; writing them to {r.cwd}/ instead "
                        f"(set CUMEMTRACE_OUTPUT to a writable directory)")
    assert (r.cwd / "x.json").exists()


def test_malformed_settings_warn_once_each_and_fall_back(run):
    r = run(["rt_workload", "basic"],
            env={"CUMEMTRACE_DEPTH": "deep", "CUMEMTRACE_LOG": "loud",
                 "CUMEMTRACE_LIMIT": "lots", "CUMEMTRACE_DISABLE": "maybe"})
    err = r.stderr
    assert "ignoring CUMEMTRACE_DEPTH='deep'" in err
    assert "ignoring CUMEMTRACE_LOG='loud'" in err
    assert "ignoring CUMEMTRACE_LIMIT='lots'" in err
    assert "ignoring CUMEMTRACE_DISABLE='maybe'" in err
    snap = r.only("exit")
    assert snap["config"]["depth"] == 32
    assert snap["config"]["limit_bytes"] == []


def test_depth_setting_bounds_stacks(run):
    snap = run(["rt_workload", "basic"], env={"CUMEMTRACE_DEPTH": "2"}).only()
    assert max(len(s["frames"]) for s in snap["stacks"]) <= 2
    assert snap["config"]["depth"] == 2
    snap = run(["rt_workload", "basic"], env={"CUMEMTRACE_DEPTH": "0"}).only()
    assert all(s["frames"] == [] for s in snap["stacks"])
    assert device(snap)["current_bytes"] == 72 * MiB


def test_manifest_lists_written_files(run, tmp_path):
    manifest = tmp_path / "manifest"
    manifest.write_text("cumemtrace-manifest key\n")  # as `cumemtrace run` makes it
    r = run(["rt_workload", "fork"], env={"CUMEMTRACE_MANIFEST": str(manifest),
                                          "CUMEMTRACE_MANIFEST_KEY": "key"})
    lines = manifest.read_text().splitlines()[1:]
    listed = sorted(l.split(" ", 3)[3] for l in lines if l.startswith("wrote "))
    assert listed == sorted(str(f) for f in r.files)
    # the parent and the two children that used CUDA (one ends with _exit)
    assert len([l for l in lines if l.startswith("cuda ")]) == 3, lines


def test_signal_dump_is_opt_in(run, tmp_path):
    # without CUMEMTRACE_SIGNAL the host's SIGUSR2 disposition is untouched
    code = subprocess.run(
        ["sh", "-c", "kill -USR2 $$; echo survived"], cwd=tmp_path,
        env=base_env(), capture_output=True, text=True)
    assert "survived" not in code.stdout


def test_symbol_list_is_exactly_what_we_export():
    out = subprocess.run(["nm", "-D", "--defined-only", str(LIB)],
                         capture_output=True, text=True, check=True).stdout
    names = {l.split()[-1] for l in out.splitlines() if l.strip()}
    names = {n for n in names if not n.startswith("_")} | \
        {n for n in names if n.startswith("_") and not n.startswith("__")}
    wrapped = {n for n in names if re.match(r"cu(da)?[A-Z]", n)}
    assert names - wrapped == {"dlsym", "cumemtrace_dump", "cumemtrace_exit_snapshot",
                               "cumemtrace_version",
                               "cumemtrace_allocator_oom", "cumemtrace_allocator_state",
                               "cumemtrace_allocator_layout",
                               "cumemtrace_allocator_refresher", "cumemtrace_allocator_tensors",
                               "cumemtrace_clock_ns",
                               "cumemtrace_mark_begin", "cumemtrace_mark_end",
                               "cumemtrace_usage", "cumemtrace_phase_push",
                               "cumemtrace_phase_pop", "cumemtrace_peak_context",
                               "cumemtrace_peak_phase", "cumemtrace_peak_phase_ended",
                               "cumemtrace_step_end", "cumemtrace_peak_step",
                               "InitializeInjectionNvtx2",
                               "execve", "execv", "execvp",
                               "execvpe", "execl", "execlp", "execle", "fexecve"}
    # the wrapped set is the one in hooks_table.h, nothing else
    table = open(os.path.join(os.path.dirname(__file__), "..", "..", "src",
                              "preload", "interpose", "hooks_table.h")).read()
    listed = set(re.findall(r"^\s+X\((\w+),", table, re.M))
    assert wrapped == listed
    needed = subprocess.run(["readelf", "-d", str(LIB)], capture_output=True,
                            text=True, check=True).stdout
    assert "libunwind" not in needed


def version_script_names(text):
    """The names a version script's global: part lists, in order."""
    return re.findall(r"(\w+);", text.split("global:")[1].split("local:")[0])


def test_the_version_script_lists_only_what_the_library_defines():
    out = subprocess.run(["nm", "-D", "--defined-only", str(LIB)],
                         capture_output=True, text=True, check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if l.strip()}
    listed = set(version_script_names((LIB.parent / "gen" / "exports.map").read_text()))
    assert listed - defined == set(), "exports.map lists names nothing defines"


def test_the_version_script_is_made_from_the_hook_table():
    # the build expands hooks_table.h into the version script: every wrapped
    # entry point once, beside the names exports.map.in lists by hand, and
    # none of the table's written there again
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src", "preload")
    table = re.findall(r"^\s+X\((\w+),",
                       open(os.path.join(src, "interpose", "hooks_table.h")).read(), re.M)
    template = open(os.path.join(src, "exports.map.in")).read()
    by_hand = re.findall(r"^\s*(\w+);", template.split("global:")[1], re.M)
    made = version_script_names((LIB.parent / "gen" / "exports.map").read_text())
    assert len(made) == len(set(made)), "a name listed twice"
    assert set(made) == set(table) | set(by_hand)
    assert set(table) & set(by_hand) == set(), "a wrapped name written by hand"
    assert len(table) > 50 and "cuCtxCreate_v4" in made


def test_event_times_follow_the_wall_clock(run):
    # ~1.2 s then ~0.3 s between allocations; the library switches from
    # CLOCK_MONOTONIC to a calibrated TSC after one second (clock.c).  The
    # program brackets each call with its own CLOCK_MONOTONIC readings, so
    # the bound is on what really elapsed (a loaded machine oversleeps).
    res = run(["rt_workload", "timed"])
    snap = res.only()
    rows = snap["events"]["data"]
    times = {r[3]: r[0] for r in rows}  # delta -> t_ns
    got = [times[k * MiB] for k in (1, 2, 3)]
    brackets = [tuple(int(x) for x in v.split(","))
                for v in re.findall(r"t\d=(\d+,\d+)", res.stdout)]
    assert len(brackets) == 3, res.stdout
    for i in (0, 1):
        (b0, a0), (b1, a1) = brackets[i], brackets[i + 1]
        lo, hi = b1 - a0, a1 - b0  # what the event gap must lie within
        slack = 2e6 + 0.002 * hi   # the TSC's calibration, 2 ms + 0.2 %
        gap = got[i + 1] - got[i]
        assert lo - slack <= gap <= hi + slack, (i, gap, lo, hi)
    assert brackets[1][0] - brackets[0][1] >= 1.2e9  # the clock switch lies between
    assert snap["process"]["dump_time_ns"] >= got[2]


def test_threads_write_events_in_time_order(run):
    # 32 threads racing alloc/free pairs: each row's time is taken under the
    # tracker's lock, so no row is older than the one before it
    snap = run(["rt_workload", "threads", "32"]).only("exit")
    rows = snap["events"]["data"]
    assert len(rows) == 32 * (50 + 50 + 2 * 2000)
    back = [(i, rows[i - 1][0] - rows[i][0]) for i in range(1, len(rows))
            if rows[i][0] < rows[i - 1][0]]
    assert not back, f"{len(back)} rows go back in time, e.g. {back[:5]}"
