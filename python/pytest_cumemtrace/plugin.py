"""pytest --cumemtrace: GPU-memory limits per test, measured by libcumemtrace.so.

Markers (registered always, checked only with --cumemtrace and the library
loaded):

    @pytest.mark.limit_gpu_memory("4 GiB")
        fails the test when, on some device, the peak it reached above what
        was held when it started exceeds the limit;
    @pytest.mark.limit_gpu_leaks("16 MiB")
        fails the test when it ends holding more than it started with, by
        more than the limit.  When PyTorch is in use, memory the caching
        allocator keeps for reuse is not a leak: the plugin compares
        torch.cuda.memory_allocated() instead of what the driver handed out.

Both measure the test function itself (the "call" phase, not fixtures), from
a mark (cumemtrace_mark_begin) set just before it: the library keeps the peak
since that mark exactly, on every allocation.  A failure message lists the
call sites that held memory at that peak (or at the end, for leaks), Python
file:line first, from a snapshot written at that moment (kept in
--cumemtrace-dir for `cumemtrace report`).

Without the library the plugin never changes an outcome: with --cumemtrace
it re-runs pytest under LD_PRELOAD when it can find the library, otherwise
it says once that the markers were not checked and how to check them.
"""
import json
import os
import re
import shlex
import sys
import tempfile

import pytest

from . import _lib

REEXEC_ENV = "PYTEST_CUMEMTRACE_REEXEC"
TOP_SITES = 5
# docs/units.md, as src/common/units.c parses them: the unit is required.
_UNITS = {"b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 10**3,
          "m": 1 << 20, "mib": 1 << 20, "mb": 10**6, "g": 1 << 30, "gib": 1 << 30,
          "gb": 10**9, "t": 1 << 40, "tib": 1 << 40, "tb": 10**12}


def parse_size(value):
    """Bytes from "4 GiB", "1.5GB", "512 MiB", "4096 B" (docs/units.md:
    KiB/MiB/GiB and K/M/G are powers of 1024, KB/MB/GB powers of 1000, a
    fraction is rounded to the nearest byte, B takes whole numbers); a number
    without a unit is refused, as the CLI and the library refuse it."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*", str(value))
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not m:
        raise ValueError(f"not a size: {value!r} (examples: \"512 MiB\", \"4 GiB\", \"4096 B\")")
    number, unit = m.group(1), m.group(2).lower()
    if not unit:
        raise ValueError(f"a size needs a unit: \"{number} GiB\", \"{number} MiB\" or "
                         f"\"{number} B\", not {value!r}")
    whole, _, frac = number.partition(".")
    if unit not in _UNITS or (unit == "b" and frac.strip("0")):
        raise ValueError(f"not a size: {value!r} (examples: \"512 MiB\", \"4 GiB\", "
                         "\"4096 B\"; B takes whole numbers)")
    if unit == "b":
        return int(whole)
    return int(float(number) * _UNITS[unit] + 0.5)


def fmt_size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def pytest_addoption(parser):
    group = parser.getgroup("cumemtrace", "GPU-memory limits (cumemtrace)")
    group.addoption("--cumemtrace", action="store_true", default=False,
                    help="check limit_gpu_memory / limit_gpu_leaks markers with "
                         "libcumemtrace.so (re-runs pytest under LD_PRELOAD if needed)")
    group.addoption("--cumemtrace-dir", default=None, metavar="DIR",
                    help="where snapshots of failing tests are written "
                         "(default: a temporary directory)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_gpu_memory(size): fail when the test's GPU-memory peak "
                   "above its start exceeds size (pytest --cumemtrace)")
    config.addinivalue_line(
        "markers", "limit_gpu_leaks(size): fail when the test ends holding more GPU "
                   "memory than it started with, by more than size (pytest --cumemtrace)")
    config._cumemtrace = _State(config)


class _State:
    def __init__(self, config):
        self.config = config
        self.lib = None
        self.unchecked = 0
        self.why_unchecked = "run pytest with --cumemtrace to check them"
        self.dir = config.getoption("cumemtrace_dir")
        if not config.getoption("cumemtrace"):
            return
        self.lib = _lib.loaded()
        if self.lib is not None:
            return
        path = _lib.find()
        cmd = self._command(path)
        if path and os.environ.get(REEXEC_ENV) is None and self._own_command_line():
            self._reexec(path)  # does not return
        if path and os.environ.get(REEXEC_ENV) is not None:
            self.why_unchecked = (f"{path} was preloaded but is not in the process "
                                  "(a setuid or static Python?); run: " + cmd)
        elif path:
            self.why_unchecked = "libcumemtrace.so must be loaded first; run: " + cmd
        else:
            self.why_unchecked = ("libcumemtrace.so not found (pip install cumemtrace, "
                                  "set CUMEMTRACE_LIB or put `cumemtrace` on PATH); run: "
                                  + cmd)

    def _own_command_line(self):
        # Re-executing is only right for the pytest the user started, not
        # for pytest.main() called from inside another program.
        return tuple(sys.argv[1:]) == tuple(self.config.invocation_params.args)

    def _command(self, path):
        args = " ".join(shlex.quote(a) for a in self.config.invocation_params.args)
        lib = shlex.quote(path) if path else "/path/to/libcumemtrace.so"
        return f"LD_PRELOAD={lib} {shlex.quote(sys.executable)} -m pytest {args}".rstrip()

    def _reexec(self, path):
        env = dict(os.environ)
        env[REEXEC_ENV] = "1"
        # After what is preloaded already: a sanitizer runtime must stay first.
        env["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD", ""), path) if p)
        # The re-run writes its own snapshots only for failing tests.
        env.setdefault("CUMEMTRACE_OUTPUT", os.path.join(tempfile.gettempdir(),
                                                         "cumemtrace.pytest.%p.json"))
        sys.stderr.write(f"cumemtrace: re-running pytest with LD_PRELOAD={path} "
                         "(the library must be loaded before CUDA)\n")
        sys.stdout.flush()
        sys.stderr.flush()
        argv = [sys.executable, "-m", "pytest", *self.config.invocation_params.args]
        os.execve(sys.executable, argv, env)


def _limits(item):
    out = {}
    for name in ("limit_gpu_memory", "limit_gpu_leaks"):
        m = item.get_closest_marker(name)
        if m is None:
            continue
        if len(m.args) != 1 or m.kwargs:
            raise ValueError(f"@pytest.mark.{name} wants one size, "
                             f"e.g. @pytest.mark.{name}(\"4 GiB\")")
        try:
            out[name] = parse_size(m.args[0])
        except ValueError as e:
            raise ValueError(f"@pytest.mark.{name}: {e}") from None
    return out


def pytest_runtest_setup(item):
    # A malformed marker is the test's error, with or without the library;
    # failed outside the handler, so pytest prints it once, unchained.
    try:
        item._cumemtrace_limits = _limits(item)
        return
    except ValueError as e:
        why = str(e)
    pytest.fail(why, pytrace=False)


def _torch_blocks():
    """PyTorch's live blocks now, {(device, address): frames} (its allocation
    history, which cumemtrace turns on, gives each block the Python stack
    that allocated it), when PyTorch has initialised CUDA; else None."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        blocks = {}
        for seg in torch.cuda.memory._snapshot()["segments"]:
            for b in seg["blocks"]:
                if b["state"] == "active_allocated":
                    frames = tuple((f.get("filename", "?"), f.get("line", 0), f.get("name", "?"))
                                   for f in b.get("frames") or ())
                    blocks[(seg["device"], b["address"])] = (b["size"], frames)
        return blocks
    except Exception:  # a build without the history API: the call sites stand
        return None


def _user_frame(frames):
    """The innermost frame outside PyTorch, pytest and the standard
    library: the line of the test (or of the code it calls) that made it."""
    for filename, line, name in frames:
        if not re.search(r"[/\\](torch|_pytest|pluggy|site-packages|dist-packages|"
                         r"lib/python[0-9.]+)[/\\]", filename):
            return f"{os.path.basename(filename)}:{line}:{name}"
    return None


def _leaked_tensors(before, dev):
    """Lines for the tensors that appeared on device `dev` since `before`
    and are still live, grouped by the line that allocated them; None when
    PyTorch keeps no history for them."""
    after = _torch_blocks()
    if before is None or after is None:
        return None
    groups, unnamed = {}, [0, 0]
    for key, (size, frames) in after.items():
        if key[0] != dev or before.get(key) == (size, frames):
            continue  # live before the test: not its leak
        where = _user_frame(frames) if frames else None
        g = groups.setdefault(where, [0, 0]) if where else unnamed
        g[0] += size
        g[1] += 1
    if not groups:
        return None
    rows = sorted(groups.items(), key=lambda kv: -kv[1][0])
    out = [f"  {fmt_size(b):>10}  {n:>5}x  {where}" for where, (b, n) in rows[:TOP_SITES]]
    if len(rows) > TOP_SITES:
        rest = sum(b for _, (b, _) in rows[TOP_SITES:])
        out.append(f"  {fmt_size(rest):>10}  in {len(rows) - TOP_SITES} more lines")
    if unnamed[1]:
        out.append(f"  {fmt_size(unnamed[0]):>10}  {unnamed[1]:>5}x  (no Python line recorded)")
    return out


def _snapshot_tensor_groups(snap, dev):
    """The snapshot's PyTorch tensors by user line on device `dev`
    (devices[].tensors.groups: what `cumemtrace report` lists), or None
    when the file has none."""
    for d in (snap or {}).get("devices", []):
        if d.get("ordinal") == dev:
            t = d.get("tensors")
            return t.get("groups") if isinstance(t, dict) else None
    return None


def _group_text(g):
    site = g.get("site")
    if site:
        return f"{os.path.basename(str(site.get('file')))}:{site.get('line')}:" \
               f"{site.get('function')}"
    o = g.get("origin")
    if o:
        fwd = o.get("forward_site")
        node = f", {o['node']}" if o.get("node") else ""
        if fwd:
            return f"[backward of {os.path.basename(str(fwd.get('file')))}:{fwd.get('line')}:" \
                   f"{fwd.get('function')}{node}]"
        return f"[autograd's backward thread{node}]"
    return "[no user frame]"


def _leaked_by_group(before, dev, snap):
    """Lines for the tensors that appeared on device `dev` since `before`
    and are still live, by the snapshot's own groups (the lines `cumemtrace
    report` prints for this dump): each new block goes to the group whose
    line is the first of its stack's frames that is a group's line (a
    group's line is the first user frame of its blocks, so no inner frame
    can be another group's).  None when the snapshot or PyTorch's history
    has no groups."""
    groups = _snapshot_tensor_groups(snap, dev)
    after = _torch_blocks()
    if before is None or after is None or groups is None:
        return None
    by_site = {}
    for g in groups:
        s = g.get("site")
        if s:
            by_site.setdefault((s.get("file"), s.get("line"), s.get("function")), g)
    new = {}
    unnamed = [0, 0]
    for key, (size, frames) in after.items():
        if key[0] != dev or before.get(key) == (size, frames):
            continue  # live before the test: not its leak
        g = next((by_site[f] for f in frames if f in by_site), None)
        row = new.setdefault(id(g), [g, 0, 0]) if g is not None else None
        if row is None:
            unnamed[0] += size
            unnamed[1] += 1
            continue
        row[1] += size
        row[2] += 1
    if not new and not unnamed[1]:
        return None
    rows = sorted(new.values(), key=lambda r: -r[1])
    out = [f"  {fmt_size(b):>10}  {n:>5}x  {_group_text(g)}  (the line holds "
           f"{fmt_size(g['bytes'])} in {g['count']} block{'' if g['count'] == 1 else 's'})"
           for g, b, n in rows[:TOP_SITES]]
    if len(rows) > TOP_SITES:
        rest = sum(b for _, b, _ in rows[TOP_SITES:])
        out.append(f"  {fmt_size(rest):>10}  in {len(rows) - TOP_SITES} more lines")
    if unnamed[1]:
        out.append(f"  {fmt_size(unnamed[0]):>10}  {unnamed[1]:>5}x  (no user line: made on "
                   "autograd's thread or in library code)")
    return out


def _torch_allocated():
    """{device: torch.cuda.memory_allocated} when PyTorch has initialised CUDA
    in this process, else None."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        return {d: torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count())}
    except Exception:  # a broken or CPU-only build: fall back to our figures
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    state = getattr(item.config, "_cumemtrace", None)
    limits = getattr(item, "_cumemtrace_limits", None) if state is not None else None
    if not limits:
        yield
        return
    if state.lib is None:
        state.unchecked += 1
        yield
        return
    lib = state.lib
    torch_start = _torch_allocated()
    item._cumemtrace_blocks = _torch_blocks() if "limit_gpu_leaks" in limits else None
    mark = lib.mark_begin()
    if mark <= 0:
        # Refused (tracing disabled, marks nested too deep): the library
        # printed why; the test runs unchecked.
        state.unchecked += 1
        state.why_unchecked = ("the library refused to set a mark (see its warning on "
                               "stderr, e.g. CUMEMTRACE_DISABLE is set)")
    failure = None
    try:
        yield
        if mark > 0:
            failure = _check(state, item, limits, torch_start)
    finally:
        if mark > 0:
            lib.mark_end(mark)
    if failure:
        item._cumemtrace_failure = failure


def _check(state, item, limits, torch_start):
    usage = state.lib.usage()
    problems = []
    limit = limits.get("limit_gpu_memory")
    if limit is not None:
        for dev, u in sorted(usage.items()):
            used = u.peak_bytes - u.mark_bytes
            if used > limit:
                problems.append(("peak", dev, used, u))
                break
    limit = limits.get("limit_gpu_leaks")
    if limit is not None:
        torch_end = _torch_allocated() if torch_start is not None or "torch" in sys.modules \
            else None
        if torch_end is not None:
            for dev, end in sorted(torch_end.items()):
                start = (torch_start or {}).get(dev, 0)
                if end - start > limit:
                    problems.append(("leak-torch", dev, end - start, (start, end)))
                    break
        else:
            for dev, u in sorted(usage.items()):
                if u.current_bytes > u.mark_bytes + limit:
                    problems.append(("leak", dev, u.current_bytes - u.mark_bytes, u))
                    break
    if not problems:
        return None
    snap = _snapshot(state, item)
    lines = []
    for what, dev, amount, info in problems:
        if what == "peak":
            lines.append(
                f"test used {fmt_size(amount)} of GPU memory on device {dev} at its peak "
                f"(peak {fmt_size(info.peak_bytes)}, {fmt_size(info.mark_bytes)} held "
                f"before it), over limit_gpu_memory({fmt_size(limits['limit_gpu_memory'])}); "
                "free or shrink what these call sites hold at the peak:")
            lines += _sites(snap, dev, "mark")
        elif what == "leak-torch":
            lines.append(
                f"test leaked {fmt_size(amount)} of GPU memory on device {dev} "
                f"(torch.cuda.memory_allocated {fmt_size(info[0])} before, "
                f"{fmt_size(info[1])} after), over limit_gpu_leaks"
                f"({fmt_size(limits['limit_gpu_leaks'])}); release the tensors it keeps.")
            before = getattr(item, "_cumemtrace_blocks", None)
            grouped = _leaked_by_group(before, dev, snap)
            if grouped is not None:
                # the report's own groups: no segment table (the driver's
                # view, `cumemtrace report --segments`, is in the file)
                lines.append("Tensors it allocated that are still live, by line (PyTorch's "
                             "tensors as `cumemtrace report` groups them):")
                lines += grouped
            else:
                tensors = _leaked_tensors(before, dev)
                if tensors is not None:
                    lines.append("Tensors it allocated that are still live, by the line that "
                                 "allocated them (PyTorch's allocation history):")
                    lines += tensors
                lines.append("The caching allocator's segments live at the end, by the call "
                             "site that created them (a leaked tensor may sit in a segment "
                             "made earlier):")
                lines += _sites(snap, dev, "live")
        else:
            lines.append(
                f"test leaked {fmt_size(amount)} of GPU memory on device {dev} "
                f"({fmt_size(info.mark_bytes)} held before, {fmt_size(info.current_bytes)} "
                f"after), over limit_gpu_leaks({fmt_size(limits['limit_gpu_leaks'])}); "
                "free what these call sites still hold (live at the end, with memory "
                "held before):")
            lines += _sites(snap, dev, "live")
    if snap is not None:
        lines.append(f"details: cumemtrace report {shlex.quote(snap['_path'])}")
    return "\n".join(lines)


def _snapshot(state, item):
    """Writes a snapshot now (the mark still active) and loads it; None
    when it cannot be written."""
    d = state.dir or os.path.join(tempfile.gettempdir(), f"cumemtrace-pytest-{os.getpid()}")
    os.makedirs(d, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-120:]
    path = os.path.join(d, f"cumemtrace.{name}.json")
    if os.path.exists(path):
        os.unlink(path)
    if not state.lib.dump(path):
        return None
    try:
        with open(path) as f:
            snap = json.load(f)
    except (OSError, ValueError):
        return None
    snap["_path"] = path
    return snap


def _is_python(fr):
    return fr.get("module") == "python" and "file" in fr


def _frame_text(fr):
    if _is_python(fr):
        return f"{os.path.basename(str(fr['file']))}:{fr.get('line', '?')}:" \
               f"{fr.get('function', '?')}"
    if fr.get("symbol"):
        return f"{fr.get('module') or '?'}!{fr['symbol']}"
    if fr.get("marker"):
        return f"[{fr['marker']}]"
    return None


def _stack_text(stack):
    """The Python frames of a stack when it has any, else its named native
    frames, innermost first."""
    frames = stack.get("frames", [])
    py = []
    for f in frames:
        if not _is_python(f):
            continue
        if re.search(r"[/\\](_pytest|pluggy)[/\\]", str(f["file"])):
            break  # pytest calling the test: the same in every stack
        py.append(f)
    shown = [t for t in map(_frame_text, py or frames) if t]
    return " < ".join(shown[:4]) or stack.get("entry", "?")


def _sites(snap, dev, which):
    if snap is None:
        return ["  (no snapshot: the call sites are unknown)"]
    stacks = {s["id"]: s for s in snap.get("stacks", [])}
    for d in snap.get("devices", []):
        if d.get("ordinal") != dev:
            continue
        groups = d.get("mark", {}).get("at_peak") if which == "mark" else d.get("live")
        if groups is None:
            return ["  (the call sites at this peak are not known: an inner mark ended "
                    "below it)"]
        groups = sorted(groups, key=lambda g: -g["bytes"])
        out = [f"  {fmt_size(g['bytes']):>10}  {g['count']:>5}x  "
               f"{_stack_text(stacks.get(g['stack'], {}))}" for g in groups[:TOP_SITES]]
        if len(groups) > TOP_SITES:
            rest = sum(g["bytes"] for g in groups[TOP_SITES:])
            out.append(f"  {fmt_size(rest):>10}  in {len(groups) - TOP_SITES} more call sites")
        return out
    return ["  (no such device in the snapshot)"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    failure = getattr(item, "_cumemtrace_failure", None)
    if call.when == "call" and failure and report.passed:
        report.outcome = "failed"
        report.longrepr = failure
        item._cumemtrace_failure = None


def pytest_report_header(config):
    state = getattr(config, "_cumemtrace", None)
    if state is None or not config.getoption("cumemtrace"):
        return None
    if state.lib is not None:
        return f"cumemtrace: libcumemtrace {state.lib.version} loaded; GPU-memory markers checked"
    return f"cumemtrace: GPU-memory markers NOT checked: {state.why_unchecked}"


def pytest_terminal_summary(terminalreporter, config):
    state = getattr(config, "_cumemtrace", None)
    if state is None or state.unchecked == 0:
        return
    n = state.unchecked
    terminalreporter.write_line(
        f"cumemtrace: {n} test{'s' if n != 1 else ''} with GPU-memory markers not "
        f"checked: {state.why_unchecked}", yellow=True)
