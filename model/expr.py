"""Integer expressions that fold as they are built: the one simplifier of `ir.Expr`.

The Pallas frontend evaluates a kernel's index arithmetic symbolically; these smart constructors
keep the result small (`(i + 1) + 2` is `i + 3`, `(i // 2) * 2` subtracted from `i` is `i % 2`),
so the IR a user reads, and the terms the prover gets, look like the kernel's own code. `mk*`
follow JAX's integer semantics: `mk_div` / `mk_rem` are lax's C division, `mk("//")` / `mk("%")`
the IR's floor division.

A variable whose name starts with `?` (OPAQUE_PREFIX) is a value only known at run time (data
loaded from memory); every other variable is an index, a parameter or a loop counter and is never
negative. While a kernel is translated, RANGES holds the known intervals of its indices, which lets
`(3 - i) % 2` of a loop index fold.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Mapping, Sequence

from .ir import (BINARY_OPS, BarrierRef, BinOp, Const, Expr, Loop, Op, Slice, UnOp, Var,
                 WarpRegion, When, free_vars)

OPAQUE_PREFIX = "?"


_OPAQUE_IDS = itertools.count(1)


def opaque(what: str) -> Var:
    """A fresh value only known at run time (data in memory, a float, a loop-varying carry)."""
    return Var(f"{OPAQUE_PREFIX}{what}{next(_OPAQUE_IDS)}")


def opaques(what: str, n: int) -> list[Var]:
    return [opaque(what) for _ in range(n)]


def opaque_vars(expr: Expr) -> list[str]:
    return sorted(v for v in free_vars(expr) if v.startswith(OPAQUE_PREFIX))



BOOL_OPS = {"==", "!=", "<", "<=", ">", ">=", "and", "or"}


def is_bool(expr: Expr) -> bool:
    if isinstance(expr, Const):
        return expr.value in (0, 1)
    if isinstance(expr, BinOp):
        return expr.op in BOOL_OPS
    if isinstance(expr, UnOp):
        return expr.op == "not"
    return False


# Known ranges of variables (loop indices, axis indices) while a kernel is translated: they let
# the folding below simplify C division and remainder of indices such as `(3 - i) % 2`.
RANGES: dict[str, tuple[int, int | None]] = {}


def _bounds(expr: Expr) -> tuple[int | None, int | None]:
    """An interval holding every value of `expr` (None: unbounded), from `RANGES`."""
    if isinstance(expr, Const):
        return expr.value, expr.value
    if isinstance(expr, Var):
        if expr.name in RANGES:
            return RANGES[expr.name]
        return (None, None) if expr.name.startswith(OPAQUE_PREFIX) else (0, None)
    if isinstance(expr, UnOp):
        lo, hi = _bounds(expr.arg)
        if expr.op == "neg":
            return (None if hi is None else -hi), (None if lo is None else -lo)
        return 0, 1
    if not isinstance(expr, BinOp):
        return None, None
    if expr.op in BOOL_OPS:
        return 0, 1
    (alo, ahi), (blo, bhi) = _bounds(expr.lhs), _bounds(expr.rhs)
    add = lambda x, y: None if x is None or y is None else x + y
    if expr.op == "+":
        return add(alo, blo), add(ahi, bhi)
    if expr.op == "-":
        return (add(alo, None if bhi is None else -bhi), add(ahi, None if blo is None else -blo))
    if expr.op in ("*", "//") and None not in (alo, ahi, blo, bhi):
        if expr.op == "//" and blo <= 0 <= bhi:
            return None, None
        f = (lambda x, y: x * y) if expr.op == "*" else (lambda x, y: x // y)
        vals = [f(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(vals), max(vals)
    if expr.op == "%" and blo is not None and blo > 0:    # floor remainder: [0, b - 1]
        hi = None if bhi is None else bhi - 1
        if alo is not None and alo >= 0 and ahi is not None:
            hi = ahi if hi is None else min(hi, ahi)
        return 0, hi
    if expr.op in ("min", "max"):
        pick = min if expr.op == "min" else max
        lo = None if None in (alo, blo) else pick(alo, blo)
        hi = None if None in (ahi, bhi) else pick(ahi, bhi)
        if expr.op == "max" and lo is None:
            lo = alo if alo is not None else blo
        if expr.op == "min" and hi is None:
            hi = ahi if ahi is not None else bhi
        return lo, hi
    return None, None


def nonneg(expr: Expr) -> bool:
    """A sufficient check that `expr` is never negative (indices, trip counts)."""
    if _syntactic_nonneg(expr):
        return True
    if not RANGES:
        return False
    lo, _ = _bounds(expr)
    return lo is not None and lo >= 0


def _syntactic_nonneg(expr: Expr) -> bool:
    if isinstance(expr, Const):
        return expr.value >= 0
    if isinstance(expr, Var):
        return not expr.name.startswith(OPAQUE_PREFIX)
    if isinstance(expr, BinOp):
        if expr.op in BOOL_OPS:
            return True
        if expr.op in ("+", "*", "//", "min", "max"):
            return nonneg(expr.lhs) and nonneg(expr.rhs)
        if expr.op == "%":
            return nonneg(expr.lhs) and nonneg(expr.rhs)
        return False
    if isinstance(expr, UnOp):
        return expr.op == "not"
    return False


def same(a: Expr, b: Expr) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def mk(op: str, a: Expr, b: Expr) -> Expr:
    """`BinOp(op, a, b)`, folded: constants, identities, affine constant offsets.

    >>> mk("+", mk("+", Var("i"), Const(1)), Const(2))
    (i + 3)
    >>> mk("max", mk("<", Var("block"), Const(8)), Const(0))   # a comparison is never negative
    (block < 8)
    """
    if isinstance(a, Const) and isinstance(b, Const):
        if op in ("//", "%") and b.value == 0:
            return BinOp(op, a, b)   # let evaluation report it where it matters
        return Const(BINARY_OPS[op](a.value, b.value))
    if op == "+":
        if isinstance(a, Const):
            a, b = b, a
        if isinstance(b, Const):
            if b.value == 0:
                return a
            if isinstance(a, BinOp) and a.op == "+" and isinstance(a.rhs, Const):
                return mk("+", a.lhs, Const(a.rhs.value + b.value))
            if isinstance(a, BinOp) and a.op == "-" and isinstance(a.rhs, Const):
                return mk("+", a.lhs, Const(b.value - a.rhs.value))
            if b.value < 0:
                return BinOp("-", a, Const(-b.value))
        if isinstance(b, UnOp) and b.op == "neg":
            return mk("-", a, b.arg)
    elif op == "-":
        if isinstance(b, Const):
            return mk("+", a, Const(-b.value))
        if same(a, b):
            return Const(0)
        # a - (a // c) * c is a % c (floor division and remainder, as in the IR)
        if isinstance(b, BinOp) and b.op == "*" and isinstance(b.rhs, Const) \
                and b.rhs.value > 0 and isinstance(b.lhs, BinOp) and b.lhs.op == "//" \
                and same(b.lhs.lhs, a) and isinstance(b.lhs.rhs, Const) \
                and b.lhs.rhs.value == b.rhs.value:
            return mk("%", a, b.rhs)
    elif op == "*":
        if isinstance(a, Const):
            a, b = b, a
        if isinstance(b, Const):
            if b.value == 0:
                return Const(0)
            if b.value == 1:
                return a
            if isinstance(a, BinOp) and a.op == "*" and isinstance(a.rhs, Const):
                return mk("*", a.lhs, Const(a.rhs.value * b.value))
    elif op == "//":
        if isinstance(b, Const) and b.value == 1:
            return a
        if isinstance(a, Const) and a.value == 0:
            return Const(0)
    elif op == "%":
        if isinstance(b, Const) and b.value == 1:
            return Const(0)
        if isinstance(a, Const) and a.value == 0:
            return Const(0)
        if isinstance(b, Const) and isinstance(a, BinOp) and a.op == "%" \
                and isinstance(a.rhs, Const) and a.rhs.value == b.value:
            return a
    elif op in ("min", "max"):
        if same(a, b):
            return a
        if op == "max":          # |x| of an x known to be >= 0
            for x, y in ((a, b), (b, a)):
                if isinstance(y, UnOp) and y.op == "neg" and same(y.arg, x) and nonneg(x):
                    return x
            for x, y in ((a, b), (b, a)):
                if isinstance(y, Const) and y.value == 0 and nonneg(x):
                    return x
    elif op in ("==", "<=", ">="):
        if same(a, b):
            return Const(1)
        if op == ">=" and isinstance(b, Const) and b.value <= 0 and nonneg(a):
            return Const(1)
    elif op in ("!=", "<", ">"):
        if same(a, b):
            return Const(0)
        if op == "<" and isinstance(b, Const) and b.value <= 0 and nonneg(a):
            return Const(0)
    elif op == "xor":
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Const) and y.value == 0:
                return x
    elif op == "and":
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if x.value == 0:
                    return Const(0)
                if is_bool(y):
                    return y
    elif op == "or":
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if x.value != 0:
                    return Const(1)
                if is_bool(y):
                    return y
    return BinOp(op, a, b)


def mk_not(a: Expr) -> Expr:
    if isinstance(a, Const):
        return Const(int(not a.value))
    if isinstance(a, UnOp) and a.op == "not" and is_bool(a.arg):
        return a.arg
    negated = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
    if isinstance(a, BinOp) and a.op in negated:
        return mk(negated[a.op], a.lhs, a.rhs)
    return UnOp("not", a)


def mk_neg(a: Expr) -> Expr:
    if isinstance(a, Const):
        return Const(-a.value)
    if isinstance(a, UnOp) and a.op == "neg":
        return a.arg
    return UnOp("neg", a)


def mk_select(pred: Expr, cases: Sequence[Expr]) -> Expr:
    """`lax.select_n(pred, *cases)`: case `pred` (0/1 for a boolean predicate)."""
    if isinstance(pred, Const):
        return cases[max(0, min(pred.value, len(cases) - 1))]
    if all(same(c, cases[0]) for c in cases):
        return cases[0]
    if len(cases) == 2:
        a, b = cases
        if is_bool(pred):
            if isinstance(a, Const) and isinstance(b, Const):
                if (a.value, b.value) == (0, 1):
                    return pred
                if (a.value, b.value) == (1, 0):
                    return mk_not(pred)
            return mk("+", mk("*", mk_not(pred), a), mk("*", pred, b))
    total: Expr = Const(0)
    for k, c in enumerate(cases):
        total = mk("+", total, mk("*", mk("==", pred, Const(k)), c))
    return total


def mk_abs(a: Expr) -> Expr:
    return a if nonneg(a) else mk("max", a, mk_neg(a))


def mk_div(a: Expr, b: Expr) -> Expr:
    """`lax.div`: C division, rounding toward zero; plain `//` when both sides are indices.

    >>> mk_div(Const(-7), Const(2)), mk_div(Var("i"), Const(2))
    (-3, (i // 2))
    """
    if isinstance(b, Const) and b.value in (1, -1):
        return a if b.value == 1 else mk_neg(a)
    if nonneg(a) and nonneg(b):
        return mk("//", a, b)
    if isinstance(a, Const) and isinstance(b, Const) and b.value:
        q = abs(a.value) // abs(b.value)
        return Const(q if (a.value < 0) == (b.value < 0) else -q)
    q = mk("//", mk_abs(a), mk_abs(b))
    flip = mk("xor", mk("<", a, Const(0)), mk("<", b, Const(0)))
    return mk("-", q, mk("*", Const(2), mk("*", flip, q)))


def mk_rem(a: Expr, b: Expr) -> Expr:
    """`lax.rem`: C remainder, with the sign of the dividend."""
    if isinstance(b, Const) and b.value in (1, -1):
        return Const(0)
    if nonneg(a) and nonneg(b):
        return mk("%", a, b)
    return mk("-", a, mk("*", b, mk_div(a, b)))


def substitute(expr: Expr, env: Mapping[str, Expr]) -> Expr:
    """Replace variables by expressions, folding again as the expression is rebuilt.

    >>> substitute(mk("%", mk("+", Var("i"), Var("c")), Const(2)), {"c": Const(1)})
    ((i + 1) % 2)
    """
    if isinstance(expr, Var):
        return env.get(expr.name, expr)
    if isinstance(expr, BinOp):
        return mk(expr.op, substitute(expr.lhs, env), substitute(expr.rhs, env))
    if isinstance(expr, UnOp):
        arg = substitute(expr.arg, env)
        return mk_not(arg) if expr.op == "not" else mk_neg(arg)
    return expr


def _subst_ref(ref: BarrierRef | None, env: Mapping[str, Expr]) -> BarrierRef | None:
    if ref is None:
        return None
    block = None if ref.block is None else tuple(substitute(e, env) for e in ref.block)
    return BarrierRef(ref.alloc, tuple(substitute(e, env) for e in ref.index), block)


def substitute_stmts(body: Sequence, env: Mapping[str, Expr]) -> tuple:
    out = []
    for s in body:
        if isinstance(s, Op):
            out.append(dataclasses.replace(
                s, barrier=_subst_ref(s.barrier, env), count=substitute(s.count, env),
                bytes=substitute(s.bytes, env),
                parity=None if s.parity is None else substitute(s.parity, env),
                phase=None if s.phase is None else substitute(s.phase, env),
                reads=tuple(_subst_mem(r, env) for r in s.reads),
                writes=tuple(_subst_mem(w, env) for w in s.writes)))
        elif isinstance(s, Loop):
            out.append(Loop(s.var, substitute(s.trip, env), substitute_stmts(s.body, env), s.loc))
        elif isinstance(s, When):
            cond = substitute(s.cond, env)
            then, orelse = substitute_stmts(s.then, env), substitute_stmts(s.orelse, env)
            if isinstance(cond, Const):
                out.extend(then if cond.value else orelse)
            else:
                out.append(When(cond, then, orelse, s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, substitute_stmts(s.body, env), s.loc))
        else:
            raise TypeError(f"not a statement: {s!r}")
    return tuple(out)


def _subst_mem(ref, env: Mapping[str, Expr]):
    region = tuple(Slice(*(substitute(e, env) for e in s.exprs())) for s in ref.region)
    return dataclasses.replace(ref, index=tuple(substitute(i, env) for i in ref.index),
                               region=region)


def stmt_vars(body: Sequence) -> set[str]:
    """Variables that synchronization depends on: indices, counts, conditions, trip counts."""
    names: set[str] = set()
    for s in body:
        if isinstance(s, Op):
            for e in (s.count, s.bytes, s.parity, s.phase):
                if e is not None:
                    names |= free_vars(e)
            if s.barrier is not None:
                for e in s.barrier.index + (s.barrier.block or ()):
                    names |= free_vars(e)
        elif isinstance(s, Loop):
            names |= free_vars(s.trip) | (stmt_vars(s.body) - {s.var})
        elif isinstance(s, When):
            names |= free_vars(s.cond) | stmt_vars(s.then) | stmt_vars(s.orelse)
        elif isinstance(s, WarpRegion):
            names |= stmt_vars(s.body)
    return names

