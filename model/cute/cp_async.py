"""Ampere's cp.async in CuTe DSL (a `cute.copy` with a `CopyG2SOp` atom, then
`cp_async_commit_group` and `cp_async_wait_group(n)`): each lane's copy writes its part of the
destination from its issue until a wait_group leaves at most n commit groups in flight.

wait_group counts groups, not copies (an empty group too): each commit becomes one cp_async
of the warp, at the commit, writing the destinations of the copies issued since the previous
one. That move is exact only when the warp does nothing the model sees in between; otherwise,
and for copies no commit groups before a wait_group or the warp's end, BP190 at the line.
Copies a `cp.async.mbarrier.arrive.noinc` completes (PipelineCpAsync's producer_commit) are
tied to no arrival the model has: they stay unread, said in the notes (handlers.py)."""

from __future__ import annotations

import itertools

from .. import primitives as K
from .layouts import _leaves, layout_of, swizzle_block
from .smem import _smem_type, data_of, footprint, not_followed
from .values import elem_bytes, lane_values

# elements per lane the exactness check enumerates (a tiled copy's partition is far smaller)
MAX_ELEMENTS = 1 << 12
COMMIT = "nvvm.cp.async.commit.group"
WAIT = "nvvm.cp.async.wait.group"
UNREAD = ("cp.async copies into shared memory are not read: races on their destinations are "
          "not checked")


def copy(warp, node, active) -> None:
    """A cp.async copy: its destination joins the group being built."""
    if len(node.operands) < 3 or not _smem_type(node.operand_types[2]):
        return
    data = data_of(warp.get(node.operands[2]))
    if data is None:
        not_followed(warp, node, "a cp.async copy")
        return
    fp = footprint(warp, node, data, node.operand_types[2], active)
    if fp[1] is not None and not _contiguous(data, node.operand_types[2], active, fp):
        # the warp's range would cover the other warps' interleaved elements: a write-write
        # race the hardware does not have. Not read, and said (BP190), never a false alarm
        warp.unmodeled(node, f"a cp.async copy whose lanes write `{data.buffer}` in several "
                             "separate ranges (an interleaved partition)")
        return
    if not warp.cp_pending:
        warp.cp_since = len(warp.events)
    warp.cp_pending.append((fp, node))


def _contiguous(data, type_text: str, active, fp) -> bool:
    """Do the active lanes' elements fill the footprint's byte range without a gap (in
    swizzle blocks, which a swizzle permutes within)?"""
    if data.desc is not None:
        layout, block, size = data.desc[:2], data.desc[2], data.elem_bytes
    else:
        layout = layout_of(type_text)
        block, size = swizzle_block(type_text), elem_bytes(type_text) or data.elem_bytes
    if layout is None:
        return False
    shape, stride = _leaves(layout[0]), _leaves(layout[1])
    count = 1
    for n in shape:
        count *= n
    if count > MAX_ELEMENTS:
        return False
    offsets = {sum(i * d for i, d in zip(index, stride))
               for index in itertools.product(*(range(n) for n in shape))}
    unit = max(block, size)
    covered = {(lane_values(data.offset, lane) + e * size) // unit
               for lane in active for e in offsets}
    _, lo, hi = fp
    return covered == set(range(lo // unit, -(-hi // unit)))


def commit(warp, node, active):
    """cp.async.commit_group: the copies since the last commit are one group, one cp_async."""
    pending, warp.cp_pending = warp.cp_pending, []
    if pending and len(warp.events) != warp.cp_since:
        warp.unmodeled(pending[0][1], "a cp.async copy with synchronization or a memory "
                                      "access between it and its commit_group")
        return None
    if pending or warp.cp_used:
        warp.cp_used = True
        warp.emit(K.CP_ASYNC, node, writes=tuple(fp for fp, _ in pending))
    return None


def wait(warp, node, active):
    """cp.async.wait_group(n): all but the newest n commit groups have landed."""
    if warp.cp_pending:
        leftover(warp, "a cp.async copy not committed to a group before cp.async.wait_group")
    n = node.attrs.get("n")
    if not isinstance(n, int):
        warp.unmodeled(node, "cp.async.wait_group with a group count not known")
    elif warp.cp_used:
        warp.emit(K.WAIT_GMEM_TO_SMEM, node, count=n)
    return None


def arrive(warp, node) -> None:
    """cp.async.mbarrier.arrive.noinc completes the thread's earlier copies: those not yet
    in a group are left unread (said), as before this module read any."""
    for _, copy_node in warp.cp_pending:
        warp.memory_note(copy_node, "", UNREAD)
    warp.cp_pending = []


def leftover(warp, what: str) -> None:
    """Copies no commit_group put in a group: no wait_group counts them."""
    for _, copy_node in warp.cp_pending[:1]:
        warp.unmodeled(copy_node, what)
    warp.cp_pending = []


RULES = {COMMIT: commit, WAIT: wait}
