"""The stream: a record that survives SIGKILL.  A program that
logs what it holds is killed at random moments; its stream must always
read, and the recovered live set must be what the program held at the
checkpoint's moment, no older than a few flush intervals."""
import json
import struct
import zlib

import pytest
import random
import signal
import subprocess
import time

from conftest import CLI, PROGS, ROOT, SAN_RUNTIME, base_env, crc32c, device

FLUSH_MS = 40
MiB = 1 << 20


def truth(log):
    rows = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:  # the last line may be cut by the kill
            rows.append((int(parts[0]), int(parts[1])))
    return rows


def has_checkpoint(d):
    streams = list(d.glob("cumemtrace.*.stream"))
    # polled while the writer runs: the file exists a moment before its
    # magic and header are written, so a partial file is "not yet"
    return bool(streams) and any(k == "C" for k, _ in scan(streams[0].read_bytes()))


def kill_run(d, delay, env=None):
    log = d / "truth.log"
    p = subprocess.Popen([str(PROGS / "rt_hold"), "default", str(log)], cwd=d,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=base_env(dict({"CUMEMTRACE_FLUSH_MS": str(FLUSH_MS)},
                                           **(env or {}))))
    assert p.stdout.readline() == "ready\n"
    # the first checkpoint comes at the first flush after the first
    # allocation; a kill before it leaves a stream that says so
    deadline = time.monotonic() + 10
    while (env or {}).get("CUMEMTRACE_STREAM") != "off" and \
            not has_checkpoint(d) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=20)
    return log


def recover(stream):
    r = subprocess.run([str(CLI), "recover", str(stream)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = stream.with_name(stream.name[:-len(".stream")] + ".killed.json")
    return json.loads(out.read_text()), r.stderr


def test_sigkill_at_random_moments_always_leaves_a_readable_stream(tmp_path):
    rng = random.Random(13)
    worst = 0.0
    for i in range(20):
        d = tmp_path / f"k{i}"
        d.mkdir()
        log = kill_run(d, rng.uniform(0.05, 0.4))
        (stream,) = d.glob("cumemtrace.*.stream")
        snap, err = recover(stream)
        assert snap["reason"] == "killed"
        rec = snap["recovered"]
        state_wall = snap["process"]["start_wall_ns"] + rec["state_ns"]
        rows = truth(log)
        # exact, by count rather than by clock: after its n-th CUDA call
        # (allocs + frees) the program logged what it held; the checkpoint
        # taken then holds the same
        k = device(snap)["by_kind"]["device"]
        n = k["allocs"] + k["frees"]
        assert 1 <= n <= len(rows), (n, len(rows), err)
        assert device(snap)["current_bytes"] == rows[n - 1][1], (n, err)
        assert snap["counters"]["live_allocations"] == 1 + (rows[n - 1][1] - 64 * MiB) // MiB
        # and no older than a few flushes before the last thing the program did
        lag = (rows[-1][0] - state_wall) / 1e9
        worst = max(worst, lag)
        assert lag < 8 * FLUSH_MS / 1000 + 0.5, (lag, err)
        assert "state recorded at most" in err
    print(f"worst staleness {worst:.3f} s")


def test_rows_of_a_large_checkpoint_come_in_chunks_with_none_lost(tmp_path):
    """At 160,000 events/s and a 300 ms flush a checkpoint has more rows
    than one chunk (16,384): they come as several 'E' records, copied a
    chunk at a time, and the recovered rows are every event in order - each
    row's current is the previous one's plus its delta, the first is the
    first allocation - as many as were recorded."""
    log = kill_run(tmp_path, 1.2, {"RT_HOLD_BURST": "200", "CUMEMTRACE_FLUSH_MS": "300",
                                   "CUMEMTRACE_STREAM": "keep"})
    (stream,) = tmp_path.glob("cumemtrace.*.stream")
    recs = records(stream)
    kinds = [k for k, _ in recs]
    runs = "".join(kinds).split("C")[:-1]
    assert any(r.count("E") > 1 for r in runs), kinds
    # a kill among a checkpoint's rows (CI's run was cut in the first of
    # three): the checkpoint before stands whole, the uncommitted rows left
    # out (version 1 wrote the rows after their checkpoint, which then
    # claimed rows the file did not hold)
    last = max(i for i, k in enumerate(kinds) if k == "C")
    first_e = next(i for i in range(last, 0, -1) if kinds[i - 1] != "E")
    cut_at = 8 + sum(16 + len(p) for _, p in recs[:first_e + 1]) + 1000
    cut = tmp_path / "cut" / stream.name
    cut.parent.mkdir()
    cut.write_bytes(stream.read_bytes()[:cut_at])
    csnap, _ = recover(cut)
    committed = [json.loads(p) for k, p in recs[:first_e] if k == "C"][-1]
    assert csnap["events"]["recorded"] == committed["events"]["recorded"] == \
        len(csnap["events"]["data"]), (csnap["events"]["recorded"], len(csnap["events"]["data"]))
    snap, _ = recover(stream)
    ev = snap["events"]
    assert not ev["thinned"]
    rows = ev["data"]
    assert len(rows) == ev["recorded"] > 16384, (len(rows), ev["recorded"])
    cur = 0
    for i, (t, dev, kind, delta, stack, current) in enumerate(rows):
        assert current == cur + delta, (i, rows[max(0, i - 2):i + 2])
        assert i == 0 or t >= rows[i - 1][0]
        cur = current
    assert rows[0][3] == 64 * MiB


def test_truncated_stream_reads_to_its_last_complete_record(tmp_path):
    log = kill_run(tmp_path, 0.3)
    (stream,) = tmp_path.glob("cumemtrace.*.stream")
    data = stream.read_bytes()
    rng = random.Random(7)
    cut = tmp_path / "cut.stream"
    ok = 0
    for n in sorted(rng.sample(range(8, len(data)), 40)) + [len(data) - 1]:
        cut.write_bytes(data[:n])
        r = subprocess.run([str(CLI), "report", str(cut)], capture_output=True, text=True)
        if r.returncode == 0:
            ok += 1
            assert "recovered from a stream" in r.stderr
            assert ("cut short" in r.stderr or "truncated record head" in r.stderr
                    or "end of file" in r.stderr), r.stderr
        else:
            # only before the first complete checkpoint
            assert "no complete checkpoint" in r.stderr or "header" in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1
    assert ok > 0
    # a flipped byte in the last record: reading stops at its checksum
    bad = bytearray(data)
    bad[-3] ^= 0xFF
    cut.write_bytes(bytes(bad))
    r = subprocess.run([str(CLI), "report", str(cut)], capture_output=True, text=True)
    assert r.returncode == 0 and "checksum mismatch" in r.stderr, r.stderr


def test_normal_exit_removes_the_stream_unless_kept(tmp_path):
    for mode, kept in (("auto", False), ("keep", True)):
        d = tmp_path / mode
        d.mkdir()
        p = subprocess.Popen([str(PROGS / "rt_hold"), "early"], cwd=d,
                             stdout=subprocess.PIPE, text=True,
                             env=base_env({"CUMEMTRACE_STREAM": mode,
                                           "CUMEMTRACE_FLUSH_MS": "20"}))
        assert p.stdout.readline() == "ready\n"
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 3
        assert len(list(d.glob("cumemtrace.*.json"))) == 1
        assert len(list(d.glob("cumemtrace.*.stream"))) == (1 if kept else 0)
    d = tmp_path / "off"
    d.mkdir()
    kill_run(d, 0.2, {"CUMEMTRACE_STREAM": "off"})
    assert list(d.glob("cumemtrace.*")) == [d / "truth.log"] or \
        list(d.glob("cumemtrace.*")) == []


def scan(data):
    """The complete records of a stream's bytes, up to the first cut or bad one."""
    if data[:8] != b"CMTSTRM1":
        return []
    off, out = 8, []
    while off + 16 <= len(data):
        magic, n, crc, kind = struct.unpack_from("<IIIB", data, off)
        payload = data[off + 16:off + 16 + n]
        if len(payload) < n or crc32c(payload) != crc:
            break
        out.append((chr(kind), payload))
        off += 16 + n
    return out


def records(stream):
    data = stream.read_bytes()
    assert data[:8] == b"CMTSTRM1"
    out = scan(data)
    # the writer's records are CRC-32C's, its header says version 2
    assert out and out[0][0] == "H" and json.loads(out[0][1])["version"] == 2, out[:1]
    return out


def test_a_version_1_stream_is_refused_in_one_line(tmp_path):
    """Version 1 (zlib's CRC-32, rows after their checkpoint) was never
    released: whatever its checksum, the reader says what it is and what to
    do, and recovers nothing."""
    head = json.dumps({"format": "cumemtrace-stream", "version": 1, "pid": 1,
                       "start_wall_ns": 1, "flush_ms": 200}, separators=(",", ":")).encode()
    for crc in (zlib.crc32(head), crc32c(head)):
        stream = tmp_path / "cumemtrace.old.1.stream"
        stream.write_bytes(b"CMTSTRM1" + struct.pack("<IIIB3x", 0x52544D43, len(head), crc,
                                                      ord("H")) + head)
        for cmd in ("recover", "report"):
            r = subprocess.run([str(CLI), cmd, str(stream)], capture_output=True, text=True)
            assert r.returncode != 0
            assert len(r.stderr.splitlines()) == 1, r.stderr
            assert ("its format version 1 is from before this cumemtrace's first release, "
                    "which reads version 2; record the program again with this cumemtrace"
                    in r.stderr), r.stderr


def test_the_seeds_are_version_2_streams(tmp_path):
    """The fuzz seeds the CLI tests read are of the format this release
    reads (tests/fuzz/stream_seeds/)."""
    for name in ("killed.stream", "cut.stream"):
        data = (ROOT / "tests" / "fuzz" / "stream_seeds" / name).read_bytes()
        magic, n, crc, kind = struct.unpack_from("<IIIB", data, 8)
        assert crc32c(data[24:24 + n]) == crc and b'"version":2' in data[24:24 + n]
    stream = tmp_path / "cumemtrace.seed.1.stream"
    stream.write_bytes((ROOT / "tests" / "fuzz" / "stream_seeds" / "killed.stream").read_bytes())
    snap, err = recover(stream)
    assert snap["reason"] == "killed" and "reading stopped at end of file" in err, err


def test_a_header_whose_checksum_is_not_its_versions_is_refused(tmp_path):
    """Version 2 checksums with CRC-32C: a header saying 2 under zlib's
    CRC-32 is not a stream this reader can trust, and says so in one line."""
    head = json.dumps({"format": "cumemtrace-stream", "version": 2, "pid": 1,
                       "start_wall_ns": 1, "flush_ms": 200}, separators=(",", ":")).encode()
    stream = tmp_path / "cumemtrace.x.1.stream"
    stream.write_bytes(b"CMTSTRM1" + struct.pack("<IIIB3x", 0x52544D43, len(head),
                                                  zlib.crc32(head), ord("H")) + head)
    r = subprocess.run([str(CLI), "recover", str(stream)], capture_output=True, text=True)
    assert r.returncode != 0
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert "checksum mismatch in the record at byte 8" in r.stderr, r.stderr


def test_a_newer_version_stream_is_called_newer_not_killed(tmp_path):
    """A stream of a later format version is not damage: the reader says it
    is newer than this cumemtrace, whatever checksum the newer writer used."""
    head = json.dumps({"format": "cumemtrace-stream", "version": 3, "pid": 1,
                       "start_wall_ns": 1, "flush_ms": 200}, separators=(",", ":")).encode()
    for crc in (crc32c(head), zlib.crc32(head), 0x12345678):
        stream = tmp_path / "cumemtrace.x.1.stream"
        stream.write_bytes(b"CMTSTRM1" + struct.pack("<IIIB3x", 0x52544D43, len(head), crc,
                                                      ord("H")) + head)
        for cmd in ("recover", "report"):
            r = subprocess.run([str(CLI), cmd, str(stream)], capture_output=True, text=True)
            assert r.returncode != 0
            assert len(r.stderr.splitlines()) == 1, r.stderr
            assert "format version 3 is newer than this cumemtrace" in r.stderr, r.stderr
            assert "killed" not in r.stderr, r.stderr


def test_a_stream_whose_writes_failed_does_not_date_the_end(tmp_path):
    """A stream stops early when its writes fail (here a file size limit, as
    a full disk would): the process runs on, so the age of its last state
    is not bounded by the end of the process, and recover says so."""
    import resource

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (96 << 10, 96 << 10))

    p = subprocess.Popen([str(PROGS / "rt_hold"), "early"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=small_files,
                         env=base_env({"CUMEMTRACE_FLUSH_MS": "20",
                                       "CUMEMTRACE_STREAM": "keep"}))
    assert p.stdout.readline() == "ready\n"
    # wait for the stream to stop growing (its writes failed at the limit),
    # then let the process run on a while
    deadline, last, still = time.monotonic() + 30, -1, 0
    while time.monotonic() < deadline and still < 10:
        streams = list(tmp_path.glob("cumemtrace.*.stream"))
        size = streams[0].stat().st_size if streams else -1
        still = still + 1 if size == last and size > 0 else 0
        last = size
        time.sleep(0.05)
    time.sleep(1.0)
    end_wall = time.time_ns()
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=20)
    (stream,) = tmp_path.glob("cumemtrace.*.stream")
    assert stream.stat().st_size <= 96 << 10
    snap, err = recover(stream)
    rec = snap["recovered"]
    # the stream's last sign of life came well before the process ended,
    # further than the flush bound the age assumes
    lived = (end_wall - snap["process"]["start_wall_ns"]) / 1e9
    assert rec["alive_ns"] / 1e9 + rec["flush_ms"] / 1e3 < lived - 0.5, (rec, lived)
    assert "if its end is what stopped the stream" in err, err
    assert "a stream whose writes failed (a full disk) stops early" in err, err


def test_disk_use_is_bounded(tmp_path):
    """With CUMEMTRACE_STREAM_MAX=64KiB (its floor) the file is replaced by
    its latest checkpoint when it would grow past the bound."""
    log = kill_run(tmp_path, 1.5, {"CUMEMTRACE_STREAM_MAX": "64KiB",
                                   "CUMEMTRACE_FLUSH_MS": "10"})
    (stream,) = tmp_path.glob("cumemtrace.*.stream")
    # the bound, or one header and checkpoint when a checkpoint alone is larger
    recs = records(stream)
    kinds = [k for k, _ in recs]
    assert kinds[0] == "H" and "C" in kinds, kinds[:8]
    first_c = kinds.index("C")
    # (a checkpoint's rows come before it)
    assert stream.stat().st_size <= max(64 << 10, 8 + sum(16 + len(p) for _, p in
                                                          recs[:first_c + 1])
                                        + 64 * len(recs))
    # a file never compacted may start with heartbeats: the first flush can
    # come before the first allocation is recorded (on a loaded machine)
    assert set(kinds[1:first_c]) <= {"B", "E"}, kinds[:8]
    # compacted: the file starts with a late checkpoint, not the first one
    # (written when the thread started, before the program's loop)
    # (an instrumented host, or a loaded machine, may not write 64 KiB in
    # the run: then the file never had to be compacted, and is still under
    # the bound)
    first = json.loads(recs[first_c][1])
    assert (first["process"]["dump_time_ns"] > 300_000_000 or
            stream.stat().st_size <= 64 << 10), first["process"]
    snap, _ = recover(stream)
    # totals survive compaction: the counts are those of the whole run (the
    # program's n-th call left it holding what the checkpoint holds), not
    # of the rows the compacted file still has
    rows = truth(log)
    k = device(snap)["by_kind"]["device"]
    n = k["allocs"] + k["frees"]
    # (a loaded machine makes fewer calls in the 1.5 s: at least half of
    # them, and never more than were made)
    assert min(300, len(rows) // 2) < n <= len(rows), (n, len(rows))
    assert device(snap)["current_bytes"] == rows[n - 1][1]

def _thread_cpu_ns(pid, name):
    import pathlib
    for t in pathlib.Path(f"/proc/{pid}/task").iterdir():
        if (t / "comm").read_text().strip() == name:
            return int((t / "schedstat").read_text().split()[0])
    raise AssertionError(f"no thread {name!r} in {pid}")


@pytest.mark.skipif(SAN_RUNTIME is not None, reason="costs under a sanitizer say nothing")
def test_writer_thread_cpu_under_one_percent(tmp_path):
    """A loop allocating and freeing 200 times per millisecond sleep (over
    100,000 events/s): the stream writer's CPU time, from the kernel's
    schedstat, stays under 1% of the wall time it ran at 100,000 events/s.
    Its work grows with the event rate, which a faster tracer raises (up to
    the loop's 200,000/s): the share is scaled to 100,000 events/s."""
    p = subprocess.Popen([str(PROGS / "rt_hold"), "default"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=base_env({"RT_HOLD_BURST": "200"}))
    assert p.stdout.readline() == "ready\n"
    t0, c0 = time.monotonic(), _thread_cpu_ns(p.pid, "cumemtrace")
    time.sleep(3)
    t1, c1 = time.monotonic(), _thread_cpu_ns(p.pid, "cumemtrace")
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    (f,) = tmp_path.glob("cumemtrace.*.signal.0.json")
    snap = json.loads(f.read_text())
    k = device(snap)["by_kind"]["device"]
    rate = (k["allocs"] + k["frees"]) / (snap["process"]["dump_time_ns"] / 1e9)
    share = (c1 - c0) / 1e9 / (t1 - t0)
    print(f"writer thread {share * 100:.2f}% of a CPU at {rate:,.0f} events/s")
    if rate < 100_000:
        pytest.skip(f"the machine is too loaded: {rate:,.0f} events/s")
    assert share * 100_000 / rate < 0.01, (share, rate)
