"""IR expressions as Z3 terms: integers as Z3 integers, comparisons and logic as 0/1 like the
IR. The one translation: the prover's (checker/symbolic/terms.py, which names what it cannot
translate `Unsupported`) and the frontends' own side proofs (model/cute/guards.py) both use it.
Imported only where Z3 is needed (model/ imports without it otherwise)."""

from __future__ import annotations

from typing import Mapping

import z3

from .ir import BinOp, Const, UnOp, Var

CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
       "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


class Untranslated(Exception):
    """An expression with no term here (an unbound name, an operator left out)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def z_int(e, env: Mapping[str, z3.ArithRef | int | None], parity: bool = False,
          exact_division: bool = False) -> z3.ArithRef:
    """An IR expression as a Z3 integer term. `parity`: only the term's parity is used (so
    `xor` may be `+`). `exact_division`: `//` and `%` only by a positive constant, where Z3's
    division is Python's floor division (Z3's rounds toward the divisor's sign otherwise)."""
    if isinstance(e, int):
        return z3.IntVal(e)
    if isinstance(e, Const):
        return z3.IntVal(e.value)
    if isinstance(e, Var):
        if e.name not in env or env[e.name] is None:
            raise Untranslated(f"`{e.name}` is not available here")
        v = env[e.name]
        return z3.IntVal(v) if isinstance(v, int) else v
    if isinstance(e, UnOp):
        if e.op == "neg":
            return -z_int(e.arg, env, parity, exact_division)
        return z3.If(z_bool(e.arg, env, exact_division), 0, 1)
    if isinstance(e, BinOp):
        if e.op in CMP or e.op in ("and", "or"):
            return z3.If(z_bool(e, env, exact_division), 1, 0)
        a = z_int(e.lhs, env, parity, exact_division)
        b = z_int(e.rhs, env, parity, exact_division)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op in ("//", "%") and (not exact_division or
                                    isinstance(e.rhs, Const) and e.rhs.value > 0):
            return a / b if e.op == "//" else a % b
        if e.op == "min":
            return z3.If(a <= b, a, b)
        if e.op == "max":
            return z3.If(a >= b, a, b)
        if e.op == "xor":
            if parity:      # only its parity is used: (a ^ b) % 2 == (a + b) % 2
                return a + b
            raise Untranslated(f"`{e}`: xor outside a parity is not supported")
    raise Untranslated(f"cannot translate `{e}`")


def z_bool(e, env: Mapping[str, z3.ArithRef | int | None],
           exact_division: bool = False) -> z3.BoolRef:
    """An IR condition as a Z3 formula (an integer is true where it is not 0)."""
    if isinstance(e, BinOp):
        if e.op in CMP:
            return CMP[e.op](z_int(e.lhs, env, False, exact_division),
                             z_int(e.rhs, env, False, exact_division))
        if e.op == "and":
            return z3.And(z_bool(e.lhs, env, exact_division), z_bool(e.rhs, env, exact_division))
        if e.op == "or":
            return z3.Or(z_bool(e.lhs, env, exact_division), z_bool(e.rhs, env, exact_division))
    if isinstance(e, UnOp) and e.op == "not":
        return z3.Not(z_bool(e.arg, env, exact_division))
    return z_int(e, env, False, exact_division) != 0
