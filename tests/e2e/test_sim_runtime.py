"""The simulated CUDA runtime reaches the driver the way NVIDIA's libcudart 13
does (shared/DESIGN.md, tests/data/README.md): dlopen("libcuda.so.1"), one
dlsym for cuGetProcAddress_v2, then the 440 look-ups in order, and never the
dynamic linker for a cu* function.  Checked on the built artefacts: symbol
tables, and real processes running the static-runtime probe
(tests/sim/static_probe.c) under a watcher that is both an LD_AUDIT library
(it sees every object opened and every cu* symbol bound, by dlsym or by the
PLT) and an LD_PRELOAD interposing cuMemAlloc_v2/cuMemFree_v2
(tests/sim/sim_watch.c).

CUMEMTRACE_BUILD names the build directory (default: build/)."""

import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
SIM = BUILD / "sim"
PROBE = BUILD / "tests" / "sim" / "static_probe"
WATCH = BUILD / "tests" / "sim" / "libsim_watch.so"
TSV = ROOT / "tests" / "data" / "cudart-13.0-getprocaddress.tsv"

LOOKUP = re.compile(r'^simcuda: cuGetProcAddress_v2\("(.*?)", (-?\d+), (\d+)\)')


def tsv_rows():
    rows = []
    for line in TSV.read_text().splitlines():
        name, version, flags = line.split("\t")
        rows.append((name, int(version), int(flags)))
    return rows


def tool_output(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def run_probe(libpath, watch=False, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SIMCUDA_") and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT")}
    if libpath:
        env["LD_LIBRARY_PATH"] = str(libpath)
    if watch:
        env["LD_AUDIT"] = env["LD_PRELOAD"] = str(WATCH)
        # A sanitizer build must accept a preload ahead of its runtime.
        env["ASAN_OPTIONS"] = "verify_asan_link_order=0:" + env.get("ASAN_OPTIONS", "")
    env.update(extra)
    proc = subprocess.run([str(PROBE)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    results = {}
    for line in proc.stdout.splitlines():
        call, *values = line.split()
        results[call] = values
    return results, proc.stderr


@pytest.fixture(scope="module", autouse=True)
def built():
    for path in (SIM / "libcuda.so.1", SIM / "libcudart.so.13", SIM / "libcudart_static.a",
                 PROBE, WATCH):
        if not path.exists():
            pytest.fail(f"{path} is missing: run `make test-bins` first")


def test_static_archive_names_no_driver_function():
    undefined = tool_output("nm", "-u", str(SIM / "libcudart_static.a")).split()
    assert [s for s in undefined if re.match(r"cu[A-Z]", s)] == []
    assert "dlopen" in " ".join(undefined) and "dlsym" in " ".join(undefined)


def test_shared_runtime_does_not_link_the_driver():
    dynamic = tool_output("readelf", "-d", str(SIM / "libcudart.so.13"))
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dynamic)
    assert needed and not [n for n in needed if n.startswith("libcuda")]
    assert "Library soname: [libcudart.so.13]" in dynamic
    undefined = tool_output("nm", "-D", "--undefined-only", str(SIM / "libcudart.so.13"))
    assert not re.search(r"\bcu[A-Z]", undefined)


def test_libraries_export_only_cuda_entry_points():
    drv = tool_output("nm", "-D", "--defined-only", str(SIM / "libcuda.so.1")).split("\n")
    names = [line.split()[-1] for line in drv if line.strip()]
    assert "cuGetProcAddress_v2" in names and "cuMemAlloc_v2" in names
    assert [n for n in names if not re.match(r"cu[A-Z]", n)] == []
    assert "Library soname: [libcuda.so.1]" in tool_output("readelf", "-d",
                                                          str(SIM / "libcuda.so.1"))
    rt = tool_output("nm", "-D", "--defined-only", str(SIM / "libcudart.so.13")).split("\n")
    names = [line.split()[-1] for line in rt if line.strip()]
    # The CUDA entry points, nvcc's registration hooks (__cuda*), and the
    # version node itself (an absolute symbol named after it).
    assert [n for n in names if not n.startswith(("cuda", "__cuda"))] == ["libcudart.so.13"]
    # NVIDIA's version node on every one of them: PyTorch's references are
    # versioned (cudaMalloc@libcudart.so.13) and ld.so refuses a stand-in
    # without it.
    dyn = tool_output("objdump", "-T", str(SIM / "libcudart.so.13")).split("\n")
    versions = {l.split()[-1]: l.split()[-2] for l in dyn if " .text" in l}
    assert versions["cudaMalloc"] == versions["__cudaRegisterFatBinary"] == "libcudart.so.13"
    assert set(versions.values()) == {"libcudart.so.13"}


def test_without_libcuda_the_driver_is_insufficient(tmp_path):
    results, _ = run_probe(libpath=tmp_path)  # an empty directory: no libcuda.so.1
    assert results["cudaGetDeviceCount"] == ["35", "0"]  # cudaErrorInsufficientDriver
    assert results["cudaMalloc"][0] == "35"
    assert results["cudaFree"] == ["35"]


def test_static_runtime_reaches_the_driver_like_nvidia():
    results, err = run_probe(libpath=SIM, watch=True, SIMCUDA_LOG="1", SIMCUDA_MEMORY="64MiB")
    lines = err.splitlines()
    # The driver is opened once, and the only driver symbol ever bound - by
    # dlsym or by the dynamic linker - is cuGetProcAddress_v2.
    opened = [l for l in lines if l.startswith("watch: open ")]
    assert [l for l in opened if l.endswith("/libcuda.so.1")] == \
        [f"watch: open {SIM / 'libcuda.so.1'}"]
    assert [l for l in lines if l.startswith("watch: bind ")] == \
        ["watch: bind cuGetProcAddress_v2"]
    # Then every look-up of NVIDIA's runtime, in order, before cuInit.
    lookups, seen_init = [], False
    for line in lines:
        m = LOOKUP.match(line)
        if m:
            assert not seen_init, "a look-up after cuInit"
            lookups.append((m.group(1), int(m.group(2)), int(m.group(3))))
        elif line.startswith("simcuda: cuInit("):
            seen_init = True
    assert lookups == tsv_rows()
    assert seen_init
    # The interposed cuMemAlloc_v2/cuMemFree_v2 were never called: the runtime
    # used the driver's own functions, obtained through cuGetProcAddress_v2.
    assert not [l for l in lines if "interposed" in l]
    assert results["cudaGetDeviceCount"] == ["0", "1"]
    # 3 MiB is paged: its addresses come from the device's paged window,
    # 256 GiB above its base (src/simgpu/driver/driver_impl.h)
    assert results["cudaMalloc"] == ["0", "0x204000000000"]
    assert results["cudaMemGetInfo"] == ["0", str(60 << 20), str(64 << 20)]
    assert results["cudaFree"] == ["0"]
    assert any(l.startswith("simcuda: cuMemAlloc_v2(3145728) -> 0x204000000000 = CUDA_SUCCESS")
               for l in lines)
