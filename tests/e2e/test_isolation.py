"""The preloaded library must not change the host: no second unwinder in
the global scope (C++ exceptions keep unwinding through libgcc_s), and other
libraries' dlsym(RTLD_NEXT, ...) keeps resolving relative to them."""
import re
import subprocess

from conftest import SAN_RUNTIME, MiB, PROGS, base_env, device

UNWUND = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol "
                    r"`_Unwind_RaiseException'")


def bindings(env, tmp_path):
    env = dict(env, LD_DEBUG="bindings")
    proc = subprocess.run([str(PROGS / "cxx_host"), str(PROGS / "libthrow.so")],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout == "42\n", proc.stderr[-2000:]
    return UNWUND.findall(proc.stderr)


def test_cxx_exceptions_still_unwind_through_libgcc(tmp_path):
    found = bindings(base_env(), tmp_path)
    # every library must get libgcc_s's (a sanitizer runtime's own aside)
    found = [(u, p) for u, p in found if not re.search(r"lib[at]san", u)]
    assert any("libstdc++" in u for u, _ in found), found
    for user, provider in found:
        # under ASan the sanitizer runtime intercepts it, then calls libgcc_s
        ok = "libgcc_s" in provider or (SAN_RUNTIME and provider == SAN_RUNTIME)
        assert ok, (user, provider)


def test_the_check_would_catch_a_global_libunwind(tmp_path):
    # What a libunwind.so.8 in the global scope would do: the same check fails.
    env = base_env(preload_first=["libunwind.so.8"])
    found = bindings(env, tmp_path)
    assert any("libunwind" in provider for _, provider in found), found


def test_rtld_next_of_another_library_after_us(run):
    r = run(["rt_workload", "basic"], extra_preload=[PROGS / "libnext.so"])
    assert "libnext: 2 cudaMalloc calls" in r.stderr
    assert device(r.only())["by_kind"]["device"]["current_bytes"] == 64 * MiB


def test_rtld_next_of_another_library_before_us(run):
    r = run(["rt_workload", "basic"], preload_first=[PROGS / "libnext.so"])
    assert "libnext: 2 cudaMalloc calls" in r.stderr
    assert device(r.only())["by_kind"]["device"]["current_bytes"] == 64 * MiB
