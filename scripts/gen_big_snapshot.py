#!/usr/bin/env python3
"""gen_big_snapshot.py - write a large, valid cumemtrace snapshot (format
version 1, docs/snapshot-format.md) for benchmarking and stress-testing the
command-line tool.

The shape follows a big PyTorch job: N live allocations spread over S
distinct call stacks (the format stores them grouped by stack, so the file
holds S live groups and S at-peak groups, not N entries), stacks of about
--depth frames mixing C++ frames with mangled symbols (drawn from a pool, as
real stacks share their library frames), stripped frames, Python frames and
markers, and an event log of --events rows.  Two files with different
--seed values share most call sites and differ in some sizes, so `diff`
has real work to do.

    scripts/gen_big_snapshot.py --allocations 1000000 --stacks 100000 -o big.json

Real stacks share most frames (a model has a few thousand lines that
allocate); --python-frames sets that pool, 0 makes every Python frame
distinct (a worst case for the reader's frame table).

Fields are consistent: at_peak sums to peak_bytes, the event log's
`current` column is the running sum of `delta`.

--module FILE points the native frames into FILE's functions instead (an
ELF built with -g, e.g. build/tests/bench/bench_symbols): `modules[]`
records its path, real build-id and vaddr_base, frames carry no symbol (as
for static functions), so the reader resolves every one from FILE's
.symtab and DWARF - what `make bench` times against CUMEMTRACE_DEBUGINFO=off.
--native-frames sets how many distinct native addresses there are, over
--modules libraries.

Every call site also has a `churn` row (allocations, frees, bytes allocated,
temporary frees over the run: what `report`'s churn table ranks), as a real
training run's caching allocator has for each site it allocated from.
"""
import argparse
import os
import random
import re
import struct
import subprocess
import sys

MiB = 1 << 20


def json_str(v):
    import json
    return json.dumps(v)


def mangled(ns, cls, fn, argc):
    """An Itanium-mangled member function name ns::cls::fn(long, ...)."""
    return "_ZN%d%s%d%s%d%sE%s" % (len(ns), ns, len(cls), cls, len(fn), fn, "l" * argc or "v")


def elf_module(path):
    """(build_id hex or None, vaddr_base, [(addr, size)] of its functions)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            sys.exit(f"gen_big_snapshot: {path} is not a 64-bit ELF file: give a program "
                     f"or shared library built with -g")
        e_type, = struct.unpack_from("<H", head, 16)
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    loads = [struct.unpack_from("<IIQQ", ph, i * phentsize) for i in range(phnum)]
    # ET_DYN (PIE, shared library): offsets are file addresses, base 0;
    # ET_EXEC: offset 0 is the first PT_LOAD's address.
    base = 0 if e_type == 3 else min(v for t, _, _, v in loads if t == 1)
    notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", notes)
    nm = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True,
                        text=True, check=True).stdout
    funcs = []
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT" and int(parts[1], 16) > 1:
            funcs.append((int(parts[0], 16) - base, int(parts[1], 16)))
    if not funcs:
        sys.exit(f"gen_big_snapshot: {path} has no function symbols: build it with -g "
                 f"and do not strip it")
    return (m.group(1) if m else None), base, sorted(funcs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allocations", type=int, default=1_000_000)
    ap.add_argument("--stacks", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=20, help="frames per stack (about)")
    ap.add_argument("--events", type=int, default=1_000_000, help="event rows kept")
    ap.add_argument("--python-frames", type=int, default=20_000,
                    help="distinct Python frames (file:line:function) to draw from; "
                         "0 makes every Python frame of every stack distinct (worst case)")
    ap.add_argument("--module", help="an ELF built with -g that the native frames lie in")
    ap.add_argument("--native-frames", type=int, default=3000,
                    help="distinct native frames (addresses) to draw from")
    ap.add_argument("--modules", type=int, default=40,
                    help="distinct native libraries the frames lie in (without --module)")
    ap.add_argument("--no-churn", action="store_true",
                    help="leave out the per-site churn rows (files before they existed)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    shared = random.Random(12345)  # the call sites both seeds share

    # Frame pools, rendered once.
    libs = ["libtorch_cuda.so", "libtorch_cpu.so", "libc10_cuda.so", "libc10.so",
            "libtorch_python.so", "libcublasLt.so.13", "libnccl.so.2"]
    libs += ["libext%d.so" % i for i in range(max(0, a.modules - len(libs)))]
    libs = libs[:max(1, a.modules)]
    native_pool = []
    modules = ""
    if a.module:
        build_id, base, funcs = elf_module(a.module)
        name = os.path.basename(a.module)
        path = os.path.abspath(a.module)
        modules = ('"modules":[{"name":%s,"path":%s,"build_id":%s,"vaddr_base":%d}],\n'
                   % (json_str(name), json_str(path),
                      json_str(build_id) if build_id else "null", base))
        seen = set()
        while len(native_pool) < a.native_frames:
            addr, size = funcs[shared.randrange(len(funcs))]
            off = addr + shared.randrange(size)
            if off in seen and len(seen) < sum(sz for _, sz in funcs):
                continue
            seen.add(off)
            native_pool.append('{"module":%s,"offset":%d,"symbol":null}'
                               % (json_str(name), off))
    for i in range(0 if a.module else a.native_frames):
        lib = libs[i % len(libs)]
        sym = mangled("at", "Kernel%d" % (i // 7), "run%d" % (i % 7), i % 4)
        native_pool.append('{"module":"%s","offset":%d,"symbol":"%s"}'
                           % (lib, 0x10000 + i * 0x40, sym))
    stripped_pool = ['{"module":"libtorch_python.so","offset":%d,"symbol":null}'
                     % (0x400000 + i * 0x10) for i in range(200)]
    files = ["/srv/job/model/layer%d.py" % i for i in range(60)] + \
            ["/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
             "/srv/job/train.py"]
    marker = '{"marker":"python frames unavailable: GIL not held"}'

    def py_frame():
        f = files[shared.randrange(len(files))]
        return ('{"module":"python","file":"%s","line":%d,"function":"f%d"}'
                % (f, shared.randrange(1, 2000), shared.randrange(300)))

    py_pool = [py_frame() for _ in range(a.python_frames)]

    entries = ["cudaMalloc", "cudaMallocAsync", "cuMemCreate", "cuMemAlloc_v2"]
    kinds = {"cudaMalloc": "device", "cudaMallocAsync": "async", "cuMemCreate": "vmm",
             "cuMemAlloc_v2": "device"}
    stacks = []
    for sid in range(1, a.stacks + 1):
        n_native = max(2, a.depth // 3)
        n_py = max(1, a.depth - n_native - 1)
        fr = [native_pool[shared.randrange(len(native_pool))] for _ in range(n_native)]
        fr.append(stripped_pool[shared.randrange(len(stripped_pool))])
        if sid % 50 == 0:
            fr.append(marker)
        else:
            for _ in range(n_py):
                fr.append(py_pool[shared.randrange(len(py_pool))] if py_pool else py_frame())
        entry = entries[sid % len(entries)]
        stacks.append((sid, entry, fr))

    # Counts per stack summing to --allocations; sizes per allocation.
    base = a.allocations // a.stacks
    counts = [base] * a.stacks
    for i in range(a.allocations - base * a.stacks):
        counts[i] += 1
    sizes = []
    for i in range(a.stacks):
        each = shared.choice([512 * 1024, 2 * MiB, 4 * MiB, 20 * MiB, 64 * 1024])
        if rnd.random() < 0.05:  # this run differs here
            each += rnd.randrange(1, 1 << 20)
        sizes.append(each)
    at_peak = [(i + 1, counts[i] * sizes[i], counts[i]) for i in range(a.stacks)]
    peak = sum(b for _, b, _ in at_peak)
    live = [(sid, b // 2, max(1, c // 2)) for sid, b, c in at_peak if sid % 3 == 0]
    current = sum(b for _, b, _ in live)

    # Event log: allocations up to the peak, then frees down to current.
    peak_t = 30_000_000_000
    n_up = max(1, a.events * 2 // 3)
    n_down = max(1, a.events - n_up)
    rows = []
    cur = 0
    up_bytes = [peak // n_up] * n_up
    up_bytes[-1] += peak - sum(up_bytes)
    for i in range(n_up):
        cur += up_bytes[i]
        t = peak_t if i == n_up - 1 else (i + 1) * (peak_t // (n_up + 1))
        sid = (i % a.stacks) + 1
        rows.append('[%d,0,"%s",%d,%d,%d]' % (t, kinds[stacks[sid - 1][1]], up_bytes[i], sid, cur))
    down = peak - current
    dn = [down // n_down] * n_down
    dn[-1] += down - sum(dn)
    for i in range(n_down):
        cur -= dn[i]
        sid = (i % a.stacks) + 1
        rows.append('[%d,0,"%s",%d,%d,%d]' % (peak_t + (i + 1) * 1000,
                                              kinds[stacks[sid - 1][1]], -dn[i], sid, cur))

    def groups(gs, with_kind):
        gs = sorted(gs, key=lambda g: -g[1])
        if with_kind:
            return ",\n".join('{"stack":%d,"kind":"%s","bytes":%d,"count":%d}'
                              % (s, kinds[stacks[s - 1][1]], b, c) for s, b, c in gs)
        return ",\n".join('{"stack":%d,"bytes":%d,"count":%d}' % (s, b, c) for s, b, c in gs)

    by_kind = {}
    for k in ("device", "managed", "async", "vmm"):
        pk = sum(b for s, b, _ in at_peak if kinds[stacks[s - 1][1]] == k)
        cu = sum(b for s, b, _ in live if kinds[stacks[s - 1][1]] == k)
        n = sum(c for s, _, c in at_peak if kinds[stacks[s - 1][1]] == k)
        by_kind[k] = ('{"current_bytes":%d,"peak_bytes":%d,"peak_time_ns":%d,"allocs":%d,'
                      '"frees":%d,"failures":0}' % (cu, pk, peak_t if pk else 0, n, n // 2))
    live_n = sum(c for _, _, c in live)
    out = open(a.output, "w")
    w = out.write
    w('{"format":"cumemtrace","version":1,"reason":"exit","sequence":0,\n')
    w('"process":{"pid":%d,"ppid":1,"exe":"python3","cmdline":["python3","train.py"],'
      '"host":"bench","rank":0,"start_wall_ns":1764400000000000000,'
      '"dump_time_ns":%d,"tool_version":"bench"},\n' % (10000 + a.seed, peak_t + n_down * 1000 + 1))
    w('"config":{"depth":32,"event_cap":%d,"limit_bytes":[],"python":true,"native":true},\n'
      % a.events)
    w('"devices":[{"ordinal":0,"total_bytes":%d,"free_bytes":%d,"limit_bytes":null,'
      '"current_bytes":%d,"peak_bytes":%d,"peak_time_ns":%d,\n' %
      (max(peak * 2, 80 << 30), max(peak * 2, 80 << 30) - current, current, peak, peak_t))
    w('"by_kind":{%s},\n' % ",".join('"%s":%s' % kv for kv in by_kind.items()))
    w('"vmm":{"reserved_bytes":0,"mapped_bytes":0,"physical_bytes":0,'
      '"reserved_peak_bytes":0,"mapped_peak_bytes":0},\n')
    w('"live":[\n%s],\n' % groups(live, True))
    if not a.no_churn:
        # over the run each site allocated a few times what it held at the
        # peak, freed all but what is live, most of it soon after
        ch = []
        live_c = {sid: c for sid, _, c in live}
        for i in range(a.stacks):
            sid = i + 1
            allocs = counts[i] * shared.randrange(1, 20)
            frees = allocs - live_c.get(sid, 0)
            ch.append((sid, allocs, frees, allocs * sizes[i], frees * shared.randrange(0, 101) // 100))
        ch.sort(key=lambda r: (-r[1], r[0]))
        w('"churn":[\n%s],\n' % ",\n".join(
            '{"stack":%d,"allocs":%d,"frees":%d,"bytes_allocated":%d,"temporary":%d}' % r
            for r in ch))
    w('"at_peak":[\n%s],\n' % groups(at_peak, False))
    w('"histogram":[],"fragmentation":null}],\n')
    w('"host_pinned":{"current_bytes":0,"peak_bytes":0,"peak_time_ns":0,"allocs":0,'
      '"frees":0,"failures":0,"live":[],"at_peak":[]},\n')
    w('"counters":{"unknown_frees":0,"failed_frees":0,"stacks":%d,"live_allocations":%d},\n'
      % (a.stacks, live_n))
    w('"oom":null,\n"ooms":{"count":0,"failed_attempts":0,"recovered":0,'
      '"retry_released_bytes":0,"suppressed":0,"dumps":[]},\n')
    w('"events":{"cap":%d,"recorded":%d,"stride":2,"thinned":true,'
      '"columns":["t_ns","device","kind","delta","stack","current"],"data":[\n'
      % (a.events, 2 * len(rows)))
    w(",\n".join(rows))
    w("]},\n")
    w(modules)
    w('"stacks":[\n')
    w(",\n".join('{"id":%d,"entry":"%s","frames":[%s]}' % (sid, e, ",".join(fr))
                 for sid, e, fr in stacks))
    w("]}\n")
    out.close()
    print("wrote %s: %d allocations in %d stacks, %d events, peak %d bytes"
          % (a.output, a.allocations, a.stacks, len(rows), peak), file=sys.stderr)


if __name__ == "__main__":
    main()
