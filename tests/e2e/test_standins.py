"""The simulated GPU's stand-ins for NVIDIA's libraries (src/simgpu/blas,
...): each exports exactly its symbol list (the imports of PyTorch's PyPI
wheel, checked against the installed wheel by tests/torch/test_standins.py)
under NVIDIA's soname and version node, and nothing else."""
import subprocess

import pytest

from conftest import ROOT, SIM, run_env

# (library, its list, the version node: None for an unversioned library)
STANDINS = [
    ("libcublas.so.13", "blas/cublas.syms", "libcublas.so.13"),
    ("libcublasLt.so.13", "blas/cublasLt.syms", "libcublasLt.so.13"),
    ("libcudnn.so.9", "dnn/cudnn.syms", "libcudnn.so.9"),
]


def dynamic(path):
    """(soname, {name: version or None} of the defined dynamic symbols)."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", "-d", str(path)], check=True,
                         capture_output=True, text=True).stdout
    soname, syms = None, {}
    for line in out.splitlines():
        if "(SONAME)" in line:
            soname = line.split("[", 1)[1].rstrip("]")
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[6] not in ("UND", "ABS") and f[3] in ("FUNC", "OBJECT"):
            name, _, ver = f[7].partition("@@")
            syms[name] = ver or None
    return soname, syms


@pytest.mark.parametrize("lib,syms,node", STANDINS, ids=[s[0] for s in STANDINS])
def test_standin_exports_exactly_its_list_under_nvidias_names(lib, syms, node):
    wanted = set((ROOT / "src" / "simgpu" / syms).read_text().split())
    soname, have = dynamic(SIM / lib)
    assert soname == lib
    assert set(have) == wanted, (sorted(set(have) - wanted), sorted(wanted - set(have)))
    wrong = {n: v for n, v in have.items() if v != node}
    assert not wrong, f"not under version node {node}: {sorted(wrong)[:5]}"


# NVIDIA's cuBLAS answers CUBLAS_STATUS_NOT_INITIALIZED (1) to a NULL handle
# in every entry point that takes one; the host-side copies take none.  Run
# in a process of its own: an instrumented build's stand-in needs its
# sanitizer runtime loaded first, which pytest's own process is not.
CUBLAS_HANDLES = r"""
import ctypes, sys
blas = ctypes.CDLL(sys.argv[1])
for name in ("cublasSgemm_v2", "cublasGemmEx", "cublasSgemmBatched",
             "cublasSetStream_v2", "cublasSetWorkspace_v2"):
    fn = getattr(blas, name)
    fn.restype = ctypes.c_int
    assert fn(None, None, None) == 1, name
handle = ctypes.c_void_p()
assert blas.cublasCreate_v2(ctypes.byref(handle)) == 0
assert blas.cublasSgemm_v2(handle) == 0
assert blas.cublasGemmEx(handle) == 0
assert blas.cublasDestroy_v2(handle) == 0
assert blas.cublasGetMatrixAsync(2, 2, 4, None, 2, None, 2, None) == 0
print("ok")
"""


def test_cublas_entry_points_refuse_a_handle_that_is_not_live():
    r = subprocess.run(["/usr/bin/python3", "-c", CUBLAS_HANDLES, str(SIM / "libcublas.so.13")],
                       env=run_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
