"""Ring indices written the long way, rewritten into the form the fragment reads.

The fragment (fragment.py, classes.py, program.py) reads a ring slot as `(a*i + c) % S` and a
phase as a function of `(a*i + c) // S`. Triton's warp specialization writes the same ring
position by advancing a slot and a phase bit through the loop, which its closed form leaves as
nested offsets and remainders, e.g. for a 3-stage ring

    slot  ((i + 2) % 3 + 1) % 3
    phase ((1 ^ ((i + 2) // 3) % 2) ^ (((i + 2) % 3 + 1) == 3)) % 2

that are, for every i >= 0, `i % 3` and `(i // 3 + 1) % 2`. Before the fragment is built, each
index into a barrier array or a buffer that depends on the loop variable and is not already
`L % S` with L linear in i gets a candidate `(a*i + c) % S` (S the array's size along that
dimension; a, c read off the expression through its `+ const` and `% S`, or from its values at
i = 0, 1 when every other value is known), and a `wait_parity` on a rewritten ring slot gets the
candidates `((a*i + c) // S + d) % 2`, d in {0, 1}. A candidate replaces the expression only
when Z3 proves them equal for every loop index 0 <= i < trip, every value of the symbolic
parameters the assumptions allow and every value of the other variables (enclosing loop indices
>= 0); nothing is assumed. An index that looks like a ring index (a remainder of the loop
variable) and has no provable candidate is left as it is, and a note says which, for the reason
of an `unknown`.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import z3

from ...model.expr import mk
from ...model.ir import (BarrierRef, BinOp, Const, Expr, Kernel, Loop, ModelError, Op, UnOp,
                         Var, WarpRegion, When, evaluate, free_vars)
from ...model.primitives.waits import WAIT_PARITY
from .terms import Unsupported, z_bool, z_int

Z3_MS = 5000        # per equality query


def normalise_ring_indices(kernel: Kernel, symbolic: Sequence[str],
                           fixed: Mapping[str, int]) -> tuple[Kernel, list[str]]:
    """The kernel with every provable ring index and parity in canonical form; notes on the
    ring-like indices left as they were."""
    rw = _Rewriter(kernel, symbolic, fixed)
    body = rw.body(kernel.body)
    kernel = kernel.replace(body=body) if rw.changed else kernel
    return relabel_strided_rings(kernel, rw), rw.notes


class _Rewriter:
    def __init__(self, kernel: Kernel, symbolic, fixed):
        self.fixed = dict(fixed)
        self.env: dict[str, z3.ArithRef] = {}
        for name in kernel.params:
            self.env[name] = z3.Int(name) if name in symbolic else z3.IntVal(int(fixed[name]))
        try:
            self.facts = [z_bool(a, self.env) for a in kernel.assumptions]
        except Unsupported:
            self.facts = [z3.BoolVal(False)]        # nothing is proved
        self.loops: list[tuple[Loop, z3.ArithRef]] = []     # enclosing loops, innermost last
        self.changed = 0
        self.notes: list[str] = []

    # -- walking -------------------------------------------------------------------------------

    def body(self, stmts) -> tuple:
        out = []
        for s in stmts:
            if isinstance(s, Op):
                s = self.op(s) if self.loops else s
            elif isinstance(s, Loop):
                i = z3.Int(f"{s.var}!ring")
                self.loops.append((s, i))
                try:
                    s = Loop(s.var, s.trip, self.body(s.body), s.loc)
                finally:
                    self.loops.pop()
            elif isinstance(s, When):
                s = When(s.cond, self.body(s.then), self.body(s.orelse), s.loc)
            elif isinstance(s, WarpRegion):
                s = WarpRegion(s.axis, self.body(s.body), s.loc)
            out.append(s)
        return tuple(out)

    def op(self, op: Op) -> Op:
        loop = self.loops[-1][0]
        changes = {}
        ring = None         # (a, c, S) of the barrier's rewritten slot
        if op.barrier is not None:
            index, ring = self.indices(op.barrier.index, op.barrier.alloc.shape, loop, op)
            if index is not None:
                changes["barrier"] = BarrierRef(op.barrier.alloc, index, op.barrier.block)
        for field in ("reads", "writes"):
            refs, new = [], False
            for ref in getattr(op, field):
                index, _ = self.indices(ref.index, ref.alloc.shape, loop, op)
                new |= index is not None
                refs.append(ref if index is None else dataclasses.replace(ref, index=index))
            if new:
                changes[field] = tuple(refs)
        if ring is not None and op.kind == WAIT_PARITY and op.phase is None \
                and op.parity is not None and loop.var in free_vars(op.parity):
            parity = self.parity(op.parity, ring, loop)
            if parity is None:
                self.notes.append(f"the parity `{op.parity}` of `{op.describe()}` ({op.loc}) is "
                                  f"not provably (({_lhs(ring, loop)}) // {ring[2]} + d) % 2 "
                                  "for d = 0 or 1")
            else:
                changes["parity"] = parity
        if not changes:
            return op
        self.changed += 1
        return dataclasses.replace(op, **changes)

    # -- slots ---------------------------------------------------------------------------------

    def indices(self, index, shape, loop: Loop, op: Op):
        """(the new index tuple or None, (a, c, S) of the first rewritten ring dimension)."""
        out, ring, new = list(index), None, False
        for d, e in enumerate(index):
            if d >= len(shape) or loop.var not in free_vars(e) or self.canonical(e, loop):
                continue
            S = shape[d]
            found = self.slot(e, S, loop)
            if found is None:
                if _mentions_remainder(e, loop.var):
                    self.notes.append(f"the ring index `{e}` of `{op.describe()}` ({op.loc}) is "
                                      f"not provably (a*{loop.var} + c) % {S} for all "
                                      f"{loop.var} in its loop")
                continue
            a, c, canon = found
            out[d], new = canon, True
            if ring is None:
                ring = (a, c, S)
        return (tuple(out) if new else None), ring

    def canonical(self, e: Expr, loop: Loop) -> bool:
        """`L % S` with L linear in the loop variable: already what the fragment reads."""
        return isinstance(e, BinOp) and e.op == "%" and loop.var not in free_vars(e.rhs) and \
            _affine(e.lhs, loop.var, None) is not None

    def slot(self, e: Expr, S: Expr, loop: Loop):
        """(a, c, (a*i + c) % S) proved equal to e in the loop, or None."""
        for a, c in self.candidates(e, S, loop.var):
            canon = mk("%", _lhs((a, c, S), loop), S)
            if self.equal(e, canon, loop):
                return a, c, canon
        return None

    def candidates(self, e: Expr, S: Expr, var: str):
        seen = []
        found = _affine(e, var, S)
        if found is not None:
            a, c = found
            # the offset in [0, S) where it can be: laps then count from the ring's first slot
            try:
                n = evaluate(S, self.fixed)
                if n > 0:
                    seen.append((a, Const(evaluate(c, self.fixed) % n)))
            except ModelError:
                less = mk("-", c, S)
                if isinstance(less, Const):
                    seen.append((a, less))
            seen.append((a, c))
        # from its values at i = 0, 1 when nothing else in it is unknown
        values = dict(self.fixed)
        if isinstance(S, Const) and S.value > 0 and free_vars(e) - {var} <= set(values):
            try:
                c0 = evaluate(e, {**values, var: 0})
                a = (evaluate(e, {**values, var: 1}) - c0) % S.value
            except (ModelError, ZeroDivisionError):
                a = None
            if a is not None and not any(x == a and _same(y, Const(c0 % S.value))
                                         for x, y in seen):
                seen.append((a, Const(c0 % S.value)))
        return [(a, c) for a, c in seen if a != 0]

    # -- parities ------------------------------------------------------------------------------

    def parity(self, p: Expr, ring, loop: Loop) -> Expr | None:
        a, c, S = ring
        lap = mk("//", _lhs(ring, loop), S)
        for d in (0, 1):
            canon = mk("%", mk("+", lap, Const(d)), Const(2))
            if self.equal(mk("%", p, Const(2)), canon, loop, parity=True):
                return canon
        return None

    # -- Z3 ----------------------------------------------------------------------------------------

    def equal(self, e: Expr, canon: Expr, loop: Loop, parity: bool = False) -> bool:
        """e == canon for every loop index in range, every parameter value the assumptions
        allow and every value of anything else; every divisor positive (Z3's and the IR's
        division agree there)."""
        env = dict(self.env)
        facts = list(self.facts)
        for outer, i in self.loops:
            env[outer.var] = i
            facts.append(i >= 0)
            try:
                facts.append(i < z_int(outer.trip, env))
            except Unsupported:
                pass        # i >= 0 alone: a stronger claim
        for name in free_vars(e) | free_vars(canon):
            if name not in env:
                env[name] = z3.Int(f"{name}!ring")
        try:
            lhs, rhs = z_int(e, env, parity), z_int(canon, env, parity)
            divisors = [z_int(x, env) for x in _divisors(e) + _divisors(canon)]
        except Unsupported:
            return False
        claim = z3.And(*[x > 0 for x in divisors], lhs == rhs)
        s = z3.Solver()
        s.set("timeout", Z3_MS)
        s.add(*facts, z3.Not(claim))
        return s.check() == z3.unsat


def _lhs(ring, loop: Loop) -> Expr:
    a, c, _ = ring
    return mk("+", mk("*", Var(loop.var), Const(a)), c)


def _affine(e: Expr, var: str, S: Expr | None):
    """(a, c) with e == a*var + c, reading `x % S` as x (modulo S it is); None otherwise."""
    if isinstance(e, Var) and e.name == var:
        return 1, Const(0)
    if var not in free_vars(e):
        return 0, e
    if isinstance(e, BinOp):
        if e.op in ("+", "-"):
            x, y = _affine(e.lhs, var, S), _affine(e.rhs, var, S)
            if x is None or y is None:
                return None
            if e.op == "+":
                return x[0] + y[0], mk("+", x[1], y[1])
            return x[0] - y[0], mk("-", x[1], y[1])
        if e.op == "*":
            for k, x in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                if isinstance(k, Const):
                    inner = _affine(x, var, S)
                    if inner is not None:
                        return inner[0] * k.value, mk("*", inner[1], k)
            return None
        if e.op == "%" and S is not None and _same(e.rhs, S):
            return _affine(e.lhs, var, S)
    if isinstance(e, UnOp) and e.op == "neg":
        inner = _affine(e.arg, var, S)
        return None if inner is None else (-inner[0], UnOp("neg", inner[1]))
    return None


def _same(x: Expr, y: Expr) -> bool:
    return repr(x) == repr(y)


def _divisors(e: Expr) -> list[Expr]:
    if isinstance(e, BinOp):
        own = [e.rhs] if e.op in ("//", "%") else []
        return own + _divisors(e.lhs) + _divisors(e.rhs)
    if isinstance(e, UnOp):
        return _divisors(e.arg)
    return []


def _mentions_remainder(e: Expr, var: str) -> bool:
    """Does e take a remainder of something that depends on the loop variable?"""
    if isinstance(e, BinOp):
        if e.op == "%" and var in free_vars(e.lhs):
            return True
        return _mentions_remainder(e.lhs, var) or _mentions_remainder(e.rhs, var)
    if isinstance(e, UnOp):
        return _mentions_remainder(e.arg, var)
    return False


# ----------------------------------------------------------------------------------------------
# Rings stepped at a stride
# ----------------------------------------------------------------------------------------------

def relabel_strided_rings(kernel: Kernel, rw: _Rewriter) -> Kernel:
    """Arrays (barriers or buffers) of a concrete size S that every loop steps through at one
    stride A, coprime with S and not 1 (a K and a V tile per iteration: slots 2i % 3 and
    (2i + 1) % 3), with their slots renamed q -> inv*q % S (inv*A = 1 mod S): every index
    `(A*i + b) % S` becomes `(i + inv*b % S) % S`, one slot per iteration, and a constant
    slot q becomes inv*q % S. Renaming the slots of one array in every reference to it changes
    no completion count and no access (its slots are alike: one init count, one slot size),
    so it is the same program. A `wait_parity` on a renamed ring slot, whose phase counts laps
    of the old position v = A*i + b, is rewritten over the new position t = i + c' (v // S is
    A*(t // S) + (A*(t % S)) // S minus a constant) when Z3 proves the two parities equal."""
    uses: dict[int, list] = {}
    _collect(kernel.body, [], uses)
    plan = {}
    for alloc, refs in uses.values():
        found = _stride_of(alloc, refs, rw.fixed)
        if found is not None:
            plan[id(alloc)] = found
    if not plan:
        return kernel
    relabel = _Relabel(rw, plan)
    try:
        body = relabel.body(kernel.body)
    except Unsupported as err:      # every reference renamed, or none
        rw.notes.append(f"the strided rings are not renamed: {err}")
        return kernel
    return kernel.replace(body=body) if relabel.changed else kernel


def _collect(stmts, loops: list[str], uses: dict) -> None:
    for s in stmts:
        if isinstance(s, Op):
            for ref in ([s.barrier] if s.barrier is not None else []) + list(s.reads) + \
                    list(s.writes):
                entry = uses.setdefault(id(ref.alloc), [ref.alloc, []])
                entry[1].append((tuple(loops), ref))
        elif isinstance(s, Loop):
            _collect(s.body, loops + [s.var], uses)
        elif isinstance(s, When):
            _collect(s.then, loops, uses)
            _collect(s.orelse, loops, uses)
        elif isinstance(s, WarpRegion):
            _collect(s.body, loops, uses)


def _stride_of(alloc, refs, fixed) -> tuple[int, int] | None:
    """(S, A) when every reference of the array names its first dimension by a constant or by
    `(A*i + b) % S` in its innermost loop over i (b a number), one A for all, 1 < A < S
    coprime with S; None otherwise."""
    if any(g != 1 for g in getattr(alloc, "granule", ())[:1]):
        return None                 # cells of several slots: renaming would regroup them
    try:
        S = evaluate(alloc.shape[0], fixed)
    except (ModelError, IndexError):
        return None
    strides = set()
    for loops, ref in refs:
        if not ref.index:
            if getattr(ref, "region", ()):
                return None         # a region along the renamed dimension
            continue                # the whole array: the same under any renaming
        e = ref.index[0]
        inner = [v for v in loops if v in free_vars(e)]
        if inner and inner != [loops[-1]]:
            return None             # a slot of an enclosing loop, or of two loops
        if not inner:
            if not free_vars(e) <= set(fixed):
                return None
            continue
        if len(inner) > 1 or not (isinstance(e, BinOp) and e.op == "%"):
            return None
        found = _affine(e.lhs, inner[0], None)
        if found is None or not free_vars(e.rhs) <= set(fixed) or \
                not free_vars(found[1]) <= set(fixed) or evaluate(e.rhs, fixed) != S:
            return None
        strides.add(found[0] % S)
    if len(strides) != 1:
        return None
    A = strides.pop()
    if S < 3 or A <= 1 or _gcd(A, S) != 1:
        return None
    return S, A


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


class _Relabel:
    def __init__(self, rw: _Rewriter, plan: dict):
        self.rw = rw
        self.plan = plan            # id(alloc) -> (S, A)
        self.changed = 0

    def body(self, stmts) -> tuple:
        out = []
        for s in stmts:
            if isinstance(s, Op):
                s = self.op(s)
            elif isinstance(s, Loop):
                self.rw.loops.append((s, z3.Int(f"{s.var}!ring")))
                try:
                    s = Loop(s.var, s.trip, self.body(s.body), s.loc)
                finally:
                    self.rw.loops.pop()
            elif isinstance(s, When):
                s = When(s.cond, self.body(s.then), self.body(s.orelse), s.loc)
            elif isinstance(s, WarpRegion):
                s = WarpRegion(s.axis, self.body(s.body), s.loc)
            out.append(s)
        return tuple(out)

    def index(self, ref):
        """(the renamed index, (A, c', S) when it is a ring slot of the innermost loop)."""
        S, A = self.plan[id(ref.alloc)]
        inv = pow(A, -1, S)
        e = ref.index[0]
        loops = [loop for loop, _ in self.rw.loops if loop.var in free_vars(e)]
        if not loops:
            return (Const(inv * evaluate(e, self.rw.fixed) % S),) + tuple(ref.index[1:]), None
        loop = loops[0]
        if self.rw.loops[-1][0] is not loop:
            raise Unsupported(f"`{e}` is a slot of an enclosing loop")
        _, b = _affine(e.lhs, loop.var, None)
        c = inv * evaluate(b, self.rw.fixed) % S
        new = mk("%", mk("+", Var(loop.var), Const(c)), Const(S))
        if not self.rw.equal(mk("%", mk("*", e, Const(inv)), Const(S)), new, loop):
            raise Unsupported(f"`{e}` renamed is not provably `{new}`")
        return (new,) + tuple(ref.index[1:]), (A, c, S)

    def op(self, op: Op) -> Op:
        changes = {}
        ring = None
        if op.barrier is not None and id(op.barrier.alloc) in self.plan and op.barrier.index:
            index, ring = self.index(op.barrier)
            changes["barrier"] = BarrierRef(op.barrier.alloc, index, op.barrier.block)
        for field in ("reads", "writes"):
            refs = list(getattr(op, field))
            for n, ref in enumerate(refs):
                if id(ref.alloc) in self.plan and ref.index:
                    refs[n] = dataclasses.replace(ref, index=self.index(ref)[0])
                    changes[field] = tuple(refs)
        if ring is not None and op.kind == WAIT_PARITY and op.phase is None and \
                op.parity is not None:
            loop = self.rw.loops[-1][0]
            A, c, S = ring
            t = mk("+", Var(loop.var), Const(c))
            lap = mk("+", mk("*", mk("//", t, Const(S)), Const(A)),
                     mk("//", mk("*", mk("%", t, Const(S)), Const(A)), Const(S)))
            for d in (0, 1):
                canon = mk("%", mk("+", lap, Const(d)), Const(2))
                if self.rw.equal(mk("%", op.parity, Const(2)), canon, loop, parity=True):
                    changes["parity"] = canon
                    break
            else:
                self.rw.notes.append(f"the parity `{op.parity}` of `{op.describe()}` "
                                     f"({op.loc}) is not provably a parity of the laps of "
                                     f"slot ({t}) % {S} at stride {A}")
        if not changes:
            return op
        self.changed += 1
        return dataclasses.replace(op, **changes)
