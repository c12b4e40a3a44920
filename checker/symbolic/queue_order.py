"""The issue order of a thread's tcgen05 queue, kept in a class system by one ghost variable.

A thread's tcgen05 ops complete in issue order (one queue per issuing thread,
model/semantics.py). A class system counts the arrivals in flight per slot (`fly[q]`), which
loses that order: the commit releasing ring slot 1 may land before the one releasing slot 0.
A CUTLASS or Gluon MMA partition that ends by waiting for its last release (the drain: the
last commit's completion, hence every earlier one) then looks, to the class system, as if it
could exit with the older releases still in flight (BP105), which the explorer never finds.

For a one-thread role that alone issues two or more tcgen05 slots of the class, each from an
operation with one slot, the system keeps `newest[role]`: the slot of the role's newest tcgen05
op of the class while it is in flight, -1 once it has landed (or before any issue). An issue on
slot q sets it to q. A landing on q while `newest == q` and `fly[q] == 1` is the newest op's
own (the only one in flight on q): the queue lets it land only when every older op of the role
on the class's slots has landed, so it requires every other `fly` of the role to be 0 and sets
`newest` to -1. Any other landing leaves it as it is and stays unconstrained.

Every landing the explorer makes satisfies these guards (the newest op lands last), so the
class system still over-approximates the explorer; the ops of the queue on other classes'
barriers are ignored, which only drops order, never adds it. Two facts follow by construction
and are checked inductive with the others (encode.py, `check_sane`): `newest == q` implies
`fly[q] >= 1`, and `newest == -1` implies no op of the role in flight on the class's slots.
"""

from __future__ import annotations

import z3

from .counters import ISSUE, CounterSystem

NONE = -1     # the newest op has landed, or nothing was issued yet


def queues(system: CounterSystem) -> dict[int, tuple[int, ...]]:
    """role index -> the tcgen05 slots whose issue order the system keeps for it."""
    issuers: dict[int, set[int]] = {}
    mine: dict[int, set[int]] = {}
    multi: set[int] = set()
    for r, role in enumerate(system.roles):
        for seg in role.segments:
            for op in seg.body:
                if op.kind != ISSUE:
                    continue
                tc = [q for q in op.slots if system.slots[q].kind == "tcgen05"]
                if tc and len(op.slots) != 1:
                    multi.add(r)            # one op arriving on several barriers: no order
                for q in tc:
                    issuers.setdefault(q, set()).add(r)
                    mine.setdefault(r, set()).add(q)
    out = {}
    for r, slots in mine.items():
        if not system.roles[r].single or r in multi or len(slots) < 2:
            continue
        if all(issuers[q] == {r} for q in slots):
            out[r] = tuple(sorted(slots))
    return out


def issue(new, r: int, op, owned: dict[int, tuple[int, ...]]) -> None:
    """An issue by role r: its op becomes the newest of its queue (new is modified)."""
    if r in owned and op.slots and op.slots[0] in owned[r]:
        new.newest[r] = z3.IntVal(op.slots[0])


def landing(st, new, q: int, owned: dict[int, tuple[int, ...]]) -> list[tuple[list, object]]:
    """A landing on slot q (new: the state after its fly count dropped) as branches
    (conditions, state): the newest op's landing needs the older ones landed."""
    owner = next((r for r, slots in owned.items() if q in slots), None)
    if owner is None:
        return [([], new)]
    is_newest = z3.And(st.newest[owner] == q, st.fly[q] == 1)
    last = new.copy()
    last.newest[owner] = z3.IntVal(NONE)
    older = [st.fly[o] == 0 for o in owned[owner] if o != q]
    return [([is_newest] + older, last), ([z3.Not(is_newest)], new)]


def facts(st, owned: dict[int, tuple[int, ...]]) -> list:
    """What holds by construction (checked inductive with the system's other facts)."""
    out = []
    for r, slots in owned.items():
        v = st.newest[r]
        out.append(z3.Or([v == NONE] + [v == q for q in slots]))
        out += [z3.Implies(v == q, st.fly[q] >= 1) for q in slots]
        out.append(z3.Implies(v == NONE, z3.And([st.fly[q] == 0 for q in slots])))
    return out
