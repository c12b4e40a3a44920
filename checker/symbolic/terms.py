"""Z3 terms of IR expressions: the translation, a solver for side questions, and the error that
says a kernel is outside the fragment the prover handles."""

from __future__ import annotations

from typing import Mapping, Sequence

import z3

from ...model.ir import BinOp, Const, Loc, UnOp, Var

class Unsupported(Exception):
    """The kernel is outside the fragment the prover handles."""

    def __init__(self, message: str, loc: Loc | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        where = f" ({self.loc})" if self.loc and self.loc.line else ""
        return self.message + where


def LOOPVAR() -> z3.ArithRef:
    """The loop variable while translating loop bodies (in the Z3 context in force)."""
    return z3.Int("i!loop")


# ----------------------------------------------------------------------------------------------
# Integer expressions to Z3
# ----------------------------------------------------------------------------------------------

CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}   # x OP y == y OP' x


def z_int(e, env: Mapping[str, z3.ArithRef], parity: bool = False) -> z3.ArithRef:
    """An IR expression as a Z3 integer term (comparisons and logic as 0/1, like the IR)."""
    if isinstance(e, int):
        return z3.IntVal(e)
    if isinstance(e, Const):
        return z3.IntVal(e.value)
    if isinstance(e, Var):
        if e.name not in env or env[e.name] is None:
            raise Unsupported(f"`{e.name}` is not available here")
        v = env[e.name]
        return z3.IntVal(v) if isinstance(v, int) else v
    if isinstance(e, UnOp):
        if e.op == "neg":
            return -z_int(e.arg, env, parity)
        return z3.If(z_bool(e.arg, env), 0, 1)
    if isinstance(e, BinOp):
        if e.op in CMP or e.op in ("and", "or"):
            return z3.If(z_bool(e, env), 1, 0)
        a, b = z_int(e.lhs, env, parity), z_int(e.rhs, env, parity)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op in ("//", "%"):
            return a / b if e.op == "//" else a % b
        if e.op == "min":
            return z3.If(a <= b, a, b)
        if e.op == "max":
            return z3.If(a >= b, a, b)
        if e.op == "xor":
            if parity:      # only its parity is used: (a ^ b) % 2 == (a + b) % 2
                return a + b
            raise Unsupported(f"`{e}`: xor outside a parity is not supported")
    raise Unsupported(f"cannot translate `{e}`")


def z_bool(e, env: Mapping[str, z3.ArithRef]) -> z3.BoolRef:
    if isinstance(e, BinOp):
        if e.op in CMP:
            return CMP[e.op](z_int(e.lhs, env), z_int(e.rhs, env))
        if e.op == "and":
            return z3.And(z_bool(e.lhs, env), z_bool(e.rhs, env))
        if e.op == "or":
            return z3.Or(z_bool(e.lhs, env), z_bool(e.rhs, env))
    if isinstance(e, UnOp) and e.op == "not":
        return z3.Not(z_bool(e.arg, env))
    return z_int(e, env) != 0


def nonlinear(t) -> bool:
    """Does a term multiply two non-constants or divide by a non-constant?"""
    if z3.is_app(t):
        kind = t.decl().kind()
        kids = t.children()
        if kind == z3.Z3_OP_MUL and sum(0 if z3.is_int_value(k) else 1 for k in kids) > 1:
            return True
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_DIV) and not z3.is_int_value(kids[1]):
            return True
        return any(nonlinear(k) for k in kids)
    return False


class Solver:
    """Validity checks under the kernel's assumptions."""

    def __init__(self, facts: Sequence[z3.BoolRef], timeout: float = 5.0):
        self.facts = list(facts)
        self.timeout = timeout

    def valid(self, claim, *extra) -> bool:
        s = z3.Solver()
        s.set("timeout", int(self.timeout * 1000))
        s.add(*self.facts, *extra, z3.Not(claim))
        return s.check() == z3.unsat

    def possible(self, claim, *extra) -> bool:
        s = z3.Solver()
        s.set("timeout", int(self.timeout * 1000))
        s.add(*self.facts, *extra, claim)
        return s.check() != z3.unsat

    def equal(self, a, b, *extra) -> bool:
        return self.valid(a == b, *extra)


def linear_in(e, var: str, env: Mapping, solver: Solver) -> tuple[int, z3.ArithRef] | None:
    """(a, b) with e == a*var + b for every value of var, a a constant; None if not."""
    try:
        t0 = z3.simplify(z_int(e, {**env, var: z3.IntVal(0)}))
        t1 = z3.simplify(z_int(e, {**env, var: z3.IntVal(1)}))
        tx = z_int(e, {**env, var: LOOPVAR()})
    except Unsupported:
        return None
    a = z3.simplify(t1 - t0)
    if not z3.is_int_value(a):
        return None
    a = a.as_long()
    if not solver.valid(tx == a * LOOPVAR() + t0):
        return None
    return a, t0


# ----------------------------------------------------------------------------------------------
# Roles and their items
# ----------------------------------------------------------------------------------------------


def consts(t) -> set:
    out = set()

    def walk(x):
        if z3.is_const(x) and not z3.is_int_value(x) and not z3.is_true(x) and \
                not z3.is_false(x):
            out.add(x)
        for ch in x.children():
            walk(ch)
    walk(t)
    return out


def evaluate(t, sub) -> int:
    v = z3.simplify(z3.substitute(t, *sub) if sub else t)
    if not z3.is_int_value(v):
        raise Unsupported(f"cannot evaluate `{t}`")
    return v.as_long()
