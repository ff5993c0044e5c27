"""PyTorch's live tensors grouped by the user's own line (the tensor model,
docs/snapshot-format.md devices[].tensors): every live block of PyTorch's
memory._snapshot() (state active_allocated) under the first frame of its
allocation stack that is the user's code - outside torch, the Python
standard library and installed packages -, with the whole stack kept, and
PyTorch's cache (reserved - allocated) as a row of its own.  Handed to the
library as JSON text (cumemtrace_allocator_tensors, a private entry point:
src/preload/life/torch_protocol.h), which writes it verbatim."""
import ctypes
import json
import os
import re
import sys

STACK_FRAMES = 256   # a stack kept whole up to this depth, innermost first
GROUPS_MAX = 4096    # past this many groups the smallest fold into "more"
# The library's bound on the text (TORCH_TENSORS_MAX): past it the stacks
# are cut beneath the user's frame, then groups fold into "more".
TEXT_MAX = 16 << 20
_ROOTS = None        # the directories of installed code, each ending in os.sep
_kind = {}           # filename -> True when it is the user's code


def installed_roots():
    """Where the standard library, installed packages and torch live: every
    sysconfig path of this interpreter and its base, site's directories, and
    torch's own package directory (also when torch came from elsewhere on
    sys.path: a source checkout's other files stay the user's)."""
    import site
    import sysconfig
    dirs = set()
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        try:
            paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix,
                                              "installed_base": prefix,
                                              "installed_platbase": prefix})
        except Exception:
            continue
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            if paths.get(key):
                dirs.add(paths[key])
    for get in (getattr(site, "getsitepackages", None),
                getattr(site, "getusersitepackages", None)):
        try:
            got = get() if get else []
        except Exception:
            continue
        dirs.update([got] if isinstance(got, str) else got)
    torch = sys.modules.get("torch")
    f = getattr(torch, "__file__", None)
    if f:
        dirs.add(os.path.dirname(os.path.abspath(f)))  # torch's own package
    out = set()
    for d in dirs:
        if not d:
            continue
        for p in (os.path.normpath(d), os.path.realpath(d)):
            out.add(p.rstrip(os.sep) + os.sep)
    return tuple(sorted(out))


def is_user(filename):
    """True when `filename` (as Python wrote it in a frame) is the user's
    own code: a Python file or exec'd text outside every installed root."""
    got = _kind.get(filename)
    if got is not None:
        return got
    global _ROOTS
    if _ROOTS is None:
        _ROOTS = installed_roots()
    if filename.startswith("<"):
        user = not filename.startswith("<frozen")  # <string>, <stdin>, a notebook cell
    elif not filename.endswith(".py"):
        user = False  # a C++ frame (stacks="all"), or no file
    else:
        path = os.path.abspath(filename)
        user = not any(p.startswith(_ROOTS) for p in (path, os.path.realpath(path)))
    _kind[filename] = user
    return user


def _frame(fr):
    return {"file": str(fr.get("filename", "?")), "line": int(fr.get("line", 0) or 0),
            "function": str(fr.get("name", "?"))}


def site_key(site):
    return f"{site['file']}:{site['line']}:{site['function']}" if site else ""


# A parameter's gradient made in backward: kept in .grad by AccumulateGrad,
# on autograd's thread (the block may be the output of the node before it,
# which AccumulateGrad keeps without a copy).
_ACCUMULATE_GRAD = {"thread": "backward", "node": "AccumulateGrad", "forward_site": None}
# With C++ frames (stacks="all": CUMEMTRACE_TORCH_STACKS=all, or the program's
# own history) a block made by autograd's engine names its node: the
# innermost Node::apply frame ("torch::autograd::generated::MmBackward0::apply").
_ENGINE = "torch::autograd::Engine::"
_NODE_APPLY = re.compile(r"torch::autograd::(?:generated::)?(\w+)::apply\(")


def _engine_origin(frames):
    """The origin of a block whose C++ frames show autograd's engine made it
    ({thread, node, forward_site}, node None when no node's apply is among
    them, as for the engine's own reduction of a node's outputs); else None."""
    names = [str(fr.get("name", "")) for fr in frames]
    if not any(n.startswith(_ENGINE) for n in names):
        return None
    for n in names:
        m = _NODE_APPLY.match(n)
        if m and m.group(1) != "Engine":
            return {"thread": "backward", "node": m.group(1), "forward_site": None}
    return {"thread": "backward", "node": None, "forward_site": None}


def backward_gradients(device, snap_segments):
    """The addresses of `device`'s blocks that are a parameter's .grad in
    roles' reading of these same segments (facts.facts reads them first),
    when a block with no frames is known to come from a thread running no
    Python (history.from_the_start); else empty."""
    got = part("roles").gradient_blocks.pop(device, None)  # noqa: F821
    if got is None or got[0] is not snap_segments or \
            not part("history").from_the_start():  # noqa: F821
        return frozenset()
    return got[1]


def read(snap_segments, device, grads=frozenset()):
    """The tensors object of `device` from memory._snapshot()'s segments:
    {allocated_bytes, count, groups, more, cache}, groups unsorted-free
    (largest bytes first), each group's stack the one of its most bytes.
    Blocks with no frames at the addresses `grads` (backward_gradients of
    the same snapshot) are a group of their own, whose origin names
    AccumulateGrad on autograd's thread."""
    groups = {}
    allocated = count = reserved = nsegs = largest = 0
    for seg in snap_segments:
        if seg.get("device") != device:
            continue
        nsegs += 1
        reserved += seg.get("total_size", 0)
        for b in seg.get("blocks", ()):
            state = b.get("state")
            size = b.get("size", 0)
            if state == "inactive":
                largest = max(largest, size)
                continue
            if state != "active_allocated":
                continue
            allocated += size
            count += 1
            frames = b.get("frames") or ()
            site = None
            for fr in frames:
                if is_user(str(fr.get("filename", ""))):
                    site = fr
                    break
            origin = None
            if site:
                key = (site.get("filename"), site.get("line"), site.get("name"))
            elif not frames and b.get("address") in grads:
                key, origin = ("backward", "AccumulateGrad"), _ACCUMULATE_GRAD
            elif frames and (origin := _engine_origin(frames)) is not None:
                key = ("backward", origin["node"])
            else:
                key = (None, None, frames[0].get("filename") if frames else None,
                       frames[0].get("line") if frames else None)
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"site": site, "bytes": 0, "count": 0, "stacks": {},
                                   "origin": origin}
            g["bytes"] += size
            g["count"] += 1
            skey = tuple((fr.get("filename"), fr.get("line"), fr.get("name"))
                         for fr in frames[:STACK_FRAMES])
            got = g["stacks"].get(skey)
            if got is None:
                g["stacks"][skey] = [size, frames]
            else:
                got[0] += size
    out = []
    for g in groups.values():
        frames = max(g["stacks"].values(), key=lambda v: v[0])[1]
        site = _frame(g["site"]) if g["site"] else None
        out.append({"site": site, "stack": [_frame(fr) for fr in frames[:STACK_FRAMES]],
                    "bytes": g["bytes"], "count": g["count"],
                    "origin": dict(g["origin"]) if g["origin"] else None})
    out.sort(key=lambda g: (-g["bytes"], site_key(g["site"])))
    return {"allocated_bytes": allocated, "count": count, "groups": out, "more": None,
            "cache": {"bytes": reserved - allocated, "segments": nsegs,
                      "largest_free_bytes": largest}}


def _fold(t, keep):
    """Folds t's groups past the first `keep` into t["more"]."""
    rest = t["groups"][keep:]
    if not rest:
        return
    more = t["more"] or {"groups": 0, "bytes": 0, "count": 0}
    more["groups"] += len(rest)
    more["bytes"] += sum(g["bytes"] for g in rest)
    more["count"] += sum(g["count"] for g in rest)
    t["more"] = more
    del t["groups"][keep:]


def _cut_stacks(t):
    """Each stack cut just beneath its user's frame (4 outer frames kept)."""
    for g in t["groups"]:
        site = g["site"]
        at = next((i for i, fr in enumerate(g["stack"]) if fr == site), len(g["stack"]) - 1)
        del g["stack"][at + 5:]


def bounded(members):
    """The JSON text of `members` ({"tensors": ..., ...}), within TEXT_MAX:
    groups past GROUPS_MAX folded, then stacks cut, then groups folded."""
    objs = [m for k, m in members.items()
            if k not in ("growth", "tensor_series", "origin") and m]
    for t in objs:
        _fold(t, GROUPS_MAX)
    text = json.dumps(members, separators=(",", ":"), ensure_ascii=False)
    if len(text) > TEXT_MAX:
        for t in objs:
            _cut_stacks(t)
        text = json.dumps(members, separators=(",", ":"), ensure_ascii=False)
    while len(text) > TEXT_MAX and any(t["groups"] for t in objs):
        for t in objs:
            _fold(t, len(t["groups"]) // 2)
        text = json.dumps(members, separators=(",", ":"), ensure_ascii=False)
    return text


_fn = []
_warned = []


def warn(e):
    """Says once on stderr that the tensors could not be read."""
    if not _warned:
        _warned.append(1)
        sys.stderr.write(f"cumemtrace: warning: PyTorch's tensors could not be read "
                         f"({type(e).__name__}: {e}); snapshots name no tensors\n")


def hand_over(device, tag, members):
    """Hands `members` to the library for `device` with `tag` (LAYOUT_STATE
    or an OOM's num_ooms); False when the library refused them."""
    if not _fn:
        fn = ctypes.CDLL(None).cumemtrace_allocator_tensors
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
        _fn.append(fn)
    # a file name Python decoded with surrogateescape: "?" for its bytes
    text = bounded(members).encode("utf-8", "replace")
    return _fn[0](device, tag, text, len(text)) == 0
