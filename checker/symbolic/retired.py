"""Accesses a thread waits for itself (a WGMMA until `wgmma_wait(n)`) that stay live past
the next instruction in a ring class, covered by the ACCESS at their issue (races.py).

The class system may keep a thread at an ACCESS until its next class event on the same slot:
the moves off an ACCESS, and past class operations of other slots of the ring (which have no
effect at the representative slot), change nothing at that slot, so delaying them is one of
its interleavings. So an access retired, on every way the thread can go, before its thread's
next event on the slot is live only while the class system may have the thread at the ACCESS,
and the ACCESS covers it, as it covers a load or store in its gap. Two shapes are proved here:

- in a ring loop (CUTLASS's `wgmma_wait(1)` keeping one group in flight and releasing the
  slot before): on in the iteration, through the next one, or out of the loop (_in_ring_loop);
- outside loops (a pipeline's peeled first stage, issued before the ring loop whose first
  iteration's `wgmma_wait(1)` retires it): on through the following items, into the first
  iteration of a loop when it runs and past it when it may not (_outside_loops).

Groups retire in order: a wait of the group that leaves at most n in flight retires an issue
followed by at least n issues of the group that surely ran (unconditional ones counted only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import z3

from ...model.compile import ASYNC_GROUPS, ASYNC_WAITS
from .classes import ring_lhs
from .terms import Unsupported, linear_in, z_int

if TYPE_CHECKING:
    from .fragment import BodyOp, Item, Role
    from .program import ClassBuilder


def retired_before_next_slot_event(builder: "ClassBuilder", role: "Role", item: "Item",
                                   bop: "BodyOp") -> bool:
    """Whether the issue `bop` is retired before its thread's next class event on its slot of
    the ring (module doc)."""
    if builder.cls.ring is None:
        return False
    if item.kind == "loop":
        return _in_ring_loop(builder, role, item, bop)
    if item.kind == "op":
        return _outside_loops(builder, role, item)
    return False


def _in_ring_loop(builder: "ClassBuilder", role: "Role", item: "Item",
                                    bop: "BodyOp") -> bool:
    """Whether an issue in a ring loop (CUTLASS's `wgmma_wait(1)` keeping one WGMMA in flight)
    is retired before its thread's next event on the same slot of the ring.

    The access is live from the issue at iteration i to the first wait of its group that
    leaves at most n in flight with n later issues since (groups retire in order), along both
    ways the thread can go: on in the same iteration, then through iteration i + 1 (at most
    one more iteration), or out of the loop after iteration i. If no operation on that way is
    a class event of slot (i + c) % S (they address other slots, proved for every ring size,
    or other classes), the thread's class position does not change while the access is live:
    the class system may keep the thread at the issue's ACCESS for the whole interval (the move
    off an ACCESS has no effect, so delaying it to the thread's next class event is one of its
    interleavings). Then the ACCESS at the issue covers the interval, as for an access retired
    by the next instruction; the thread's own accesses on the way touch other slots, so it
    cannot race its own access either."""
    cls, frag = builder.cls, builder.frag
    if cls.ring is None or item.kind != "loop":
        return False
    op = bop.op
    group = ASYNC_GROUPS[op.kind]
    var, env, S = item.loop.var, role.env, cls.ring
    mine = ring_offset(builder, op, env, var)
    if mine is None:
        return False
    at = next(n for n, b in enumerate(item.body) if b is bop)
    body = item.body

    def other_slot(o, shift: int) -> bool:
        """`o`, run `shift` iterations after the issue, addresses no slot-s class event."""
        refs = builder.class_refs(o)
        if not refs:
            return True
        c = ring_offset(builder, o, env, var)
        if c is None:
            return False
        d = z3.simplify(c + shift - mine)
        if not z3.is_int_value(d) or d.as_long() == 0:
            return False
        return frag.solver.valid(S > abs(d.as_long()))

    def retires(o, conds, later: int) -> bool:
        wait = ASYNC_WAITS.get(o.kind)
        if wait is None or wait[0] != group:
            return False
        if conds:                          # a wait that may be skipped retires nothing
            return False
        if not wait[1]:
            return True
        keep = z3.simplify(z_int(o.count, env))
        return z3.is_int_value(keep) and keep.as_long() <= later

    def counts(b) -> int:
        return 1 if b.op.kind in ASYNC_GROUPS and ASYNC_GROUPS[b.op.kind] == group and \
            not b.conds else 0

    later = 0
    for b in body[at + 1:]:                # on in the same iteration
        if retires(b.op, b.conds, later):
            return True
        if not other_slot(b.op, 0):
            return False
        later += counts(b)
    through, nxt = False, later            # through iteration i + 1 (and no further)
    for b in body:
        if retires(b.op, b.conds, nxt):
            through = True
            break
        if not other_slot(b.op, 1):
            break
        nxt += counts(b)
    if not through:
        return False
    items = role.items                     # out of the loop after iteration i
    for after in items[items.index(item) + 1:]:
        if after.kind != "op":
            return False
        if retires(after.op, after.conds, later):
            return True
        if builder.class_refs(after.op):
            return False
        later += 1 if after.op.kind in ASYNC_GROUPS and \
            ASYNC_GROUPS[after.op.kind] == group and not after.conds else 0
    return False


def ring_offset(builder: "ClassBuilder", op, env, var):
    """c when every reference of `op` into the ring class is (i + c) % S, else None."""
    found = None
    for ref in builder.class_refs(op):
        try:
            lin = linear_in(ring_lhs(builder.frag, ref, env, builder.cls.ring), var, env,
                            builder.frag.solver)
        except Unsupported:
            return None
        if lin is None or lin[0] != 1:
            return None
        if found is not None and not builder.frag.solver.equal(found, lin[1]):
            return None
        found = lin[1]
    return found


def _constant_slot(builder: "ClassBuilder", op, env):
    """s when every reference of `op` outside loops into the ring class is the constant slot
    position s (before the wrap), else None."""
    found = None
    for ref in builder.class_refs(op):
        try:
            t = z3.simplify(z_int(ring_lhs(builder.frag, ref, env, builder.cls.ring), env))
        except Unsupported:
            return None
        if not z3.is_int_value(t) or (found is not None and found != t.as_long()):
            return None
        found = t.as_long()
    return found


def _retires(op, conds, group, later: int, env) -> bool:
    """A wait of `group` that surely runs and leaves at most `later` of it in flight."""
    wait = ASYNC_WAITS.get(op.kind)
    if wait is None or wait[0] != group or conds:
        return False
    if not wait[1]:
        return True
    keep = z3.simplify(z_int(op.count, env))
    return z3.is_int_value(keep) and keep.as_long() <= later


def _issues(op, conds, group) -> int:
    return 1 if ASYNC_GROUPS.get(op.kind) == group and not conds else 0


def _outside_loops(builder: "ClassBuilder", role: "Role", item: "Item") -> bool:
    """An issue outside loops at constant ring position c0 (slot c0 % S): along the role's
    next items, each way the thread can go reaches a retiring wait before a class event whose
    slot may be c0's. A loop's first iteration (position c + 0 for its operations of offset c)
    is followed when the loop surely runs (Z3: trip >= 1); else the way that skips it too,
    with the issues inside not counted. The retirement must come within that first iteration
    (or past the loop): the class events of later iterations are not followed."""
    frag, S, env = builder.frag, builder.cls.ring, role.env
    op = item.op
    group = ASYNC_GROUPS[op.kind]
    c0 = _constant_slot(builder, op, env)
    if c0 is None or item.conds:
        return False

    def apart(d) -> bool:        # positions d apart are different slots for every ring size
        return d != 0 and frag.solver.valid(S > abs(d))

    items = role.items
    later = 0
    for nxt in items[items.index(item) + 1:]:
        if nxt.kind == "op":
            if _retires(nxt.op, nxt.conds, group, later, env):
                return True
            if builder.class_refs(nxt.op):
                c = _constant_slot(builder, nxt.op, env)
                if c is None or not apart(c - c0):
                    return False
            later += _issues(nxt.op, nxt.conds, group)
            continue
        if nxt.kind != "loop":
            return False
        var = nxt.loop.var
        inside, retired = later, False
        for b in nxt.body:                      # its first iteration, at i = 0
            if _retires(b.op, b.conds, group, inside, env):
                retired = True
                break
            if builder.class_refs(b.op):
                c = ring_offset(builder, b.op, env, var)
                if c is None:
                    return False
                d = z3.simplify(c - c0)
                if not z3.is_int_value(d) or not apart(d.as_long()):
                    return False
            inside += _issues(b.op, b.conds, group)
        if not retired:
            return False
        if not nxt.conds and frag.solver.valid(z_int(nxt.loop.trip, env) >= 1):
            return True
        # the way past a loop that may run no iteration: its issues not counted
    return False
