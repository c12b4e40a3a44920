"""Loops of a kernel: trip counts, closed forms of loop-carried values, data-dependent control.

A `scan` or `while` becomes one IR `Loop` when every carry that synchronization depends on is an
induction (`c + s`, `(c + s) % m`, a parity toggle): its value at iteration `i` is a closed form
in `i`. A carry without one is unrolled (up to UNROLL_LIMIT iterations). A trip count or branch
that depends on data loaded from memory becomes a parameter with a stated default, or, when it
only decides branches, an axis of the grid checked value by value. A loop or branch on data with
nothing but memory effects inside is taken as always happening (`_memory_loop`,
data_control.py), or BP190.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..expr import (RANGES, mk, mk_neg, mk_not, mk_select, opaque, opaques, opaque_vars, same,
                    stmt_vars, substitute, substitute_stmts)
from ..ir import (BinOp, Const, Expr, Loc, Loop, ModelError, Op, Param, UNKNOWN_LOC, UnOp, Var,
                  WarpRegion, When, free_vars, walk)
from . import data_control
from .locations import _stem
from .memory import has_barrier_ops, unguard_memory
from .primitives import _has_sync

if TYPE_CHECKING:
    from .translate import Translator

DEFAULT_TRIPS = 3                 # data-dependent loops: enough to reuse a double-buffered slot
UNROLL_LIMIT = 64                 # loops whose carried index has no closed form are unrolled

# Tracing a shape family (family.py) compares the IRs of several traces position by position, so
# a loop must keep its place when its trip count happens to be 0 or 1, and nothing inside may be
# simplified with the trip count of one trace.
KEEP_LOOPS = {"on": False}


class LoopRules:
    """The Translator's rules for `scan` and `while`, and the lifting of data to parameters."""

    # Loops: carries get closed forms in the loop variable when they are inductions.

    def _carry_forms(self, jaxpr, consts_vals, carry_init, extra_args, frame):
        """Translate a loop body once with placeholder carries; classify each carry."""
        placeholders = []
        for k, init in enumerate(carry_init):
            placeholders.append(Var(f"%c{next(self._counter)}") if isinstance(init, Expr)
                                else init)
        loopvar = self._fresh("i")
        body: list = []
        results = self._inline(jaxpr, (), [*consts_vals, *placeholders, *extra_args],
                               dataclasses.replace(frame, loop_depth=frame.loop_depth + 1,
                                                   control=frame.control + 1),
                               body)
        return placeholders, loopvar, tuple(body), results

    def _closed_forms(self, placeholders, carry_init, new_carry, loopvar, trip: Expr | None):
        """For each carry: its value at iteration `loopvar` and after the loop (or None)."""
        forms: dict[str, Expr] = {}
        finals: list[Expr | None] = []
        i = Var(loopvar)
        pnames = {p.name for p in placeholders if isinstance(p, Var)}
        for p, init, new in zip(placeholders, carry_init, new_carry):
            if not isinstance(p, Var) or not isinstance(new, Expr):
                finals.append(None)
                continue
            at, final = _induction(p, init, new, i, trip, pnames)
            if at is None:
                finals.append(None)
                continue
            forms[p.name] = at
            finals.append(final)
        return forms, finals

    def _loop(self, eqn, env, frame, out, *, jaxpr, consts_vals, carry_init, extra_args,
              trip_of: Callable, carry_slice: tuple[int, int], ys: int, what: str):
        loc = self.where(frame)
        placeholders, loopvar, body, results = self._carry_forms(
            jaxpr, consts_vals, carry_init, extra_args, frame)
        new_carry = results[carry_slice[0]:carry_slice[1]]
        trip = trip_of(placeholders, carry_init, new_carry)
        made = trip is None
        if made:
            trip = self._trip_param(loc, what)
        forms, finals = self._closed_forms(placeholders, carry_init, new_carry, loopvar, trip)
        unknown = {p.name for p in placeholders if isinstance(p, Var)} - set(forms)
        if body and not has_barrier_ops(body) and (made or opaque_vars(trip)):
            return self._memory_loop(loc, loopvar, body, forms, unknown, trip if made else None,
                                     what, out, len(finals), ys)
        if unknown & stmt_vars(body):
            start = len(self.notes)
            relaxed = unguard_memory(body, unknown, self._as_if_always)
            if not unknown & stmt_vars(relaxed):
                # Only memory effects sat under those branches: each is kept unconditionally or
                # BP190 (data_control.py), and says so
                body = relaxed
            else:
                del self.notes[start:]
        if unknown & stmt_vars(body):
            if not has_barrier_ops(body) and not (isinstance(trip, Const)
                                                  and trip.value <= UNROLL_LIMIT):
                # too long to unroll: what stands for every trip count stands for this one
                return self._memory_loop(loc, loopvar, body, forms, unknown, None, what, out,
                                         len(finals), ys)
            return self._unroll(loc, jaxpr, consts_vals, carry_init, extra_args, trip, frame,
                                out, carry_slice, ys)
        for name in unknown:
            forms[name] = opaque("carry")
        keep = KEEP_LOOPS["on"]
        RANGES[loopvar] = (0, trip.value - 1 if isinstance(trip, Const) and not keep else None)
        stmts = substitute_stmts(body, forms)
        if keep and stmts:
            out.append(Loop(loopvar, trip, stmts, loc))
        elif not isinstance(trip, Const) or trip.value > 0:
            if isinstance(trip, Const) and trip.value == 1:
                stmts = substitute_stmts(stmts, {loopvar: Const(0)})
                out.extend(stmts)
            elif stmts:
                out.append(Loop(loopvar, trip, stmts, loc))
        outs = []
        for k, final in enumerate(finals):
            outs.append(final if final is not None else
                        (carry_init[k] if isinstance(trip, Const) and trip.value == 0
                         else opaque("carry")))
        return outs + opaques("ys", ys)

    def _memory_loop(self, loc, loopvar, body, forms, unknown, param, what, out, ncarry, ys):
        """A loop of only memory effects whose trip count depends on data: two iterations, every
        slot that depends on the iteration or on data the whole buffer, every branch on them
        taken as always happening (data_control.py), or BP190 where that is unsound.

        Two iterations stand for every trip count t >= 0, given data_control's conditions
        (nothing inside retires an asynchronous operation; no counted wait of the kernel keeps
        what the body issues in flight): the body holds no barrier operation and no wait, so an
        iteration orders nothing and retires nothing, and with its slots independent of the
        iteration every iteration makes the same accesses. A race in a run of t iterations
        pairs an access of iteration a with one of an iteration b > a or one outside the loop;
        the iterations between them order nothing, so iterations 0 and 1 of the model pair the
        same accesses unordered. For t < 2 the model's run is the GPU's with accesses added,
        which order and retire nothing, so no race of the GPU's run is lost. Tested against the
        loop unrolled at trip counts 0..4 (tests/test_pallas_data_control.py)."""
        if param is not None:       # the trip count is no parameter: no value of it is chosen
            del self.params[param.name]
            self.notes[:] = [n for n in self.notes if f"`{param.name}`" not in n]
        names = unknown | {loopvar}
        stmts = unguard_memory(substitute_stmts(body, forms), names, self._as_if_always)
        if names & stmt_vars(stmts):
            out.append(data_control.site(loc, what, (
                "has only memory effects, but a trip count or count inside it depends on the "
                "iteration or on a carried value: its memory effects are not modelled.")))
            return opaques("carry", ncarry) + opaques("ys", ys)
        stmts = substitute_stmts(stmts, {**{n: opaque("carry") for n in unknown},
                                         loopvar: opaque("iteration")})
        self._note(f"{loc}: this {what} depends on data; it is checked as two iterations whose "
                   "slots are the whole buffer where they depend on the iteration or on data, "
                   "which stands for every trip count")
        RANGES[loopvar] = (0, 1)
        out.extend(self._as_if_always(((Loop(loopvar, Const(2), stmts, loc),),), loc, what))
        return opaques("carry", ncarry) + opaques("ys", ys)

    def _unroll(self, loc, jaxpr, consts_vals, carry_init, extra_args, trip, frame, out,
                carry_slice, ys):
        if not isinstance(trip, Const) or trip.value > UNROLL_LIMIT:
            raise ModelError(
                "a loop-carried value that barrier indices or branches depend on has no closed "
                f"form, and the loop's trip count ({trip}) is too large to unroll", loc=loc,
                hint="compute barrier slots from the loop index (e.g. i % num_slots)")
        self._note(f"{loc}: loop unrolled ({trip.value} iterations): its carried state has no "
                   "closed form")
        carry = list(carry_init)
        sub = dataclasses.replace(frame, loop_depth=frame.loop_depth + 1,
                                  control=frame.control + 1)
        for _ in range(trip.value):
            results = self._inline(jaxpr, (), [*consts_vals, *carry, *extra_args], sub, out)
            carry = results[carry_slice[0]:carry_slice[1]]
        return list(carry) + opaques("ys", ys)

    # Data-dependent control: the opaque part of a trip count or a branch condition becomes a
    # parameter. Only the data term itself is replaced, so `min(2, n)`, `n` and `i + 1 < n` in
    # one pipeline keep sharing the same `n`.

    def _lift_stmts(self, body: Sequence) -> tuple:
        out = []
        for s in body:
            if isinstance(s, Op):
                for e in (s.count, s.bytes):
                    if opaque_vars(e):
                        raise ModelError(f"{s.kind} depends on data loaded from memory",
                                         loc=s.loc)
                if s.barrier is not None and any(map(opaque_vars, s.barrier.index)):
                    index = tuple(self._lift_known(e, s) for e in s.barrier.index)
                    s = dataclasses.replace(s, barrier=dataclasses.replace(s.barrier,
                                                                           index=index))
                out.append(s)
            elif isinstance(s, Loop):
                trip = self._lift(s.trip, s.loc, "trips")
                out.append(Loop(s.var, trip, self._lift_stmts(s.body), s.loc))
            elif isinstance(s, When):
                cond = self._lift(s.cond, s.loc, "data")
                then, orelse = self._lift_stmts(s.then), self._lift_stmts(s.orelse)
                if isinstance(cond, Const):
                    out.extend(then if cond.value else orelse)
                else:
                    out.append(When(cond, then, orelse, s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, self._lift_stmts(s.body), s.loc))
        return tuple(out)

    def _lift_known(self, e: Expr, op: Op) -> Expr:
        """A barrier index over data that already stands for a parameter (a trip count or a
        branch lifted before it in program order), rewritten in it; other data is refused: a
        fresh default would pick a slot the kernel never computes."""
        before = set(self._lifted)
        lifted = self._lift(e, op.loc, "data", slots=True)
        if set(self._lifted) != before:
            raise ModelError(f"the index of barrier `{op.barrier.alloc.name}` depends on data "
                             "loaded from memory; barrierproof cannot follow it", loc=op.loc,
                             hint="compute barrier slots from loop indices, axis indices and "
                             "the trip counts of earlier loops")
        return lifted

    def _lift(self, e: Expr, loc: Loc, role: str, slots: bool = False) -> Expr:
        if not opaque_vars(e):
            return e
        structural = {"min", "max", "==", "!=", "<", "<=", ">", ">=", "and", "or"}
        if isinstance(e, BinOp) and (e.op in structural or (
                e.op in ("+", "-", "*") and not (opaque_vars(e.lhs) and opaque_vars(e.rhs)))
                or (slots and e.op in ("%", "//") and not opaque_vars(e.rhs))):
            return mk(e.op, self._lift(e.lhs, loc, role, slots),
                      self._lift(e.rhs, loc, role, slots))
        if isinstance(e, UnOp) and e.op == "not":
            return mk_not(self._lift(e.arg, loc, role))
        key = repr(e)
        if key not in self._lifted:
            pname = self._fresh(f"{role}_{_stem(loc)}_{loc.line}")
            self._lifted[key] = pname
            self.params[pname] = Param(pname, DEFAULT_TRIPS)
            sources = []
            for v in opaque_vars(e):
                prim, frame = self.origins.get(v, ("?", None))
                where = self.where(frame) if frame is not None else UNKNOWN_LOC
                sources.append(f"{prim} at {where}" if where != UNKNOWN_LOC else prim)
            what = "trip count" if role == "trips" else "branch condition"
            self._data_terms[pname] = (loc, what, ", ".join(sorted(set(sources))))
        return Var(self._lifted[key])

    def _data_constants(self, e: Expr, out: dict[str, set[int]]) -> None:
        """Constants that a data term is compared with, e.g. `n > 4` -> {4} for `n`."""
        if isinstance(e, BinOp):
            if e.op in ("==", "!=", "<", "<=", ">", ">="):
                for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                    if isinstance(x, Var) and x.name in self._data_terms \
                            and isinstance(y, Const):
                        out.setdefault(x.name, set()).add(y.value)
            self._data_constants(e.lhs, out)
            self._data_constants(e.rhs, out)
        elif isinstance(e, UnOp):
            self._data_constants(e.arg, out)

    def _data_axes(self, body: tuple) -> tuple:
        """A data value that only decides branches (`pl.when(flag > 0)`) is checked for every
        value that matters, not one default: it becomes an axis of the grid, whose positions
        the checker explores one by one, over 0..3 and the constants it is compared with (each
        +-1). Data that is also a trip count stays a parameter with a stated default."""
        trip_vars: set[str] = set()
        constants: dict[str, set[int]] = {}
        for s in walk(body):
            if isinstance(s, Loop):
                trip_vars |= free_vars(s.trip)
            elif isinstance(s, When):
                self._data_constants(s.cond, constants)
        env: dict[str, Expr] = {}
        for pname, (loc, what, sources) in self._data_terms.items():
            if pname in trip_vars or what != "branch condition":
                self._note(f"{loc}: this {what} depends on data ({sources}); parameter "
                           f"`{pname}` stands for it (default {DEFAULT_TRIPS}, the same at "
                           "every execution)")
                continue
            values = set(range(DEFAULT_TRIPS + 1))
            for c in constants.get(pname, ()):
                values |= {v for v in (c - 1, c, c + 1) if v >= 0}
            values = sorted(values)
            del self.params[pname]
            if values == list(range(len(values))):
                env[pname] = Var(pname)
                shown = f"0..{values[-1]}"
            else:
                axis = Var(pname)
                env[pname] = mk_select(axis, [Const(v) for v in values])
                shown = ", ".join(str(v) for v in values) + \
                    f" (grid position k of `{pname}` stands for the k-th)"
            self.grid.append((pname, Const(len(values))))
            self.axis_sizes[pname] = len(values)
            self._note(f"{loc}: this branch condition depends on data ({sources}); it is "
                       f"checked for every value of `{pname}` in {shown}, as an axis of the "
                       "grid (the same value for every thread of a block)")
        return substitute_stmts(body, env) if env else body

    def _trip_param(self, loc: Loc, what: str) -> Var:
        pname = self._fresh(f"trips_{_stem(loc)}_{loc.line}")
        self.params[pname] = Param(pname, DEFAULT_TRIPS)
        self._note(f"{loc}: the trip count of this {what} depends on data; parameter `{pname}` "
                   f"(default {DEFAULT_TRIPS})")
        return Var(pname)

    def _scan(self, eqn, env, frame, out):
        p = eqn.params
        nc, ncarry = p["num_consts"], p["num_carry"]
        args = [self.read(env, a) for a in eqn.invars]
        consts, init, xs = args[:nc], args[nc:nc + ncarry], args[nc + ncarry:]
        # A reversed scan walks its xs backwards; carries still evolve in execution order, and
        # xs are data, so the loop translates the same way.
        length = Const(int(p["length"]))
        xs_vals = opaques("xs", len(xs))
        jaxpr = p["jaxpr"]
        return self._loop(eqn, env, frame, out, jaxpr=_closed_as_open(jaxpr),
                          consts_vals=_closed_consts(self, jaxpr) + list(consts),
                          carry_init=init, extra_args=xs_vals,
                          trip_of=lambda *_: length, carry_slice=(0, ncarry),
                          ys=len(eqn.outvars) - ncarry, what="scan")

    def _while(self, eqn, env, frame, out):
        p = eqn.params
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        args = [self.read(env, a) for a in eqn.invars]
        cconsts, bconsts, init = args[:cn], args[cn:cn + bn], args[cn + bn:]
        cond_jaxpr, body_jaxpr = p["cond_jaxpr"], p["body_jaxpr"]
        if _has_sync(cond_jaxpr.jaxpr):
            raise ModelError("synchronization inside a while loop's condition is not supported",
                             loc=self.where(frame))

        def trip_of(placeholders, carry_init, new_carry):
            cond_out = self._inline(_closed_as_open(cond_jaxpr),
                                    (), _closed_consts(self, cond_jaxpr) + list(cconsts)
                                    + list(placeholders), frame, [])
            return _while_trip(cond_out[0], placeholders, carry_init, new_carry)

        return self._loop(eqn, env, frame, out, jaxpr=_closed_as_open(body_jaxpr),
                          consts_vals=_closed_consts(self, body_jaxpr) + list(bconsts),
                          carry_init=init, extra_args=[], trip_of=trip_of,
                          carry_slice=(0, len(init)), ys=0, what="while loop")



def _closed_as_open(closed):
    return closed.jaxpr if hasattr(closed, "jaxpr") else closed


def _closed_consts(tr: "Translator", closed) -> list:
    jaxpr = _closed_as_open(closed)
    consts = list(getattr(closed, "consts", ()) or ())
    if jaxpr.constvars:
        return [tr._const_value(c) for c in consts]
    return []


def _induction(p: Var, init, new: Expr, i: Var, trip: Expr | None, pnames: set[str]):
    """Closed form of a loop carry: (value at iteration i, value after `trip` iterations).

    >>> c, i = Var("%c"), Var("i")
    >>> _induction(c, Const(0), mk("%", mk("+", c, Const(1)), Const(2)), i, Const(5), {"%c"})
    ((i % 2), 1)
    >>> _induction(c, Const(0), mk("-", Const(1), c), i, None, {"%c"})[0]
    (i % 2)
    """
    if not isinstance(init, Expr):
        return None, None
    if same(new, p):                                         # loop-invariant
        return init, init
    others = free_vars(new) - {p.name}
    if others & pnames:
        return None, None

    def after(at: Expr) -> Expr | None:
        return None if trip is None else substitute(at, {i.name: trip})

    # c' = c + s
    if isinstance(new, BinOp) and new.op in ("+", "-"):
        lhs, rhs = new.lhs, new.rhs
        step = None
        if same(lhs, p) and p.name not in free_vars(rhs):
            step = rhs if new.op == "+" else mk_neg(rhs)
        elif new.op == "+" and same(rhs, p) and p.name not in free_vars(lhs):
            step = lhs
        if step is not None and i.name not in free_vars(step):
            at = mk("+", init, mk("*", i, step))
            return at, after(at)
        # c' = 1 - c  (a parity toggle)
        if new.op == "-" and isinstance(lhs, Const) and lhs.value == 1 and same(rhs, p) \
                and isinstance(init, Const) and init.value in (0, 1):
            at = mk("%", mk("+", i, init), Const(2))
            return at, after(at)
    # c' = (c + s) % m
    if isinstance(new, BinOp) and new.op == "%" and isinstance(new.rhs, Const) \
            and new.rhs.value > 0 and isinstance(init, Const) \
            and 0 <= init.value < new.rhs.value:
        inner = new.lhs
        if isinstance(inner, BinOp) and inner.op == "+" and same(inner.lhs, p) \
                and isinstance(inner.rhs, Const) and inner.rhs.value >= 0:
            at = mk("%", mk("+", init, mk("*", i, inner.rhs)), new.rhs)
            return at, after(at)
    # c' = c ^ 1, c' = not c
    if ((isinstance(new, BinOp) and new.op == "xor" and same(new.lhs, p)
         and isinstance(new.rhs, Const) and new.rhs.value == 1)
            or (isinstance(new, UnOp) and new.op == "not" and same(new.arg, p))) \
            and isinstance(init, Const) and init.value in (0, 1):
        at = mk("%", mk("+", i, init), Const(2))
        return at, after(at)
    return None, None


def _while_trip(cond: Any, placeholders, carry_init, new_carry) -> Expr | None:
    """Trip count of `while c < bound` with c an induction variable of constant step."""
    if not isinstance(cond, BinOp):
        return None
    names = {p.name: k for k, p in enumerate(placeholders) if isinstance(p, Var)}
    invariant = {}
    for p, init, new in zip(placeholders, carry_init, new_carry):
        if isinstance(p, Var) and isinstance(new, Expr) and same(new, p) \
                and isinstance(init, Expr):
            invariant[p.name] = init
    op, lhs, rhs = cond.op, cond.lhs, cond.rhs
    flip = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "!=": "!="}
    if isinstance(rhs, Var) and rhs.name in names and rhs.name not in invariant \
            and op in flip:
        op, lhs, rhs = flip[op], rhs, lhs
    if not (isinstance(lhs, Var) and lhs.name in names):
        return None
    k = names[lhs.name]
    init, new = carry_init[k], new_carry[k]
    if not isinstance(init, Expr) or not isinstance(new, BinOp) or new.op != "+":
        return None
    if same(new.lhs, lhs):
        step = new.rhs
    elif same(new.rhs, lhs):
        step = new.lhs
    else:
        return None
    if free_vars(step) & set(names):
        return None
    bound = substitute(rhs, invariant)
    if free_vars(bound) & set(names):
        return None
    if not isinstance(step, Const) or step.value <= 0:
        return None
    s = step.value
    if op == "<":
        span = mk("-", bound, init)
    elif op == "<=":
        span = mk("+", mk("-", bound, init), Const(1))
    elif op == "!=" and s == 1:
        span = mk("-", bound, init)
    else:
        return None
    trip = mk("//", mk("+", span, Const(s - 1)), Const(s)) if s > 1 else span
    if isinstance(trip, Const):
        return Const(max(trip.value, 0))
    return mk("max", trip, Const(0))

