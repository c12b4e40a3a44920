"""The integer part of lax, evaluated symbolically: one rule per arithmetic primitive.

A rule takes (equation, argument expressions, argument dtypes) and returns an `Expr`; anything it
cannot follow exactly (floats, bit tricks on signed values) becomes an opaque data value.
"""

from __future__ import annotations

from typing import Callable

from ..expr import (Const, Expr, mk, mk_abs, mk_div, mk_neg, mk_not, mk_rem, mk_select, nonneg,
                    opaque)


def _integral(dtype) -> bool:
    import numpy as np
    try:
        return np.issubdtype(dtype, np.integer) or np.dtype(dtype) == np.bool_
    except TypeError:
        return False



def _bitwise(op: str):
    def rule(eqn, args, dtypes):
        a, b = args
        if all(d is not None and str(d) == "bool" for d in dtypes):
            return mk({"and": "and", "or": "or", "xor": "!="}[op], a, b)
        if op == "xor":
            return mk("xor", a, b)
        if op == "and":
            for x, y in ((a, b), (b, a)):
                if isinstance(y, Const) and y.value > 0 and (y.value + 1) & y.value == 0 \
                        and nonneg(x):
                    return mk("%", x, Const(y.value + 1))   # x & (2^k - 1)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(a.value & b.value if op == "and" else a.value | b.value)
        return opaque("bits")
    return rule


def _not_rule(eqn, args, dtypes):
    (a,) = args
    if dtypes[0] is not None and str(dtypes[0]) == "bool":
        return mk_not(a)
    return mk("-", mk_neg(a), Const(1))


def _cmp(op):
    return lambda eqn, args, dtypes: mk(op, args[0], args[1])


def _sign(eqn, args, dtypes):
    (a,) = args
    return mk("-", mk(">", a, Const(0)), mk("<", a, Const(0)))


def _clamp(eqn, args, dtypes):
    lo, x, hi = args
    return mk("min", mk("max", x, lo), hi)


def _integer_pow(eqn, args, dtypes):
    (a,) = args
    y = int(eqn.params["y"])
    if y < 0:
        return opaque("pow")
    out: Expr = Const(1)
    for _ in range(y):
        out = mk("*", out, a)
    return out


def _shift_left(eqn, args, dtypes):
    a, b = args
    if isinstance(b, Const) and 0 <= b.value < 31:
        return mk("*", a, Const(1 << b.value))
    return opaque("shift")


def _shift_right(eqn, args, dtypes):
    a, b = args
    if isinstance(b, Const) and 0 <= b.value < 31 and nonneg(a):
        return mk("//", a, Const(1 << b.value))
    return opaque("shift")


def _identity(eqn, args, dtypes):
    return args[0]


_ARITH: dict[str, Callable] = {
    "add": lambda e, a, d: mk("+", a[0], a[1]),
    "sub": lambda e, a, d: mk("-", a[0], a[1]),
    "mul": lambda e, a, d: mk("*", a[0], a[1]),
    "div": lambda e, a, d: mk_div(a[0], a[1]),
    "rem": lambda e, a, d: mk_rem(a[0], a[1]),
    "max": lambda e, a, d: mk("max", a[0], a[1]),
    "min": lambda e, a, d: mk("min", a[0], a[1]),
    "neg": lambda e, a, d: mk_neg(a[0]),
    "abs": lambda e, a, d: mk_abs(a[0]),
    "sign": _sign,
    "eq": _cmp("=="), "ne": _cmp("!="), "lt": _cmp("<"), "le": _cmp("<="),
    "gt": _cmp(">"), "ge": _cmp(">="),
    "and": _bitwise("and"), "or": _bitwise("or"), "xor": _bitwise("xor"),
    "not": _not_rule,
    "select_n": lambda e, a, d: mk_select(a[0], a[1:]),
    "clamp": _clamp,
    "integer_pow": _integer_pow,
    "shift_left": _shift_left,
    "shift_right_logical": _shift_right,
    "shift_right_arithmetic": _shift_right,
    "convert_element_type": _identity,
    "squeeze": _identity, "reshape": _identity, "broadcast_in_dim": _identity,
    "copy": _identity, "copy_p": _identity, "optimization_barrier": _identity,
    "reduce_precision": _identity,
    "multiple_of": _identity,
}


