"""Concrete structure made explicit before the fragment is built: the same program, rewritten.

Nested loops. The fragment handles one level of loops. A loop nested in another (or holding
another) whose trip count is a number once the fixed parameters are substituted -- a release in
each of the 2 blocks of a cluster, a turn for each of 3 warpgroups -- runs exactly that many
times, so replacing it by copies of its body with the loop variable substituted is the same
program. Loops whose count stays symbolic are left as they are (and still rejected when nested).

Loops of c * X iterations. A producer that loads `tiles * ksteps` tiles in one loop feeds a
consumer that loops over `tiles` with an inner loop of `ksteps`: with ksteps = c concrete, the
producer's loop is the same program as a loop over X = tiles whose body is its old body c times,
for i = c*t + 0, ..., c*t + c - 1. Rewritten so when another loop of the kernel runs X times,
the two loops can be aligned iteration by iteration in the static order. c is the product of
every concrete factor of the trip count: the ping-pong's producer loads `2 * tiles * ksteps`
tiles for two consumers that each loop over `tiles`, 2 * ksteps loads per tile.

Arrays with one symbolic dimension. `order[depth, groups]` with a symbolic `depth` and a concrete
number of groups, every access naming its group by a constant, is `groups` rings of `depth`
barriers side by side: one array per group (`order[:, 1]`), each a ring the fragment supports.
"""

from __future__ import annotations

from typing import Mapping

import dataclasses

from ...model.expr import substitute_stmts
from ...model.ir import (BarrierAlloc, BarrierRef, BinOp, Const, Kernel, Loop, Op, Var,
                         WarpRegion, When, evaluate, free_vars, map_ops, walk)

# Longer concrete loops stay loops: unrolling them would only make the tau search slower.
MAX_UNROLL = 8


def _has_loop(body) -> bool:
    for stmt in body:
        if isinstance(stmt, Loop):
            return True
        if isinstance(stmt, When) and (_has_loop(stmt.then) or _has_loop(stmt.orelse)):
            return True
        if isinstance(stmt, WarpRegion) and _has_loop(stmt.body):
            return True
    return False


def _trip(loop: Loop, fixed: Mapping[str, int]) -> int | None:
    if free_vars(loop.trip) - set(fixed):
        return None
    try:
        return max(0, evaluate(loop.trip, fixed))
    except Exception:       # a trip count the fixed values cannot evaluate stays a loop
        return None


def _unroll(body, fixed: Mapping[str, int], inside: bool) -> tuple:
    out = []
    for stmt in body:
        if isinstance(stmt, Loop):
            nested = inside or _has_loop(stmt.body)
            n = _trip(stmt, fixed) if nested else None
            if n is not None and n <= MAX_UNROLL:
                for v in range(n):
                    out.extend(_unroll(substitute_stmts(stmt.body, {stmt.var: Const(v)}), fixed,
                                       inside))
            else:
                out.append(Loop(stmt.var, stmt.trip, _unroll(stmt.body, fixed, True), stmt.loc))
        elif isinstance(stmt, When):
            out.append(When(stmt.cond, _unroll(stmt.then, fixed, inside),
                            _unroll(stmt.orelse, fixed, inside), stmt.loc))
        elif isinstance(stmt, WarpRegion):
            out.append(WarpRegion(stmt.axis, _unroll(stmt.body, fixed, inside), stmt.loc))
        else:
            out.append(stmt)
    return tuple(out)


def unroll_fixed_loops(kernel: Kernel, fixed: Mapping[str, int]) -> Kernel:
    """The kernel with every nested loop of concrete trip count (at most MAX_UNROLL) unrolled;
    the kernel itself when there is none."""
    if not any(isinstance(s, Loop) and _has_loop(s.body) for s in walk(kernel.body)):
        return kernel
    return kernel.replace(body=_unroll(kernel.body, fixed, False))


def _factors(e) -> list:
    """The factors of a product, flattened: `2 * tiles * ksteps` is [2, tiles, ksteps]."""
    if isinstance(e, BinOp) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]


def _split_trip(trip, fixed: Mapping[str, int]):
    """(c, X) when `trip` is c * X with c a number of at most MAX_UNROLL once `fixed` is in:
    the product of the trip's concrete factors, X the product of the others (a producer that
    loads `2 * tiles * ksteps` tiles for two consumers looping over `tiles` is 2 * ksteps
    loads per tile)."""
    factors = _factors(trip)
    concrete = [f for f in factors if not free_vars(f) - set(fixed)]
    rest = [f for f in factors if free_vars(f) - set(fixed)]
    if not concrete or not rest:
        return None
    try:
        n = 1
        for f in concrete:
            n *= evaluate(f, fixed)
    except Exception:
        return None
    if not 2 <= n <= MAX_UNROLL:
        return None
    x = rest[0]
    for f in rest[1:]:
        x = BinOp("*", x, f)
    return n, x


def strip_mine_loops(kernel: Kernel, fixed: Mapping[str, int]) -> Kernel:
    """The kernel with every top-level loop of c * X iterations (c concrete, X the trip count of
    another loop) rewritten as a loop of X iterations doing c of the old ones each."""
    trips = {repr(s.trip) for s in walk(kernel.body) if isinstance(s, Loop)}
    changed = []

    def body(stmts, inside: bool) -> tuple:
        out = []
        for s in stmts:
            if isinstance(s, Loop):
                split = None if inside else _split_trip(s.trip, fixed)
                if split is not None and repr(split[1]) in trips:
                    c, x = split
                    t = Var(s.var + "_outer")
                    new = []
                    for u in range(c):
                        new.extend(substitute_stmts(s.body, {s.var: t * c + u}))
                    out.append(Loop(t.name, x, body(tuple(new), True), s.loc))
                    changed.append(s)
                else:
                    out.append(Loop(s.var, s.trip, body(s.body, True), s.loc))
            elif isinstance(s, When):
                out.append(When(s.cond, body(s.then, inside), body(s.orelse, inside), s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, body(s.body, inside), s.loc))
            else:
                out.append(s)
        return tuple(out)

    new = body(kernel.body, False)
    return kernel.replace(body=new) if changed else kernel


def _ring_dim(alloc: BarrierAlloc, fixed: Mapping[str, int]) -> int | None:
    """The one dimension of a multi-dimensional array whose size stays symbolic, if the others
    are concrete."""
    if len(alloc.shape) < 2:
        return None
    symbolic = [d for d, size in enumerate(alloc.shape) if free_vars(size) - set(fixed)]
    return symbolic[0] if len(symbolic) == 1 else None


def _refs(body):
    for stmt in walk(body):
        if isinstance(stmt, Op) and stmt.barrier is not None:
            yield stmt.barrier


def split_ring_arrays(kernel: Kernel, fixed: Mapping[str, int]) -> Kernel:
    """The kernel with every array of one symbolic dimension, accessed with constant indices
    along its other dimensions, split into one ring per combination of those indices."""
    split: dict[str, tuple[int, dict]] = {}
    for alloc in kernel.barriers:
        d = _ring_dim(alloc, fixed)
        if d is None:
            continue
        refs = [r for r in _refs(kernel.body) if r.alloc is alloc]
        if not refs or not all(len(r.index) == len(alloc.shape) and all(
                isinstance(e, Const) for n, e in enumerate(r.index) if n != d) for r in refs):
            continue
        parts = {}
        for r in refs:
            key = tuple(e.value for n, e in enumerate(r.index) if n != d)
            if key not in parts:
                label = ", ".join(":" if n == d else str(r.index[n].value)
                                  for n in range(len(alloc.shape)))
                parts[key] = dataclasses.replace(alloc, name=f"{alloc.name}[{label}]",
                                                 shape=(alloc.shape[d],), scalar=False)
        split[alloc.name] = (d, parts)
    if not split:
        return kernel

    def ref(r: BarrierRef | None) -> BarrierRef | None:
        if r is None or r.alloc.name not in split:
            return r
        d, parts = split[r.alloc.name]
        key = tuple(e.value for n, e in enumerate(r.index) if n != d)
        return BarrierRef(parts[key], (r.index[d],), r.block)

    def body(stmts) -> tuple:
        return map_ops(stmts, lambda op: dataclasses.replace(op, barrier=ref(op.barrier)))

    barriers = []
    for alloc in kernel.barriers:
        barriers += list(split[alloc.name][1].values()) if alloc.name in split else [alloc]
    return kernel.replace(body=body(kernel.body), barriers=tuple(barriers))
