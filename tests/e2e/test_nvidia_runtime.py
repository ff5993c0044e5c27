"""NVIDIA's own CUDA runtime obtains our wrappers.

tests/nvidia/alloc.cu is built by nvcc (tests/nvidia.mk) against NVIDIA's
real runtime, shared and static, and runs under LD_PRELOAD=libcumemtrace.so
with our simulated libcuda.so.1 on the library path.  NVIDIA's runtime
dlopens "libcuda.so.1" (ours), takes cuGetProcAddress_v2 from it with
dlsym(handle, ...), then resolves 440 driver functions through it: the debug
log must show our wrappers handed out for each allocation function it asks
for, with the ABI variant the (name, version, flags) means.

The real runtime cannot go further on the simulated driver (it needs the
undocumented export tables of cuGetExportTable): every runtime call then
fails, which the program prints.  Skips without nvcc (the programs are not
built) or, for the shared build, without NVIDIA's libcudart.so.13."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT, SAN_RUNTIME, SIM, base_env

CUDA_HOME = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
NVCC = pathlib.Path(os.environ.get("NVCC", CUDA_HOME / "bin" / "nvcc"))
NVIDIA = BUILD / "tests" / "nvidia"
TSV = ROOT / "tests" / "data" / "cudart-13.0-getprocaddress.tsv"
MODES = ("shared", "static")

# What the real runtime 13.0 asks for, and the wrapper it must get:
# (symbol, version, flags) -> wrapper.  Flags 2 is
# CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: the _ptsz variant.
HANDED_OUT = {
    ("cuGetProcAddress", 11030, 0): "cuGetProcAddress",
    ("cuGetProcAddress", 12000, 0): "cuGetProcAddress_v2",
    ("cuMemGetInfo", 3020, 0): "cuMemGetInfo_v2",
    ("cuMemAlloc", 3020, 0): "cuMemAlloc_v2",
    ("cuMemAllocPitch", 3020, 0): "cuMemAllocPitch_v2",
    ("cuMemAllocManaged", 6000, 0): "cuMemAllocManaged",
    ("cuMemFree", 3020, 0): "cuMemFree_v2",
    ("cuMemHostAlloc", 2020, 0): "cuMemHostAlloc",
    ("cuMemFreeHost", 2000, 0): "cuMemFreeHost",
    ("cuMemAllocAsync", 11020, 0): "cuMemAllocAsync",
    ("cuMemAllocAsync", 11020, 2): "cuMemAllocAsync_ptsz",
    ("cuMemFreeAsync", 11020, 0): "cuMemFreeAsync",
    ("cuMemFreeAsync", 11020, 2): "cuMemFreeAsync_ptsz",
    ("cuMemAllocFromPoolAsync", 11020, 0): "cuMemAllocFromPoolAsync",
    ("cuMemAllocFromPoolAsync", 11020, 2): "cuMemAllocFromPoolAsync_ptsz",
}
HAND_OUT = re.compile(r'cumemtrace: debug: cuGetProcAddress\("(\w*)", version (\d+), '
                      r'flags (\d+)\) -> wrapper (\w+)')
DLSYM = re.compile(r'cumemtrace: debug: dlsym\(0x[0-9a-f]+, "cuGetProcAddress_v2"\) '
                   r'-> cumemtrace wrapper')
SIM_LOOKUP = re.compile(r'simcuda: cuGetProcAddress_v2\("([^"]*)", (-?\d+), (\d+)\)')
RESULT = re.compile(r"^(cuda\w+) = (-?\d+) \((\w+)\)$", re.M)


def real_libcudart():
    for d in ("lib64", "targets/x86_64-linux/lib", "lib"):
        p = CUDA_HOME / d / "libcudart.so.13"
        if p.exists():
            return p.resolve()
    return None


def program(mode):
    exe = NVIDIA / f"alloc_{mode}"
    if not exe.exists():
        if shutil.which(str(NVCC)) is None:
            pytest.skip(f"no nvcc at {NVCC}: the programs built against NVIDIA's "
                        f"runtime do not exist (set CUDA_HOME or NVCC)")
        pytest.skip(f"{exe} is not built: run `make test-bins`")
    if mode == "shared" and real_libcudart() is None:
        pytest.skip(f"no NVIDIA libcudart.so.13 under {CUDA_HOME}")
    return exe


def run_alloc(mode, tmp_path, preload=True):
    """Runs alloc_<mode> with our simulated driver on the library path and,
    for the shared build, NVIDIA's libcudart.so.13 ahead of our simulated
    one (a directory holding only that library, first on the path)."""
    exe = program(mode)
    path = [str(SIM)]
    if mode == "shared":
        rt = tmp_path / "nvidia-runtime"
        rt.mkdir(exist_ok=True)
        link = rt / "libcudart.so.13"
        if not link.exists():
            link.symlink_to(real_libcudart())
        path.insert(0, str(rt))
    env = base_env({"LD_LIBRARY_PATH": ":".join(path), "CUMEMTRACE_LOG": "debug",
                    "SIMCUDA_LOG": "1"}, preload=preload)
    if not preload and SAN_RUNTIME:  # an instrumented simulated driver needs it
        env["LD_PRELOAD"] = SAN_RUNTIME
    cwd = tmp_path / ("traced" if preload else "plain")
    cwd.mkdir(exist_ok=True)
    return subprocess.run([str(exe)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def describe(p):
    """Exit status, stdout and stderr without the simulated driver's 440
    look-up lines."""
    err = [line for line in p.stderr.splitlines() if not SIM_LOOKUP.match(line)]
    status = (f"killed by signal {-p.returncode}" if p.returncode < 0
              else f"exit {p.returncode}")
    return (f"{status}\nstdout:\n{p.stdout}\nstderr (look-ups left out):\n"
            + "\n".join(err[-60:]))


@pytest.mark.parametrize("mode", MODES)
def test_nvidia_runtime_is_the_one_loaded(mode, tmp_path):
    p = run_alloc(mode, tmp_path)
    loaded = re.findall(r"^start: loaded (\S+)$", p.stdout, re.M)
    runtimes = [pathlib.Path(x).resolve() for x in loaded
                if pathlib.Path(x).name.startswith("libcudart")]
    if mode == "shared":
        assert runtimes == [real_libcudart()], describe(p)
    else:
        assert runtimes == [], describe(p)  # the runtime is inside the program
    # and the driver NVIDIA's runtime dlopened is our simulated one
    assert SIM_LOOKUP.search(p.stderr), describe(p)


@pytest.mark.parametrize("mode", MODES)
def test_nvidia_runtime_obtains_our_wrappers(mode, tmp_path):
    p = run_alloc(mode, tmp_path)
    assert DLSYM.search(p.stderr), describe(p)
    got = {}
    for sym, ver, flags, wrapper in HAND_OUT.findall(p.stderr):
        got.setdefault((sym, int(ver), int(flags)), set()).add(wrapper)
    missing = {k: v for k, v in HANDED_OUT.items() if got.get(k) != {v}}
    assert not missing, (f"expected hand-outs missing or wrong: {missing}\n"
                         f"got: {got}\n{describe(p)}")
    for (sym, _, _), wrappers in got.items():
        for w in wrappers:  # never another function's wrapper
            assert re.fullmatch(re.escape(sym) + r"(_v\d+)?(_ptsz)?", w), (sym, w)


def recorded_lookups():
    rows = []
    for line in TSV.read_text().splitlines():
        sym, ver, flags = line.split("\t")
        rows.append((sym, int(ver), int(flags)))
    return rows


@pytest.mark.parametrize("mode", MODES)
def test_nvidia_runtime_lookups_match_recorded_data(mode, tmp_path):
    """The simulated driver logs each cuGetProcAddress_v2 call: the real
    runtime's look-ups, made through our wrapper, are exactly those of
    tests/data/cudart-13.0-getprocaddress.tsv, in order (anything after
    them would be our library's own look-ups)."""
    p = run_alloc(mode, tmp_path)
    m = re.search(r"^runtime version (\d+)$", p.stdout, re.M)
    if m is None or m.group(1) != "13000":
        pytest.skip(f"the recorded look-ups are CUDA 13.0's; this runtime says "
                    f"{m.group(1) if m else 'nothing'}")
    seen = [(s, int(v), int(f)) for s, v, f in SIM_LOOKUP.findall(p.stderr)]
    want = recorded_lookups()
    assert seen[:len(want)] == want, describe(p)


@pytest.mark.parametrize("mode", MODES)
def test_nvidia_runtime_fails_the_same_with_and_without_us(mode, tmp_path):
    """The runtime gives up on the simulated driver; under our library the
    program must still run to its end and see exactly the same results."""
    plain = run_alloc(mode, tmp_path, preload=False)
    assert plain.returncode == 0, describe(plain)
    results = RESULT.findall(plain.stdout)
    assert [r[0] for r in results] == ["cudaRuntimeGetVersion", "cudaMalloc",
                                       "cudaMallocHost", "cudaMallocAsync"], describe(plain)
    assert plain.stdout.endswith("done\n"), describe(plain)
    traced = run_alloc(mode, tmp_path)
    assert traced.returncode == 0, (
        f"the program died under libcumemtrace.so, not without it:\n{describe(traced)}")
    assert RESULT.findall(traced.stdout) == results, describe(traced)
    assert traced.stdout.endswith("done\n"), describe(traced)
