"""No include cycles between the modules of src/ (BRIEF: "no include
cycles").  A module is a directory's <stem>.c with its <stem>.h; module A
depends on B when A.c or A.h includes B.h.  A cycle - oom.c including
snapshot_write.h while snapshot_write.c includes oom.h - means neither can
be understood, tested or changed without the other."""
import os
import re

RUNS_NO_C = True  # reads src/

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")
# where a quoted include is looked for: the including file's directory, then
# the -I directories of the Makefile
SEARCH = [os.path.join(SRC, "common"), os.path.join(SRC, "simgpu", "common"),
          os.path.join(ROOT, "include")]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(path):
    return os.path.splitext(os.path.relpath(path, ROOT))[0]


def includes(path):
    """The files `path` includes with quotes, resolved as the compiler does."""
    d = os.path.dirname(path)
    out = []
    with open(path, errors="replace") as fh:
        for name in INCLUDE.findall(fh.read()):
            for base in [d] + SEARCH:
                target = os.path.normpath(os.path.join(base, name))
                if os.path.exists(target):
                    out.append(target)
                    break
    return out


def graph(src=SRC):
    """Module -> the modules it depends on.  A module is a <stem>.c with its
    <stem>.h; a header without a .c (shared declarations: hooks.h,
    record_impl.h) has no code of its own to be circular with, so it is
    part of whoever includes it: its includes count as theirs."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
             if f.endswith((".c", ".h"))]
    direct = {f: includes(f) for f in files}

    def owner(path):
        stem = os.path.splitext(path)[0]
        return module(path) if os.path.exists(stem + ".c") else None

    deps = {}
    for f in files:
        me = owner(f)
        if me is None:
            continue
        deps.setdefault(me, set())
        seen, todo = set(), list(direct[f])
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            o = owner(t)
            if o is None:  # a header of no module: look through it
                todo.extend(direct.get(t) or includes(t))
            elif o != me:
                deps[me].add(o)
    return deps


def cycles(deps):
    """One cycle (a list of modules, first == last) per strongly connected
    component of more than one module."""
    return [path_within(sorted(c), deps) for c in components(deps)]


def components(deps):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(set(comp))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def path_within(comp, deps):
    """A shortest cycle through comp[0] inside the component (breadth first)."""
    start, members = comp[0], set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(deps[v] & members):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [start]


# Cycles that may stay (none): an entry is one include that closes a cycle,
# and an entry whose include no longer closes one fails too.
KNOWN = set()


def test_no_include_cycles_between_modules():
    deps = graph()
    for a, b in KNOWN:
        deps.get(a, set()).discard(b)
    found = cycles(deps)
    assert not found, "include cycles (break each by moving what both need into " \
        "a module of its own): " + "; ".join(" -> ".join(c) for c in found)


def test_known_cycles_are_still_cycles():
    """Fixing one of KNOWN must remove it from the list."""
    deps = graph()
    for a, b in KNOWN:
        assert b in deps.get(a, ()), f"{a} no longer includes {b}: drop it from KNOWN"
        assert any(c >= {a, b} for c in components(deps)), \
            f"{a} -> {b} no longer closes a cycle: drop it from KNOWN"


def test_the_check_sees_a_two_module_cycle(tmp_path):
    for stem, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"{stem}.h").write_text("/* header */\n")
        (tmp_path / f"{stem}.c").write_text(f'#include "{stem}.h"\n#include "{other}.h"\n')
    (tmp_path / "c.c").write_text('#include "a.h"\n')
    found = cycles(graph(str(tmp_path)))
    assert len(found) == 1 and set(found[0]) == {module(str(tmp_path / "a")),
                                                 module(str(tmp_path / "b"))}, found


def test_the_check_sees_a_longer_cycle(tmp_path):
    ring = ["x", "y", "z"]
    for i, stem in enumerate(ring):
        (tmp_path / f"{stem}.h").write_text(f'#include "{ring[(i + 1) % 3]}.h"\n')
        (tmp_path / f"{stem}.c").write_text(f'#include "{stem}.h"\n')
    found = cycles(graph(str(tmp_path)))
    assert len(found) == 1 and len(found[0]) == 4, found


def test_a_header_without_code_is_part_of_its_includer(tmp_path):
    # a.c includes s.h (a's private declarations), which needs a.h: no cycle
    (tmp_path / "a.h").write_text("/* a */\n")
    (tmp_path / "a.c").write_text('#include "a.h"\n#include "s.h"\n')
    (tmp_path / "s.h").write_text('#include "a.h"\n')
    assert cycles(graph(str(tmp_path))) == []
    # but a cycle through it is one: s.h brings in b.h, and b.c includes a.h
    (tmp_path / "s.h").write_text('#include "a.h"\n#include "b.h"\n')
    (tmp_path / "b.h").write_text("/* b */\n")
    (tmp_path / "b.c").write_text('#include "b.h"\n#include "a.h"\n')
    found = cycles(graph(str(tmp_path)))
    assert len(found) == 1 and set(found[0]) == {module(str(tmp_path / "a")),
                                                 module(str(tmp_path / "b"))}, found
