"""Nested loops with a concrete trip count, unrolled before the fragment is built.

The fragment handles one level of loops. A loop nested in another (or holding another) whose
trip count is a number once the fixed parameters are substituted -- a release in each of the
2 blocks of a cluster, a turn for each of 3 warpgroups -- runs exactly that many times, so
replacing it by copies of its body with the loop variable substituted is the same program.
Loops whose count stays symbolic are left as they are (and still rejected when nested).
"""

from __future__ import annotations

from typing import Mapping

from ...model.expr import substitute_stmts
from ...model.ir import Const, Kernel, Loop, WarpRegion, When, evaluate, free_vars, walk

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
