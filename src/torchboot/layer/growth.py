"""Growth by line (docs/snapshot-format.md devices[].growth): the groups of
PyTorch's live tensors (tensors.py) whose bytes grew reading over reading.

Readings: the live bytes of each group (its site's file:line:function) -
  at the end of an optimizer step (phases.py counts them) when the device's
    allocated bytes there passed every earlier step end's.  The counters
    (_allocated: PyTorch's raw ones, not memory_allocated(), whose
    memory_stats() flattens and sorts every counter in Python) build a
    dict of every counter, dear beside a small step whose kernels take no
    time, so they are read at the end of every step only while it grows;
    each step end
    that finds no growth doubles the steps to the next read, up to
    GAP_MAX, and the first that finds growth brings it back to every step
    (a leak that starts late is first read up to GAP_MAX steps after it
    began; its rate divides by the steps between readings).  The peak's
    tensors (peak.py) are read at the same step ends.  A
    reading is taken only while the readings so far (the peak's step-end
    readings, peak.py, with them) took less than SHARE of the process's
    CPU time (one skipped leaves a gap that the steps
    between two readings account for);
  without an optimizer, at every dump (exit, signal, periodic, api), the
    dump's own reading, its step the dump's ordinal (1 = the first).
A group grows when its bytes rose at each of its last RUN_MIN readings or
more, the latest included: first_step, last_step the steps of the first
and last readings of that run, bytes_per_step its rise over them divided
by the steps between; bytes what it holds at the dump.

The same readings, each timed on the snapshots' clock, are the device's
series by line (docs/snapshot-format.md devices[].tensor_series): the
SERIES_LINES lines holding the most at any kept reading, the rest of
each reading's tensors as one figure, for the timelines."""
import ctypes
import time

tensors = part("tensors")  # noqa: F821 (set by cumemtrace_torch.part)
phases = part("phases")  # noqa: F821
roles = part("roles")  # noqa: F821
history = part("history")  # noqa: F821
peak = part("peak")  # noqa: F821

SHARE = 0.01     # of the process's CPU time, at most, for the step readings
KEPT = 64        # readings kept per device (the oldest go)
RUN_MIN = 2      # rises in a row that make a growth
GAP_MAX = 16     # steps, at most, between two reads of the counters
SERIES_LINES = 16  # lines a series names; the rest of a reading is one figure
_readings = {}   # device -> [(step, {key: bytes}, time_ns, allocated, reserved)]
_sites = {}      # device -> {key: site}: the lines the readings name
_clock = []      # the library's cumemtrace_clock_ns, once looked up
_best = {}       # device -> the most allocated bytes at a step's end
_spent = [0.0]   # CPU seconds the step readings took
_dumps = [0]     # dumps read so far (the steps without an optimizer)


def _by_site(t):
    return {tensors.site_key(g["site"]): g["bytes"] for g in t["groups"] if g["site"]}


def _now_ns():
    """Now on the snapshots' clock (ns since the library loaded)."""
    if not _clock:
        fn = ctypes.CDLL(None).cumemtrace_clock_ns
        fn.restype = ctypes.c_int64
        fn.argtypes = []
        _clock.append(fn)
    return _clock[0]()


def _keep(device, step, t):
    """Keeps tensors.read's `t` as device's reading of `step`."""
    sites = _by_site(t)
    names = _sites.setdefault(device, {})
    for g in t["groups"]:
        if g["site"]:
            names.setdefault(tensors.site_key(g["site"]), g["site"])
    # the blocks with no user frame, as one line of the series (site null)
    loose = sum(g["bytes"] for g in t["groups"] if not g["site"])
    if loose:
        sites = dict(sites, **{"": loose})
        names[""] = None
    cache = t["cache"]["bytes"] if t.get("cache") else 0
    row = (step, sites, _now_ns(), t["allocated_bytes"], t["allocated_bytes"] + cache)
    r = _readings.setdefault(device, [])
    if r and r[-1][0] == step:
        r[-1] = row  # the same step read again: the later stands
    else:
        r.append(row)
    del r[:-KEPT]


def series(device):
    """devices[].tensor_series of `device`: None without readings, else
    {lines: [site], readings: [{step, time_ns, allocated_bytes,
    reserved_bytes, bytes: [one per line], other_bytes}]}, the lines those
    holding the most at any reading (largest first; null: the blocks with
    no user frame), other_bytes the rest of the reading's allocated bytes."""
    r = _readings.get(device)
    if not r:
        return None
    most = {}
    for row in r:
        for key, b in row[1].items():
            if b > most.get(key, -1):
                most[key] = b
    keys = sorted(most, key=lambda k: (-most[k], k))[:SERIES_LINES]
    names = _sites.get(device, {})
    out = []
    for step, sites, t_ns, allocated, reserved in r:
        shown = [sites.get(k, 0) for k in keys]
        out.append({"step": step, "time_ns": t_ns, "allocated_bytes": allocated,
                    "reserved_bytes": reserved, "bytes": shown,
                    "other_bytes": max(0, allocated - sum(shown))})
    return {"lines": [names[k] for k in keys], "readings": out}


def start(torch):
    """Registers the step-end reading (after phases.start, whose own hook
    counts the step first)."""
    last = [0]
    gap = [1]    # steps from one counter read to the next
    due = [0]    # the step at whose end the counters are read next

    def step_post(optimizer, args, kwargs):
        step = phases.step_count()
        if step > last[0]:  # a new most-steps: one reading a training step
            last[0] = step
            try:
                if history.tracing:
                    peak.note_step_end(step)  # no counters: the peak's step by its time
                if step < due[0]:
                    return
                if not torch.cuda.is_initialized() or \
                        not (history.tracing or history.reading()):
                    return  # nothing to read: no counters either
                now = {d: _allocated(torch, d) for d in range(torch.cuda.device_count())}
                if history.tracing:
                    peak.at_step_end(torch, step, now, _spent, SHARE, optimizer)
                grew = at_step_end(torch, step, now)
                gap[0] = 1 if grew else min(2 * gap[0], GAP_MAX)
                due[0] = step + gap[0]
            except Exception:
                pass  # growth then has fewer readings; the step is the host's
    roles.optim_module().register_optimizer_step_post_hook(step_post)


def _allocated(torch, device):
    """(allocated bytes, max_memory_allocated) of `device`: PyTorch's
    counters as its C++ gives them, without memory_stats()'s flattening."""
    try:
        a = torch._C._cuda_memoryStats(device)["allocated_bytes"]["all"]
        return a["current"], a["peak"]
    except (AttributeError, KeyError, TypeError):
        return torch.cuda.memory_allocated(device), torch.cuda.max_memory_allocated(device)


def step_of_dump():
    """The step a dump's reading counts for: the steps done, or without an
    optimizer (or with phases off) the dump's ordinal, 1 for the first."""
    step = phases.step_count()
    if step > 0:
        return step
    _dumps[0] += 1
    return _dumps[0]


def at_step_end(torch, step, now):
    """After optimizer step `step` (`now`: _allocated of each device): a
    reading of each device whose allocated bytes passed every earlier step
    end's, within the CPU share; True when one passed."""
    if not history.reading():
        return False
    grew = []
    for d, (a, _) in now.items():
        if a > _best.get(d, -1):
            _best[d] = a
            grew.append(d)
    if not grew or _spent[0] > SHARE * time.process_time():
        return bool(grew)
    t = time.process_time()
    snap = history.snapshot(torch).get("segments", [])
    for d in grew:
        _keep(d, step, tensors.read(snap, d))
    _spent[0] += time.process_time() - t
    return True


def at_dump(device, t, step):
    """The dump's reading of `device` (`t`: tensors.read's, `step`:
    step_of_dump's), then the device's growth list."""
    by_site = _by_site(t)
    if phases.step_count() == 0:
        _keep(device, step, t)  # readings between dumps
    # else the step ends' readings alone: each at the same point of its step
    r = [(row[0], {k: b for k, b in row[1].items() if k}) for row in _readings.get(device, [])]
    groups = {tensors.site_key(g["site"]): g for g in t["groups"] if g["site"]}
    out = []
    for key, now in by_site.items():
        if not r or key not in r[-1][1]:
            continue  # not in the latest reading: it did not grow up to it
        first = len(r) - 1
        while first > 0 and r[first - 1][1].get(key, 0) < r[first][1].get(key, 0):
            first -= 1
        rises = len(r) - 1 - first
        if rises < RUN_MIN:
            continue
        s0, s1 = r[first][0], r[-1][0]
        if s1 <= s0:
            continue
        g = groups[key]
        rate = (r[-1][1][key] - r[first][1].get(key, 0)) // (s1 - s0)
        out.append({"site": g["site"], "stack": g["stack"], "bytes": now,
                    "bytes_per_step": rate, "first_step": s0, "last_step": s1,
                    "steps": s1 - s0})
    out.sort(key=lambda g: (-g["bytes_per_step"], tensors.site_key(g["site"])))
    return out
