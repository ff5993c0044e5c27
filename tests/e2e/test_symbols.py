"""Native frames named from debug information: static and inlined
functions with file:line from DWARF, a stripped binary falling back to what
the snapshot recorded, a rebuild whose code moved still matched by diff, and
a binary replaced after the run detected by its build-id."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import BUILD, CLI, ROOT, SIM, base_env, cli

SRC = ROOT / "tests" / "progs" / "rt_symbols.c"


def marker_lines():
    """{marker: line} for the LINE:name comments of the program."""
    out = {}
    for n, text in enumerate(SRC.read_text().splitlines(), 1):
        if "/* LINE:" in text:
            out[text.split("/* LINE:")[1].split()[0]] = n
    return out


def build(path, *defines):
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-rdynamic",
                    *[f"-D{d}" for d in defines],
                    f"-I{ROOT / 'src' / 'common'}", f"-I{ROOT / 'include'}",
                    "-o", str(path), str(SRC), f"-L{SIM}", "-lcudart",
                    f"-Wl,-rpath,{SIM}"], check=True)
    return path


def trace(exe, cwd):
    cwd.mkdir(exist_ok=True)
    subprocess.run([str(exe)], cwd=cwd, env=base_env(), check=True,
                   capture_output=True, timeout=60)
    (snap,) = cwd.glob("cumemtrace.*.json")
    return snap


def folded(snap, **kw):
    r = cli("flamegraph", snap, **kw)
    assert r.returncode == 0, r.stderr
    return [l.rpartition(" ")[0].split(";") for l in r.stdout.splitlines()]


@pytest.fixture
def prog(tmp_path):
    return build(tmp_path / "symprog")


def test_static_and_inlined_functions_have_file_and_line(prog, tmp_path):
    snap = trace(prog, tmp_path / "run")
    doc = json.loads(snap.read_text())
    mod = next(m for m in doc["modules"] if m["name"] == "symprog")
    assert mod["path"] == str(prog)
    readelf = subprocess.run(["readelf", "-n", str(prog)], capture_output=True,
                             text=True).stdout
    assert mod["build_id"] in readelf, "the build-id recorded is the file's own"
    L = marker_lines()
    stacks = folded(snap)
    hidden = next(s for s in stacks if any("hidden_alloc" in f for f in s))
    assert hidden[-2] == f"symprog!hidden_alloc at rt_symbols.c:{L['hidden_alloc']}"
    inl = next(s for s in stacks if any("inlined_alloc" in f for f in s))
    # innermost first in the snapshot; the folded line reads outermost first
    assert inl[-2] == f"symprog!inlined_alloc at rt_symbols.c:{L['inlined_alloc']} (inlined)"
    assert inl[-3] == f"symprog!outer_of_inlined at rt_symbols.c:{L['outer_call']}"
    # two calls from main on different lines are two frames
    assert hidden[-3] != inl[-4] and hidden[-3].startswith("symprog!main at rt_symbols.c:")


def test_debuginfo_off_keeps_the_recorded_names(prog, tmp_path):
    snap = trace(prog, tmp_path / "run")
    stacks = folded(snap, env={"CUMEMTRACE_DEBUGINFO": "off"})
    flat = [f for s in stacks for f in s]
    assert not any(" at rt_symbols.c" in f for f in flat)
    assert "symprog!main" in flat and any(f.startswith("symprog+0x") for f in flat)


def test_stripped_binary_falls_back_cleanly(prog, tmp_path):
    stripped = tmp_path / "stripped"
    shutil.copy(prog, stripped)
    subprocess.run(["strip", "--strip-all", str(stripped)], check=True)
    snap = trace(stripped, tmp_path / "run")
    r = cli("report", snap)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    flat = [f for s in folded(snap) for f in s]
    assert not any(" at rt_symbols.c" in f for f in flat)
    # the exported main keeps its dynamic symbol, the static helper its offset
    assert "stripped!main" in flat
    assert any(f.startswith("stripped+0x") for f in flat)


def test_rebuild_with_moved_code_still_matches_in_diff(tmp_path):
    a = trace(build(tmp_path / "symprog"), tmp_path / "a")
    (tmp_path / "b").mkdir()
    b = trace(build(tmp_path / "b" / "symprog", "PAD"), tmp_path / "b")
    off = lambda snap: sorted(f["offset"] for s in json.loads(snap.read_text())["stacks"]
                              for f in s["frames"] if f["module"] == "symprog")
    assert off(a) != off(b), "-DPAD must move the code"
    r = cli("diff", a, b)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Call sites at peak")[1].split("\n\n")[0]
    assert "(2 call sites unchanged)" in section, r.stdout
    # without debug information the moved static helper no longer matches
    r = cli("diff", a, b, env={"CUMEMTRACE_DEBUGINFO": "off"})
    section = r.stdout.split("Call sites at peak")[1].split("\n\n")[0]
    assert "(2 call sites unchanged)" not in section, r.stdout


def test_binary_replaced_after_the_run_is_detected(tmp_path):
    exe = build(tmp_path / "symprog")
    snap = trace(exe, tmp_path / "run")
    build(tmp_path / "symprog", "PAD")  # same path, another build
    r = cli("report", snap)
    assert r.returncode == 0
    assert "is not the one that ran" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert " at rt_symbols.c" not in r.stdout
    assert "symprog!main" in r.stdout or "symprog+0x" in r.stdout


def functions_of(path):
    """[(offset, size)] of the function symbols of an ELF (a PIE: offset =
    address)."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return sorted({(int(p[0], 16), int(p[1], 16)) for p in map(str.split, out.splitlines())
                   if len(p) == 4 and p[2] in "tT" and int(p[1], 16) > 8})


def one_frame_stacks(tmp_path, module, offsets):
    """A snapshot with one stack per offset, a lone frame in module; stack i
    has the entry point "e<i>", so that the flame graph's lines say which
    (stacks that print the same are otherwise one line)."""
    bid = subprocess.run(["readelf", "-n", str(module)], capture_output=True,
                         text=True).stdout.split("Build ID: ")[1].split()[0]
    n = len(offsets)
    doc = {"format": "cumemtrace", "version": 1, "reason": "exit", "sequence": 0,
           "process": {"pid": 1},
           "devices": [{"ordinal": 0, "current_bytes": 0, "peak_bytes": n * (n + 1) // 2,
                        "peak_time_ns": 1, "live": [],
                        "at_peak": [{"stack": i + 1, "bytes": i + 1, "count": 1}
                                    for i in range(n)]}],
           "modules": [{"name": module.name, "path": str(module), "build_id": bid,
                        "vaddr_base": 0}],
           "stacks": [{"id": i + 1, "entry": f"e{i}",
                       "frames": [{"module": module.name, "offset": o, "symbol": None}]}
                      for i, o in enumerate(offsets)]}
    path = tmp_path / "one_frame.json"
    path.write_text(json.dumps(doc))
    return path


def test_inlined_chains_are_whole_as_addr2line_gives_them(tmp_path):
    """Every level of an inlined call chain is a frame: checked against
    binutils' addr2line -i on the CLI itself (an -O2 -g program with real
    inlining), at the middle of each of its functions."""
    module = tmp_path / "module"
    shutil.copy(CLI, module)
    offsets = [o + s // 2 for o, s in functions_of(module)]
    snap = one_frame_stacks(tmp_path, module, offsets)
    ours = {}
    for line in cli("flamegraph", "--all-frames", snap).stdout.splitlines():
        chain = line.rpartition(" ")[0].split(";")
        names = [f.split("!", 1)[1].split(" at ")[0].removesuffix(" (inlined)")
                 for f in chain[:-1] if "!" in f]
        ours[offsets[int(chain[-1][1:])]] = names[::-1]  # innermost first
    a2l = subprocess.run(["addr2line", "-a", "-i", "-f", "-e", str(module),
                          *map(hex, offsets)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    # addr2line -a -i -f prints: address, then (function, file:line) per level.
    theirs, k = {}, 0
    while k < len(a2l):
        addr = int(a2l[k], 16)
        k += 1
        names = []
        while k < len(a2l) and not a2l[k].startswith("0x"):
            names.append(a2l[k])
            k += 2
        theirs[addr] = names
    compared = 0
    for o in offsets:
        if "??" in theirs[o] or not ours.get(o):
            continue  # no DWARF there (start-up code)
        assert ours[o] == theirs[o], (hex(o), ours[o], theirs[o])
        compared += 1
    assert compared > len(offsets) // 2
    assert any(len(v) >= 3 for v in theirs.values())  # chains of inlined calls exist


def cpu_of(*args, env=None):
    e = dict(os.environ, NO_COLOR="1")
    e.pop("CUMEMTRACE_DEBUGINFO", None)
    e.update(env or {})
    p = subprocess.Popen([str(CLI), *map(str, args)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=e)
    _, status, ru = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return ru.ru_utime + ru.ru_stime


def test_many_frames_in_one_big_unit_resolve_cheaply(tmp_path):
    """One compilation unit of 1024 functions, three distinct frames in each:
    resolving them costs at most a few times reading the file without
    debug information (a per-unit index of functions and a sorted symbol
    table; dwarf_getscopes and dwfl_module_addrinfo walked the whole unit
    and every symbol for each frame, 30 times the read)."""
    src = tmp_path / "many.c"
    fns = "\n".join(f"__attribute__((noinline)) static long f{i}(long x)\n"
                    f"{{ long y = x * 31 + {i}; if (y & 1) y += x >> 2; return y ^ (y >> 3); }}"
                    for i in range(1024))
    table = ", ".join(f"f{i}" for i in range(1024))
    src.write_text(f"#include <stdio.h>\n{fns}\nstatic long (*const t[])(long) = {{{table}}};\n"
                   "int main(void) { long s = 0; for (int i = 0; i < 1024; i++) s += t[i](i);"
                   " printf(\"%ld\\n\", s); return 0; }\n")
    module = tmp_path / "many"
    subprocess.run(["cc", "-O0", "-g", "-o", str(module), str(src)], check=True)
    offsets = sorted({o + d for o, s in functions_of(module) for d in (1, s // 2, s - 2)})
    assert len(offsets) > 3000
    snap = one_frame_stacks(tmp_path, module, offsets)
    named = cli("flamegraph", snap).stdout
    lines = named.splitlines()  # resolution really ran (all but crt's _start & co)
    assert sum(" at many.c:" in l for l in lines) >= 1024
    assert sum(" at many.c:" not in l for l in lines) <= 8
    on = min(cpu_of("report", snap) for _ in range(2))
    off = min(cpu_of("report", snap, env={"CUMEMTRACE_DEBUGINFO": "off"}) for _ in range(2))
    assert on <= 6 * off + 0.02, (on, off)  # 0.02: the clock's grain on tiny runs


def test_big_snapshot_generator_points_frames_into_a_real_module(tmp_path):
    """gen_big_snapshot.py --module (what make bench times resolution on):
    the frames lie in the module's functions, with its build-id, and
    resolve to file:line."""
    module = tmp_path / "module"
    shutil.copy(CLI, module)
    snap = tmp_path / "big.json"
    subprocess.run(["python3", ROOT / "scripts" / "gen_big_snapshot.py", "--allocations",
                    "2000", "--stacks", "200", "--events", "100", "--native-frames", "500",
                    "--module", module, "-o", snap], check=True, capture_output=True)
    doc = json.loads(snap.read_text())
    (mod,) = doc["modules"]
    assert mod["name"] == "module" and len(mod["build_id"]) == 40
    lines = cli("flamegraph", "--native-only", snap).stdout.splitlines()
    assert lines and all("module!" in l and ".c:" in l for l in lines)
    off = cli("flamegraph", "--native-only", snap, env={"CUMEMTRACE_DEBUGINFO": "off"})
    assert "module+0x" in off.stdout
