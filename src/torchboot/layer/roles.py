"""Roles: whose tensor each live block is - parameters, buffers, gradients,
optimizer state, or other (activations kept for backward, inputs,
temporaries).  Modules and optimizers are found by a scan of the garbage
collector's objects at the dump (a dump is rare: the exit, an OOM); the
optimizers PyTorch's global step hook saw are added (one not tracked by
the collector would be missed otherwise).

The host's objects never see the scan: they are kept by id() and weak
reference, never hashed nor compared (an optimizer class may define
__eq__); their fields are read from their instance __dict__, past any
__getattribute__ of theirs; their tensors are read with PyTorch's
__torch_function__ dispatch off (a tensor subclass's and an active
TorchFunctionMode's).  An object without the fields (a Module whose
__init__ skipped Module.__init__) is left out, alone."""

_optimizers = {}  # id(optimizer) -> weak reference: the optimizers seen stepping
# device -> (the snapshot's segments, the addresses of the blocks the latest
# roles() reading of them gave the role of a parameter's .grad): tensors.py
# takes it to name who made those with no stack
gradient_blocks = {}
PARAMETERS, BUFFERS, GRADIENTS, OPTIMIZER, OTHER = range(5)


def optim_module():
    # torch.optim's submodule: torch may load torch.optim lazily, and at
    # CUDA's initialisation its attribute is not there yet.
    import importlib
    return importlib.import_module("torch.optim.optimizer")


def fields(o):
    """The instance __dict__ of `o`, read past its class's __getattribute__
    (none of the host's code runs); {} when it has none."""
    try:
        d = object.__getattribute__(o, "__dict__")
    except Exception:
        return {}
    return d if type(d) is dict else {}


def _forget(key):
    def dead(ref):
        if _optimizers.get(key) is ref:
            del _optimizers[key]
    return dead


def watch_optimizers(torch):
    import weakref
    ref = weakref.ref

    def seen(optimizer, args, kwargs):
        try:
            key = id(optimizer)
            r = _optimizers.get(key)
            if r is None or r() is not optimizer:
                _optimizers[key] = ref(optimizer, _forget(key))
        except Exception:
            pass  # one the scan may miss; the step goes on as without us
    try:
        optim_module().register_optimizer_step_pre_hook(seen)
    except Exception:
        pass  # an older torch: the scan finds them


def scan(torch):
    """The live modules and optimizers: the collector's objects, and the
    optimizers seen stepping."""
    import gc
    Module, Optimizer = torch.nn.Module, torch.optim.Optimizer
    modules, optimizers = [], {}
    for o in gc.get_objects():
        t = type(o)  # not isinstance: it reads __class__, which some objects warn about
        if issubclass(t, Module):
            modules.append(o)
        elif issubclass(t, Optimizer):
            optimizers[id(o)] = o
    for r in list(_optimizers.values()):
        o = r()
        if o is not None:
            optimizers.setdefault(id(o), o)
    return modules, list(optimizers.values())


def roles(torch, device, snapshot_segments, allocated, scanned=None):
    """[parameters, buffers, gradients, optimizer state, other] bytes of
    `allocated` (memory_allocated of `device`) and the optimizers' class
    names: each live block (PyTorch's active_allocated blocks) gets the role
    of the tensor whose storage it is - a block holds one storage, at its
    start - parameters first, then buffers, gradients and optimizer state;
    what no role claims is "other" (activations kept for backward, inputs,
    temporaries).  None when the blocks do not add up to `allocated`."""
    gradient_blocks.pop(device, None)
    blocks = {}
    for seg in snapshot_segments:
        if seg.get("device") != device:
            continue
        for b in seg.get("blocks", []):
            if b.get("state") == "active_allocated":
                blocks[b["address"]] = b["size"]
    if sum(blocks.values()) != allocated:
        return None  # a tensor came or went between the two reads
    quiet = getattr(torch._C, "DisableTorchFunction", None)
    if quiet is None:  # its tensors cannot be read without the host's dispatch
        part("library").missing("torch._C.DisableTorchFunction",  # noqa: F821
                                 part("library").NO_QUIET)  # noqa: F821
        return None
    out = [0] * 5
    with quiet():
        names, grads = _claim_all(torch, device, blocks, out,
                                  scanned if scanned is not None else scan(torch))
    gradient_blocks[device] = (snapshot_segments, grads)
    out[OTHER] = sum(blocks.values())
    return out, ", ".join(names)


def _group_params(f):
    """The entries of the param_groups of an optimizer's fields `f`, read
    as lists and dicts only."""
    groups = f.get("param_groups")
    for g in groups if type(groups) is list else ():
        ps = dict.get(g, "params") if issubclass(type(g), dict) else None
        yield from ps if type(ps) is list else ()


def _storage(TensorBase, t, device):
    """The storage address of `t` when it is a CUDA tensor on `device`, else
    None.  type(), not isinstance: that reads __class__ of what is not a
    tensor."""
    if not issubclass(type(t), TensorBase) or not t.is_cuda or t.device.index != device:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None  # a tensor without storage (sparse, meta, subclass)


def optimizer_gradients(torch, device, optimizer):
    """The storage addresses on `device` of the .grad of `optimizer`'s
    parameters (its param_groups, read from its fields as _claim_all reads
    them, with __torch_function__ off); empty when they cannot be read."""
    quiet = getattr(torch._C, "DisableTorchFunction", None)
    if quiet is None:
        return frozenset()
    TensorBase = torch._C.TensorBase
    with quiet():
        ptrs = [_storage(TensorBase, p.grad, device) for p in _group_params(fields(optimizer))
                if issubclass(type(p), TensorBase)]
    return frozenset(p for p in ptrs if p is not None)


def _claim_all(torch, device, blocks, out, scanned):
    """Takes from `blocks` (address -> size) into `out` each block a role
    claims; returns the names of the optimizers that hold state there and
    the addresses of the blocks that are parameters' gradients.
    Called with __torch_function__ off: reading a tensor runs none of the
    host's Python."""
    TensorBase = torch._C.TensorBase
    grads = []

    def claim(t, role):
        ptr = _storage(TensorBase, t, device)
        size = blocks.pop(ptr, None) if ptr is not None else None
        if size is not None:
            out[role] += size
            if role == GRADIENTS:
                grads.append(ptr)

    def entries(d):
        # dict's own values(), not one a subclass defines
        return list(dict.values(d)) if issubclass(type(d), dict) else []
    modules, optimizers = scanned
    modules = [fields(m) for m in modules]
    optimizers = [(o, fields(o)) for o in optimizers]
    params = []
    for m in modules:
        params.extend(entries(m.get("_parameters")))
    for _, o in optimizers:
        params.extend(_group_params(o))
    for p in params:
        claim(p, PARAMETERS)
    for m in modules:
        for b in entries(m.get("_buffers")):
            claim(b, BUFFERS)
    for p in params:
        if issubclass(type(p), TensorBase):
            claim(p.grad, GRADIENTS)
    names = []
    for o, f in optimizers:
        held = out[OPTIMIZER]
        for state in entries(f.get("state")):
            for v in entries(state):
                claim(v, OPTIMIZER)
        if out[OPTIMIZER] > held and type(o).__name__ not in names:
            names.append(type(o).__name__)
    return names, frozenset(grads)
