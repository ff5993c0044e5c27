"""The autograd node behind a request made on autograd's backward thread,
and the forward line of that node where PyTorch kept it (docs/
snapshot-format.md, oom.allocator.origin and a group's origin).

At an out-of-memory, PyTorch's observer runs on the failing thread:
torch._C._current_autograd_node() there is the node whose request failed
(None outside backward), read without side effects.  A node's forward
traceback exists only under anomaly mode (set_detect_anomaly(True), the
host's choice, never ours): metadata["traceback_"], the forward's frames as
traceback.format_list wrote them, outermost first.  The metadata is read
only while anomaly mode is on - reading it creates it otherwise."""
import re

_FRAME = re.compile(r'\s*File "(.*)", line (\d+), in (.*)')


def forward_site(node, torch):
    """The innermost user frame {file, line, function} of `node`'s forward
    traceback, or None (anomaly mode off, no traceback, no user frame)."""
    if not torch.is_anomaly_enabled():
        return None
    tb = node.metadata.get("traceback_")
    if not isinstance(tb, list):
        return None
    is_user = part("tensors").is_user  # noqa: F821
    for entry in reversed(tb):
        m = _FRAME.match(str(entry).split("\n", 1)[0])
        if m and is_user(m.group(1)):
            return {"file": m.group(1), "line": int(m.group(2)), "function": m.group(3)}
    return None


def oom_origin(torch):
    """{thread, node, forward_site} of the failing request when the current
    thread is running an autograd node, else None."""
    current = getattr(torch._C, "_current_autograd_node", None)
    node = current() if current is not None else None
    if node is None:
        return None
    return {"thread": "backward", "node": str(node.name()),
            "forward_site": forward_site(node, torch)}
