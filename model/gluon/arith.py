"""Integer TTGIR ops evaluated symbolically: `arith` as folding expressions (model/expr.py),
program ids as parameters. Bitwise ops the IR has no term for (`x & 5`) are data."""

from __future__ import annotations

import re

from ..expr import is_bool, mk, mk_div, mk_not, mk_rem, mk_select, opaque, same
from ..ir import BinOp, Const, Expr, Var, free_vars
from .ttgir import Operation

def _implied_nonneg(facts: list[Expr], x: Expr) -> bool:
    """Do the facts imply `x >= 0` for every integer value of their variables (Z3)? Anything
    Z3 cannot read or decide keeps the C form (the prover then reports it outside its
    fragment)."""
    return _implied(facts, x, lambda z: z >= 0)


def implied_positive(facts: list[Expr], x: Expr) -> bool:
    """Do the facts imply `x >= 1` for every integer value of their variables (Z3)?"""
    return _implied(facts, x, lambda z: z >= 1)


def implied_constant(facts: list[Expr], x: Expr, value: int) -> bool:
    """Do the facts imply `x == value` for every integer value of their variables (Z3)?"""
    return _implied(facts, x, lambda z: z == value)


def _implied(facts: list[Expr], x: Expr, claim) -> bool:
    import z3

    from ...checker.symbolic.terms import Unsupported, z_bool, z_int
    names = set(free_vars(x)).union(*(free_vars(f) for f in facts))
    env = {n: z3.Int(n) for n in names}
    try:
        s = z3.Solver()
        s.set("timeout", 2000)
        s.add(*(z_bool(f, env) for f in facts))
        s.add(z3.Not(claim(z_int(x, env))))
        return s.check() == z3.unsat
    except (Unsupported, z3.Z3Exception):
        return False


_CMP = {"eq": "==", "ne": "!=", "slt": "<", "ult": "<", "sle": "<=", "ule": "<=", "sgt": ">",
        "ugt": ">", "sge": ">=", "uge": ">="}


class ArithRules:
    def constant(self, op: Operation, out):
        m = re.match(r"^arith\.constant\s+(true|false|-?\d+)\s*(?::\s*(\w+))?\s*$", op.text)
        if not m:
            return None                           # a tensor or float constant: data
        text = m.group(1)
        return [Const(1 if text == "true" else 0 if text == "false" else int(text))]

    def binary(self, op: Operation, out):
        args = [self.value(a) for a in op.operands[:2]]
        if not all(isinstance(a, Expr) for a in args) or len(args) != 2:
            return None
        a, b = args
        kind = op.name.split(".")[1]
        if kind == "addi":
            return [mk("+", a, b)]
        if kind == "subi":
            return [mk("-", a, b)]
        if kind == "muli":
            return [mk("*", a, b)]
        if kind == "divsi":
            return [self._c_division(a, b, mk_div(a, b), mk("//", a, b))]
        if kind in ("divui", "floordivsi"):
            return [mk("//", a, b)]
        if kind == "ceildivsi":
            return [mk("//", mk("+", a, mk("-", b, Const(1))), b)]
        if kind == "remsi":
            return [self._c_division(a, b, mk_rem(a, b), mk("%", a, b))]
        if kind == "remui":
            return [mk("%", a, b)]
        if kind in ("minsi", "minui"):
            return [mk("min", a, b)]
        if kind in ("maxsi", "maxui"):
            return [mk("max", a, b)]
        if kind in ("andi", "ori", "xori"):
            return [self._bitwise(kind, a, b)]
        if kind == "shli" and isinstance(b, Const):
            return [mk("*", a, Const(1 << b.value))]
        if kind in ("shrsi", "shrui") and isinstance(b, Const):
            return [mk("//", a, Const(1 << b.value))]
        return None

    def _c_division(self, a: Expr, b: Expr, c_form: Expr, floor_form: Expr) -> Expr:
        """C division by a positive constant of a dividend that may be negative: remembered,
        so that under a predicate that keeps the dividend non-negative (`pred=i - 1 >= 0`, the
        tutorials' release of the buffer of an earlier iteration) it reads as the floor form
        (see `ArithRules.under`)."""
        if isinstance(b, Const) and b.value > 0 and not same(c_form, floor_form):
            self.c_divisions[repr(c_form)] = (a, floor_form)
        return c_form

    def under(self, pred: Expr, e: Expr) -> Expr:
        """`e` with the C divisions whose dividends `pred` keeps non-negative in floor form:
        Z3 proves the dividend non-negative from the predicate, the enclosing loops' ranges
        and the launch's assumptions (`pred=k_tiles > 0` keeps `k_tiles - 1` non-negative)."""
        if not self.c_divisions:
            return e
        facts = [pred, *self.loop_ranges, *self.assumptions]

        def walk(e: Expr) -> Expr:
            hit = self.c_divisions.get(repr(e))
            if hit is not None and _implied_nonneg(facts, hit[0]):
                return hit[1]
            if isinstance(e, BinOp):
                lhs, rhs = walk(e.lhs), walk(e.rhs)
                return e if lhs is e.lhs and rhs is e.rhs else mk(e.op, lhs, rhs)
            return e
        return walk(e)

    @staticmethod
    def _bitwise(kind: str, a: Expr, b: Expr) -> Expr:
        if isinstance(a, Const) and not isinstance(b, Const):
            a, b = b, a
        if kind == "andi":
            if is_bool(a) and is_bool(b):
                return mk("and", a, b)
            if isinstance(b, Const) and b.value > 0 and b.value & (b.value + 1) == 0:
                return mk("%", a, Const(b.value + 1))             # x & (2^k - 1)
            return opaque("bits")
        if kind == "ori":
            if is_bool(a) and is_bool(b):
                return mk("or", a, b)
            return opaque("bits")
        if is_bool(a) and same(b, Const(1)):
            return mk_not(a)
        return mk("xor", a, b)

    def cmpi(self, op: Operation, out):
        m = re.match(r"^arith\.cmpi\s+(\w+)\s*,", op.text)
        args = [self.value(a) for a in op.operands[:2]]
        if not m or m.group(1) not in _CMP or not all(isinstance(a, Expr) for a in args):
            return None
        return [mk(_CMP[m.group(1)], args[0], args[1])]

    def select(self, op: Operation, out):
        c, a, b = (self.value(x) for x in op.operands[:3])
        if not isinstance(c, Expr):
            return None
        return [self._select(c, a, b)]

    @staticmethod
    def _select(cond, a, b):
        if not (isinstance(a, Expr) and isinstance(b, Expr)):
            return a if a is b else None
        if isinstance(cond, Const):
            return a if cond.value else b
        # `p ^ 1 if wrap else p` is `p ^ wrap`; `0 if c + 1 == S else c + 1` is `(c + 1) % S`
        # (the carry analysis accepts it only for a c known to stay below S)
        from ..ir import BinOp
        if isinstance(a, BinOp) and a.op == "xor" and same(a.lhs, b) and same(a.rhs, Const(1)):
            return mk("xor", b, cond)
        if isinstance(cond, BinOp) and cond.op == "==" and isinstance(cond.rhs, Const) \
                and same(a, Const(0)) and same(b, cond.lhs) and cond.rhs.value > 0:
            return mk("%", b, cond.rhs)
        return mk_select(cond, [b, a])

    def cast(self, op: Operation, out):
        v = self.value(op.operands[0]) if op.operands else None
        return [v] if isinstance(v, Expr) else None

    def program_id(self, op: Operation, out):
        axis = op.text.split()[1] if len(op.text.split()) > 1 else "x"
        key = f"%program_id_{axis}"        # one per axis: every partition is in the same CTA
        if key not in self.values:
            nprog = self._num_programs(axis)
            pid = self.param(f"pid_{axis}", 0)
            self.assumptions.append(pid < nprog)
            self.values[key] = pid
        return [self.values[key]]

    def num_programs(self, op: Operation, out):
        axis = op.text.split()[1] if len(op.text.split()) > 1 else "x"
        return [self._num_programs(axis)]

    def _num_programs(self, axis: str) -> Var:
        key = f"%num_programs_{axis}"
        if key not in self.values:
            k = "xyz".index(axis) if axis in "xyz" else 0
            grid = self.launch.grid
            n = self.param(f"num_programs_{axis}", grid[k] if k < len(grid) else 1)
            self.assumptions.append(n >= 1)
            self.values[key] = n
        return self.values[key]
