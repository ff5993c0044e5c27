"""The peak's tensors (docs/snapshot-format.md devices[].peak_tensors): the
live tensors at the moment of the device's max_memory_allocated, grouped as
tensors.py groups them, found by replaying PyTorch's trace of allocator
events (torch.cuda.memory._snapshot()["device_traces"], history with
enabled="all") backward from the live blocks, as memory_viz does: an
"alloc" undone takes its block out, a "free_requested" undone puts it
back, until the allocated bytes equal max_memory_allocated.  A block freed
since the peak has only its requested size in the trace: it counts with
PyTorch's rounding (512-byte multiples), and the result is kept only when
the replayed bytes equal max_memory_allocated exactly; else (a block that
was not split, roundup_power2_divisions, a peak older than the trace)
there is no reading - never an estimate.

On by default (history.py records the bounded trace; CUMEMTRACE_TORCH_PEAK=0
turns it off).  Reading the trace costs: _snapshot() turns every entry into
Python objects.  So it is read only where the peak may have moved -
  at an optimizer step's end where growth.py reads PyTorch's counters
    (every step while memory grows, else up to GAP_MAX steps apart) whose
    max_memory_allocated differs from the last such end's (or after
    reset_peak_memory_stats): the replay from there, within growth.py's CPU
    share for step-end readings; its step from its moment and the times of
    the step ends (note_step_end: no counters at the others);
  at a dump, only for a device without a kept reading that still holds:
    one whose allocated_bytes equal max_memory_allocated now, with no
    reset_peak_memory_stats since it was taken.
A reading found either way is kept, so a peak older than the trace still
has its tensors; a dump with every device's reading kept reads no trace."""
import functools
import time

tensors = part("tensors")  # noqa: F821 (set by cumemtrace_torch.part)
growth = part("growth")  # noqa: F821
roles = part("roles")  # noqa: F821

MIN_BLOCK = 512  # PyTorch's kMinBlockSize: every block a multiple of it
_kept = {}       # device -> (peak_tensors, resets when it was read)
_seen = {}       # device -> (max_memory_allocated, resets) at the last step end read
_resets = [0]    # calls of reset_peak_memory_stats (any device) so far
_counting = []   # [True] once start() counts them: no kept reading before
ENDS = 256       # step ends whose time is kept
_ends = []       # (step, Unix us) of the latest step ends, oldest first


def _rounded(size):
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def start(torch):
    """Counts the program's resets of PyTorch's peak (reset_peak_memory_stats
    and reset_max_memory_allocated call this one function of torch._C, looked
    up at each call): a kept reading is then no longer the peak's.  Same
    arguments, result and exceptions as PyTorch's own."""
    c = torch._C
    orig = getattr(c, "_cuda_resetPeakMemoryStats", None)
    if orig is None:
        raise AttributeError("torch._C has no _cuda_resetPeakMemoryStats")
    if getattr(orig, "_cumemtrace_counts", False):
        return

    @functools.wraps(orig)
    def reset_peak(*args, **kwargs):
        _resets[0] += 1
        return orig(*args, **kwargs)
    reset_peak._cumemtrace_counts = True
    c._cuda_resetPeakMemoryStats = reset_peak
    _counting.append(True)


def note_step_end(step):
    """Optimizer step `step` ended now: its time, so that a peak's moment
    tells its step although the counters are not read at every step end."""
    _ends.append((step, time.time_ns() // 1000))
    del _ends[:-ENDS]


def _step_of(when):
    """The optimizer step during which Unix-us `when` fell: the first whose
    end came at or after it, the one after the last end when it came after
    every one; None without step ends, or before the ends kept (unless the
    oldest kept is step 1's)."""
    if when is None or not _ends:
        return None
    if when > _ends[-1][1]:
        return _ends[-1][0] + 1
    if when <= _ends[0][1]:
        return _ends[0][0] if _ends[0][0] == 1 else None
    for step, t in _ends:
        if t >= when:
            return step
    return None


def _valid(device, max_allocated):
    k = _kept.get(device)
    return bool(_counting) and k is not None and k[1] == _resets[0] and \
        k[0]["allocated_bytes"] == max_allocated


def needs_trace(devices_max):
    """Whether a dump must read the trace: some device of `devices_max`
    ({device: max_memory_allocated}) has no kept reading that holds."""
    return any(not _valid(d, m) for d, m in devices_max.items())


def at_dump(full, device, max_allocated, grads=frozenset()):
    """peak_tensors of `device` at a dump: the kept reading while it holds,
    else the replay of `full` (a memory._snapshot(), its trace read when
    needs_trace said so), kept when it reaches the peak; else None.
    `grads`: tensors.backward_gradients of full's segments (see read)."""
    if _valid(device, max_allocated):
        return _kept[device][0]
    t = read(full, device, max_allocated, grads)
    if t is not None:
        _kept[device] = (t, _resets[0])
    return t


def at_step_end(torch, step, now, spent, share, optimizer=None):
    """At optimizer step `step`'s end, where growth.py reads the counters
    (`now`: growth._allocated of each device; every step while memory grows,
    else every few, up to growth.GAP_MAX): the replay of each device whose
    max_memory_allocated moved since the last such end (or was reset), kept; `spent` (a one-item list of CPU seconds,
    growth.py's) and `share` bound the step-end readings together.
    `optimizer`, the one that stepped: its parameters' .grad are the
    gradients read names (a step end runs no roles scan, which walks every
    object the collector tracks)."""
    moved = [d for d, (_, m) in now.items() if _seen.get(d) != (m, _resets[0])]
    if not moved or not _counting or spent[0] > share * time.process_time():
        return  # tried again at the next step end
    t0 = time.process_time()
    # the gradients before the snapshot: one replaced in between has an
    # event in its trace, so read does not name it
    grads = {}
    if optimizer is not None and part("history").from_the_start():  # noqa: F821
        for d in moved:
            grads[d] = roles.optimizer_gradients(torch, d, optimizer)
    full = history_snapshot(torch)
    for d in moved:
        m = now[d][1]
        _seen[d] = (m, _resets[0])
        t = read(full, d, m, grads.get(d, frozenset()))
        if t is not None:
            _kept[d] = (t, _resets[0])
        else:
            _kept.pop(d, None)  # no reading of this peak: a dump replays
    spent[0] += time.process_time() - t0


def history_snapshot(torch):
    return part("history").snapshot(torch, traces=True)  # noqa: F821


def read(snap, device, max_allocated, grads=frozenset()):
    """peak_tensors of `device` from a full memory._snapshot() `snap`, or
    None when its trace does not reach the peak exactly.  `grads`: the
    addresses of snap's blocks that are a parameter's .grad made on
    autograd's thread (tensors.backward_gradients of the same segments); a
    block of the peak is named so only when it is one of them and no event
    of the trace touched its address since the peak: the very block, live
    throughout.  A gradient freed since the peak (zero_grad, a later step's)
    has no role known at the peak: it stays in the frameless group."""
    traces = snap.get("device_traces") or []
    if device >= len(traces) or max_allocated is None or max_allocated < 0:
        return None
    # the two clocks read together: the trace's (Unix us) onto the
    # snapshots' (growth._now_ns, ns since the library loaded)
    offset = growth._now_ns() - time.time_ns()
    trace = traces[device]
    live = {}
    for seg in snap.get("segments", ()):
        if seg.get("device") != device:
            continue
        for b in seg.get("blocks", ()):
            if b.get("state") == "active_allocated":
                live[b["address"]] = [b["size"], b.get("frames") or (), None]
    allocated = sum(v[0] for v in live.values())
    at = len(trace)  # the peak lies just before trace[at]
    touched = set()  # addresses an event came at since the peak
    while allocated != max_allocated and at > 0:
        at -= 1
        e = trace[at]
        action = e.get("action")
        touched.add(e.get("addr"))
        if action == "alloc":
            got = live.pop(e.get("addr"), None)
            allocated -= got[0] if got is not None else _rounded(e.get("size", 0))
        elif action == "free_requested":
            live[e.get("addr")] = [_rounded(e.get("size", 0)), None, e]
            allocated += live[e.get("addr")][0]
    if allocated != max_allocated:
        return None
    # the blocks freed since the peak: their stacks from their allocation,
    # further back in the trace
    missing = {a for a, v in live.items() if v[1] is None}
    for e in reversed(trace[:at]):
        if not missing:
            break
        if e.get("action") == "alloc" and e.get("addr") in missing:
            live[e["addr"]][1] = e.get("frames") or ()
            missing.discard(e["addr"])
    # an address is given only to the blocks that may be named a gradient
    blocks = [{"size": v[0], "frames": v[1] or (), "state": "active_allocated",
               "address": a if a in grads and a not in touched else None}
              for a, v in live.items()]
    t = tensors.read([{"device": device, "total_size": 0, "blocks": blocks}], device,
                     grads)
    t.pop("cache", None)
    t["cache"] = None
    # the moment: that of the event that made the peak's state (none when
    # the state is older than the trace)
    when = trace[at - 1].get("time_us") if at > 0 else None
    t["time_ns"] = max(0, when * 1000 + offset) if when is not None else None
    t["time_unix_us"] = when
    t["step"] = _step_of(when)
    return t
