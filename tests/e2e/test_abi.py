"""Our own declaration of the CUDA ABI matches NVIDIA's headers exactly: every
prototype, type layout and value, checked by
tests/abi/check_abi.py whenever a toolkit's headers are installed
($CUDA_INCLUDE, or $CUDA_HOME/include, default /usr/local/cuda/include).

The failure cases run the check on a copy of src/common and src/preload with
one deliberate mistake each, and show that it is caught - including the one
only the C++ pass can see (an enum parameter declared unsigned int)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

RUNS_NO_C = True  # compiles its own probes of our headers with the plain compiler

CUDA_HOME = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
CUDA_INCLUDE = pathlib.Path(os.environ.get("CUDA_INCLUDE", CUDA_HOME / "include"))
CHECK = ROOT / "tests" / "abi" / "check_abi.py"
API_H = ROOT / "src" / "common" / "cuda_api.h"

pytestmark = pytest.mark.skipif(
    not ((CUDA_INCLUDE / "cuda.h").is_file() and
         (CUDA_INCLUDE / "cuda_runtime_api.h").is_file()),
    reason=f"no CUDA toolkit headers (cuda.h, cuda_runtime_api.h) in "
           f"{CUDA_INCLUDE}: set CUDA_HOME or CUDA_INCLUDE")


def check(out, root=ROOT, only=None):
    cmd = [sys.executable, str(CHECK), "--cuda-include", str(CUDA_INCLUDE),
           "--root", str(root), "--out", str(out),
           "--cc", os.environ.get("CC", "cc"), "--cxx", os.environ.get("CXX", "c++")]
    if only:
        cmd += ["--only", only]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_declarations_match_nvidia(tmp_path):
    p = check(tmp_path)
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert "abi: ok:" in p.stdout


def test_every_prototype_is_checked(tmp_path):
    """The generated list holds every prototype of cuda_api.h (counted here
    by a second, independent reading of the header) and the four of
    resolve.h, so none escapes the redeclaration check."""
    p = check(tmp_path, only="functions")
    assert p.returncode == 0, p.stderr
    checked = (tmp_path / "functions.txt").read_text().split()
    assert len(checked) == len(set(checked)), checked
    # a prototype starts at column 0: [const] type [*]name(
    ours = re.findall(r"^(?:const\s+)?\w+\s*\*?\s*(cu\w+)\(", API_H.read_text(), re.M)
    assert ours and sorted(ours) == sorted(checked[:len(ours)]), (ours, checked)
    assert checked[len(ours):] == ["cuCtxPushCurrent", "cuCtxPopCurrent",
                                   "cudaGetDriverEntryPoint_ptsz",
                                   "cudaGetDriverEntryPointByVersion_ptsz"]
    for n in ("cuMemAlloc", "cuMemAlloc_v2", "cuMemAllocAsync_ptsz",
              "cudaMallocAsync", "cudaMallocAsync_ptsz"):
        assert n in checked


def layout_of(out):
    return (out / "probe_nvidia.txt").read_text().splitlines()


def test_layout_covers_every_name(tmp_path):
    """Every struct, field, typedef, enumerator and #define of our headers
    has a line in NVIDIA's probe output."""
    assert check(tmp_path, only="layout").returncode == 0
    lines = "\n".join(layout_of(tmp_path))
    for needle in ("type CUresult: size 4", "enumerator CUDA_ERROR_OUT_OF_MEMORY = 2 ",
                   "record struct CUmemPoolProps_st: size 88 align 8",
                   "field struct CUmemAllocationProp_st.allocFlags.usage: offset 26 size 2",
                   "type CUdeviceptr_v1: size 4", "define cudaHostAllocMapped = 2",
                   "enumerator CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115 ",
                   "type enum cudaDriverEntryPointQueryResult:"):
        assert needle in lines
    types_h = (ROOT / "src" / "common" / "cuda_types.h").read_text()
    for name in re.findall(r"^#define[ \t]+(\w+)[ \t]+\S", types_h, re.M):
        assert f"define {name} = " in lines
    for name in re.findall(r"^[ \t]+(\w+)[ \t]*=", types_h, re.M):
        assert f"enumerator {name} = " in lines


# (file, text, replacement, which check, expected exit status, what the
#  report must say)
MUTATIONS = {
    "parameter type": (
        "src/common/cuda_api.h",
        "cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)",
        "cuMemAlloc_v2(CUdeviceptr *dptr, unsigned int bytesize)",
        "functions", 1, r"conflicting types for .cuMemAlloc_v2"),
    "return type": (
        "src/common/cuda_api.h",
        "CUresult cuMemFreeHost(void *p);",
        "cudaError_t cuMemFreeHost(void *p);",
        "functions", 1, r"conflicting types for .cuMemFreeHost"),
    "enum parameter as unsigned (C++ only)": (
        "src/common/cuda_api.h",
        "CUmemAllocationGranularity_flags option);",
        "unsigned int option);",
        "functions", 1, r"\(C\+\+\):[\s\S]*conflicting declaration of C function "
                        r".CUresult cuMemGetAllocationGranularity"),
    "name NVIDIA does not declare": (
        "src/common/cuda_api.h",
        "CUresult cuMemFreeHost(void *p);",
        "CUresult cuMemFreeHost(void *p);\nCUresult cuMemFreeHostNotInCuda(void *p);",
        "functions", 1, r"not declared by NVIDIA's headers \(so they cannot be "
                        r"checked\): cuMemFreeHostNotInCuda"),
    "prototype hidden from the check": (
        "src/common/cuda_api.h",
        "} CUdevice_attribute;",
        "} CUdevice_attribute;\nCUresult cuHiddenFromCheck(int x);",
        "functions", 2, r"hidden from the check by CUMEMTRACE_OFFICIAL_CUDA: "
                        r"cuHiddenFromCheck"),
    "resolve.h prototype": (
        "src/preload/interpose/resolve.h",
        "void **funcPtr, unsigned long long flags,\n    enum",
        "void **funcPtr, unsigned int flags,\n    enum",
        "functions", 1, r"conflicting types for .cudaGetDriverEntryPoint_ptsz"),
    "enumerator value": (
        "src/common/cuda_types.h",
        "CU_MEM_HANDLE_TYPE_FABRIC = 0x8,",
        "CU_MEM_HANDLE_TYPE_FABRIC = 0x10,",
        "layout", 1, r"-enumerator CU_MEM_HANDLE_TYPE_FABRIC = 8 .*\n"
                     r"\+enumerator CU_MEM_HANDLE_TYPE_FABRIC = 16 "),
    "struct size": (
        "src/common/cuda_types.h",
        "unsigned char reserved[54];",
        "unsigned char reserved[56];",
        "layout", 1, r"\+record struct CUmemPoolProps_st: size 96"),
    "typedef signedness": (
        "src/common/cuda_types.h",
        "typedef int CUdevice_v1;",
        "typedef unsigned int CUdevice_v1;",
        "layout", 1, r"-type CUdevice_v1: size 4 align 4 i\n[\s\S]*"
                     r"\+type CUdevice_v1: size 4 align 4 j"),
    "#define value": (
        "src/common/cuda_types.h",
        "#define cudaHostAllocMapped 0x02",
        "#define cudaHostAllocMapped 0x08",
        "layout", 1, r"\+define cudaHostAllocMapped = 8"),
}


@pytest.mark.parametrize("case", MUTATIONS)
def test_check_fails_on_a_mistake(tmp_path, case):
    path, old, new, only, status, expect = MUTATIONS[case]
    root = tmp_path / "tree"
    for d in ("src/common", "src/preload"):
        shutil.copytree(ROOT / d, root / d)
    f = root / path
    text = f.read_text()
    assert text.count(old) == 1, (
        f"{path} no longer holds {old!r} exactly once: update this test's mistake")
    f.write_text(text.replace(old, new))
    p = check(tmp_path / "out", root=root, only=only)
    assert p.returncode == status, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert re.search(expect, p.stderr), f"expected /{expect}/ in:\n{p.stderr}"
    if case.endswith("(C++ only)"):
        assert "(C):" not in p.stderr  # why the C++ pass exists
