"""Anti-unification of kernels traced at several sizes, and the fit of what varies.

`AntiUnifier` zips the IRs of N traces statement by statement; where they differ only in an
integer (a trip count, a coefficient or constant of a linear index such as `(i + 2) % 2`) it
leaves a hole with the N values, anything else is `Disagree`. `fit` then finds an expression of
the sizes for a hole's values (`fit_1d`: affine, or affine clipped by a constant; a pair of sizes:
`min(x, y)`, `x - min(x, y)`), with at least one point more than the expression has unknowns.
`instantiate` puts values back in; `same_kernel` says where two kernels differ. Used by
family.py.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

from ..expr import mk, substitute, substitute_stmts
from ..ir import (BarrierAlloc, BarrierRef, BinOp, Const, Expr, Kernel, Loop, MemAlloc, MemRef,
                  Op, Slice, UnOp, Var, WarpRegion, When, evaluate)


class Disagree(Exception):
    """Two traces differ in structure, or a varying position fits no expression."""


# ----------------------------------------------------------------------------------------------
# Anti-unification
# ----------------------------------------------------------------------------------------------

HOLE = "%hole"


class AntiUnifier:
    """Zips N kernels; every integer position where they differ becomes a hole `%holeN` whose
    values (one per kernel) are kept for fitting."""

    def __init__(self, kernels: Sequence[Kernel]):
        self.kernels = list(kernels)
        self.holes: dict[str, tuple[int, ...]] = {}
        self.where: dict[str, str] = {}

    def hole(self, values: tuple[int, ...], where: str) -> Expr:
        if len(set(values)) == 1:
            return Const(values[0])
        name = f"{HOLE}{len(self.holes)}"
        self.holes[name] = values
        self.where[name] = where
        return Var(name)

    # expressions -------------------------------------------------------------------------------

    def expr(self, es: Sequence[Expr], ren: Sequence[Mapping[str, str]], where: str) -> Expr:
        es = [_rename(e, r) for e, r in zip(es, ren)]
        if all(isinstance(e, Const) for e in es):
            return self.hole(tuple(e.value for e in es), where)
        forms = [_linear(e) for e in es]
        if all(f is not None for f in forms):
            names = sorted(set().union(*(set(f) for f in forms)) - {""})
            out: Expr = self.hole(tuple(f.get("", 0) for f in forms), where)
            for v in names:
                coef = self.hole(tuple(f.get(v, 0) for f in forms), where)
                term = Var(v) if isinstance(coef, Const) and coef.value == 1 else \
                    mk("*", coef, Var(v))
                out = mk("+", term, out) if not (isinstance(out, Const) and out.value == 0) \
                    else term
            return out
        first = es[0]
        if isinstance(first, BinOp) and all(isinstance(e, BinOp) and e.op == first.op
                                            for e in es):
            return BinOp(first.op, self.expr([e.lhs for e in es], [{}] * len(es), where),
                         self.expr([e.rhs for e in es], [{}] * len(es), where))
        if isinstance(first, UnOp) and all(isinstance(e, UnOp) and e.op == first.op
                                           for e in es):
            return UnOp(first.op, self.expr([e.arg for e in es], [{}] * len(es), where))
        if isinstance(first, Var) and all(isinstance(e, Var) and e.name == first.name
                                          for e in es):
            return first
        raise Disagree(f"{where}: {' / '.join(repr(e) for e in es)}")

    def exprs(self, ess, ren, where):
        lens = {len(es) for es in ess}
        if len(lens) != 1:
            raise Disagree(f"{where}: index arity differs")
        return tuple(self.expr(list(col), ren, where) for col in zip(*ess))

    # allocations -------------------------------------------------------------------------------

    def barriers(self) -> dict[str, BarrierAlloc]:
        lists = [k.barriers for k in self.kernels]
        if len({tuple(b.name for b in bs) for bs in lists}) != 1:
            raise Disagree("the traces allocate different barriers")
        out = {}
        for col in zip(*lists):
            b = col[0]
            flags = {(x.orders_tensor_core, x.cluster, x.collective_axes, x.scalar, x.semaphore)
                     for x in col}
            if len(flags) != 1:
                raise Disagree(f"barrier {b.name} is declared differently")
            where = f"{b.loc}: barrier {b.name}"
            none = [{}] * len(col)
            out[b.name] = dataclasses.replace(
                b, num_arrivals=self.expr([x.num_arrivals for x in col], none, where),
                shape=self.exprs([x.shape for x in col], none, where),
                copies=self.expr([x.copies for x in col], none, where))
        return out

    def buffers(self) -> dict[str, MemAlloc]:
        lists = [k.buffers for k in self.kernels]
        if len({tuple(b.name for b in bs) for bs in lists}) != 1:
            raise Disagree("the traces allocate different buffers")
        out = {}
        for col in zip(*lists):
            b = col[0]
            # cells fine enough for every trace (a finer cell keeps each region whole)
            granule = tuple(math.gcd(*gs) for gs in zip(*(x.granule for x in col)))
            out[b.name] = dataclasses.replace(
                b, shape=self.exprs([x.shape for x in col], [{}] * len(col),
                                    f"{b.loc}: buffer {b.name}"), granule=granule)
        return out

    # statements --------------------------------------------------------------------------------

    def body(self, bodies, ren, bars, bufs) -> tuple:
        if len({len(b) for b in bodies}) != 1:
            raise Disagree(f"{_first_loc(bodies)}: the traces have different statements here")
        out = []
        for col in zip(*bodies):
            s = col[0]
            if any(type(x) is not type(s) for x in col):
                raise Disagree(f"{s.loc}: a {type(s).__name__} in one trace is a "
                               "different statement in another")
            where = f"{s.loc}"
            if isinstance(s, Loop):
                inner = [dict(r, **{x.var: s.var}) for r, x in zip(ren, col)]
                trip = self.expr([x.trip for x in col], ren, f"{where}: trip count")
                out.append(Loop(s.var, trip, self.body([x.body for x in col], inner, bars, bufs),
                                s.loc))
            elif isinstance(s, When):
                out.append(When(self.expr([x.cond for x in col], ren, f"{where}: condition"),
                                self.body([x.then for x in col], ren, bars, bufs),
                                self.body([x.orelse for x in col], ren, bars, bufs), s.loc))
            elif isinstance(s, WarpRegion):
                if any(x.axis != s.axis for x in col):
                    raise Disagree(f"{where}: warp axes differ")
                out.append(WarpRegion(s.axis, self.body([x.body for x in col], ren, bars, bufs),
                                      s.loc))
            else:
                out.append(self.op(col, ren, bars, bufs))
        return tuple(out)

    def op(self, col, ren, bars, bufs) -> Op:
        s = col[0]
        where = f"{s.loc}: {s.kind}"
        keys = {(x.kind, x.name, x.collective_axes, x.decrement, x.aligned,
                 x.barrier.alloc.name if x.barrier else None,
                 x.barrier.block is None if x.barrier else None,
                 tuple(r.alloc.name for r in x.reads), tuple(w.alloc.name for w in x.writes),
                 x.parity is None, x.phase is None, x.bar_id is None) for x in col}
        if len(keys) != 1:
            raise Disagree(f"{where}: the operation differs between traces")

        def opt(get):
            vals = [get(x) for x in col]
            return None if vals[0] is None else self.expr(vals, ren, where)

        barrier = None
        if s.barrier is not None:
            block = None if s.barrier.block is None else \
                self.exprs([x.barrier.block for x in col], ren, where)
            barrier = BarrierRef(bars[s.barrier.alloc.name],
                                 self.exprs([x.barrier.index for x in col], ren, where), block)

        def region(refs):
            if len({len(r.region) for r in refs}) != 1:
                raise Disagree(f"{where}: the region differs between traces")
            parts = self.exprs([tuple(e for s in r.region for e in s.exprs()) for r in refs],
                               ren, where)
            return tuple(Slice(*parts[i:i + 3]) for i in range(0, len(parts), 3))

        def mems(get):
            return tuple(MemRef(bufs.get(refs[0].alloc.name, refs[0].alloc),
                                self.exprs([r.index for r in refs], ren, where), region(refs))
                         for refs in zip(*(get(x) for x in col)))

        return dataclasses.replace(
            s, barrier=barrier, count=self.expr([x.count for x in col], ren, where),
            bytes=self.expr([x.bytes for x in col], ren, where),
            parity=opt(lambda x: x.parity), phase=opt(lambda x: x.phase),
            bar_id=opt(lambda x: x.bar_id), reads=mems(lambda x: x.reads),
            writes=mems(lambda x: x.writes))

    def kernel(self) -> Kernel:
        ks = self.kernels
        k0 = ks[0]
        if len({tuple(sorted(k.params)) for k in ks}) != 1:
            raise Disagree("the traces have different parameters")
        if len({(k.thread_axis, k.warp_axis, k.num_warps) for k in ks}) != 1:
            raise Disagree("the traces differ in their threads")
        for attr in ("cluster", "grid"):
            if len({tuple(a for a, _ in getattr(k, attr)) for k in ks}) != 1:
                raise Disagree(f"the traces differ in their {attr} axes")
        none = [{}] * len(ks)
        bars, bufs = self.barriers(), self.buffers()
        shape = {attr: tuple((a, self.expr([dict(getattr(k, attr))[a] for k in ks], none,
                                           f"{attr} axis {a}"))
                             for a, _ in getattr(k0, attr)) for attr in ("cluster", "grid")}
        return k0.replace(
            body=self.body([k.body for k in ks], none, bars, bufs),
            barriers=tuple(bars.values()), buffers=tuple(bufs.values()),
            num_threads=self.expr([k.num_threads for k in ks], none, "threads per block"),
            cluster=shape["cluster"], grid=shape["grid"])


def _first_loc(bodies) -> str:
    for b in bodies:
        if b:
            return str(b[0].loc)
    return "a block"


def _rename(e: Expr, ren: Mapping[str, str]) -> Expr:
    if not ren:
        return e
    return substitute(e, {a: Var(b) for a, b in ren.items() if a != b})


def _linear(e: Expr) -> dict[str, int] | None:
    """`e` as {variable: coefficient, "": constant} when it is linear with constant
    coefficients."""
    if isinstance(e, Const):
        return {"": e.value}
    if isinstance(e, Var):
        return {e.name: 1}
    if isinstance(e, UnOp) and e.op == "neg":
        f = _linear(e.arg)
        return None if f is None else {k: -v for k, v in f.items()}
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, BinOp) and e.op == "*":
        for c, x in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(c, Const):
                f = _linear(x)
                return None if f is None else {k: c.value * v for k, v in f.items()}
    return None


# ----------------------------------------------------------------------------------------------
# Fitting a varying position
# ----------------------------------------------------------------------------------------------

def fit_1d(vs: Sequence[int], ys: Sequence[int], p: Expr) -> Expr | None:
    """The simplest expression in v that gives ys at vs, with at least one point more than it
    has unknowns: a constant, `a*v + b`, `min(a*v + b, c)` or `max(a*v + b, c)`.

    >>> fit_1d([1, 2, 3, 4, 5], [1, 2, 2, 2, 2], Var("k"))
    min(k, 2)
    >>> fit_1d([1, 2, 3, 4, 5], [0, 0, 1, 2, 3], Var("k"))
    (k - min(k, 2))
    """
    pts = sorted(set(zip(vs, ys)))
    if len({v for v, _ in pts}) != len(pts):
        return None
    if len({y for _, y in pts}) == 1:
        return Const(pts[0][1])

    def affine(sub):
        if len(sub) < 2:
            return None
        (v1, y1), (v2, y2) = sub[0], sub[1]
        if (y2 - y1) % (v2 - v1):
            return None
        a = (y2 - y1) // (v2 - v1)
        b = y1 - a * v1
        return (a, b) if all(a * v + b == y for v, y in sub) else None

    def build(a, b):
        return mk("+", mk("*", Const(a), p), Const(b))

    if len(pts) >= 3:
        ab = affine(pts)
        if ab is not None:
            return build(*ab)
    if len(pts) >= 4:
        for op, pick in (("min", min), ("max", max)):
            for c in sorted({y for _, y in pts}):
                off = [(v, y) for v, y in pts if y != c]
                on = [(v, y) for v, y in pts if y == c]
                if len(off) >= 2:
                    cands = [affine(off)]
                elif off and off[0][0] == pts[0][0]:
                    # one point before the plateau: the slope is not pinned down, but every
                    # slope that fits gives the plateau from the second point on
                    cands = [(a, off[0][1] - a * off[0][0]) for a in (1, -1, 2, -2)]
                else:
                    cands = []
                for ab in cands:
                    if ab is None:
                        continue
                    a, b = ab
                    if all(pick(a * v + b, c) == y for v, y in pts):
                        if op == "max" and a == 1 and c == 0 and b < 0:
                            # max(v - m, 0) as v - min(v, m): the spelling of a drain loop's
                            # start (`steps - min(steps, stages)`) the prover aligns loops by
                            return mk("-", p, mk("min", p, Const(-b)))
                        return mk(op, build(a, b), Const(c))
    return None


def _without_constant(e: Expr) -> Expr:
    """`a*v + b` -> `a*v` (the constants of a sum of fits are added once)."""
    if isinstance(e, BinOp) and e.op in ("+", "-") and isinstance(e.rhs, Const):
        return e.lhs
    return e


def fit(points: Sequence[Mapping[str, int]], ys: Sequence[int], params: Sequence[str],
        base: Mapping[str, int]) -> Expr | None:
    """An expression over `params` that gives ys at points: a sum of one 1-D fit per parameter,
    fitted on the points that vary that parameter alone, then checked at every point."""
    at_base = [y for x, y in zip(points, ys) if all(x[n] == base[n] for n in params)]
    if not at_base:
        return None
    y0 = at_base[0]
    terms: list[Expr] = []
    for n in params:
        axis = [(x[n], y) for x, y in zip(points, ys)
                if all(x[m] == base[m] for m in params if m != n)]
        g = fit_1d([v for v, _ in axis], [y for _, y in axis], Var(n))
        if g is None:
            return None
        if not isinstance(g, Const):
            terms.append(_without_constant(g))
    offset = y0 - sum(evaluate(t, base) for t in terms)
    total: Expr | None = None
    for t in terms:
        total = t if total is None else mk("+", total, t)
    if total is None:
        total = Const(offset)
    elif offset:
        total = mk("+", total, Const(offset)) if offset > 0 else mk("-", total, Const(-offset))
    if all(evaluate(total, x) == y for x, y in zip(points, ys)):
        return total
    return _fit_pair(points, ys, params, base)


def _fit_pair(points, ys, params, base) -> Expr | None:
    """`min(x, y) + c` or `x - min(x, y) + c` of two sizes (a drain of min(steps, stages)
    iterations starting at steps - min(steps, stages)), checked at every point."""
    for x in params:
        for y in params:
            if x == y:
                continue
            X, Y = Var(x), Var(y)
            for t in (mk("min", X, Y), mk("-", X, mk("min", X, Y))):
                c = ys[0] - evaluate(t, points[0])
                e = t if c == 0 else mk("+", t, Const(c))
                if all(evaluate(e, p) == v for p, v in zip(points, ys)):
                    return e
    return None


# ----------------------------------------------------------------------------------------------
# Values back in
# ----------------------------------------------------------------------------------------------

def instantiate(kernel: Kernel, env: Mapping[str, int]) -> Kernel:
    """The family's kernel with some parameters replaced by values (folded as it is rebuilt)."""
    sub = {n: Const(v) for n, v in env.items()}
    bars = {b.name: dataclasses.replace(
        b, num_arrivals=substitute(b.num_arrivals, sub),
        shape=tuple(substitute(e, sub) for e in b.shape), copies=substitute(b.copies, sub))
        for b in kernel.barriers}
    bufs = {b.name: dataclasses.replace(b, shape=tuple(substitute(e, sub) for e in b.shape))
            for b in kernel.buffers}
    body = _rebind(substitute_stmts(kernel.body, sub), bars, bufs)
    params = {n: p for n, p in kernel.params.items() if n not in env}
    assumptions = tuple(a for a in (substitute(a, sub) for a in kernel.assumptions)
                        if not isinstance(a, Const))
    return kernel.replace(body=body, barriers=tuple(bars.values()),
                          buffers=tuple(bufs.values()), params=params, assumptions=assumptions,
                          num_threads=substitute(kernel.num_threads, sub),
                          cluster=tuple((a, substitute(e, sub)) for a, e in kernel.cluster),
                          grid=tuple((a, substitute(e, sub)) for a, e in kernel.grid))


def _rebind(body, bars, bufs) -> tuple:
    """Point every barrier and buffer reference at the kernel's own allocations."""
    out = []
    for s in body:
        if isinstance(s, Op):
            barrier = s.barrier if s.barrier is None else dataclasses.replace(
                s.barrier, alloc=bars.get(s.barrier.alloc.name, s.barrier.alloc))
            out.append(dataclasses.replace(
                s, barrier=barrier,
                reads=tuple(dataclasses.replace(r, alloc=bufs.get(r.alloc.name, r.alloc))
                            for r in s.reads),
                writes=tuple(dataclasses.replace(w, alloc=bufs.get(w.alloc.name, w.alloc))
                             for w in s.writes)))
        elif isinstance(s, Loop):
            out.append(Loop(s.var, s.trip, _rebind(s.body, bars, bufs), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _rebind(s.then, bars, bufs), _rebind(s.orelse, bars, bufs),
                            s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _rebind(s.body, bars, bufs), s.loc))
    return tuple(out)


def same_kernel(a: Kernel, b: Kernel) -> str | None:
    """None when two kernels have the same synchronization program, else where they differ."""
    try:
        au = AntiUnifier([a, b])
        au.kernel()
    except Disagree as err:
        return str(err)
    if au.holes:
        name = next(iter(au.holes))
        return f"{au.where[name]}: {au.holes[name][0]} / {au.holes[name][1]}"
    return None


def instantiate_exprs(kernel: Kernel, env: Mapping[str, Expr]) -> Kernel:
    bars = {b.name: dataclasses.replace(
        b, num_arrivals=substitute(b.num_arrivals, env),
        shape=tuple(substitute(e, env) for e in b.shape), copies=substitute(b.copies, env))
        for b in kernel.barriers}
    bufs = {b.name: dataclasses.replace(b, shape=tuple(substitute(e, env) for e in b.shape))
            for b in kernel.buffers}
    return kernel.replace(body=_rebind(substitute_stmts(kernel.body, env), bars, bufs),
                          barriers=tuple(bars.values()), buffers=tuple(bufs.values()),
                          num_threads=substitute(kernel.num_threads, env),
                          cluster=tuple((a, substitute(e, env)) for a, e in kernel.cluster),
                          grid=tuple((a, substitute(e, env)) for a, e in kernel.grid))
