"""Accesses a thread waits for itself, into buffers of that thread alone, proved race-free along
its own program.

A pre-Hopper `cp.async` (`k.cp_async`), a TMA store (`copy_smem_to_gmem`), a WGMMA and a
`tcgen05.st` are awaited only by the thread that issued them (`wait_gmem_to_smem(n)`,
`wait_smem_to_gmem(n)`, `wgmma_wait(n)`: at most n of its group still in flight, retired in
order; `tcgen05_wait_store`: none), and no barrier hears of them. When the buffers they touch
are touched by one thread only (these accesses, its loads and stores), every race on them is
between that thread and its own accesses in flight, and whether one exists is a question about
the thread's program alone: for every such "copy" (any of them), on every way the program can
go after it, is it retired before the thread touches an overlapping cell again, one of the two
writing (a store into a TMA store's source, a load of a cp.async destination, another copy)?

`own_copies_retired` answers it with Z3, for every parameter value: from the copy at iteration i
of its loop (i symbolic) or outside loops, it follows the program forward, splitting on every
condition (both ways where the path condition allows them) and at every loop end (the next
iteration if one runs, else the code after the loop), counting the copies issued since; a wait
retires the copy once at least n copies came after it. Any access on the way that may overlap
the copy's cells, a path that reaches the end of the thread or another loop, or one longer than
`HORIZON` iterations, means no proof. Then the copy's accesses need no place in the class
systems: no other thread touches those cells, and the thread itself never meets them live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import z3

from ...model import kinds
from ...model.compile import ASYNC_GROUPS, ASYNC_WAITS
from .terms import Unsupported, z_bool, z_int

if TYPE_CHECKING:
    from .fragment import BodyOp, Fragment, Item, Role

HORIZON = 3          # iterations a copy may stay in flight along one path
# What may touch a thread-private buffer: the thread's loads and stores, and the accesses it
# waits for itself (cp.async copies, TMA stores, WGMMA operands, tcgen05.st)
OWN_KINDS = kinds.kinds_where(lambda p: p.memory in ("thread", "issue"))


def private_buffers(frag: "Fragment", role: "Role", op) -> bool:
    """The buffers `op` touches are touched by `role` alone, a single thread, through loads,
    stores and accesses it waits for itself only."""
    names = {m.alloc.name for m in op.reads + op.writes}
    if not role.single or not names:
        return False
    for other in frag.roles:
        for item in other.items:
            for bop in item.ops:
                mine = [m for m in bop.op.reads + bop.op.writes if m.alloc.name in names]
                if not mine:
                    continue
                if other is not role or bop.op.kind not in OWN_KINDS:
                    return False
    return True


def own_copies_retired(frag: "Fragment", role: "Role", item: "Item", bop: "BodyOp",
                       touches: bool = True) -> bool:
    """Whether the copy `bop` is retired, on every way its thread can go, before the thread
    touches a cell the copy may write (module doc); with `touches` False, only whether it is
    retired before the thread ends (BP105 at the kernel's exit: checker/symbolic/exit_async.py)."""
    op = bop.op
    group = ASYNC_GROUPS[op.kind]
    items = role.items
    start = items.index(item)
    env = dict(role.env)
    facts = []
    if item.kind == "loop":
        i = z3.Int(f"copy!{item.loop.var}")
        facts += [i >= 0, i < z_int(item.loop.trip, env)]
        at = next(n for n, b in enumerate(item.body) if b is bop)
        first = (start, at + 1, i, 0)
        cond = z3.And(_conds(item.conds, env), _conds(bop.conds, {**env, item.loop.var: i}))
        here = {**env, item.loop.var: i}
    else:
        first = (start + 1, None, None, 0)
        cond = _conds(item.conds, env)
        here = env
    try:
        cells = [([z_int(e, here) for e in m.index], m.alloc.name, write)
                 for m, write in [(w, True) for w in op.writes] + [(r, False) for r in op.reads]
                 if touches]
    except Unsupported:
        return False
    names = {name for _, name, _ in cells}
    solver = frag.solver

    def feasible(path) -> bool:
        return solver.possible(z3.And(path), *facts)

    def overlaps(other, env_other, path) -> bool:
        """`other` may touch a cell of the access in flight, one of the two writing."""
        for m, write in [(w, True) for w in other.writes] + [(r, False) for r in other.reads]:
            if m.alloc.name not in names:
                continue
            mine_here = [c for c, name, w in cells if name == m.alloc.name and (w or write)]
            if not mine_here:
                continue                   # two reads never conflict
            if not m.index:
                return True
            try:
                theirs = [z_int(e, env_other) for e in m.index]
            except Unsupported:
                return True
            for mine in mine_here:
                if not mine or len(mine) != len(theirs):
                    return True
                same = z3.And([a == b for a, b in zip(mine, theirs)])
                if solver.possible(z3.And(path + [same]), *facts):
                    return True
        return False

    # (item index, body index or None, iteration term, iterations stepped), later, path
    work = [(first, 0, [cond])]
    while work:
        (n, b, it, stepped), later, path = work.pop()
        if not feasible(path):
            continue
        if n >= len(items):
            return False                   # still in flight at the thread's end
        cur = items[n]
        if cur.kind == "op":
            if b is not None:
                return False
            step = _visit(cur.op, _conds(cur.conds, env), env, path, later, group, overlaps)
            if step is None:
                return False
            for path2, later2, retired in step:
                if not retired:
                    work.append(((n + 1, None, None, stepped), later2, path2))
            continue
        if cur.kind != "loop":
            return False
        var, trip = cur.loop.var, z_int(cur.loop.trip, env)
        if b is None:                      # entering a loop after the copy
            if stepped >= HORIZON:
                return False
            runs = z3.And(_conds(cur.conds, env), trip >= 1)
            work.append(((n, 0, z3.IntVal(0), stepped + 1), later, path + [runs]))
            work.append(((n + 1, None, None, stepped), later, path + [z3.Not(runs)]))
            continue
        if b >= len(cur.body):             # the end of an iteration
            if stepped >= HORIZON:
                return False
            work.append(((n, 0, it + 1, stepped + 1), later, path + [it + 1 < trip]))
            work.append(((n + 1, None, None, stepped), later, path + [it + 1 >= trip]))
            continue
        benv = {**env, var: it}
        nxt = cur.body[b]
        step = _visit(nxt.op, _conds(nxt.conds, benv), benv, path, later, group, overlaps)
        if step is None:
            return False
        for path2, later2, retired in step:
            if not retired:
                work.append(((n, b + 1, it, stepped), later2, path2))
    return True


def _visit(op, cond, env, path, later, group, overlaps):
    """The ways past one operation: [(path, copies since, retired)]; None when it may touch the
    copy's cells while it is in flight."""
    out = [(path + [z3.Not(cond)], later, False)]
    taken = path + [cond]
    if overlaps(op, env, taken):
        return None
    wait = ASYNC_WAITS.get(op.kind)
    if wait is not None and wait[0] == group:
        if not wait[1]:
            out.append((taken, later, True))
        else:
            keep = z3.simplify(z_int(op.count, env))
            if not z3.is_int_value(keep):
                return None
            out.append((taken, later, later >= keep.as_long()))
    else:
        issued = op.kind in ASYNC_GROUPS and ASYNC_GROUPS[op.kind] == group
        out.append((taken, later + (1 if issued else 0), False))
    return out


def _conds(conds, env) -> z3.BoolRef:
    return z3.And([z_bool(c, env) if pos else z3.Not(z_bool(c, env)) for c, pos in conds]
                  or [z3.BoolVal(True)])
