"""carve.memory — the names of torch.cuda.memory's snapshot functions, for
code written against them: _snapshot, _dump_snapshot and
_record_memory_history, over carve's snapshot_torch, dump_snapshot and
record.

The one idea: PyTorch's memory_viz reads a pickle of
{"segments", "device_traces"}; carve writes the same layout from its own
snapshot (segments and blocks) and its own recording (the trace), so a
program that dumps snapshots for memory_viz changes only the module it
calls.
"""

from ._api import dump_snapshot, record, snapshot_torch, stop_recording

__all__ = ["_snapshot", "_dump_snapshot", "_record_memory_history"]


def _snapshot(device=None):
    """snapshot_torch(device): PyTorch's snapshot layout."""
    return snapshot_torch(device)


def _dump_snapshot(filename="dump_snapshot.pickle", device=None):
    """dump_snapshot(filename, device): a pickle memory_viz opens."""
    return dump_snapshot(filename, device)


def _record_memory_history(enabled="all", path=None, **_ignored):
    """Start (enabled truthy: carve.record(path)) or stop (enabled None or
    False: carve.stop_recording()) recording the allocations that
    _dump_snapshot puts in device_traces. PyTorch's other arguments
    (context, stacks, max_entries) are accepted and ignored: carve records
    no stack frames. Returns the trace's path."""
    if enabled in (None, False):
        return stop_recording()
    from ._api import _rec, _rec_lock
    with _rec_lock:
        if _rec["writer"] is not None:
            return _rec["path"]
    return record(path)
