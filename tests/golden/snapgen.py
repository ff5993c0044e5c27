"""snapgen.py - build consistent cumemtrace snapshots (docs/snapshot-format.md,
version 1) for the CLI's golden tests.

Written independently of the preloaded library's writer: the CLI must read
what the documented format says, and these files are that reading made
concrete.  A snapshot is described by its call sites and what each held at
the peak, at the end, and at an OOM; every derived field (peak_bytes, the
sum of at_peak, counts, the event log's running `current`) is computed here,
so the invariants of the format hold by construction.
"""
import json

MiB = 1 << 20
GiB = 1 << 30

# ---- frames -----------------------------------------------------------------


def py(file, line, function):
    return {"module": "python", "file": file, "line": line, "function": function}


def native(module, offset, symbol=None):
    return {"module": module, "offset": offset, "symbol": symbol}


def marker(text):
    return {"marker": text}


# The PyTorch caching allocator's malloc, mangled as g++ emits it.
C10_MALLOC = native(
    "libc10_cuda.so", 0x3A1F0,
    "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvimP11CUstream_st")
C10_ALLOC = native(
    "libc10_cuda.so", 0x41C88,
    "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator8allocateEm")
EMPTY = native("libtorch_cpu.so", 0x1F2A3B0, "_ZN2at6detail10empty_cudaEN3c108ArrayRefIlEENS1_10ScalarTypeESt8optionalINS1_6DeviceEESt8optionalINS1_12MemoryFormatEE")
PYGLUE = native("libtorch_python.so", 0x4A1F20)          # stripped: no symbol
CUBLAS_WS = native("libcublasLt.so.13", 0x8812F0, "cublasLtMatmul")
NCCL = native("libnccl.so.2", 0x1B0400, "ncclCommInitRank")
MAIN = native("train_sim", 0x1260, "main")
LOOP = native("train_sim", 0x11A0, "_Z10train_stepP5Modeli")


class Stack:
    def __init__(self, sid, entry, frames):
        self.id = sid
        self.entry = entry
        self.frames = frames  # innermost first

    def json(self):
        return {"id": self.id, "entry": self.entry, "frames": self.frames}


# ---- snapshot ---------------------------------------------------------------

KINDS = ("device", "managed", "async", "vmm")


def kind_stats(current=0, peak=0, peak_time=0, allocs=0, frees=0, failures=0):
    return {"current_bytes": current, "peak_bytes": peak, "peak_time_ns": peak_time,
            "allocs": allocs, "frees": frees, "failures": failures}


class Device:
    """One device: at_peak / live are lists of (stack, kind, bytes, count)."""

    def __init__(self, ordinal, peak_time, at_peak, live, total=None, free=None,
                 limit=None, kinds=None, vmm=None, frag=None, hist=None):
        self.ordinal = ordinal
        self.peak_time = peak_time
        self.at_peak = at_peak
        self.live = live
        self.total, self.free, self.limit = total, free, limit
        self.kinds = kinds or {}
        self.vmm, self.frag, self.hist = vmm, frag, hist

    def peak(self):
        return sum(b for _, _, b, _ in self.at_peak)

    def current(self):
        return sum(b for _, _, b, _ in self.live)

    def json(self):
        by_kind = {}
        for k in KINDS:
            st = self.kinds.get(k)
            if st is None:
                cur = sum(b for _, kk, b, _ in self.live if kk == k)
                pk = sum(b for _, kk, b, _ in self.at_peak if kk == k)
                n_live = sum(c for _, kk, _, c in self.live if kk == k)
                n_peak = sum(c for _, kk, _, c in self.at_peak if kk == k)
                allocs = max(n_peak, n_live) + (n_peak if pk else 0)
                st = kind_stats(cur, max(pk, cur), self.peak_time if pk else 0,
                                allocs, allocs - n_live, 0)
            by_kind[k] = st
        live = sorted(self.live, key=lambda g: -g[2])
        at_peak = sorted(self.at_peak, key=lambda g: -g[2])
        d = {
            "ordinal": self.ordinal,
            "total_bytes": self.total,
            "free_bytes": self.free,
            "limit_bytes": self.limit,
            "current_bytes": self.current(),
            "peak_bytes": self.peak(),
            "peak_time_ns": self.peak_time,
            "by_kind": by_kind,
            "vmm": self.vmm or {"reserved_bytes": 0, "mapped_bytes": 0, "physical_bytes": 0,
                                "reserved_peak_bytes": 0, "mapped_peak_bytes": 0},
            "live": [{"stack": s.id, "kind": k, "bytes": b, "count": c} for s, k, b, c in live],
            "at_peak": [{"stack": s.id, "bytes": b, "count": c} for s, k, b, c in at_peak],
            "histogram": self.hist if self.hist is not None else histogram(self.live),
            "fragmentation": self.frag if self.frag is not None else fragmentation(self.live),
        }
        return d


def histogram(live):
    buckets = {}
    for _, _, b, c in live:
        each = b // c if c else b
        le = 1
        while le < each:
            le *= 2
        cnt, byt = buckets.get(le, (0, 0))
        buckets[le] = (cnt + c, byt + b)
    return [{"le": le, "count": c, "bytes": b} for le, (c, b) in sorted(buckets.items())]


def fragmentation(live, granularity=2 * MiB):
    req = sum(b for _, _, b, _ in live)
    rounded = 0
    small_c = small_b = 0
    for _, _, b, c in live:
        each = b // c if c else b
        rounded += c * (-(-each // granularity) * granularity) if c else 0
        if each < MiB:
            small_c += c
            small_b += b
    return {"granularity_bytes": granularity, "requested_bytes": req,
            "rounded_bytes": rounded, "small_count": small_c, "small_bytes": small_b}


def events_for(devices, host_events=(), end_ns=None):
    """An event log that rises to each device's at_peak set at peak_time and
    falls to its live set afterwards; `current` is the running total."""
    rows = []
    for d in devices:
        t0 = max(1, d.peak_time // (len(d.at_peak) + 1))
        cur = 0
        t = t0
        for s, k, b, c in sorted(d.at_peak, key=lambda g: g[0].id):
            cur += b
            rows.append([t, d.ordinal, k, b, s.id, cur])
            t += t0
        # the last allocation before the peak lands exactly at peak_time
        if rows:
            rows[-1][0] = d.peak_time
        live = {(s.id, k): b for s, k, b, _ in d.live}
        peak = {(s.id, k): b for s, k, b, _ in d.at_peak}
        t = d.peak_time + 1000
        for key in sorted(set(peak) | set(live)):
            delta = live.get(key, 0) - peak.get(key, 0)
            if delta:
                cur += delta
                rows.append([t, d.ordinal, key[1], delta, key[0], cur])
                t += 1000
    rows.extend(host_events)
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def snapshot(*, reason="exit", pid=4242, exe="python3", rank=None, host="gpu-node-07",
             cmdline=None, dump_time=42_100_000_000, devices=(), stacks=(), host_pinned=None,
             oom=None, ooms=None, events=None, limits=(), counters=None, sequence=0):
    devs = sorted(devices, key=lambda d: d.ordinal)
    ev = events if events is not None else events_for(devs)
    live_allocs = sum(c for d in devs for _, _, _, c in d.live)
    doc = {
        "format": "cumemtrace",
        "version": 1,
        "reason": reason,
        "sequence": sequence,
        "process": {
            "pid": pid, "ppid": 4200, "exe": exe,
            "cmdline": cmdline or [exe, "train.py", "--batch", "64"],
            "host": host, "rank": rank, "start_wall_ns": 1764400000000000000,
            "dump_time_ns": dump_time, "tool_version": "0.1.0",
        },
        "config": {"depth": 32, "event_cap": 1048576,
                   "limit_bytes": [{"device": d, "bytes": b} for d, b in limits],
                   "python": True, "native": True, "temporary_ms": 0},
        "devices": [d.json() for d in devs],
        "host_pinned": host_pinned or {
            "current_bytes": 0, "peak_bytes": 0, "peak_time_ns": 0, "allocs": 0,
            "frees": 0, "failures": 0, "live": [], "at_peak": []},
        "counters": counters or {
            "unknown_frees": 0, "failed_frees": 0, "stacks": len(stacks),
            "live_allocations": live_allocs},
        "oom": oom,
        "ooms": ooms or {"count": 0, "failed_attempts": 0, "recovered": 0,
                         "retry_released_bytes": 0, "suppressed": 0, "dumps": []},
        "events": {"cap": 1048576, "recorded": len(ev), "stride": 1, "thinned": False,
                   "columns": ["t_ns", "device", "kind", "delta", "stack", "current"],
                   "data": ev},
        "stacks": [s.json() for s in stacks],
    }
    return doc


def dump(doc, path):
    """Writes a snapshot the way a careful writer would: one member per line
    at the top, compact event rows."""
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
