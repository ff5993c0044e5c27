"""The stand-ins of src/simgpu define every symbol the installed PyTorch
wheel imports from NVIDIA's libraries, with the same version node: PyTorch
loads its libraries with RTLD_NOW, so one missing symbol (or a versioned
reference to an unversioned definition) stops `import torch` on the
simulated GPU.  The lists in src/simgpu/*/*.syms are read from this wheel:
a newer wheel that imports more fails here, naming what to add."""
import importlib.util
import pathlib
import subprocess

import pytest

from conftest import BUILD, REAL, ROOT

pytestmark = pytest.mark.skipif(REAL, reason="a real GPU runs NVIDIA's libraries")

# stand-in, its list, version node (None: NCCL is unversioned), how the
# wheel's undefined symbols of that library are told apart
STANDINS = [
    ("libcublas.so.13", "blas/cublas.syms", "libcublas.so.13"),
    ("libcublasLt.so.13", "blas/cublasLt.syms", "libcublasLt.so.13"),
    ("libcudnn.so.9", "dnn/cudnn.syms", "libcudnn.so.9"),
    ("libnccl.so.2", "nccl/nccl.syms", None),
]


def torch_lib():
    spec = importlib.util.find_spec("torch")  # finds, does not import
    return pathlib.Path(spec.origin).parent / "lib"


def readelf(path):
    return subprocess.run(["readelf", "-W", "--dyn-syms", str(path)], check=True,
                          capture_output=True, text=True).stdout.splitlines()


def wheel_imports(node):
    """name of every undefined symbol `name@node` of torch/lib/*.so; for
    node None (NCCL, unversioned) every unversioned undefined `nccl*`."""
    names = set()
    for so in sorted(torch_lib().glob("*.so")):
        for line in readelf(so):
            f = line.split()
            if len(f) < 8 or f[6] != "UND":
                continue
            if node is None:
                if f[7].startswith("nccl") and "@" not in f[7]:
                    names.add(f[7])
            elif f[7].endswith("@" + node):
                names.add(f[7].rsplit("@", 1)[0])
    return names


def defined(path):
    out = {}
    for line in readelf(path):
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[6] != "UND" and f[3] == "FUNC":
            name, _, ver = f[7].partition("@@")
            out[name] = ver or None
    return out


@pytest.mark.parametrize("lib,syms,node", STANDINS, ids=[s[0] for s in STANDINS])
def test_wheel_imports_are_the_standins_list(lib, syms, node):
    imports = wheel_imports(node)
    assert imports, f"the wheel imports nothing @{node}: is {torch_lib()} PyTorch's CUDA wheel?"
    listed = set((ROOT / "src" / "simgpu" / syms).read_text().split())
    assert imports == listed, (f"add to src/simgpu/{syms}: {sorted(imports - listed)}; "
                               f"no longer imported: {sorted(listed - imports)}")
    have = defined(BUILD / "sim" / lib)
    missing = sorted(n for n in imports if n not in have or have[n] != node)
    assert not missing, f"{lib} lacks (at version {node}): {missing}"
