"""Ampere's cp.async in CuTe DSL (a `cute.copy` with a `CopyG2SOp` atom, then
`cp_async_commit_group` and `cp_async_wait_group(n)`): each lane's copy writes its part of the
destination from its issue until a wait_group leaves at most n commit groups in flight.

wait_group counts groups, not copies (an empty group too): each commit becomes one cp_async
of the warp, at the commit, writing the destinations of the copies issued since the previous
one (the byte ranges their lanes' elements cover, an interleaved partition range by range:
smem.footprint). That move is exact only when the warp does nothing the model sees in between;
otherwise, and for copies no commit groups before a wait_group or the warp's end, BP190 at
the line. Copies a `cp.async.mbarrier.arrive.noinc` completes (PipelineCpAsync's
producer_commit) are tied to no arrival the model has: they stay unread, said in the notes
(handlers.py)."""

from __future__ import annotations

from .. import primitives as K
from .smem import _smem_type, data_of, footprint, not_followed

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
    fps = footprint(warp, node, data, node.operand_types[2], active)
    if not warp.cp_pending:
        warp.cp_since = len(warp.events)
    warp.cp_pending.append((fps, node))


def commit(warp, node, active):
    """cp.async.commit_group: the copies since the last commit are one group, one cp_async."""
    pending, warp.cp_pending = warp.cp_pending, []
    if pending and len(warp.events) != warp.cp_since:
        warp.unmodeled(pending[0][1], "a cp.async copy with synchronization or a memory "
                                      "access between it and its commit_group")
        return None
    if pending or warp.cp_used:
        warp.cp_used = True
        warp.emit(K.CP_ASYNC, node, writes=tuple(fp for fps, _ in pending for fp in fps))
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
