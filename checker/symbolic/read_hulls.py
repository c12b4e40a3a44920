"""Reads told apart by the thread only through their regions, widened to their slots.

Two threads of one block running one program whose only difference is the region of some
reads (each consumer warpgroup multiplying its own rows of a shared A tile) are two one-thread
roles of the class system: Fragment.merge_roles compares the references as terms at each
thread. Widening each such read to its whole slot (the leading indices; model/ir.py MemRef: the
rest of the buffer whole) covers what either thread reads, so a race the regions have is a race
of the widened kernel (coarser, never missing one: an over-approximation of every read), and
two reads never conflict, so the widening adds no race between the threads themselves. The
threads then run the same program and are one counted role, the counter abstraction of two
equal one-thread programs, as for the barrier proof (which has no accesses at all)."""

from __future__ import annotations

import dataclasses

from ...model.ir import Kernel, MemRef, Op, free_vars, map_ops


def widen_thread_reads(kernel: Kernel) -> Kernel:
    """`kernel` with every read whose region mentions the thread index widened to its slots;
    writes as they are (two threads' writes to their own regions must stay apart)."""
    axis = kernel.thread_axis

    def mentions(ref: MemRef) -> bool:
        return any(axis in free_vars(e) for s in ref.region for e in s.exprs())

    def widen(op: Op) -> Op:
        if not any(mentions(r) for r in op.reads):
            return op
        return dataclasses.replace(op, reads=tuple(
            MemRef(r.alloc, r.index) if mentions(r) else r for r in op.reads))

    changed = any(mentions(r) for op in kernel.ops() for r in op.reads)
    return kernel.replace(body=map_ops(kernel.body, widen)) if changed else kernel
