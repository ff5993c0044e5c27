"""Where PyTorch's memory lies: its segments and their blocks (from
torch.cuda.memory._snapshot()), with each live block's Python frames where
PyTorch's history has them, handed to the library
(cumemtrace_allocator_layout) so that post-mortems and exports draw
PyTorch's own blocks."""
import ctypes

library = part("library")  # noqa: F821 (set by cumemtrace_torch.part)
Block, Segment = library.Block, library.Segment

_STATES = {"inactive": 0, "active_allocated": 1, "active_pending_free": 2}
FRAMES_PER_BLOCK = 64  # of a live block's Python frames, innermost first


def _block_stack(frames):
    return "\n".join(f"{fr.get('filename', '?')}:{fr.get('line', 0)}:{fr.get('name', '?')}"
                     .replace("\n", " ") for fr in frames[:FRAMES_PER_BLOCK])


def segments(torch, device, tag, fn, snap=None):
    """Hands the library where PyTorch's memory on `device` lies (its
    segments and their blocks, from memory._snapshot()), tagged with the
    num_ooms of the facts that follow (an OOM) or LAYOUT_STATE (the exit),
    with the Python frames of each block where PyTorch's history has them
    (fn from segments_fn)."""
    if snap is None:
        snap = part("history").snapshot(torch).get("segments", [])
    segs = sorted((g for g in snap if g.get("device") == device), key=lambda g: g["address"])
    arr = (Segment * len(segs))()
    keep = []  # the block arrays must outlive the call
    stacks = {}
    for i, g in enumerate(segs):
        blocks = g.get("blocks", [])
        b = (Block * len(blocks))()
        for j, k in enumerate(blocks):
            b[j].offset = k["address"] - g["address"]
            b[j].size = k["size"]
            b[j].state = _STATES.get(k.get("state"), 3)
            frames = k.get("frames") if k.get("state") != "inactive" else None
            if frames:
                b[j].stack = stacks.setdefault(_block_stack(frames), len(stacks) + 1)
        keep.append(b)
        arr[i].address = g["address"]
        arr[i].size = g.get("total_size", 0)
        arr[i].pool = 0 if g.get("segment_type") == "small" else 1
        arr[i].nblocks = len(blocks)
        arr[i].blocks = ctypes.cast(b, library.BlockPointer)
    text = (ctypes.c_char_p * max(len(stacks), 1))()
    for t, k in stacks.items():
        text[k - 1] = t.encode(errors="replace")
    fn(device, tag, arr, len(segs), text, len(stacks))


def segments_fn():
    """The library's layout hand-off (cumemtrace_allocator_layout)."""
    fn = ctypes.CDLL(None).cumemtrace_allocator_layout
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(Segment), ctypes.c_uint32,
                   ctypes.POINTER(ctypes.c_char_p), ctypes.c_uint32]
    return fn
