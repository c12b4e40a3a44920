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
from ...model.ir import free_vars
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


def own_cells(frag: "Fragment", role: "Role", item: "Item", bop: "BodyOp") -> bool:
    """No agent but `role`'s thread touches a cell the access `bop` touches, one of the two
    writing, for every parameter value and loop position (two warpgroups each storing from its
    own staging slot `out_smem.at[wg, slot]`): then, as for `private_buffers`, every race on
    those cells is between the thread and its own accesses in flight (own_copies_retired).

    Another role's reference is apart when Z3 proves that the slot indices the two name differ
    in some dimension of their common prefix (the region dimensions after them are judged
    whole, coarser), with each loop coordinate free within its trip count. Loads, stores and
    accesses waited for by their own thread resolve in their own block (model/compile.py
    `_accesses`), so another block's such accesses touch other memory; a TMA load may land in
    any block (a multicast), so it is compared in every block. The thread's own loads, stores
    and self-waited accesses are left to own_copies_retired; its other accesses (a TMA load it
    issues, an MMA) are asynchronous agents of their own, compared like another role's."""
    op = bop.op
    if not role.single or not op.reads + op.writes:
        return False
    solver = frag.solver
    try:
        mine, facts = _refs_at(op, role, item, bop, "copy!")
    except Unsupported:
        return False
    names = {m.alloc.name for m, _ in mine}
    for other in frag.roles:
        for it in other.items:
            for b in it.ops:
                o = b.op
                theirs = [(m, w) for m, w in _refs(o) if m.alloc.name in names]
                if not theirs or (o.kind in OWN_KINDS and (
                        other is role or other.block != role.block)):
                    continue
                try:
                    refs, more = _refs_at(o, other, it, b, "other!")
                except Unsupported:
                    return False
                if other.block != role.block:      # another block: another grid position
                    fresh = [(g, z3.FreshInt("grid")) for g in frag.grid_vars.values()]
                    for r in refs:
                        r[0].index = [z3.substitute(t, *fresh) if fresh else t
                                      for t in r[0].index]
                    more = [z3.substitute(f, *fresh) if fresh else f for f in more]
                for m2, w2 in refs:
                    if not other.single and frag.kernel.thread_axis in \
                            set().union(*[free_vars(e) for e in m2.exprs()]):
                        return False       # its threads' slots are not told apart here
                    for m1, w1 in mine:
                        if m1.alloc.name != m2.alloc.name or not (w1 or w2):
                            continue
                        if not _apart(m1, m2, facts + more, solver):
                            return False
    return True


def owned_buffer(frag: "Fragment", alloc) -> bool:
    """Every access to `alloc` is a load, store or self-waited access of a single thread to
    cells no other agent touches (own_cells), each self-waited one retired before its thread
    touches those cells again (own_copies_retired): no race on the buffer is possible, and it
    needs no place in the class systems (the staging buffer of an epilogue whose warpgroups
    each store from their own slots)."""
    users = {id(op) for op in frag.kernel.ops()
             if any(m.alloc is alloc for m in op.reads + op.writes)}
    seen = set()
    for role in frag.roles:
        for item in role.items:
            for bop in item.ops:
                op = bop.op
                if id(op) not in users:
                    continue
                seen.add(id(op))
                if op.kind not in OWN_KINDS or not own_cells(frag, role, item, bop):
                    return False
                if op.kind in ASYNC_GROUPS and not own_copies_retired(frag, role, item, bop):
                    return False
    return bool(users) and seen == users


def _refs(op) -> list:
    return [(m, True) for m in op.writes] + [(m, False) for m in op.reads]


def _refs_at(op, role: "Role", item: "Item", bop: "BodyOp", tag: str):
    """The references of `op` as (ref, their index terms, writes) in its role's environment,
    with the facts on its loop coordinate (`tag` names it apart) and the conditions it runs
    under."""
    env = dict(role.env)
    facts = [_conds(item.conds, env)]
    if item.kind == "loop":
        i = z3.Int(f"{tag}{role.name}!{item.loop.var}")
        facts += [i >= 0, i < z_int(item.loop.trip, env)]
        env[item.loop.var] = i
        facts.append(_conds(bop.conds, env))
    return [(_Ref(m, [z_int(e, env) for e in m.index]), w) for m, w in _refs(op)], facts


class _Ref:
    """A memory reference with its slot indices as Z3 terms."""

    def __init__(self, ref, index):
        self.ref, self.alloc, self.index = ref, ref.alloc, index

    def exprs(self):
        return self.ref.exprs()


def _apart(a: _Ref, b: _Ref, facts, solver) -> bool:
    n = min(len(a.index), len(b.index))
    if n == 0:
        return False
    for x, y in zip(a.index[:n], b.index[:n]):
        x, y = z3.simplify(x), z3.simplify(y)
        if z3.is_int_value(x) and z3.is_int_value(y) and x.as_long() != y.as_long():
            return True                    # two numbers: no solver needed
    return not solver.possible(z3.And([x == y for x, y in zip(a.index[:n], b.index[:n])]),
                               *facts)


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

    if _along_paths(items, first, cond, env, group, overlaps, feasible):
        return True
    # a symbolic count or a long window: the copy's own loop retires it periodically
    from .periodic_retire import retired_periodically
    return item.kind == "loop" and retired_periodically(frag, role, item, bop, i, facts, cond,
                                                        overlaps, _conds, _inert)


def _along_paths(items, first, cond, env, group, overlaps, feasible) -> bool:
    """Whether every way from `first` retires the copy before `overlaps` may meet it."""
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
            if _inert(cur, env, path, group, overlaps):
                # no iteration touches the copy's cells or its group: past the loop, the copy
                # is as it was (a K loop between one tile's stores and the next tile's wait)
                work.append(((n + 1, None, None, stepped), later, path))
                continue
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


def _inert(loop: "Item", env, path, group, overlaps) -> bool:
    """No iteration of `loop` issues or waits for an access of `group` or may touch the cells
    of the copy in flight: every iteration, run or not, leaves the copy as it was."""
    i = z3.Int(f"inert!{loop.loop.var}")
    benv = {**env, loop.loop.var: i}
    inside = path + [_conds(loop.conds, env), i >= 0, i < z_int(loop.loop.trip, env)]
    for b in loop.body:
        kind = b.op.kind
        if ASYNC_GROUPS.get(kind) == group or ASYNC_WAITS.get(kind, (None,))[0] == group:
            return False
        if overlaps(b.op, benv, inside + [_conds(b.conds, benv)]):
            return False
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
