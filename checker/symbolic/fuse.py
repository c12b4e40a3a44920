"""Peeled pipeline loops joined again before the fragment is built: the same program, rewritten.

Pallas pipelines (`emit_pipeline*`) issue the first `stages` loads in a prologue loop and then
run a steady-state loop that waits for a released slot before each load:

    loop a < Ta:   copy(full[a])                      # prologue
    loop b < Tb:   wait(empty[b % 2]); copy(full[b % 2])

which is the one loop `loop v < Ta + Tb: when v >= Ta: wait(empty[(v - Ta) % 2]); copy(...)`
the static event order of the prover aligns with the consumers' loop (a DSL ring is written
that way). The rewrite is made only when Z3 proves, for every parameter value the assumptions
allow, that both trip counts are >= 0 and that every expression of the prologue's operations at
iteration v equals the steady state's at iteration v - Ta (so the fused loop runs exactly the
same operations in the same order); otherwise the loops stay as they are.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import z3

from ...model.expr import OPAQUE_PREFIX, mk, substitute_stmts
from ...model.ir import BinOp, Const, Expr, Kernel, Loop, Op, Var, WarpRegion, When, free_vars
from .terms import Unsupported, z_bool, z_int


def fuse_peeled_loops(kernel: Kernel, symbolic: Sequence[str],
                      fixed: Mapping[str, int]) -> tuple[Kernel, int]:
    """The kernel with every provable prologue + steady-state pair joined; how many were."""
    fuser = _Fuser(kernel, symbolic, fixed)
    body = fuser.body(kernel.body)
    return (kernel.replace(body=body) if fuser.fused else kernel), fuser.fused


class _Fuser:
    def __init__(self, kernel: Kernel, symbolic, fixed):
        self.env: dict[str, z3.ArithRef | int] = dict(fixed)
        self.facts = []
        for n in symbolic:
            self.env[n] = z3.Int(n)
        try:
            self.facts = [z_bool(a, self.env) for a in kernel.assumptions]
        except Unsupported:
            self.facts = [z3.BoolVal(False)]      # nothing is proved
        self.fused = 0
        self.path: list = []        # conditions of the enclosing branches, over parameters

    def _z(self, e: Expr, env) -> z3.ArithRef:
        for v in free_vars(e):
            if v not in env:
                env[v] = z3.Int(v)
                if not v.startswith(OPAQUE_PREFIX):     # indices and loop variables; data
                    self.facts_extra.append(env[v] >= 0)  # may be anything
        return z_int(e, env)

    def _valid(self, claim, extra=()) -> bool:
        s = z3.Solver()
        s.set("timeout", 5000)
        s.add(*self.facts, *self.path, *self.facts_extra, *extra, z3.Not(claim))
        return s.check() == z3.unsat

    def body(self, stmts) -> tuple:
        out: list = []
        for s in stmts:
            if isinstance(s, Loop):
                s = Loop(s.var, s.trip, self.body(s.body), s.loc)
            elif isinstance(s, When):
                s = When(s.cond, self.within(s.cond, True, s.then),
                         self.within(s.cond, False, s.orelse), s.loc)
            elif isinstance(s, WarpRegion):
                s = WarpRegion(s.axis, self.body(s.body), s.loc)
            if out and isinstance(out[-1], Loop) and isinstance(s, Loop):
                joined = self.join(out[-1], s)
                if joined is not None:
                    out[-1] = joined
                    self.fused += 1
                    continue
            if out and isinstance(out[-1], Op) and isinstance(s, Loop):
                rotated = self.rotate(out, s)
                if rotated is not None:
                    q, loop = rotated
                    del out[len(out) - q:]
                    out.append(loop)
                    self.fused += 1
                    continue
            out.append(s)
        return tuple(out)

    def rotate(self, before: list, b: Loop) -> tuple[int, Loop] | None:
        """A rotated loop (CUTLASS's mainloop with a release lag: wait for stage 0, then each
        iteration waits for stage t + 1 and releases stage t) whose q peeled operations are the
        first q operations of the body at iteration -1:

            P;  loop t < T: H(t); R(t)      ==   loop t < T + 1: H(t - 1); when t >= 1: R(t - 1)

        when Z3 proves T >= 0 and P == H(-1) expression by expression. (q, the loop) or None."""
        qb = len(b.body)
        ops = 0
        while ops < len(before) and isinstance(before[len(before) - 1 - ops], Op):
            ops += 1
        for q in range(min(ops, qb - 1), 0, -1):
            pro, head, rest = before[len(before) - q:], b.body[:q], b.body[q:]
            if not all(isinstance(y, Op) for y in head) or \
                    any(not _same_shape(x, y) for x, y in zip(pro, head)):
                continue
            v = Var(b.var)
            prev = mk("-", v, Const(1))
            self.facts_extra = []
            try:
                env = dict(self.env)
                tb = self._z(b.trip, env)
                if not self._valid(tb >= 0):
                    return None
                at_minus_one = substitute_stmts(head, {b.var: Const(-1)})
                for x, y in zip(pro, at_minus_one):
                    for ex, ey in zip(_exprs(x), _exprs(y)):
                        if not self._valid(self._z(ex, env) == self._z(ey, env)):
                            raise Unsupported("differs")
            except Unsupported:
                continue
            guard = When(mk(">=", v, Const(1)), substitute_stmts(rest, {b.var: prev}), (),
                         b.loc)
            body = substitute_stmts(head, {b.var: prev}) + (guard,)
            return q, Loop(b.var, mk("+", b.trip, Const(1)), body, b.loc)
        return None

    def within(self, cond, holds: bool, stmts) -> tuple:
        """The branch's statements, with its condition known when it is about parameters."""
        try:
            fact = z_bool(cond, self.env) if free_vars(cond) <= set(self.env) else None
        except Unsupported:
            fact = None
        if fact is not None:
            self.path.append(fact if holds else z3.Not(fact))
        try:
            return self.body(stmts)
        finally:
            if fact is not None:
                self.path.pop()

    def join(self, a: Loop, b: Loop) -> Loop | None:
        qa, qb = len(a.body), len(b.body)
        if not qa or qb <= qa or not all(isinstance(x, Op) for x in a.body + b.body):
            return None
        pre, tail = b.body[:qb - qa], b.body[qb - qa:]
        if any(not _same_shape(x, y) for x, y in zip(a.body, tail)):
            return None
        v = Var(a.var)
        shifted = mk("-", v, a.trip)
        moved = _fold_ring_offsets(substitute_stmts(tail, {b.var: shifted}))
        self.facts_extra = []
        try:
            env = dict(self.env)
            zv = self._z(v, env)
            ta, tb = self._z(a.trip, env), self._z(b.trip, env)
            if not (self._valid(ta >= 0) and self._valid(tb >= 0)):
                return None
            inside = (zv >= 0, zv < ta)
            for x, y in zip(a.body, moved):
                for ex, ey in zip(_exprs(x), _exprs(y)):
                    if not self._valid(self._z(ex, env) == self._z(ey, env), inside):
                        return None
        except Unsupported:
            return None
        guard = When(mk(">=", v, a.trip),
                     _fold_ring_offsets(substitute_stmts(pre, {b.var: shifted})), (), b.loc)
        return Loop(a.var, mk("+", a.trip, b.trip), (guard,) + moved, a.loc)


def _fold_mod(e: Expr) -> Expr:
    """`(x + c) % m` with c outside 0..m-1 as `(x + c mod m) % m` (the same value for every
    integer x: the remainder takes the sign of m > 0), and `(x +- m) % m` as `x % m` for a
    symbolic m (the same value for every m != 0). The steady state moved back by the
    prologue's length indexes its ring `(v - 2) % 2`, or `(v - S) % S`; the ring classes count
    laps from slot position 0, so the offset is kept in 0..m-1."""
    if isinstance(e, BinOp):
        lhs, rhs = _fold_mod(e.lhs), _fold_mod(e.rhs)
        if e.op == "%" and isinstance(rhs, Const) and rhs.value > 0 and isinstance(lhs, BinOp) \
                and lhs.op in ("+", "-") and isinstance(lhs.rhs, Const):
            c = lhs.rhs.value if lhs.op == "+" else -lhs.rhs.value
            return mk("%", mk("+", lhs.lhs, Const(c % rhs.value)), rhs)
        if e.op == "%" and isinstance(lhs, BinOp) and lhs.op in ("+", "-") and \
                repr(lhs.rhs) == repr(rhs):
            # `(x - S) % S` is `x % S` for a ring of symbolic size S (the prologue's length)
            return mk("%", lhs.lhs, rhs)
        return mk(e.op, lhs, rhs)
    return e


def _fold_ring_offsets(stmts) -> tuple:
    out = []
    for s in stmts:
        if isinstance(s, Op) and s.barrier is not None:
            index = tuple(_fold_mod(i) for i in s.barrier.index)
            s = dataclasses.replace(s, barrier=dataclasses.replace(s.barrier, index=index))
        out.append(s)
    return tuple(out)


def _same_shape(x: Op, y: Op) -> bool:
    return (x.kind, x.name, x.collective_axes, x.decrement, x.aligned,
            x.barrier.alloc.name if x.barrier else None,
            None if x.barrier is None else len(x.barrier.index),
            None if x.barrier is None else x.barrier.block is None,
            x.parity is None, x.phase is None, x.bar_id is None,
            tuple(r.alloc.name for r in x.reads), tuple(w.alloc.name for w in x.writes)) == \
        (y.kind, y.name, y.collective_axes, y.decrement, y.aligned,
         y.barrier.alloc.name if y.barrier else None,
         None if y.barrier is None else len(y.barrier.index),
         None if y.barrier is None else y.barrier.block is None,
         y.parity is None, y.phase is None, y.bar_id is None,
         tuple(r.alloc.name for r in y.reads), tuple(w.alloc.name for w in y.writes))


def _exprs(op: Op) -> list[Expr]:
    out = [op.count, op.bytes]
    if op.barrier is not None:
        out += list(op.barrier.index) + list(op.barrier.block or ())
    out += [e for e in (op.parity, op.phase, op.bar_id) if e is not None]
    for r in op.reads + op.writes:
        out += list(r.index)
    return out


__all__ = ["fuse_peeled_loops"]
