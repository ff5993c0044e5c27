"""Roles: whose tensor each live block is - parameters, buffers, gradients,
optimizer state, or other (activations kept for backward, inputs,
temporaries).  Modules and optimizers are found by a scan of the garbage
collector's objects at the dump (a dump is rare: the exit, an OOM); the
optimizers PyTorch's global step hook saw are added (one not tracked by
the collector would be missed otherwise)."""

_optimizers = None  # weakref.WeakSet of the optimizers seen stepping
PARAMETERS, BUFFERS, GRADIENTS, OPTIMIZER, OTHER = range(5)


def optim_module():
    # torch.optim's submodule: torch may load torch.optim lazily, and at
    # CUDA's initialisation its attribute is not there yet.
    import importlib
    return importlib.import_module("torch.optim.optimizer")


def watch_optimizers(torch):
    global _optimizers
    import weakref
    _optimizers = weakref.WeakSet()
    add = _optimizers.add

    def seen(optimizer, args, kwargs):
        add(optimizer)
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
    for o in list(_optimizers or ()):
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
    blocks = {}
    for seg in snapshot_segments:
        if seg.get("device") != device:
            continue
        for b in seg.get("blocks", []):
            if b.get("state") == "active_allocated":
                blocks[b["address"]] = b["size"]
    if sum(blocks.values()) != allocated:
        return None  # a tensor came or went between the two reads
    out = [0] * 5
    Tensor = torch.Tensor

    def claim(t, role):
        if not isinstance(t, Tensor) or not t.is_cuda or t.device.index != device:
            return
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:
            return  # a tensor without storage (sparse, meta, subclass)
        size = blocks.pop(ptr, None)
        if size is not None:
            out[role] += size
    modules, optimizers = scanned if scanned is not None else scan(torch)
    params = []
    for m in modules:
        params.extend(m._parameters.values())
    for o in optimizers:
        for g in o.param_groups:
            params.extend(g.get("params", ()))
    for p in params:
        claim(p, PARAMETERS)
    for m in modules:
        for b in m._buffers.values():
            claim(b, BUFFERS)
    for p in params:
        if p is not None:
            claim(p.grad, GRADIENTS)
    names = []
    for o in optimizers:
        held = out[OPTIMIZER]
        for state in o.state.values():
            if isinstance(state, dict):
                for v in state.values():
                    claim(v, OPTIMIZER)
        if out[OPTIMIZER] > held and type(o).__name__ not in names:
            names.append(type(o).__name__)
    out[OTHER] = sum(blocks.values())
    return out, ", ".join(names)
