"""Z3 terms of IR expressions: the translation, a solver for side questions, and the error that
says a kernel is outside the fragment the prover handles."""

from __future__ import annotations

from typing import Mapping, Sequence

import z3

from ...model import zterms
from ...model.ir import Loc
from ...model.zterms import CMP  # noqa: F401 (the prover's modules take it from here)


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

FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}   # x OP y == y OP' x


def z_int(e, env: Mapping[str, z3.ArithRef], parity: bool = False) -> z3.ArithRef:
    """An IR expression as a Z3 integer term (model/zterms.py); what has none is Unsupported."""
    try:
        return zterms.z_int(e, env, parity)
    except zterms.Untranslated as err:
        raise Unsupported(err.message) from None


def z_bool(e, env: Mapping[str, z3.ArithRef]) -> z3.BoolRef:
    try:
        return zterms.z_bool(e, env)
    except zterms.Untranslated as err:
        raise Unsupported(err.message) from None


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
