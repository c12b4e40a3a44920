"""Shape families: one IR for every size of a Pallas kernel, from traces at a few sizes.

A kernel takes its loop trip counts from the shapes of its arguments (K steps = K / tile_k), so
one trace says nothing about another K. A target names its size arguments:

    @sizes(k_steps=("k", 64))            # the argument k is 64 * k_steps
    def hopper_matmul(k=256): ...

and `trace_family` traces it at k_steps = lo .. lo+4 (the other size parameters at their
defaults), anti-unifies the IRs and fits every IR position that varies (a trip count, the offset
of a drain loop's first slot) as an expression of the size parameters: affine (`k_steps - 2`),
or affine clipped by a constant (`min(k_steps, 2)`, `max(k_steps - 2, 0)`). Positions that vary
alike share the parameter; a position that fits no such expression, or traces that differ in
structure (a Python `if` on a shape), is never guessed: the smallest values where the traces
disagree become exceptions, the rest is fitted and the fit is re-checked against traces at
larger sizes it did not see. Exceptions are joined to the family by a branch on the parameter
(`k_steps == 1`: the IR traced there), so one parameterised IR stands for every size.

A persistent loop (`plgpu.nd_loop` over the tiles, `collective_axes` the grid) runs a number of
tiles that depends on the block's grid position and the problem size; its trip count becomes one
parameter `tiles` (every value >= 0), tied across the roles that run the same count, and the grid
axis disappears when nothing else reads it. Every grid position of every shape is then one value
of `tiles`, a remainder SM with one tile fewer included.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..expr import mk, substitute, substitute_stmts
from ..ir import (BarrierAlloc, BarrierRef, BinOp, Const, Expr, Kernel, Loop, MemAlloc, MemRef,
                  ModelError, Op, Param, UnOp, Var, WarpRegion, When, evaluate, free_vars)
from .locations import _loc_of_function

SIZES_ATTR = "__barrierproof_sizes__"
AXIS_POINTS = 5          # traces per size parameter: lo .. lo + 4 (an affine fit is over-determined
#                          by three, a clipped one by two)
CHECK_OFFSETS = (7, 11)  # re-check the fit at sizes it did not see
# A persistent loop's count is a parameter fixed at 2 by default (every barrier is reused across a
# tile boundary); the prover's fragment has no nested loops, so `--symbolic tiles` is `unknown`.
TILES_DEFAULT = 2
MAX_EXCEPTIONS = 3       # small values traced on their own before the family's regime starts


def sizes(**params):
    """Declare a target's shape family: `name=("argument", unit)` makes `argument = unit * name`
    a size the proof quantifies over (`name >= 1`)."""
    def mark(fn):
        setattr(fn, SIZES_ATTR, dict(params))
        return fn
    return mark


@dataclass(frozen=True)
class SizeParam:
    name: str
    arg: str
    unit: int
    base: int            # the value at the function's defaults


@dataclass
class Family:
    """What `trace_family` found: the parameterised kernel and how it was obtained."""

    kernel: Kernel
    sizes: list[SizeParam]
    traced: list[dict[str, int]] = field(default_factory=list)
    checked: list[dict[str, int]] = field(default_factory=list)
    fits: list[str] = field(default_factory=list)
    exceptions: dict[str, list[int]] = field(default_factory=dict)   # sizes joined as branches
    tiles: list[str] = field(default_factory=list)
    fitted: Kernel | None = None       # the fitted kernel alone, for the sizes of its regime


class Disagree(Exception):
    """Two traces differ in structure, or a varying position fits no expression."""


def size_params(fn: Callable, name: str) -> list[SizeParam] | None:
    declared = getattr(fn, SIZES_ATTR, None)
    if not declared:
        return None
    where = _loc_of_function(fn)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    out = []
    for pname, spec in declared.items():
        if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str)
                and isinstance(spec[1], int) and spec[1] > 0):
            raise ModelError(f"sizes({pname}={spec!r}) of {name} is not (argument, unit)",
                             loc=where, hint='write e.g. @sizes(k_steps=("k", 64)): the '
                             "argument k is 64 * k_steps")
        arg, unit = spec
        param = sig.parameters.get(arg) if sig else None
        if param is None or not isinstance(param.default, int):
            raise ModelError(f"sizes({pname}=...) names argument {arg!r}, which {name} does not "
                             "take with an integer default", loc=where,
                             hint=f"give {name} an argument {arg}=<a multiple of {unit}>")
        if param.default % unit or param.default <= 0:
            raise ModelError(f"the default {arg}={param.default} of {name} is not a positive "
                             f"multiple of {unit}", loc=where,
                             hint=f"make the default a multiple of {unit}")
        out.append(SizeParam(pname, arg, unit, param.default // unit))
    return out


# ----------------------------------------------------------------------------------------------
# Tracing one member
# ----------------------------------------------------------------------------------------------

def trace_member(fn: Callable, name: str, expect: str | None, params: Sequence[SizeParam],
                 values: Mapping[str, int], load: Callable) -> Kernel:
    """The kernel at these sizes, loops kept in place and persistent loops' counts as `tiles`."""
    from .loops import KEEP_LOOPS
    kwargs = {p.arg: p.unit * values[p.name] for p in params}
    KEEP_LOOPS["on"] = True
    try:
        kernels = load(lambda: fn(**kwargs), name=name, expect=expect)
    finally:
        KEEP_LOOPS["on"] = False
    if len(kernels) != 1:
        raise ModelError(f"{name} launches {len(kernels)} kernels; a shape family needs one",
                         loc=_loc_of_function(fn), hint="call one plgpu.kernel per target")
    return generalize_tiles(kernels[0])


def generalize_tiles(kernel: Kernel) -> Kernel:
    """Trip counts that depend only on the grid position become parameters `tiles`, `tiles2`,
    ... (one per distinct count), every value >= 0."""
    grid_axes = {a for a, _ in kernel.grid}
    names: dict[str, str] = {}
    defaults: dict[str, int] = {}

    def visit(body):
        out = []
        for s in body:
            if isinstance(s, Loop):
                trip = s.trip
                fv = free_vars(trip)
                if fv and fv <= grid_axes:
                    key = repr(trip)
                    if key not in names:
                        names[key] = "tiles" if not names else f"tiles{len(names) + 1}"
                        defaults[names[key]] = TILES_DEFAULT
                    trip = Var(names[key])
                out.append(Loop(s.var, trip, visit(s.body), s.loc))
            elif isinstance(s, When):
                out.append(When(s.cond, visit(s.then), visit(s.orelse), s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, visit(s.body), s.loc))
            else:
                out.append(s)
        return tuple(out)

    body = visit(kernel.body)
    if not names:
        return kernel
    params = dict(kernel.params)
    for n in names.values():
        params[n] = Param(n, defaults[n])
    used = set()
    for s in _walk_all(body):
        used |= _stmt_free_vars(s)
    grid = tuple((a, n) for a, n in kernel.grid if a in used)
    return kernel.replace(body=body, params=params, grid=grid,
                          assumptions=kernel.assumptions + tuple(Var(n) >= 0 for n in names.values()))


def _walk_all(body):
    for s in body:
        yield s
        if isinstance(s, Loop):
            yield from _walk_all(s.body)
        elif isinstance(s, When):
            yield from _walk_all(s.then)
            yield from _walk_all(s.orelse)
        elif isinstance(s, WarpRegion):
            yield from _walk_all(s.body)


def _stmt_free_vars(s) -> set[str]:
    out: set[str] = set()
    if isinstance(s, Loop):
        out |= free_vars(s.trip)
    elif isinstance(s, When):
        out |= free_vars(s.cond)
    elif isinstance(s, Op):
        for e in (s.count, s.bytes, s.parity, s.phase, s.bar_id):
            if e is not None:
                out |= free_vars(e)
        if s.barrier is not None:
            for e in s.barrier.index + (s.barrier.block or ()):
                out |= free_vars(e)
        for r in s.reads + s.writes:
            for e in r.index:
                out |= free_vars(e)
    return out


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
        self._by_values: dict[tuple, str] = {}

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
            out[b.name] = dataclasses.replace(
                b, shape=self.exprs([x.shape for x in col], [{}] * len(col),
                                    f"{b.loc}: buffer {b.name}"))
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

        def mems(get):
            return tuple(MemRef(bufs.get(refs[0].alloc.name, refs[0].alloc),
                                self.exprs([r.index for r in refs], ren, where))
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
                cands = [affine(off)] if len(off) >= 2 else \
                    [(a, off[0][1] - a * off[0][0]) for a in (1, -1, 2, -2)] if off else []
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
# The family
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


def _fit_all(kernels, points, names, base) -> tuple[Kernel, list[str]]:
    au = AntiUnifier(kernels)
    fam = au.kernel()
    env: dict[str, Expr] = {}
    fits = []
    for hole, ys in au.holes.items():
        expr = fit(points, ys, names, base)
        if expr is None:
            shown = ", ".join(f"{_point_text(x)}: {y}" for x, y in zip(points, ys))
            raise Disagree(f"{au.where[hole]} takes the values {shown}, which no expression "
                           "a*n + b, min(a*n + b, c) or max(a*n + b, c) of the sizes fits")
        env[hole] = expr
        fits.append(f"{au.where[hole]}: {expr!r}")
    return instantiate_exprs(fam, env), fits


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


def _point_text(x: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in x.items())


def trace_family(fn: Callable, name: str, expect: str | None, load: Callable) -> Family:
    """Trace `fn` at several sizes and return one kernel whose sizes are parameters.

    Raises ModelError when the traces cannot be joined (what differs, where); the caller then
    falls back to the traced shape.
    """
    params = size_params(fn, name)
    if not params:
        raise ModelError(f"{name} declares no sizes", loc=_loc_of_function(fn),
                         hint='declare them with @sizes(k_steps=("k", 64))')
    names = [p.name for p in params]
    cache: dict[tuple, Kernel | ModelError] = {}

    def at(values: Mapping[str, int]) -> Kernel:
        key = tuple(values[n] for n in names)
        if key not in cache:
            try:
                cache[key] = trace_member(fn, name, expect, params, values, load)
            except ModelError as err:
                cache[key] = err
        got = cache[key]
        if isinstance(got, ModelError):
            raise got
        return got

    lo = {n: 1 for n in names}
    exceptions: dict[str, list[int]] = {n: [] for n in names}
    rejected: dict[str, list[int]] = {n: [] for n in names}
    base = {p.name: p.base for p in params}
    last_error: Exception | None = None
    fam = None
    for _ in range(2 * MAX_EXCEPTIONS + 2):
        fam_base = {n: max(base[n], lo[n]) for n in names}
        points = _axis_points(fam_base, lo, names)
        try:
            kernels = []
            for x in points:
                try:
                    kernels.append(at(x))
                except ModelError as err:
                    # the kernel's own checks reject this size (too few steps, say): the
                    # family starts above it
                    small = [n for n in names if x[n] == lo[n]]
                    if err.code or not small or len(rejected[small[0]]) >= MAX_EXCEPTIONS:
                        raise
                    raise _Reject(small[0], err) from None
            fam, fits = _fit_all(kernels, points, names, fam_base)
            break
        except _Reject as rej:
            rejected[rej.param].append(lo[rej.param])
            lo[rej.param] += 1
            last_error = rej.err
        except Disagree as err:
            last_error = err
            moved = False
            for n in names:       # the smallest size is the usual odd one out (one step, ...)
                trial = {**lo, n: lo[n] + 1}
                if len(exceptions[n]) < MAX_EXCEPTIONS and _joinable(at, trial, names, base):
                    exceptions[n].append(lo[n])
                    lo = trial
                    moved = True
                    break
            if not moved:
                break
    if fam is None:
        raise ModelError(f"the traces of {name} at different sizes cannot be joined into one "
                         f"kernel: {last_error}", loc=_loc_of_function(fn),
                         hint="check it at given sizes with `barrierproof check`")
    # the fit must predict sizes it has not seen
    checked = []
    for off in CHECK_OFFSETS:
        x = {n: lo[n] + off for n in names}
        want = at(x)
        got = instantiate(fam, x)
        diff = same_kernel(got, want)
        if diff is not None:
            raise ModelError(f"the fitted family of {name} does not predict its trace at "
                             f"{_point_text(x)} ({diff})", loc=_loc_of_function(fn),
                             hint="check it at given sizes with `barrierproof check`")
        checked.append(x)
    # exceptions: the kernel traced at that size, selected by a branch on the parameter
    body = fam.body
    extra_bars: list[BarrierAlloc] = []
    extra_bufs: list[MemAlloc] = []
    branched: dict[str, list[int]] = {n: [] for n in names}
    for n in names:
        for v in sorted(exceptions[n], reverse=True):
            point = {**{m: lo[m] for m in names}, n: v}
            member = at(point)
            diff = same_kernel(_drop_params(member, names),
                               _drop_params(instantiate(fam, point), names))
            if diff is None:
                continue                  # the fit covers it after all
            if len(names) > 1:
                # a branch traced at one value of the other sizes would stand for all of them
                raise ModelError(f"{name} traces differently at {n} = {v}, and with several "
                                 "sizes such a branch cannot be joined", loc=_loc_of_function(fn),
                                 hint=f"let the kernel reject {n} = {v} (its own check), or "
                                      "declare fewer sizes")
            one = instantiate(fam, {n: v})
            # allocations sized by the parameter (fewer stages for fewer steps) get their own
            # copies in that branch
            fbars = {b.name: b for b in one.barriers}
            fbufs = {b.name: b for b in one.buffers}
            bars = {b.name: b for b in fam.barriers}
            bufs = {b.name: b for b in fam.buffers}
            for b in member.barriers:
                f = fbars.get(b.name)
                if f is None or _alloc_key(f) != _alloc_key(b):
                    bars[b.name] = dataclasses.replace(b, name=f"{b.name}_{n}{v}")
                    extra_bars.append(bars[b.name])
            for b in member.buffers:
                f = fbufs.get(b.name)
                if f is None or repr(f.shape) != repr(b.shape) or f.space != b.space:
                    bufs[b.name] = dataclasses.replace(b, name=f"{b.name}_{n}{v}")
                    extra_bufs.append(bufs[b.name])
            if repr(member.num_threads) != repr(one.num_threads) or \
                    [a for a, _ in member.cluster] != [a for a, _ in one.cluster] or \
                    repr(member.cluster) != repr(one.cluster):
                raise ModelError(f"{name} at {n}={v} runs other threads or blocks than at "
                                 "larger sizes", loc=_loc_of_function(fn),
                                 hint="check it at given sizes with `barrierproof check`")
            body = (When(Var(n) == v, _rebind(member.body, bars, bufs), body, fam.loc),)
            branched[n].append(v)
    tiles = [n for n in fam.params if n.startswith("tiles")]
    fam_params = dict(fam.params)
    for p in params:
        fam_params[p.name] = Param(p.name, p.base, symbolic=True)
    lows = {n: min([lo[n]] + exceptions[n]) for n in names}
    assumptions = tuple(Var(n) >= lows[n] for n in names) + fam.assumptions
    notes = list(fam.notes)
    notes.append("shape family: " + "; ".join(
        f"{p.arg} = {p.unit}*{p.name}" for p in params) +
        f"; fitted from {len(points)} traces, re-checked against traces at "
        + " and ".join(_point_text(x) for x in checked))
    for n in names:
        if rejected[n]:
            notes.append(f"{name} rejects {n} = {', '.join(map(str, rejected[n]))} while "
                         f"tracing (its own checks): the family starts at {n} = {lows[n]}")
        if branched[n]:
            notes.append(f"at {n} = {', '.join(map(str, sorted(branched[n])))} the trace differs in "
                         "structure from the larger sizes; the kernel traced there is a branch "
                         f"of the family (`{n} == v`)")
    for t in tiles:
        notes.append(f"`{t}`: the trip count of a persistent loop over the grid (tiles of one "
                     f"cluster; each value stands for every grid position and size that runs "
                     f"that many tiles); it is {fam.params[t].default} unless given with "
                     f"--param {t}=N")
    kernel = fam.replace(body=body, params=fam_params, assumptions=assumptions,
                         notes=tuple(notes), barriers=fam.barriers + tuple(extra_bars),
                         buffers=fam.buffers + tuple(extra_bufs))
    return Family(kernel, params, sorted(points, key=lambda x: tuple(x.values())), checked,
                  fits, branched, tiles, fam)


class _Reject(Exception):
    def __init__(self, param, err):
        super().__init__(str(err))
        self.param = param
        self.err = err


def _axis_points(fam_base, lo, names) -> list[dict[str, int]]:
    points = [fam_base] + [dict(fam_base, **{n: v}) for n in names
                           for v in range(lo[n], lo[n] + AXIS_POINTS)]
    if len(names) > 1:      # sizes moved together: a fit of one size at a time must hold here
        points += [{n: lo[n] + 1 for n in names},
                   {n: lo[n] + 2 + k for k, n in enumerate(names)},
                   {n: lo[n] + 3 + 2 * k for k, n in enumerate(reversed(names))}]
    return [dict(x) for x in {tuple(sorted(x.items())): x for x in points}.values()]


def _joinable(at, lo, names, base) -> bool:
    fam_base = {n: max(base[n], lo[n]) for n in names}
    points = _axis_points(fam_base, lo, names)
    try:
        _fit_all([at(x) for x in points], points, names, fam_base)
    except (Disagree, ModelError):
        return False
    return True


def _drop_params(k: Kernel, names) -> Kernel:
    return k.replace(params={n: p for n, p in k.params.items() if n not in names})


def _alloc_key(b: BarrierAlloc) -> str:
    return repr((b.num_arrivals, b.shape, b.copies, b.orders_tensor_core, b.cluster,
                 b.collective_axes, b.scalar, b.semaphore))
