"""A flat buffer laid out stage after stage, read as a ring's stages of rows.

A ring of S stages whose each stage is m slots (a consumer warp's row each, a TMA copy filling
the stage's m slots at once) is often declared flat, S*m slots, and indexed
`(i % S) * m + c` (one row) or `ds((i % S) * m + c, l)` (rows c .. c+l-1 of the stage). The race
proof judges a buffer at one ring slot only when its first dimension is the ring's (races.py,
`_concrete_ring_of`); the flat one goes to the class of every concrete barrier instead, where
the ring and the hand-offs beside it (a named barrier before an epilogue's store) make one
class too large to close.

The rewrite gives such a buffer the shape (S, m), slot k becoming (k // m, k % m): a bijection
of the slots, so two accesses meet on a cell after it iff they met before (cells are single
slots: a buffer with a coarser granule is left as it is). Each reference is rewritten only
when it is read off as a stage and a row range inside the stage, and Z3 proves the new
reference names the same slots (stage*m + row == the old index, 0 <= row, row + l <= m);
anything else (another index, a region across stages) leaves the whole buffer as it is.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import z3

from ...model.ir import (BinOp, Const, Expr, Kernel, Loop, MemAlloc, MemRef, Op, Slice, Var,
                         WarpRegion, When, evaluate, free_vars)
from ...model.expr import mk
from .nested import _term
from .ring_index import _affine


def _stage_and_row(e: Expr, S: int, m: int) -> tuple[Expr, int] | None:
    """(stage, row) when `e` is `(x % S) * m + row` (either operand order, row a constant),
    `(a*i + c) % (S*m)` with m dividing a (as ring_index.py writes the former: the stage is
    `(a/m*i + c//m) % S`, the row c % m), or a constant; None otherwise."""
    if isinstance(e, Const):
        return Const(e.value // m), e.value % m
    if isinstance(e, BinOp) and e.op == "%" and isinstance(e.rhs, Const) and \
            e.rhs.value == S * m and len(free_vars(e.lhs)) == 1:
        [var] = free_vars(e.lhs)
        found = _affine(e.lhs, var, None)
        if found is not None and found[0] % m == 0 and isinstance(found[1], Const):
            a, c = found[0], found[1].value
            return mk("%", mk("+", mk("*", Var(var), Const(a // m)), Const(c // m)),
                      Const(S)), c % m
    row = 0
    if isinstance(e, BinOp) and e.op == "+" and isinstance(e.rhs, Const):
        e, row = e.lhs, e.rhs.value
    if not (isinstance(e, BinOp) and e.op == "*"):
        return None
    for stage, scale in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        if isinstance(scale, Const) and scale.value == m and isinstance(stage, BinOp) and \
                stage.op == "%" and isinstance(stage.rhs, Const) and stage.rhs.value == S:
            return stage, row
    return None


def _same_slots(old: Expr, stage: Expr, row: int, size: int, m: int) -> bool:
    """Z3: the old start is stage*m + row for every value of the variables, and the rows
    row .. row+size-1 lie in one stage."""
    if row < 0 or row + size > m:
        return False
    solver = z3.Solver()
    solver.set(timeout=2000)
    solver.add(_term(old, {}) != _term(stage, {}) * m + row)
    return solver.check() == z3.unsat


def _rows_ref(ref: MemRef, new: MemAlloc, S: int, m: int) -> MemRef | None:
    if not ref.index and not ref.region:
        return MemRef(new)                                  # the whole buffer, whole
    if len(ref.index) == 1 and not ref.region:
        found = _stage_and_row(ref.index[0], S, m)
        if found and _same_slots(ref.index[0], *found, 1, m):
            # the stage as the leading index, the row as a region (races.py reads a ring
            # slot from one leading index)
            return MemRef(new, (found[0],), (Slice(Const(found[1]), Const(1)),))
        return None
    if not ref.index and len(ref.region) == 1:
        r = ref.region[0]
        if not (isinstance(r.size, Const) and isinstance(r.stride, Const) and r.stride.value == 1):
            return None
        found = _stage_and_row(r.start, S, m)
        if found and _same_slots(r.start, *found, r.size.value, m):
            return MemRef(new, (found[0],), (Slice(Const(found[1]), r.size),))
    return None


def _refs(body):
    for s in body:
        if isinstance(s, Op):
            yield from s.reads + s.writes
        elif isinstance(s, Loop) or isinstance(s, WarpRegion):
            yield from _refs(s.body)
        elif isinstance(s, When):
            yield from _refs(s.then + s.orelse)


def _swap(body, table: dict, memo: dict) -> tuple:
    """The statements with each rewritten reference swapped in; an op held at two places stays
    one op."""
    out = []
    for s in body:
        if isinstance(s, Op):
            if id(s) not in memo:
                memo[id(s)] = dataclasses.replace(
                    s, reads=tuple(table.get(id(r), r) for r in s.reads),
                    writes=tuple(table.get(id(w), w) for w in s.writes))
            out.append(memo[id(s)])
        elif isinstance(s, Loop):
            out.append(Loop(s.var, s.trip, _swap(s.body, table, memo), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _swap(s.then, table, memo), _swap(s.orelse, table, memo),
                            s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _swap(s.body, table, memo), s.loc))
        else:
            raise TypeError(f"not a statement: {s!r}")
    return tuple(out)


def ring_rows(kernel: Kernel, fixed: Mapping[str, int]) -> tuple[Kernel, list[str]]:
    """The kernel with each flat buffer of S*m slots indexed stage by stage as S stages of m
    rows, S the size of one of its barrier arrays (module doc), and a note per buffer."""
    rings = set()
    for b in kernel.barriers:
        if len(b.shape) == 1 and not free_vars(b.shape[0]) - set(fixed):
            rings.add(evaluate(b.shape[0], dict(fixed)))
    table: dict[int, MemRef] = {}
    buffers, notes = [], []
    refs = list(_refs(kernel.body))
    for alloc in kernel.buffers:
        done = None
        if len(alloc.shape) == 1 and not free_vars(alloc.shape[0]) - set(fixed) and \
                all(g == 1 for g in alloc.granule):
            N = evaluate(alloc.shape[0], dict(fixed))
            mine = [r for r in refs if r.alloc is alloc]
            for S in sorted(s for s in rings if 1 < s < N and N % s == 0):
                m = N // S
                new = MemAlloc(alloc.name, alloc.space, (Const(S), Const(m)), alloc.loc,
                               scalar=False)
                swapped = {id(r): _rows_ref(r, new, S, m) for r in mine}
                if mine and all(v is not None for v in swapped.values()):
                    done = new
                    table.update(swapped)
                    notes.append(f"buffer `{alloc.name}` of {N} slots indexed stage by stage: "
                                 f"{S} stages of {m} rows, each reference proved (Z3) to name "
                                 "the same slots (checker/symbolic/ring_rows.py)")
                    break
        buffers.append(done or alloc)
    if not notes:
        return kernel, []
    return kernel.replace(body=_swap(kernel.body, table, {}), buffers=tuple(buffers)), notes


__all__ = ["ring_rows"]
