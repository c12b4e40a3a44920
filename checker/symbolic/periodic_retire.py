"""A self-waited copy retired by its own loop's counted wait, for a symbolic count.

own_copies.py follows a copy forward path by path, which needs the wait's count to be a number
and the copy retired within a few iterations. A store ring (`wait_smem_to_gmem(stages - 1)`
before writing slot `i % stages`, then its TMA store) keeps a symbolic number of copies in
flight. When the copy's loop issues exactly one copy of its group per iteration and waits for
that group exactly once per iteration, both unconditionally, with a count n that no iteration
changes, the copy of iteration i is retired at a known point: the wait of iteration

    R = i + n + 1   when the wait comes before the copy in the body (copies i+1 .. R-1 since)
    R = i + n       when it comes after the copy (copies i+1 .. R since)

(at most n of the group still in flight, retired in issue order: model/memory.py). Z3 then
proves, for every parameter value and every i, j in range, that no access of iteration j to the
buffer lying after the copy and before that wait may touch the copy's cells, one of the two
writing; and, when the loop may end first (R >= trip count), that the code after the loop
reaches an unconditional wait of the group leaving none in flight before any access that may
overlap (loops on the way must leave the copy as it was: own_copies `_inert`). n must be
provably non-negative. Anything else: no proof (the caller keeps its `unknown`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import z3

from ...model.compile import ASYNC_GROUPS, ASYNC_WAITS
from .terms import Unsupported, z_int

if TYPE_CHECKING:
    from .fragment import BodyOp, Fragment, Item, Role


def retired_periodically(frag: "Fragment", role: "Role", item: "Item", bop: "BodyOp",
                         i: z3.ArithRef, facts: list, cond: z3.BoolRef,
                         overlaps: Callable, conds: Callable, inert: Callable) -> bool:
    """Whether the copy `bop` at iteration `i` of loop `item` (under `facts`, issued when
    `cond`) is retired before its thread touches its cells again (module doc). `overlaps`,
    `conds` and `inert` are own_copies.py's: may an op touch the copy's cells on a path, the
    conditions of an item, and whether a loop leaves the copy as it was."""
    if item.kind != "loop" or bop.conds:
        return False
    group = ASYNC_GROUPS[bop.op.kind]
    body = item.body
    issues = [p for p, b in enumerate(body) if ASYNC_GROUPS.get(b.op.kind) == group]
    waits = [p for p, b in enumerate(body) if ASYNC_WAITS.get(b.op.kind, (None,))[0] == group]
    if issues != [body.index(bop)] or len(waits) != 1 or body[waits[0]].conds:
        return False
    a, w = issues[0], waits[0]
    wait = body[w].op
    env, var = dict(role.env), item.loop.var
    try:
        trip = z_int(item.loop.trip, env)
        if ASYNC_WAITS[wait.kind][1]:
            n = z_int(wait.count, {**env, var: i})
            if not frag.solver.valid(n == z_int(wait.count, {**env, var: i + 1}), *facts):
                return False                       # the count changes from one iteration on
        else:
            n = z3.IntVal(0)
    except Unsupported:
        return False
    if not frag.solver.valid(n >= 0, *facts):
        return False
    retire = i + n + 1 if w < a else i + n
    j = z3.Int(f"periodic!{var}")
    for p, later in enumerate(body):
        benv = {**env, var: j}
        try:
            here = conds(later.conds, benv)
        except Unsupported:
            return False
        # (i, a) < (j, p) < (retire, w), lexicographically: after the copy, before its wait
        after = z3.Or(j > i, z3.And(j == i, p > a)) if p != a else j > i
        before = z3.Or(j < retire, z3.And(j == retire, p < w)) if p != w else j < retire
        path = [cond, j >= 0, j < trip, after, before, here]
        if overlaps(later.op, benv, path):
            return False
    # the loop ends before the wait retires the copy: the code after it must retire it
    ends_first = [cond, retire >= trip]
    if not frag.solver.possible(z3.And(ends_first), *facts):
        return True
    items = role.items
    for nxt in items[items.index(item) + 1:]:
        try:
            path = ends_first + [conds(nxt.conds, env)]
        except Unsupported:
            return False
        if nxt.kind == "loop":
            if not inert(nxt, env, path):
                return False
            continue
        if nxt.kind != "op" or overlaps(nxt.op, env, path):
            return False
        kind = nxt.op.kind
        if ASYNC_WAITS.get(kind, (None,))[0] == group and not nxt.conds:
            if not ASYNC_WAITS[kind][1]:
                return True
            try:
                keep = z3.simplify(z_int(nxt.op.count, env))
            except Unsupported:
                return False
            if z3.is_int_value(keep) and keep.as_long() == 0:
                return True
    return False                                   # still in flight at the thread's end
