"""tcgen05 arrivals that are landed at every exit because a later arrival of their queue is.

A thread's tcgen05 ops complete in issue order (one queue per issuing thread,
model/semantics.py). A Gluon or CUTLASS MMA partition releases each ring slot by a commit and
ends with one more commit on the accumulator barrier, which the epilogue waits for; nobody
waits for the last releases of the ring. A class system of the ring sees the epilogue's wait as
another class's (it may pass at any time), so at its exit the last releases may still be in
flight, which it would call BP105: the order of the queue is lost between classes.

The tail of a role is its last tcgen05 op that arrives, when it is a plain unconditional
operation after every other tcgen05 op of the role (not in a loop, not multicast). Its barrier
stays held to the exit rules in its own class (no slot of a tail's barrier is ever drained
here), so in every real exit state the tail has landed, and with it every earlier op of the
same queue. A tcgen05 slot of a class system whose issuers all have a tail is therefore empty
in the projection of every real exit state: the class system checks its exit conditions only
where those slots are empty (encode.py, `exit_bad`), after the landings every such state can
still make. The proof then rests on every class of its partition, as it always does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...model import kinds
from .counters import ISSUE, CRole

if TYPE_CHECKING:
    from ...model.ir import Op
    from .fragment import Fragment, Role

# The ops of a thread's tensor-core queue (they complete in issue order).
QUEUED = kinds.kinds_where(lambda p: p.tensor_core)


def tail(role: "Role") -> "Op | None":
    """The role's last queued tcgen05 op, when it arrives on a barrier, runs unconditionally
    outside loops, is not multicast and follows every other queued op of the role."""
    last = None
    for item in role.items:
        for bop in item.ops:
            if bop.op.kind in QUEUED:
                last = (item, bop)
    if last is None:
        return None
    item, bop = last
    op = bop.op
    if item.kind != "op" or item.conds or op.barrier is None or op.collective_axes:
        return None
    return op


def drained_slots(frag: "Fragment", builder, croles: list[CRole]) -> frozenset[int]:
    """The tcgen05 slots of one class system that every real exit finds landed: issued only by
    roles with a tail, and not on the barrier of any role's tail."""
    tails = {role.name: tail(role) for role in frag.roles}
    final = {op.barrier.alloc for op in tails.values() if op is not None}
    issuers: dict[int, set[str]] = {}
    for crole in croles:
        for seg in crole.segments:
            for cop in seg.body:
                if cop.kind == ISSUE:
                    for q in cop.slots:
                        issuers.setdefault(q, set()).add(crole.name)
    out = set()
    for q, names in issuers.items():
        slot = builder.slots[q]
        alloc = builder.cls.instances[slot.inst][0]
        if slot.kind == "tcgen05" and alloc not in final and \
                all(tails.get(n) is not None for n in names):
            out.add(q)
    return frozenset(out)
