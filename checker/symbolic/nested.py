"""Nested loops over two runtime counts, flattened into one loop over the running position.

A persistent kernel walks its tiles in an outer loop (`tiles` set at run time) around an inner
loop over each tile's K steps (`ksteps`, at run time too), and its ring position is the running
count `t * ksteps + kk` that CUTLASS's `PipelineState` keeps: index and phase run on across
tiles. The prover takes one level of loops, and `t * ksteps` is not linear. But when every
nested loop of the kernel is

    loop t < T: loop kk < K: B        (nothing else in the outer body)

with the same two counts T and K (expressions over parameters: `tiles`, or a static
schedule's `(tiles + blocks - 1) // blocks`), and B reads t and kk only through the running
position p = t*K + kk, the pair runs B at p = 0, 1, ..., T*K - 1 in that order (for T, K >= 0:
the iterations in lexicographic order are the positions in increasing order), which is

    loop p < P: B[p]                  with P = T * K a parameter of its own,

and where everything else reads T and K through their product (a producer tail over
`min(T*K, stages)` slots, a producer loop over all `T*K` loads), it reads P. Proving the new
kernel for every P >= lo(T) * lo(K) (the assumptions' lower bounds) and every value of the
parameters it still reads proves the original for every T and K: every product is such a P.
The assumptions on parameters no longer read are dropped (a wider range, so still sound).

Nothing here is taken on trust: the rewritten program is obtained by substitution (t := 0,
kk := p in B, then every `T * K` spelled out replaced by P), and Z3 proves, for every
expression the rewrite changed, that it equals the original at p = t*K + kk, P = T*K for every
0 <= t < T, 0 <= kk < K and every value of the other variables allowed by the assumptions
(floor division and remainder exact for a positive divisor, xor exact on bits, where a ^ b is
(a + b) % 2; uninterpreted otherwise: only congruence is used there, never an identity). A Z3 `unknown`, a 3-level
nest, an operation beside the inner loop (a per-tile operation), two nests over different
counts, a count that may be negative, or an expression that reads t or kk alone keeps the
kernel as it is, and the verdict names the construct (tests/test_nested.py checks the rewrite
against the explorer on a grid of T x K).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import z3

from ...model.expr import substitute_stmts
from ...model.ir import (BinOp, Const, Expr, Kernel, Loop, MemRef, Op, Param, Slice, UnOp, Var,
                         WarpRegion, When, evaluate, free_vars, unique_name, walk)
from .terms import Unsupported

LOWER_BOUND_SCAN = 8        # lower bounds of T and K looked for among 0..8
TIMEOUT_MS = 5000           # per equivalence query


# ----------------------------------------------------------------------------------------------
# IR expressions as Z3 terms (division and remainder by a non-positive value, xor: uninterpreted)
# ----------------------------------------------------------------------------------------------

def _uninterpreted(name: str):
    """An uninterpreted Int x Int -> Int of the Z3 context in force (budget.own_context)."""
    return z3.Function(name, z3.IntSort(), z3.IntSort(), z3.IntSort())

_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _term(e: Expr, env: Mapping[str, z3.ArithRef]) -> z3.ArithRef:
    """An IR expression as a Z3 integer (truth values 0/1, as in the IR)."""
    if isinstance(e, Const):
        return z3.IntVal(e.value)
    if isinstance(e, Var):
        return env[e.name] if e.name in env else z3.Int(e.name)
    if isinstance(e, UnOp):
        a = _term(e.arg, env)
        return -a if e.op == "neg" else z3.If(a == 0, 1, 0)
    if isinstance(e, BinOp):
        a, b = _term(e.lhs, env), _term(e.rhs, env)
        if e.op in _CMP:
            return z3.If(_CMP[e.op](a, b), 1, 0)
        simple = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                  "and": lambda: z3.If(z3.And(a != 0, b != 0), 1, 0),
                  "or": lambda: z3.If(z3.Or(a != 0, b != 0), 1, 0),
                  "min": lambda: z3.If(a <= b, a, b), "max": lambda: z3.If(a >= b, a, b),
                  "//": lambda: z3.If(b > 0, a / b, _uninterpreted("floordiv!")(a, b)),
                  "%": lambda: z3.If(b > 0, a % b, _uninterpreted("mod!")(a, b)),
                  # on bits (a parity's terms), a ^ b is (a + b) % 2 exactly
                  "xor": lambda: z3.If(z3.And(a >= 0, a <= 1, b >= 0, b <= 1), (a + b) % 2,
                                       _uninterpreted("xor!")(a, b))}
        if e.op in simple:
            return simple[e.op]()
    raise Unsupported(f"nested loops: cannot compare `{e}`")


# ----------------------------------------------------------------------------------------------
# The shape
# ----------------------------------------------------------------------------------------------

class PerTileOps(Unsupported):
    """A nest with operations beside its inner loop (pertile.py may split it)."""


@dataclasses.dataclass
class Flat:
    """The flattened kernel and what it rests on."""
    kernel: Kernel
    symbolic: list[str]
    note: str


def _nests(body) -> list[Loop]:
    """The loops holding a loop."""
    return [s for s in walk(body) if isinstance(s, Loop) and
            any(isinstance(x, Loop) for x in walk(s.body))]


def _shape(outer: Loop, params: Mapping) -> tuple[Expr, Expr]:
    """(T, K) when `outer` is `loop t < T: loop kk < K: B`, both counts over parameters."""
    where = f"line {outer.loc.line}" if outer.loc and outer.loc.line else "a loop"
    if len(outer.body) != 1 or not isinstance(outer.body[0], Loop):
        raise PerTileOps(f"nested loops: the outer loop ({where}) runs operations beside its "
                          "inner loop (per-tile operations), which one loop over the running "
                          "position cannot hold", outer.loc)
    inner = outer.body[0]
    if any(isinstance(s, (Loop, WarpRegion)) for s in walk(inner.body)):
        raise Unsupported(f"nested loops: a third level of loops (or a warp region) inside "
                          f"the loops at {where}", outer.loc)
    for loop in (outer, inner):
        if loop.var in params:
            raise Unsupported(f"nested loops: the loop variable `{loop.var}` shadows a "
                              "parameter", loop.loc)
        if not free_vars(loop.trip) <= set(params):
            raise Unsupported(f"nested loops: the trip count `{loop.trip}` reads more than the "
                              "kernel's parameters", loop.loc)
    return outer.trip, inner.trip


def _map_exprs(body, fn) -> tuple:
    """The statements with `fn` applied to every expression (no constant folding: the shape
    stays, so the checker can pair old and new)."""
    out = []
    for s in body:
        if isinstance(s, Op):
            ref = s.barrier
            if ref is not None:
                ref = dataclasses.replace(ref, index=tuple(fn(e) for e in ref.index),
                                          block=None if ref.block is None else
                                          tuple(fn(e) for e in ref.block))
            out.append(dataclasses.replace(
                s, barrier=ref, count=fn(s.count), bytes=fn(s.bytes),
                reads=tuple(_map_mem(m, fn) for m in s.reads),
                writes=tuple(_map_mem(m, fn) for m in s.writes),
                parity=None if s.parity is None else fn(s.parity),
                phase=None if s.phase is None else fn(s.phase)))
        elif isinstance(s, Loop):
            out.append(Loop(s.var, fn(s.trip), _map_exprs(s.body, fn), s.loc))
        elif isinstance(s, When):
            out.append(When(fn(s.cond), _map_exprs(s.then, fn), _map_exprs(s.orelse, fn), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _map_exprs(s.body, fn), s.loc))
        else:
            out.append(s)
    return tuple(out)


def _map_mem(ref: MemRef, fn) -> MemRef:
    """A memory reference with `fn` applied to its slot indices and region bounds."""
    return dataclasses.replace(ref, index=tuple(fn(e) for e in ref.index),
                               region=tuple(Slice(*(fn(e) for e in r.exprs()))
                                            for r in ref.region))


def _replace(e: Expr, shapes: set[str], by: Expr) -> Expr:
    """`e` with every subexpression spelled like one of `shapes` replaced by `by`."""
    if repr(e) in shapes:
        return by
    if isinstance(e, BinOp):
        return BinOp(e.op, _replace(e.lhs, shapes, by), _replace(e.rhs, shapes, by))
    if isinstance(e, UnOp):
        return UnOp(e.op, _replace(e.arg, shapes, by))
    return e


def _flatten(body, nests: set[int], p: str, P: str) -> tuple:
    out = []
    for s in body:
        if isinstance(s, Loop) and id(s) in nests:
            inner = s.body[0]
            b = substitute_stmts(inner.body, {s.var: Const(0), inner.var: Var(p)})
            out.append(Loop(p, Var(P), b, s.loc))
        elif isinstance(s, Loop):
            out.append(Loop(s.var, s.trip, _flatten(s.body, nests, p, P), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _flatten(s.then, nests, p, P),
                            _flatten(s.orelse, nests, p, P), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _flatten(s.body, nests, p, P), s.loc))
        else:
            out.append(s)
    return tuple(out)


def _op_exprs(op: Op) -> list[Expr | None]:
    """Every expression of an operation the rewrite may change, in a fixed order: its counts,
    its barrier's slot and block, and the slots and regions of its memory effects (races.py
    judges those; each is proved equal at the running position like the rest)."""
    ref = op.barrier
    return [op.count, op.bytes, op.parity, op.phase] + \
        ([] if ref is None else list(ref.index) + list(ref.block or ())) + \
        [e for m in op.reads + op.writes for e in m.exprs()]


class _Prover:
    """Z3 obligations: each rewritten expression equals the original one."""

    def __init__(self, kernel: Kernel, fixed: Mapping[str, int], T: Expr, K: Expr, P: str,
                 p: str):
        self.T, self.K, self.P, self.p = T, K, P, p
        self.moved = free_vars(T) | free_vars(K)
        self.facts = [_term(a, {}) != 0 for a in kernel.assumptions] + \
            [z3.Int(n) == v for n, v in fixed.items()]
        self.zT, self.zK = _term(T, {}), _term(K, {})
        self.checked = 0

    def valid(self, claim, *extra) -> bool:
        s = z3.Solver()
        s.set("timeout", TIMEOUT_MS)
        s.add(*self.facts, *extra, z3.Not(claim))
        return s.check() == z3.unsat

    def lower_bound(self, e: Expr) -> int | None:
        """The largest c <= LOWER_BOUND_SCAN with e >= c under the assumptions; None when they
        do not keep e >= 0 (a parameter's domain is every integer they allow, signs.py)."""
        for c in range(LOWER_BOUND_SCAN, -1, -1):
            if self.valid(_term(e, {}) >= c):
                return c
        return None

    def same(self, old: Expr | None, new: Expr | None, nest: tuple[str, str] | None) -> None:
        if (old is None) != (new is None):
            raise Unsupported("nested loops: the rewrite changed an operation's shape")
        if old is None:
            return
        moved = self.moved | (set(nest) if nest else set())
        if not (free_vars(old) & moved) and repr(old) == repr(new):
            return
        extra = [self.zT >= 0, self.zK >= 0]
        env = {self.P: self.zT * self.zK}
        if nest is not None:
            t, k = z3.Int(nest[0]), z3.Int(nest[1])
            extra += [t >= 0, t < self.zT, k >= 0, k < self.zK]
            env[self.p] = t * self.zK + k
        self.checked += 1
        if not self.valid(_term(old, {}) == _term(new, env), *extra):
            where = f" inside the nested loops {nest}" if nest else ""
            position = f"{nest[0]} * {self.K} + {nest[1]}" if nest else f"{self.T} * {self.K}"
            raise Unsupported(f"nested loops: `{old}`{where} is not a function of the running "
                              f"position `{position}` alone (Z3 does not prove it equal to "
                              f"`{new}`)")

    def body(self, old, new, nests: set[int], nest=None) -> None:
        if len(old) != len(new):
            raise Unsupported("nested loops: the rewrite changed the program's shape (a branch "
                              "on the tile or K-step index alone?)")
        for a, b in zip(old, new):
            if isinstance(a, Op) and isinstance(b, Op) and a.kind == b.kind:
                if a.signals or b.signals:
                    raise Unsupported("nested loops: an operation with several signals", a.loc)
                if [(m.alloc, len(m.index), len(m.region)) for m in a.reads + a.writes] != \
                        [(m.alloc, len(m.index), len(m.region)) for m in b.reads + b.writes]:
                    raise Unsupported("nested loops: the rewrite changed a memory reference's "
                                      "shape", a.loc)
                if a.bar_id is not None and free_vars(a.bar_id) & (
                        self.moved | set(nest or ())):
                    raise Unsupported("nested loops: a named-barrier id moves with the loops",
                                      a.loc)
                for x, y in zip(_op_exprs(a), _op_exprs(b), strict=True):
                    self.same(x, y, nest)
            elif isinstance(a, Loop) and isinstance(b, Loop) and id(a) in nests:
                inner = a.body[0]
                self.body(inner.body, b.body, nests, (a.var, inner.var))
            elif isinstance(a, Loop) and isinstance(b, Loop):
                self.same(a.trip, b.trip, nest)
                self.body(a.body, b.body, nests, nest)
            elif isinstance(a, When) and isinstance(b, When):
                self.same(a.cond, b.cond, nest)
                self.body(a.then, b.then, nests, nest)
                self.body(a.orelse, b.orelse, nests, nest)
            elif isinstance(a, WarpRegion) and isinstance(b, WarpRegion) and a.axis == b.axis:
                self.body(a.body, b.body, nests, nest)
            else:
                raise Unsupported("nested loops: the rewrite changed the program's shape")


def _kernel_vars(kernel: Kernel, body) -> set[str]:
    exprs = [kernel.num_threads] + [e for _, e in kernel.cluster + kernel.grid] + \
        [e for b in kernel.barriers for e in (b.num_arrivals, b.copies, *b.shape)] + \
        [e for m in kernel.buffers for e in m.shape]
    names = set().union(*(free_vars(e) for e in exprs))
    _map_exprs(body, lambda e: names.update(free_vars(e)) or e)
    return names


def flatten_nested(kernel: Kernel, symbolic: Sequence[str],
                   fixed: Mapping[str, int] | None = None) -> Flat | None:
    """The kernel with its nested loops over T x K as one loop over P = T*K (module doc);
    None when it has no nested loops; Unsupported naming the construct when it has some that
    do not flatten."""
    fixed = dict(fixed or {})
    nests = _nests(kernel.body)
    if not nests:
        return None
    shapes = {(repr(t), repr(k)): (t, k) for t, k in (_shape(n, kernel.params) for n in nests)}
    if len(shapes) != 1:
        raise Unsupported("nested loops over different counts: "
                          + ", ".join(f"{t} x {k}" for t, k in sorted(shapes)))
    (T, K), = shapes.values()
    if not (free_vars(T) | free_vars(K)) & set(symbolic):
        return None             # concrete counts: unroll.py's business
    taken = set(kernel.params) | {s.var for s in walk(kernel.body) if isinstance(s, Loop)} | \
        {kernel.thread_axis, kernel.warp_axis} | {a for a, _ in kernel.cluster + kernel.grid} | \
        {s.axis for s in walk(kernel.body) if isinstance(s, WarpRegion)}
    named = isinstance(T, Var) and isinstance(K, Var)
    P = unique_name(f"{T.name}_x_{K.name}" if named else "positions", taken)
    p = unique_name("pos", taken)
    ids = {id(n) for n in nests}
    product = {repr(BinOp("*", T, K)), repr(BinOp("*", K, T))}
    body = _map_exprs(_flatten(kernel.body, ids, p, P), lambda e: _replace(e, product, Var(P)))
    check = _Prover(kernel, fixed, T, K, P, p)
    bounds = {e: check.lower_bound(e) for e in (T, K)}
    check.body(kernel.body, body, ids)
    used = _kernel_vars(kernel, body)
    for e, bound in bounds.items():
        # A count read only as the nest's trip: at a negative value the nest runs no
        # iteration, as at 0, so its runs are those of P = 0 (covered: the bound is then 0).
        # A count read elsewhere too would keep its negative values there: refused.
        if bound is None and free_vars(e) & used:
            raise Unsupported(f"nested loops: the assumptions do not keep `{e}` >= 0 and it "
                              "is read outside the nest (a negative trip count runs no "
                              "iteration, the product would)")
    lo = (bounds[T] or 0) * (bounds[K] or 0)
    params = {n: q for n, q in kernel.params.items() if n in used or n not in symbolic}
    dt = dk = None
    try:
        values = kernel.param_values(fixed)
        dt, dk = evaluate(T, values), evaluate(K, values)
    except Exception:       # a parameter without a default: P has none either
        pass
    params[P] = Param(P, None if dt is None else max(dt, 0) * max(dk, 0), symbolic=True)
    kept = tuple(a for a in kernel.assumptions if free_vars(a) <= set(params))
    dropped = len(kernel.assumptions) - len(kept)
    new = kernel.replace(body=body, params=params,
                         assumptions=kept + (BinOp(">=", Var(P), Const(lo)),))
    gone = sorted(set(kernel.params) - set(params))
    note = (f"nested loops: `loop t < {T}: loop kk < {K}` read through the running position "
            f"t*{K} + kk only, so they are one loop over {P} = {T}*{K} positions "
            f"(checker/symbolic/nested.py; {check.checked} rewritten expression(s) proved "
            f"equal by Z3), proved for every {P} >= {lo}, which covers every product"
            + (f" (no longer read: {', '.join(gone)}; {dropped} assumption(s) on them dropped, "
               "a wider range)" if gone else ""))
    return Flat(new, [n for n in symbolic if n in params] + [P], note)


__all__ = ["Flat", "PerTileOps", "flatten_nested"]
