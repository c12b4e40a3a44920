"""The cells of a thread's queued tcgen05 MMAs, held until the arrivals issued right after them.

A queued MMA (races.py, queued_plan: one that arrives on no barrier of its class, as Gluon's
`tcgen05_mma(..., mbarriers=[a, b, c])` is an MMA and three commits) keeps its cells live from
its issue to the landing of a later tcgen05 arrival of its thread on the class. Put on that
arrival's slot, the cells were live while any delivery to the barrier instance was in flight:
one slot serves every site committing there (the QK MMA's commit on the K slot's `empty`
carried the PV MMA's read of P), and the first of the commits had to land, though the protocol
hands each buffer off through another (P through `s_free`, O through `o_ready`).

A thread's tcgen05 ops complete in issue order (one queue, model/semantics.py), so the MMA has
completed once any later tcgen05 arrival of its thread has landed: while it is still running,
every arrival the thread issued after it is in flight. Let A1 be the arrival queued_plan
chose, and A2..An the arrivals on the class that follow A1 directly in the thread's class
program (no other operation of the class between them), in the same loop iteration, running
whenever A1 does. The hold is live while each of A1..An has a delivery in flight on one of its
slots: `fly[q] >= 1` for some slot q of each.

Why this over-approximates the explorer. Take a reachable state of the class system in which
the MMA may still be running and an access conflicting with one of its cells is live. Before A1
is issued the MMA's ACCESS (or a later member's) covers the cells, as before (queued_plan). With
A1..An all issued, none has landed (the MMA runs), so the hold is live. With the thread standing
between A1 and An, extend the run by the thread's own next moves up to the issue of An: issues
never block, the other instances' operations in between are skipped, and the operations of other
classes are not in this system; those moves only raise fly counts and move that thread, so the
other access stays live (its thread stands where it stood, its deliveries are still in flight)
and the hold is live in the state reached, which the class system also reaches. So every race
of the explorer is a race of the class system.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import z3

from ...model import kinds, primitives
from .counters import QueueHold
from .plain import Plain

if TYPE_CHECKING:
    from .fragment import Role
    from .program import ClassBuilder

TCGEN05_ARRIVALS = kinds.kinds_where(lambda p: p.tensor_core)


def arrival(builder: "ClassBuilder", op) -> bool:
    """A tcgen05 op that arrives on a barrier of the class once it is done."""
    return op.kind in TCGEN05_ARRIVALS and op.barrier is not None and \
        op.barrier.alloc in builder.cls.allocs


def hold(builder: "ClassBuilder", role: "Role", first: tuple[int, int], cells, cops) -> None:
    """Hold each of the queued cells `cells` ((cell, writes, guard) triples, the guard over the
    arrival's loop coordinate) until the arrival at position `first` (its COps `cops`) and
    the ones right after it land: on each arrival, the slots of its COps whose guard can hold
    with the cell's (a cell of ring slot 2 waits for the delivery to `empty[2]`, not to any
    slot of the ring)."""
    holds = builder.__dict__.setdefault("_holds", {})
    runs = builder.__dict__.setdefault("_hold_runs", {})
    for cell, write, g in cells:
        key = (role.name, first, cell, write, g.sexpr())
        h = holds.get(key)
        if h is None:
            h = holds[key] = QueueHold((role.name, role.single), guard=g)
            (h.writes if write else h.reads).add(cell)
            for pos in arrival_run(builder, role, first):
                runs.setdefault((role.name, pos), []).append(h)
        slots = {q for cop in cops if compatible(builder, cop, g) for q in cop.slots}
        if slots:
            h.arrivals.setdefault(first, set()).update(slots)
            if h not in builder.holds:
                builder.holds.append(h)


def extend(builder: "ClassBuilder", role: "Role", pos: tuple[int, int], cops) -> None:
    """The arrival at `pos` follows the first arrival of holds directly: its slots (those
    whose guard can hold with the cell's) are one more arrival each of them waits for."""
    for h in builder.__dict__.get("_hold_runs", {}).get((role.name, pos), ()):
        slots = {q for cop in cops if compatible(builder, cop, h.guard) for q in cop.slots}
        if slots:
            h.arrivals.setdefault(pos, set()).update(slots)


def compatible(builder: "ClassBuilder", cop, g) -> bool:
    """The issue's guard can hold together with a cell's guard (both over its coordinate)."""
    return not builder.frag.solver.valid(z3.Not(z3.And(cop.guard, g)))


def arrival_run(builder: "ClassBuilder", role: "Role", first: tuple[int, int]
                ) -> list[tuple[int, int]]:
    """The positions of the tcgen05 arrivals on the class that directly follow the one at
    `first` in the role's class program (the next operations of the class, in the same loop
    body, or among the role's top-level operations with no loop between), each running
    whenever the first does, up to the first operation of the class that is not one."""
    j, n = first
    items = role.items
    item = items[j]
    frag = builder.frag
    out = []

    def c_op(op) -> bool:
        return op.kind != primitives.UNMODELED and bool(builder.class_refs(op))

    if item.kind == "loop":
        ops = item.ops
        ctx = builder.context(role, item)
        mine = ctx.guard(ops[n].conds)
        deltas = builder.op_offsets(role, item)[1] if builder.cls.ring is not None else None
        for m in range(n + 1, len(ops)):
            op = ops[m].op
            if not c_op(op):
                continue
            if not arrival(builder, op) or (deltas is not None and deltas[m] != deltas[n]) \
                    or not frag.solver.valid(z3.Implies(mine, ctx.guard(ops[m].conds))):
                break
            out.append((j, m))
        return out
    plain = Plain(frag, role.env, None)
    mine = plain.guard(item.conds)
    for m in range(j + 1, len(items)):
        it = items[m]
        if it.kind != "op":         # a loop, or a fork, join or await: the run ends
            break
        if not c_op(it.op):
            continue
        if not arrival(builder, it.op) or \
                not frag.solver.valid(z3.Implies(mine, plain.guard(it.conds))):
            break
        out.append((m, 0))
    return out


def held(st, h: QueueHold) -> z3.BoolRef:
    """The hold is live: each of its arrivals has a delivery in flight on one of its slots."""
    return z3.And([z3.Or([st.fly[q] >= 1 for q in sorted(qs)])
                   for _, qs in sorted(h.arrivals.items())])


def describe(system, h: QueueHold) -> str:
    """`tcgen05 MMA until s_free and empty2[0]|empty2[1] land`: the arrivals it waits for."""
    names = [" or ".join(sorted({system.instances[system.slots[q].inst].name for q in qs}))
             for _, qs in sorted(h.arrivals.items())]
    return f"tcgen05 MMA in flight until {' and '.join(names)} lands"
