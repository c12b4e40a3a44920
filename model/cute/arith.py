"""The integer ops a warp's thread and warp index arithmetic is made of (arith dialect).

One row per op: how its result is computed from its operands, lane by lane (values.lift).
"""

from __future__ import annotations

import operator

from .values import Unknown, lift


def _cdiv(a: int, b: int) -> int:
    """C division (arith.divsi): truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _crem(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


def _ceildiv(a: int, b: int) -> int:
    return -((-a) // b)


def _guard(fn):
    def safe(a, b):
        return fn(a, b) if b != 0 else _ZERO
    return safe


_ZERO = object()

BINARY = {
    "arith.addi": operator.add, "arith.subi": operator.sub, "arith.muli": operator.mul,
    "arith.floordivsi": _guard(operator.floordiv), "arith.divsi": _guard(_cdiv),
    "arith.divui": _guard(operator.floordiv), "arith.remsi": _guard(_crem),
    "arith.remui": _guard(operator.mod), "arith.ceildivsi": _guard(_ceildiv),
    "arith.ceildivui": _guard(_ceildiv),
    "arith.andi": operator.and_, "arith.ori": operator.or_, "arith.xori": operator.xor,
    "arith.shli": operator.lshift, "arith.shrui": operator.rshift, "arith.shrsi": operator.rshift,
    "arith.maxsi": max, "arith.minsi": min, "arith.maxui": max, "arith.minui": min,
}

# arith.cmpi's predicate attribute, in the order of MLIR's CmpIPredicate enum
PREDICATES = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
              operator.lt, operator.le, operator.gt, operator.ge]

# Casts between integer widths: the value is kept (i1 results keep the low bit).
CASTS = {"arith.extui", "arith.extsi", "arith.trunci", "arith.index_cast",
         "arith.index_castui", "arith.bitcast"}


def binary(name: str, a, b):
    fn = BINARY[name]
    out = lift(lambda x, y: fn(x, y), a, b)
    if out is _ZERO or (hasattr(out, "values") and _ZERO in out.values):
        return Unknown(f"{name} by zero")
    return out


def compare(predicate: int, a, b):
    fn = PREDICATES[predicate]
    return lift(lambda x, y: int(fn(x, y)), a, b)


def cast(value, result_type: str):
    if result_type == "i1":
        return lift(lambda x: x & 1, value)
    return value


def select(cond, a, b):
    if isinstance(cond, Unknown):
        return cond
    if isinstance(cond, int):
        return a if cond else b
    return lift(lambda c, x, y: x if c else y, cond, a, b)
