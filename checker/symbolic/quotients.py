"""A parameter the kernel reads only as a quotient becomes that quotient.

A shape parameter often reaches the protocol only through `N_CTX // 128`: every loop runs
`N_CTX // 128` blocks and nothing else looks at N_CTX. The prover then carries N_CTX and the
division through every invariant, although the kernel cannot tell apart two lengths with the
same quotient. Such a parameter P is replaced by a fresh one Q standing for `P // D`; the kernel
behaves at Q = q exactly as at every P with P // D = q, so a proof for every Q the assumptions
allow is a proof for every P, and a violation at Q = q is one at the smallest such P.

The rewrite is taken only when it is exact: every occurrence of P in the program, allocations
and shape is the dividend of the one floor division `P // D` (D > 0 constant), the assumptions
name P alone, and Z3 confirms that the Q range stated for the new kernel is exactly the set
of quotients of the P range (no value gained, none lost). Otherwise the kernel is proved as it
is. The verdict is translated back: it names `P // D` and gives breaking values of P.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import z3

from ...model.ir import BinOp, Const, Expr, Kernel, Param, UnOp, Var, free_vars, unique_name
from ..verdict import Verdict
from .terms import z_bool

SHAPE_FIELDS = ("body", "barriers", "buffers", "num_threads", "cluster", "grid")


@dataclass(frozen=True)
class Quotient:
    """`name` stands for `param // divisor` in `kernel`; P's range maps onto [lo, hi]."""

    param: str
    divisor: int
    name: str
    lo: int | None
    hi: int | None
    p_assumptions: tuple[Expr, ...]

    def witness(self, q: int) -> int | None:
        """The P nearest zero in P's range with P // D = q."""
        p = z3.Int(self.param)
        opt = z3.Optimize()
        opt.set("timeout", 5000)
        opt.add(*[z_bool(a, {self.param: p}) for a in self.p_assumptions], p / self.divisor == q)
        opt.minimize(z3.If(p >= 0, p, -p))
        if opt.check() != z3.sat:
            return None
        return opt.model().eval(p).as_long()


def quotient_rewrite(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]
                     ) -> tuple[Kernel, list[Quotient]]:
    """The kernel with each symbolic parameter read only as `P // D` replaced by a parameter for
    the quotient (when the replacement is exact), and the replacements made."""
    done: list[Quotient] = []
    for name in symbolic:
        found = _rewrite_one(kernel, name, fixed)
        if found is not None:
            kernel, q = found
            done.append(q)
    return kernel, done


def _rewrite_one(kernel: Kernel, name: str, fixed: Mapping[str, int]
                 ) -> tuple[Kernel, Quotient] | None:
    divisors: set[int] = set()
    for part in SHAPE_FIELDS:
        if not _only_quotients(getattr(kernel, part), name, divisors, set()):
            return None
    if len(divisors) != 1:
        return None
    (d,) = divisors
    mine = tuple(_at_fixed(a, fixed) for a in kernel.assumptions if name in free_vars(a))
    if any(free_vars(a) != {name} for a in mine):
        return None      # a condition linking P to another parameter: not translated
    bounds = _quotient_range(name, d, mine)
    if bounds is None:
        return None
    lo, hi = bounds
    qname = unique_name(f"{name}_div_{d}", set(kernel.params) | _all_vars(kernel))
    qvar = Var(qname)
    conds = tuple(c for c in ((BinOp(">=", qvar, Const(lo)) if lo is not None else None),
                              (BinOp("<=", qvar, Const(hi)) if hi is not None else None))
                  if c is not None)
    target = BinOp("//", Var(name), Const(d))
    memo: dict[int, Any] = {}
    changes = {part: _replace(getattr(kernel, part), target, qvar, memo)
               for part in SHAPE_FIELDS}
    old = kernel.params[name]
    params = {(qname if k == name else k):
              (Param(qname, None if old.default is None else old.default // d, old.symbolic)
               if k == name else v) for k, v in kernel.params.items()}
    assumptions = tuple(a for a in kernel.assumptions if name not in free_vars(a)) + conds
    return (kernel.replace(params=params, assumptions=assumptions, **changes),
            Quotient(name, d, qname, lo, hi, mine))


def _at_fixed(expr: Expr, fixed: Mapping[str, int]) -> Expr:
    """`expr` with the fixed parameters' values put in, nothing folded (a folding simplifier
    may take variables to be non-negative, which is the very question here)."""
    if isinstance(expr, Var) and expr.name in fixed:
        return Const(fixed[expr.name])
    if isinstance(expr, BinOp):
        return BinOp(expr.op, _at_fixed(expr.lhs, fixed), _at_fixed(expr.rhs, fixed))
    if isinstance(expr, UnOp):
        return UnOp(expr.op, _at_fixed(expr.arg, fixed))
    return expr


def _quotient_range(name: str, d: int, assumptions: Sequence[Expr]
                    ) -> tuple[int | None, int | None] | None:
    """[lo, hi] (None: unbounded) such that Q in it iff Q = P // d for some P meeting the
    assumptions, checked by Z3; None when the quotients are not such an interval."""
    p, q = z3.Int(name), z3.Int(name + "!q")
    a = z3.And(*[z_bool(e, {name: p}) for e in assumptions]) if assumptions else z3.BoolVal(True)
    ends = []
    for goal in ("minimize", "maximize"):
        opt = z3.Optimize()
        opt.set("timeout", 5000)
        opt.add(a)
        h = getattr(opt, goal)(p / d)
        if opt.check() != z3.sat:
            return None
        value = h.value()
        ends.append(value.as_long() if z3.is_int_value(value) else None)
    lo, hi = ends
    in_range = z3.And(*([q >= lo] if lo is not None else []) + ([q <= hi] if hi is not None
                                                                else [])) \
        if (lo, hi) != (None, None) else z3.BoolVal(True)
    image = z3.Exists([p], z3.And(a, p / d == q))
    s = z3.Solver()
    s.set("timeout", 5000)
    s.add(in_range != image)
    return (lo, hi) if s.check() == z3.unsat else None


def _only_quotients(obj, name: str, divisors: set[int], seen: set[int]) -> bool:
    """Every occurrence of `name` under `obj` is the whole dividend of `name // D`, D > 0."""
    if isinstance(obj, Expr):
        if isinstance(obj, BinOp) and obj.op == "//" and isinstance(obj.lhs, Var) \
                and obj.lhs.name == name:
            if isinstance(obj.rhs, Const) and obj.rhs.value > 0:
                divisors.add(obj.rhs.value)
                return True
            return False
        if isinstance(obj, Var):
            return obj.name != name
        if isinstance(obj, BinOp):
            return _only_quotients(obj.lhs, name, divisors, seen) and \
                _only_quotients(obj.rhs, name, divisors, seen)
        if isinstance(obj, UnOp):
            return _only_quotients(obj.arg, name, divisors, seen)
        return True
    if id(obj) in seen:
        return True
    seen.add(id(obj))
    return all(_only_quotients(child, name, divisors, seen) for child in _children(obj))


def _children(obj):
    if isinstance(obj, (tuple, list)):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    return []


def _replace(obj, target: Expr, new: Expr, memo: dict[int, Any]):
    """`obj` rebuilt with `target` replaced by `new`; a shared object (a barrier allocation every
    reference points to) is rebuilt once, so references keep pointing at one object."""
    if isinstance(obj, Expr):
        if repr(obj) == repr(target):
            return new
        if isinstance(obj, BinOp):
            return BinOp(obj.op, _replace(obj.lhs, target, new, memo),
                         _replace(obj.rhs, target, new, memo))
        if isinstance(obj, UnOp):
            return UnOp(obj.op, _replace(obj.arg, target, new, memo))
        return obj
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, tuple):
        out: Any = tuple(_replace(x, target, new, memo) for x in obj)
    elif isinstance(obj, list):
        out = [_replace(x, target, new, memo) for x in obj]
    elif isinstance(obj, dict):
        out = {k: _replace(v, target, new, memo) for k, v in obj.items()}
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            rebuilt = _replace(value, target, new, memo)
            if rebuilt is not value:
                changes[f.name] = rebuilt
        out = dataclasses.replace(obj, **changes) if changes else obj
    else:
        out = obj
    memo[id(obj)] = out
    return out


def _all_vars(kernel: Kernel) -> set[str]:
    names: set[str] = set()

    def walk(obj, seen: set[int]):
        if isinstance(obj, Expr):
            names.update(free_vars(obj))
            return
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for child in _children(obj):
            walk(child, seen)
    seen: set[int] = set()
    for part in SHAPE_FIELDS:
        walk(getattr(kernel, part), seen)
    return names


def translate(verdict: Verdict, quotients: Sequence[Quotient]) -> Verdict:
    """The verdict of the rewritten kernel in terms of the original parameters."""
    def text(s):
        if not isinstance(s, str):
            return s
        for q in quotients:     # a value of Q given as the P it stands for, the rest as P // D
            s = re.sub(rf"\b{re.escape(q.name)}=(-?\d+)",
                       lambda m, q=q: _value_text(q, int(m.group(1))), s)
            s = re.sub(rf"'{re.escape(q.name)}': (-?\d+)",      # a printed dict of values
                       lambda m, q=q: "'" + _value_text(q, int(m.group(1))).replace("=", "': "),
                       s)
            s = s.replace(q.name, f"{q.param} // {q.divisor}")
        return s
    params = dict(verdict.params)
    for q in quotients:
        if q.name in params:
            value = params.pop(q.name)
            p = q.witness(value)
            if p is not None:
                params[q.param] = p
            else:     # cannot happen once the range check passed; say so rather than guess
                params[f"{q.param} // {q.divisor}"] = value
    for diags in (verdict.diagnostics, verdict.at_declared):
        for dg in diags:
            dg.message, dg.help = text(dg.message), text(dg.help)
            dg.details = [text(x) for x in dg.details]
    verdict.params = params
    verdict.coverage = text(verdict.coverage)
    verdict.notes = [text(n) for n in verdict.notes] + [
        f"{q.param} reaches the protocol only as {q.param} // {q.divisor}: the proof ranges over "
        f"that quotient ({_range_text(q)}), exactly the quotients of {q.param}'s range"
        for q in quotients]
    return verdict


def _value_text(q: Quotient, value: int) -> str:
    p = q.witness(value)
    return f"{q.param}={p}" if p is not None else f"{q.param} // {q.divisor}={value}"


def _range_text(q: Quotient) -> str:
    lo = "" if q.lo is None else f"{q.lo} <= "
    hi = "" if q.hi is None else f" <= {q.hi}"
    return f"{lo}{q.param} // {q.divisor}{hi}" if (lo or hi) else "every integer"
