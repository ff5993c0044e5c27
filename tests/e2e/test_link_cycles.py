"""No call loops between the units of src/, drawn from the objects the
build made: unit A depends on unit B when an object of A references (nm:
undefined) a global symbol an object of B defines.  Unlike the include
check (test_include_cycles.py), a loop cannot hide in a header here: an
inline function in hooks.h that calls into init.c is a reference from every
object that uses it.

A unit is one .c file, except that the files sharing one private header
<unit>_impl.h in their folder (record_impl.h: record.c, record_stacks.c,
record_vmm.c, record_view.c) are one unit: one table split by
concern, and the header is what they share and nobody else includes.  A
loop inside a unit is no loop; any loop between units fails the test.

A reference is followed only within the program the object is linked
into: src/preload (the library) and src/cli (the command), each with
src/common, and each library of src/simgpu, the simulated device
(src/simgpu/driver, runtime, blas, dnn, nccl, nvml), with src/common and
src/simgpu/common."""
import functools
import os
import re
import subprocess

from conftest import BUILD, ROOT
from needs import missing
from test_include_cycles import components  # the same Tarjan, on units

RUNS_NO_C = True  # reads the build's objects with nm

SRC = os.path.join(str(ROOT), "src")
OBJ = os.path.join(str(BUILD), "obj", "src")
IMPL = re.compile(r'^\s*#\s*include\s+"(\w+)_impl\.h"', re.M)

# Call edges (unit, unit) that close a loop today; the graph is checked
# without them.  An entry that no longer closes a loop fails
# test_known_loops_are_still_loops: drop it then, so the list only shrinks.
KNOWN = set()


def symbols(obj):
    """(defined global symbols, undefined symbols) of one object."""
    st = os.stat(obj)
    return _symbols(obj, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _symbols(obj, mtime_ns, size):
    # once per object and version: three tests read the whole build's graph
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in "Uw":
            undefined.add(name)
        elif kind.isupper() or kind == "u":
            defined.add(name)
    return defined, undefined


def unit_of(module, src):
    """The unit of an object (its path under obj/src, without .o): the
    folder's <unit> when its source includes <unit>_impl.h beside it."""
    path = os.path.join(src, module + ".c")
    if os.path.exists(path):
        with open(path, errors="replace") as fh:
            for stem in IMPL.findall(fh.read()):
                folder = os.path.dirname(module)
                if os.path.exists(os.path.join(src, folder, stem + "_impl.h")):
                    return os.path.join(folder, stem)
    return module


SHARED = "common"
SIM = "simgpu"
SIM_SHARED = os.path.join(SIM, "common")
# The way up into start-up (hooks.h, hook_enter): a wrapper starts the
# library on first use - it may run before our constructor - tells start-up
# of the process's first CUDA call, and serves a dump a signal asked for.
# References to these are up by design and not drawn; any other reference
# into start-up is.
ENTRY = {"hooks_init_once", "hooks_first_touch", "hooks_service_dump_request"}


def program_of(unit):
    """The program an object is linked into: its first folder, or under
    src/simgpu its first two (each folder there is a library of its own)."""
    parts = unit.split(os.sep)
    if parts[0] == SIM and len(parts) > 2:
        return os.path.join(SIM, parts[1])
    return parts[0] if len(parts) > 1 else ""


def linked_with(u, v):
    """Whether unit v's objects are in unit u's program."""
    pv, pu = program_of(v), program_of(u)
    return pv in (pu, SHARED) or (pu.startswith(SIM + os.sep) and pv == SIM_SHARED)


def graph(obj=OBJ, src=SRC, with_why=False):
    """Unit -> the units it calls (or whose data it uses), within each
    program."""
    defs, refs = {}, {}
    for d, _, fs in os.walk(obj):
        for f in fs:
            if not f.endswith(".o"):
                continue
            module = os.path.splitext(os.path.relpath(os.path.join(d, f), obj))[0]
            unit = unit_of(module, src)
            defined, undefined = symbols(os.path.join(d, f))
            refs.setdefault(unit, set()).update(undefined - ENTRY)
            for s in defined:
                defs.setdefault(s, set()).add(unit)
    deps = {u: set() for u in refs}
    why = {}
    for u, undefined in refs.items():
        for s in undefined:
            for v in defs.get(s, ()):
                if v != u and linked_with(u, v):
                    deps[u].add(v)
                    why.setdefault((u, v), set()).add(s)
    return (deps, why) if with_why else deps


def describe(comp, deps, why):
    return "{" + ", ".join(sorted(comp)) + "}: " + "; ".join(
        f"{a} -> {b} ({', '.join(sorted(why[(a, b)])[:3])})"
        for a in sorted(comp) for b in sorted(deps[a] & comp))


def built():
    if not os.path.isdir(os.path.join(OBJ, "preload")):
        missing(f"the objects under {OBJ}", "make builds them")


def test_no_call_loops_between_units():
    built()
    deps, why = graph(with_why=True)
    for a, b in KNOWN:
        deps.get(a, set()).discard(b)
    # every program is in the graph, the simulated device's libraries too
    for program in ("preload", "cli", "simgpu/driver", "simgpu/runtime", "simgpu/nccl"):
        assert any(program_of(u) == program for u in deps), program
    found = components(deps)
    assert not found, "call loops between units (move what both need into a " \
        "unit of its own, below both): " + " | ".join(describe(c, deps, why) for c in found)


def test_known_loops_are_still_loops():
    """Cutting one of KNOWN must remove it from the list."""
    built()
    deps = graph()
    comps = components(deps)
    stale = [f"{a} -> {b}" for a, b in sorted(KNOWN)
             if b not in deps.get(a, ()) or not any({a, b} <= c for c in comps)]
    assert not stale, "no longer a call closing a loop, drop from KNOWN: " + "; ".join(stale)


# ---- the check itself, on objects compiled here ----

def compile_units(tmp_path, files):
    src, obj = tmp_path / "src", tmp_path / "obj"
    for name, text in files.items():
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for name in files:
        if name.endswith(".c"):
            o = obj / (os.path.splitext(name)[0] + ".o")
            o.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cc", "-c", "-o", str(o), str(src / name)], check=True,
                           cwd=str(src / os.path.dirname(name)))
    return graph(str(obj), str(src))


def test_the_check_sees_a_two_unit_loop(tmp_path):
    deps = compile_units(tmp_path, {
        "a.c": "void b(void); void a(void) { b(); }\n",
        "b.c": "void a(void); void b(void) { a(); }\n",
        "c.c": "void a(void); void c(void) { a(); }\n"})
    assert components(deps) == [{"a", "b"}], deps


def test_the_check_sees_a_loop_through_a_header(tmp_path):
    # x.c never names y's function: the inline in the header does
    deps = compile_units(tmp_path, {
        "x.h": "void y_go(void);\nstatic inline void x_enter(void) { y_go(); }\n",
        "x.c": '#include "x.h"\nvoid x_run(void) { x_enter(); }\n',
        "y.c": "void x_run(void); void y_go(void) {}\nvoid y_start(void) { x_run(); }\n"})
    assert components(deps) == [{"x", "y"}], deps


def test_the_check_sees_a_loop_through_data(tmp_path):
    deps = compile_units(tmp_path, {
        "p.c": "extern int q_flag; int p_flag; int p(void) { return q_flag; }\n",
        "q.c": "extern int p_flag; int q_flag; int q(void) { return p_flag; }\n"})
    assert components(deps) == [{"p", "q"}], deps


def test_files_sharing_a_private_header_are_one_unit(tmp_path):
    ring = {
        "t/t_impl.h": "void t_a(void); void t_b(void);\n",
        "t/t.c": '#include "t_impl.h"\nvoid t_a(void) { t_b(); }\n',
        "t/t_more.c": '#include "t_impl.h"\nvoid t_b(void) {}\nvoid t_c(void) { t_a(); }\n'}
    assert components(compile_units(tmp_path, ring)) == []
    # but a loop between that unit and another one is a loop
    ring["t/u.c"] = "void t_a(void); void u(void) { t_a(); }\n"
    ring["t/t_more.c"] += "void u(void); void t_d(void) { u(); }\n"
    assert components(compile_units(tmp_path, ring)) == [{"t/t", "t/u"}]


def test_references_stay_within_a_program(tmp_path):
    # the command and the library both define cudaFree-like names; a call
    # in one never reaches the other (they are never linked together),
    # but both reach what src/common holds
    deps = compile_units(tmp_path, {
        "common/c.c": "void c_help(void) {}\n",
        "lib/l.c": "void c_help(void); void shared_name(void) { c_help(); }\n",
        "cmd/m.c": "void shared_name(void); void c_help(void);\n"
                   "void m(void) { shared_name(); c_help(); }\n",
        "cmd/k.c": "void m(void); void shared_name(void) { m(); }\n"})
    assert deps["lib/l"] == {"common/c"} and deps["cmd/m"] == {"cmd/k", "common/c"}, deps
    assert components(deps) == [{"cmd/k", "cmd/m"}], deps


def test_each_simulated_library_is_a_program(tmp_path):
    # src/simgpu's folders are libraries of their own, linked with
    # simgpu/common (and common): a stand-in's call into the runtime's
    # symbols is not followed (another .so), a loop inside one library is
    deps = compile_units(tmp_path, {
        "simgpu/common/s.c": "void s_help(void) {}\n",
        "simgpu/runtime/r.c": "void s_help(void); void cudaMalloc_(void) { s_help(); }\n",
        "simgpu/blas/b.c": "void cudaMalloc_(void); void s_help(void);\n"
                           "void b(void) { cudaMalloc_(); s_help(); }\n",
        "simgpu/dnn/d1.c": "void d2(void); void d1(void) { d2(); }\n",
        "simgpu/dnn/d2.c": "void d1(void); void d2(void) { d1(); }\n"})
    assert deps["simgpu/blas/b"] == {"simgpu/common/s"}, deps
    assert deps["simgpu/runtime/r"] == {"simgpu/common/s"}, deps
    assert components(deps) == [{"simgpu/dnn/d1", "simgpu/dnn/d2"}], deps


def test_a_chain_is_no_loop(tmp_path):
    deps = compile_units(tmp_path, {
        "top.c": "void mid(void); void top(void) { mid(); }\n",
        "mid.c": "void low(void); void mid(void) { low(); }\n",
        "low.c": "void low(void) {}\n"})
    assert components(deps) == [] and deps["top"] == {"mid"}, deps


def test_only_the_entry_into_start_up_is_not_drawn(tmp_path):
    files = {
        "life/init.c": "void w_setup(void);\nvoid hooks_init_once(void) { w_setup(); }\n"
                       "void init_other(void) {}\n",
        "life/w.c": "void hooks_init_once(void);\nvoid w_setup(void) {}\n"
                    "void w_call(void) { hooks_init_once(); }\n"}
    assert components(compile_units(tmp_path, files)) == []
    files["life/w.c"] += "void init_other(void);\nvoid w_more(void) { init_other(); }\n"
    assert components(compile_units(tmp_path, files)) == [{"life/init", "life/w"}]


def test_the_command_layer_is_above_the_model():
    """The readers, the model and the base never call up into the command
    layer (cli.c, cli_usage.c, main.c) or a view: options are parsed, and
    usage errors printed, above them."""
    built()
    deps, why = graph(with_why=True)
    top = {"cli/cli", "cli/cli_usage", "cli/main"}
    bad = [f"{u} -> {v} ({', '.join(sorted(why[(u, v)])[:3])})" for u in sorted(deps)
           if u.startswith(("cli/model/", "cli/read/", "cli/base/"))
           for v in sorted(deps[u]) if v in top or v.startswith("cli/views/")]
    assert not bad, "lower layers calling up: " + "; ".join(bad)
