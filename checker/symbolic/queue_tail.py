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

A loop tail (CUTLASS's and Gluon's MMA warp that releases each slot by a commit and drains by
waiting for its last release): every tcgen05 op of a one-thread role is in one loop whose body
ends with an unconditional commit on one barrier. On every run that issues anything, that
commit's last iteration is the queue's newest op. A slot of its barrier is drained under the
condition (on the frozen values) that it is not the slot of that last iteration; the class that
holds that slot checks it at exit: after the landings of the other slots (always possible), a
state with it in flight is an error state there. So at every real exit the newest op, and with
it the queue, has landed. A class with such a slot is proved case by case on which slot holds
the last iteration (`drain_cases`, the sign cases' argument: the frozen values fix the case).
In a per-tile split (pertile.py), the per-tile commit that closes the queue is in the other
projection, which proves it landed: `CLOSED` names the ops whose queue is closed so.
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import TYPE_CHECKING

import z3

from ...model import kinds
from ...model.instructions import ISSUE_TCGEN05
from .classes import ring_lhs
from .counters import ISSUE, CRole
from .terms import Unsupported, z_int

if TYPE_CHECKING:
    from ...model.ir import Op
    from .fragment import Fragment, Role

# The ops of a thread's tensor-core queue (they complete in issue order).
QUEUED = kinds.kinds_where(lambda p: p.tensor_core)

# Source locations of tcgen05 ops whose queue another projection of the kernel proves landed
# at every exit (pertile.py: the per-tile commit that closes the MMA warp's queue): set while
# the K loop's projection is proved, where that commit is not.
CLOSED: contextvars.ContextVar[frozenset] = contextvars.ContextVar("closed_queues",
                                                                   default=frozenset())


def closed_at_exit(system, violation) -> bool:
    """BP105 of a tcgen05 queue whose every op is in CLOSED (replays of candidate orders)."""
    closed = CLOSED.get()
    if not closed or violation.code != "BP105" or violation.agent is None or \
            violation.inst is not None:
        return False
    locs = [system.sources[i.src].loc for i in system.programs[violation.agent]
            if i.op == ISSUE_TCGEN05]
    return bool(locs) and all(loc in closed for loc in locs)


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


def loop_tail(role: "Role"):
    """(loop item, op) when every queued tcgen05 op of the role is in one loop and the last one
    of its body arrives on one barrier, unconditionally, not multicast: on every run that
    issues anything, that op's last iteration is the queue's newest op (CUTLASS's and Gluon's
    MMA warp releasing each ring slot by a commit)."""
    found = [(item, bop) for item in role.items for bop in item.ops
             if bop.op.kind in QUEUED]
    # one thread: its queue's newest op is one instance of the tail, at one index
    if not role.single or not found or any(item is not found[0][0] for item, _ in found):
        return None
    item, bop = found[-1]
    op = bop.op
    if item.kind != "loop" or bop.conds or op.barrier is None or op.collective_axes:
        return None
    return item, op


def _not_last(frag: "Fragment", role: "Role", item, op, builder, inst: int):
    """Z3: the instance `inst` of the class is not the one the loop tail's last iteration
    arrives on (None when its index cannot be read)."""
    alloc, index, _ = builder.cls.instances[inst]
    env = dict(role.env)
    env[item.loop.var] = z_int(item.loop.trip, role.env) - 1
    try:
        if index is None:                       # the ring class's representative slot s
            S = builder.cls.ring
            last = z_int(ring_lhs(frag, op.barrier, role.env, S), env)
            return last % S != builder.cls.s
        index = index if isinstance(index, tuple) else (index,)
        exprs = list(op.barrier.index)
        if len(exprs) != len(index):
            return None
        return z3.Not(z3.And([z_int(e, env) == v for e, v in zip(exprs, index)]))
    except Unsupported:
        return None


def drained_slots(frag: "Fragment", builder, croles: list[CRole]) -> dict[int, z3.BoolRef]:
    """The tcgen05 slots of one class system that every real exit finds landed, each with the
    condition on the frozen values under which it does: issued only by roles with a tail, and
    not on the barrier of any role's tail (always); on the barrier of a role's loop tail and
    issued by that role alone, when the slot is not the one of the tail's last iteration (the
    class that holds that one checks it, module doc)."""
    tails = {role.name: tail(role) for role in frag.roles}
    final = {op.barrier.alloc for op in tails.values() if op is not None}
    loops = {role.name: loop_tail(role) for role in frag.roles if tails[role.name] is None}
    loops = {name: lt for name, lt in loops.items() if lt is not None}
    roles = {role.name: role for role in frag.roles}
    tails.update({name: op for name, (_, op) in loops.items()})
    looped = {op.barrier.alloc: name for name, (_, op) in loops.items()}
    closed = CLOSED.get()
    shut = {role.name for role in frag.roles if closed and
            all(bop.op.loc in closed for item in role.items for bop in item.ops
                if bop.op.kind in QUEUED)}
    issuers: dict[int, set[str]] = {}
    for crole in croles:
        for seg in crole.segments:
            for cop in seg.body:
                if cop.kind == ISSUE:
                    for q in cop.slots:
                        issuers.setdefault(q, set()).add(crole.name)
    out = {}
    for q, names in issuers.items():
        slot = builder.slots[q]
        alloc = builder.cls.instances[slot.inst][0]
        if slot.kind == "tcgen05" and names <= shut:
            out[q] = z3.BoolVal(True)
            continue
        if slot.kind != "tcgen05" or alloc in final or \
                not all(tails.get(n) is not None for n in names):
            continue
        if alloc not in looped:
            out[q] = z3.BoolVal(True)
        elif names == {looped[alloc]}:
            item, op = loops[looped[alloc]]
            cond = _not_last(frag, roles[looped[alloc]], item, op, builder, slot.inst)
            if cond is not None:
                out[q] = cond
    return out


def drain_cases(system) -> list:
    """The class system case by case on which conditionally drained slot holds the loop tail's
    last iteration (none, or one of them), for `prove`'s case split (signs.py): the frozen
    values fix the case of every run, and the cases cover every value, so invariants proved on
    each case's system cover every run. Facts such as "the drain has seen the last release"
    hold on one side only, where a linear fact over both is out of the templates' reach."""
    from .signs import SignCase
    conds = [(q, c) for q, c in sorted(system.drained.items()) if not z3.is_true(c)]
    if not conds:
        return []
    cases = [("no drained slot holds the last release", z3.And([c for _, c in conds]))]
    cases += [(f"slot {q} holds the last release", z3.Not(c)) for q, c in conds]
    out = []
    for text, cond in cases:
        solver = z3.Solver()
        solver.set("timeout", 10_000)
        solver.add(*system.constraints, cond)
        if solver.check() != z3.unsat:      # undecided: kept, and so proved like the others
            out.append(SignCase(text, frozenset(), dataclasses.replace(
                system, constraints=list(system.constraints) + [cond])))
    return out

