#!/usr/bin/env python3
"""check_abi.py - our CUDA declarations against NVIDIA's headers.

We declare the CUDA ABI ourselves (src/common/cuda_types.h, cuda_api.h and
two prototypes in src/preload/interpose/resolve.h) so the build never needs the
toolkit.  When a toolkit is installed, this script proves the declarations
still match NVIDIA's:

  functions  tests/abi/functions.c, compiled as C and as C++, includes
             NVIDIA's cuda.h + cuda_runtime_api.h, then our prototypes: any
             differing parameter or return type is a compile error.  The list
             of our prototypes is read from our headers, and each one must be
             declared by NVIDIA (and not be a macro) before ours is seen.
  layout     tests/abi/probe.cpp prints size/alignment/type of every typedef,
             struct and field, and the value of every enumerator and #define
             of our headers; it is built once with NVIDIA's headers and once
             with ours, and the outputs must be identical.

The names come from parsing our headers after the preprocessor; a construct
the parser does not know is an error, never a silent omission.

Usage: check_abi.py --cuda-include DIR [--root DIR] [--out DIR] [--cc CC]
                    [--cxx CXX] [--only functions|layout]
Exit status 0 when everything matches, 1 on a mismatch, 2 on a usage or
parse error.  Generated files and both probe outputs stay in --out.
"""
import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# CUDA entry points are cu* / cuda* followed by a capital letter.
CUDA_NAME = re.compile(r"^cu(da)?[A-Z]")
TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<number>(?:0[xX][0-9A-Fa-f]+|\d+)[uUlL]*)
  | (?P<punct><<|>>|->|\.\.\.|.)
""", re.X)


class AbiError(Exception):
    """A problem with the inputs (not a mismatch): exit status 2."""


class Tok:
    __slots__ = ("text", "file", "line")

    def __init__(self, text, file, line):
        self.text, self.file, self.line = text, file, line

    def where(self, root):
        return f"{os.path.relpath(self.file, root)}:{self.line}"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def preprocess(cc, args, header, keep, strict=True):
    """Preprocesses `header` and returns (tokens, defines) of the text that
    comes from the files in `keep` (absolute paths): tokens carry file:line,
    defines are (name, value, Tok) from -dD.  `strict`: a function-like macro
    or another directive in those files is an error (they would escape the
    layout check)."""
    cmd = shlex.split(cc) + ["-E", "-dD", "-x", "c", "-std=c11"] + args + [header]
    p = run(cmd)
    if p.returncode != 0:
        raise AbiError(f"cannot preprocess {header}: {' '.join(cmd)}\n{p.stderr}")
    keep = {os.path.realpath(k) for k in keep}
    toks, defines = [], []
    cur, line = None, 0
    for raw in p.stdout.splitlines():
        m = re.match(r'#\s*(\d+)\s+"([^"]*)"', raw)
        if m:
            line, name = int(m.group(1)), m.group(2)
            cur = os.path.realpath(name) if not name.startswith("<") else None
            continue
        here = cur in keep
        if raw.startswith("#"):
            d = re.match(r"#define\s+(\w+)(\([^)]*\))?\s*(.*)$", raw)
            if here and d and strict:
                if d.group(2):
                    raise AbiError(f"{cur}:{line}: function-like macro "
                                   f"{d.group(1)} is not understood by check_abi.py")
                defines.append((d.group(1), d.group(3).strip(), Tok(d.group(1), cur, line)))
            elif here and strict and not d and not raw.startswith(("#undef", "#pragma")):
                raise AbiError(f"{cur}:{line}: unexpected directive {raw!r}")
            line += 1  # -dD prints each directive on its own source line
            continue
        if here:
            pos = 0
            while pos < len(raw):
                t = TOKEN.match(raw, pos)
                pos = t.end()
                if t.lastgroup != "space":
                    toks.append(Tok(t.group(), cur, line))
        line += 1
    return toks, defines


def statements(toks):
    """Splits tokens into top-level statements: up to a ';' outside braces
    and parentheses, or a function body's closing brace."""
    out, cur, depth = [], [], 0
    for t in toks:
        cur.append(t)
        if t.text in "({[":
            depth += 1
        elif t.text in ")}]":
            depth -= 1
            if depth == 0 and t.text == "}" and is_function_body(cur):
                out.append(cur)
                cur = []
        elif t.text == ";" and depth == 0:
            out.append(cur)
            cur = []
    if cur:
        raise AbiError(f"{cur[0].file}:{cur[0].line}: unterminated declaration")
    return out


def is_function_body(stmt):
    texts = [t.text for t in stmt]
    i = texts.index("{")
    return i > 0 and texts[i - 1] == ")" and texts[0] not in ("typedef", "struct",
                                                               "enum", "union")


def split_top(toks, sep):
    """Splits a token list on `sep` at nesting depth 0."""
    parts, cur, depth = [], [], 0
    for t in toks:
        if t.text in "({[":
            depth += 1
        elif t.text in ")}]":
            depth -= 1
        if t.text == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return [p for p in parts if p]


def matching(toks, i):
    """Index of the bracket closing toks[i]."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text in "({[":
            depth += 1
        elif toks[j].text in ")}]":
            depth -= 1
            if depth == 0:
                return j
    raise AbiError(f"{toks[i].file}:{toks[i].line}: unbalanced brackets")


def prototype_name(stmt):
    """The declared name if `stmt` is a function prototype (no body), else
    None."""
    texts = [t.text for t in stmt]
    if texts[0] in ("typedef", "struct", "enum", "union", "static") or "(" not in texts:
        return None
    i = texts.index("(")
    if i == 0 or not re.match(r"[A-Za-z_]\w*$", texts[i - 1]) or texts[-1] != ";":
        return None
    return stmt[i - 1]


def declarator_name(toks, what):
    """Name declared by a simple declaration (`T *name`, `T name[N]`)."""
    texts = [t.text for t in toks]
    bad = {"(", ":", ","} & set(texts)
    if bad:
        raise AbiError(f"{toks[0].file}:{toks[0].line}: {what} "
                       f"{' '.join(texts)!r} uses {sorted(bad)}: not understood "
                       f"by check_abi.py (extend it)")
    if texts[-1] == "]":
        texts = texts[:texts.index("[")]
    if not re.match(r"[A-Za-z_]\w*$", texts[-1]):
        raise AbiError(f"{toks[0].file}:{toks[0].line}: no name in {what} "
                       f"{' '.join(t.text for t in toks)!r}")
    return texts[-1]


class Layout:
    """What probe.cpp must print, in header order."""

    def __init__(self):
        self.lines = []     # abi_list.h lines
        self.names = []     # every name covered, for the summary

    def type(self, label, spelled):
        self.lines.append(f'ABI_TYPE("{label}", {spelled})')
        self.names.append(label)

    def record(self, label, spelled, fields):
        self.lines.append(f'ABI_RECORD("{label}", {spelled})')
        self.names.append(label)
        for f in fields:
            self.lines.append(f'ABI_FIELD("{label}", {spelled}, {f})')

    def enumerator(self, name):
        self.lines.append(f"ABI_ENUMERATOR({name})")
        self.names.append(name)

    def define(self, name):
        self.lines.append(f"ABI_DEFINE({name})")
        self.names.append(name)


def fields_of(body, prefix=""):
    """Member designators (a, b.c for nested anonymous-type members) of a
    struct body."""
    out = []
    for decl in split_top(body, ";"):
        texts = [t.text for t in decl]
        if texts[0] in ("struct", "union") and "{" in texts:
            i = texts.index("{")
            j = matching(decl, i)
            rest = decl[j + 1:]
            if len(rest) != 1:
                raise AbiError(f"{decl[0].file}:{decl[0].line}: nested "
                               f"{texts[0]} must declare exactly one member")
            name = rest[0].text
            out.append(prefix + name)
            out += fields_of(decl[i + 1:j], prefix + name + ".")
        else:
            out.append(prefix + declarator_name(decl, "member"))
    return out


def parse_types(stmts, layout):
    """Fills `layout` from our headers' statements; returns the names of the
    function prototypes met on the way."""
    protos = []
    for st in stmts:
        texts = [t.text for t in st]
        where = f"{st[0].file}:{st[0].line}"
        if prototype_name(st) is not None:
            protos.append(prototype_name(st).text)
            continue
        if len(texts) == 3 and texts[0] == "struct" and texts[2] == ";":
            continue  # a forward declaration: an opaque type, no layout
        typedef = texts[0] == "typedef"
        head = texts[1:] if typedef else texts
        if head and head[0] in ("enum", "struct", "union") and "{" in texts:
            kind = head[0]
            i = texts.index("{")
            j = matching(st, i)
            tag = texts[i - 1] if texts[i - 1] != kind else None
            after = [t for t in st[j + 1:] if t.text != ";"]
            if kind == "union":
                raise AbiError(f"{where}: unions are not understood by check_abi.py")
            if typedef:
                name = declarator_name(after, "typedef")
                if after[0].text == "*" or len(after) != 1:
                    raise AbiError(f"{where}: typedef {kind} must name the type itself")
            elif after or tag is None:
                raise AbiError(f"{where}: {kind} definition must be a bare tagged one")
            spelled = f"{kind} {tag}" if tag else name
            if kind == "enum":
                if typedef:
                    layout.type(name, name)
                else:
                    layout.type(spelled, spelled)
                for e in split_top(st[i + 1:j], ","):
                    layout.enumerator(e[0].text)
            else:
                layout.record(spelled, spelled, fields_of(st[i + 1:j]))
                if typedef:
                    layout.type(name, name)
            continue
        if typedef and texts[-1] == ";" and "(" in texts:
            # typedef R (*name)(params);  a function pointer type
            i = texts.index("(")
            if texts[i + 1:i + 2] != ["*"] or texts[i + 3:i + 4] != [")"]:
                raise AbiError(f"{where}: typedef {' '.join(texts)!r} is not "
                               f"understood by check_abi.py (extend it)")
            layout.type(texts[i + 2], texts[i + 2])
            continue
        if typedef:
            name = declarator_name(st[1:-1], "typedef")
            layout.type(name, name)
            continue
        if len(texts) == 3 and texts[0] == "struct" and texts[2] == ";":
            continue  # a forward declaration: the type is only passed through pointers
        raise AbiError(f"{where}: declaration {' '.join(texts)!r} is not "
                       f"understood by check_abi.py (extend it)")
    return protos


def c_literal(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def generate(args, out):
    common = os.path.join(args.root, "src", "common")
    preload = os.path.join(args.root, "src", "preload", "interpose")
    api_h = os.path.join(common, "cuda_api.h")
    types_h = os.path.join(common, "cuda_types.h")
    resolve_h = os.path.join(preload, "resolve.h")
    for f in (api_h, types_h, resolve_h):
        if not os.path.isfile(f):
            raise AbiError(f"missing {f}")

    # 1. Prototypes as the check compiles them: in official mode, cuda_api.h
    #    is nothing but prototypes.
    toks, _ = preprocess(args.cc, ["-DCUMEMTRACE_OFFICIAL_CUDA", "-I", common],
                         api_h, [api_h])
    protos = []
    for st in statements(toks):
        name = prototype_name(st)
        if name is None:
            raise AbiError(f"{st[0].where(args.root)}: in CUMEMTRACE_OFFICIAL_CUDA "
                           f"mode cuda_api.h must hold prototypes only, found "
                           f"{' '.join(t.text for t in st)!r}")
        protos.append(name)

    # 2. The CUDA prototypes resolve.h adds, token for token.
    toks, _ = preprocess(args.cc, ["-DCUMEMTRACE_OFFICIAL_CUDA", "-I", common, "-I", preload],
                         resolve_h, [resolve_h], strict=False)
    extra = []
    for st in statements(toks):
        name = prototype_name(st)
        if name is not None and CUDA_NAME.match(name.text):
            extra.append((name, " ".join(t.text for t in st)))

    # 3. Types, enumerators and #defines of our own declarations.
    toks, defines = preprocess(args.cc, ["-I", common], api_h, [api_h, types_h])
    layout = Layout()
    ours_protos = parse_types(statements(toks), layout)
    hidden = sorted(set(ours_protos) - {p.text for p in protos})
    if hidden:
        raise AbiError(f"prototypes hidden from the check by "
                       f"CUMEMTRACE_OFFICIAL_CUDA: {', '.join(hidden)}")
    for name, value, _ in defines:
        if value == "":
            continue  # include guards
        layout.define(name)

    dup = sorted({p.text for p in protos if [q.text for q in protos].count(p.text) > 1})
    if dup:
        raise AbiError(f"declared twice in cuda_api.h: {', '.join(dup)}")

    declared = ["/* generated by tests/abi/check_abi.py - do not edit */"]
    for name in protos + [n for n, _ in extra]:
        n, where = name.text, c_literal(name.where(args.root))
        declared += [
            f"/* {n} ({where}) */",
            f"#ifdef {n}",
            f'#error "{n} ({where}) is a macro in NVIDIA\'s headers: our prototype would declare another function"',
            "#endif",
            f"enum {{ abi_declared_{n} = sizeof(&{n}) }};",
        ]
    ext = ["/* generated by tests/abi/check_abi.py from src/preload/interpose/resolve.h - do not edit */",
           "#ifdef __cplusplus", 'extern "C" {', "#endif"]
    ext += [f"#line {n.line} \"{c_literal(n.file)}\"\n{text}" for n, text in extra]
    ext += ["#ifdef __cplusplus", "}", "#endif"]
    lst = ["/* generated by tests/abi/check_abi.py - do not edit */"] + layout.lines

    for fname, lines in (("abi_declared.h", declared), ("abi_extra.h", ext),
                         ("abi_list.h", lst)):
        with open(os.path.join(out, fname), "w") as f:
            f.write("\n".join(lines) + "\n")
    names = [p.text for p in protos] + [n.text for n, _ in extra]
    with open(os.path.join(out, "functions.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    return names, layout


def undeclared(stderr):
    return sorted(set(re.findall(r"[‘'](\w+)[’'] (?:undeclared|was not declared)",
                                 stderr)))


def check_functions(args, out, names, pool):
    common = os.path.join(args.root, "src", "common")
    src = os.path.join(HERE, "functions.c")
    base = ["-fsyntax-only", "-DCUMEMTRACE_OFFICIAL_CUDA", "-isystem", args.cuda_include,
            "-I", out, "-I", common, "-Wall", "-Wextra", "-Werror",
            "-Wno-deprecated-declarations"]
    jobs = []
    for lang, cmd in (("C", shlex.split(args.cc) + ["-x", "c", "-std=c11", "-D_GNU_SOURCE"]),
                      ("C++", shlex.split(args.cxx) + ["-x", "c++", "-std=c++17"])):
        full = cmd + base + [src]
        jobs.append((lang, full, pool.submit(run, full)))
    return lambda: report_functions(jobs, names)


def report_functions(jobs, names):
    ok = True
    for lang, full, job in jobs:
        p = job.result()
        if p.returncode == 0:
            continue
        ok = False
        print(f"abi: FAIL: our CUDA prototypes do not match NVIDIA's ({lang}):\n"
              f"  {' '.join(full)}\n{p.stderr}", file=sys.stderr)
        missing = [n for n in undeclared(p.stderr) if n in names]
        if missing:
            print(f"abi: not declared by NVIDIA's headers (so they cannot be "
                  f"checked): {', '.join(missing)}", file=sys.stderr)
    return ok


def build_probe(args, out, official, pool):
    exe = os.path.join(out, "probe_nvidia" if official else "probe_ours")
    common = os.path.join(args.root, "src", "common")
    flags = (["-DABI_OFFICIAL", "-isystem", args.cuda_include] if official
             else ["-I", common])
    cmd = (shlex.split(args.cxx) + ["-std=c++17", "-O0", "-Wall", "-Werror",
                                     "-Wno-deprecated-declarations", "-I", out]
           + flags + ["-o", exe, os.path.join(HERE, "probe.cpp")])
    job = pool.submit(run, cmd)
    return lambda: run_probe(exe, cmd, official, job.result())


def run_probe(exe, cmd, official, p):
    who = "NVIDIA's" if official else "our"
    if p.returncode != 0:
        print(f"abi: FAIL: the layout probe does not build with {who} headers:\n"
              f"  {' '.join(cmd)}\n{p.stderr}", file=sys.stderr)
        missing = undeclared(p.stderr)
        if missing and official:
            print(f"abi: not declared by NVIDIA's headers: {', '.join(missing)}",
                  file=sys.stderr)
        return None
    r = run([exe])
    if r.returncode != 0:
        raise AbiError(f"{exe} exited {r.returncode}: {r.stderr}")
    with open(exe + ".txt", "w") as f:
        f.write(r.stdout)
    return r.stdout.splitlines()


def check_layout(args, out, pool):
    builds = [build_probe(args, out, True, pool), build_probe(args, out, False, pool)]
    return lambda: report_layout(*(b() for b in builds))


def report_layout(theirs, ours):
    if theirs is None or ours is None:
        return False, 0
    if theirs == ours:
        return True, len(ours)
    diff = difflib.unified_diff(theirs, ours, "NVIDIA (probe_nvidia.txt)",
                                "ours (probe_ours.txt)", lineterm="")
    print("abi: FAIL: our types, layouts or values differ from NVIDIA's:\n"
          + "\n".join(diff), file=sys.stderr)
    return False, len(ours)


def cuda_version(include):
    try:
        with open(os.path.join(include, "cuda.h")) as f:
            m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", f.read())
        return int(m.group(1)) if m else None
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda-include", required=True)
    ap.add_argument("--root", default=ROOT, help="tree holding src/common, src/preload")
    ap.add_argument("--out", default=None, help="where generated files go")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--only", choices=("functions", "layout"),
                    help="run one of the two checks (the tests' failure cases)")
    args = ap.parse_args(argv)
    args.root = os.path.abspath(args.root)
    args.cuda_include = os.path.abspath(args.cuda_include)
    out = os.path.abspath(args.out or os.path.join(args.root, "build", "tests", "abi"))
    os.makedirs(out, exist_ok=True)
    for h in ("cuda.h", "cuda_runtime_api.h"):
        if not os.path.isfile(os.path.join(args.cuda_include, h)):
            print(f"abi: cannot check: no {h} in {args.cuda_include}", file=sys.stderr)
            return 2
    try:
        names, layout = generate(args, out)
        with ThreadPoolExecutor(max_workers=4) as pool:  # four compilers at once
            funcs = (check_functions(args, out, names, pool) if args.only != "layout"
                     else lambda: True)
            lay = (check_layout(args, out, pool) if args.only != "functions"
                   else lambda: (True, 0))
            funcs_ok = funcs()
            layout_ok, facts = lay()
    except AbiError as e:
        print(f"abi: error: {e}", file=sys.stderr)
        return 2
    version = cuda_version(args.cuda_include)
    version = f"{version // 1000}.{version % 1000 // 10}" if version else "(unknown version)"
    if not (funcs_ok and layout_ok):
        return 1
    what = []
    if args.only != "layout":
        what.append(f"{len(names)} prototypes (as C and as C++)")
    if args.only != "functions":
        what.append(f"{facts} type, layout and value facts on {len(layout.names)} names")
    print(f"abi: ok: {' and '.join(what)} match NVIDIA's CUDA {version} headers "
          f"in {args.cuda_include}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
