"""A class's expressions in z3 with the loop variable as its coordinate k: the translation
program.py (class programs) and races.py (the ways to a queued MMA's arrival) share."""

from __future__ import annotations

import z3

from .counters import K
from .terms import Unsupported, nonlinear, z_bool, z_int


class Plain:
    """Expressions with the loop variable as the class coordinate k (concrete class)."""

    def __init__(self, frag, env, var, shift=None):
        self.frag = frag
        self.env = dict(env)
        self.var = var
        self.shift = z3.IntVal(0) if shift is None else shift
        if var is not None:
            self.env[var] = z3.simplify(K() - self.shift)

    def int(self, e, parity=False):
        t = z3.simplify(z_int(e, self.env, parity))
        if nonlinear(t):
            raise Unsupported(f"`{e}` is not linear in the parameters and the loop variable")
        return t

    def bool(self, e):
        t = z3.simplify(z_bool(e, self.env))
        if nonlinear(t):
            raise Unsupported(f"`{e}` is not linear in the parameters and the loop variable")
        return t

    def guard(self, conds):
        return z3.simplify(z3.And([self.bool(c) if pos else z3.Not(self.bool(c))
                                   for c, pos in conds] or [z3.BoolVal(True)]))

    def require_in_range(self, inside, ref):
        self.frag.require_always(inside, f"the index of `{ref}` is within num_barriers", self)

    def domain(self):
        return [] if self.var is None else [K() >= self.shift]
