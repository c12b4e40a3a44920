"""BP105 for a thread's own asynchronous shared-memory accesses (model/exit_async.py), for every
parameter value: the Z3 encoding of the barrier rules has no memory effects, so a TMA store, a
WGMMA or a cp.async still running when its thread ends would otherwise pass unseen.

First a count that needs no solver: per group, how many issues may still be in flight, walking
the program (an issue adds one, `wait(n)` with a known n caps it at n, a branch takes the larger
of its two ways, a loop the largest count over any number of iterations; a warp region's warps
are threads of their own, counted from zero to their end). Zero at the end of every thread, for
every group that touches shared memory, proves the rule for every parameter value. Otherwise
each such issue is followed along its thread's program with Z3 (own_copies.py, with no regard
to what the thread touches meanwhile): on every way the thread can go after it, a wait of its
group must retire it before the thread ends. Where neither proves it, the prover says why and
proves nothing (fail closed); engine.py then searches small parameter values for the violation.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ...model.compile import ASYNC_GROUPS, ASYNC_WAITS
from ...model.ir import Kernel, Loop, ModelError, Op, When, WarpRegion, evaluate
from .fragment import Fragment
from .own_copies import own_copies_retired
from .terms import Unsupported


def _touches_smem(op) -> bool:
    return op.kind in ASYNC_GROUPS and \
        any(r.alloc.space == "smem" for r in op.reads + op.writes)


UNBOUNDED = 1 << 30      # more in flight than any count can say
ROUNDS = 16              # loop iterations followed before a growing count is unbounded


def _in_flight(body, group: str, n: int, fixed: Mapping[str, int], ends: list) -> int:
    """Issues of `group` possibly in flight after `body`, from `n` before it; each warp
    region's count at its end goes to `ends`."""
    for stmt in body:
        if isinstance(stmt, Op):
            if ASYNC_GROUPS.get(stmt.kind) == group:
                n = min(n + 1, UNBOUNDED)
            elif ASYNC_WAITS.get(stmt.kind, ("",))[0] == group:
                keep = 0
                if ASYNC_WAITS[stmt.kind][1]:
                    try:
                        keep = evaluate(stmt.count, fixed)
                    except (ModelError, KeyError, TypeError):
                        keep = n             # a count that depends on a symbolic value
                n = min(n, keep)
        elif isinstance(stmt, When):
            n = max(_in_flight(stmt.then, group, n, fixed, ends),
                    _in_flight(stmt.orelse, group, n, fixed, ends))
        elif isinstance(stmt, Loop):
            seen, cur = n, n
            for _ in range(ROUNDS):
                cur = _in_flight(stmt.body, group, cur, fixed, ends)
                if cur <= seen:
                    break
                seen = cur
            else:
                seen = UNBOUNDED
            n = seen
        elif isinstance(stmt, WarpRegion):
            ends.append(_in_flight(stmt.body, group, 0, fixed, ends))
        else:
            return UNBOUNDED
    return n


def _counted_open(kernel: Kernel, fixed: Mapping[str, int]) -> str | None:
    """The group left in flight at some thread's end by the count, or None."""
    for group in sorted({ASYNC_GROUPS[op.kind] for op in kernel.ops() if _touches_smem(op)}):
        ends: list = []
        ends.append(_in_flight(kernel.body, group, 0, fixed, ends))
        if max(ends):
            return group
    return None


def exit_open(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]) -> str | None:
    """None when every thread retires each of its asynchronous shared-memory accesses before
    it ends, for every value of `symbolic`; else the reason it is not proved."""
    if not any(_touches_smem(op) for op in kernel.ops()) or _counted_open(kernel, fixed) is None:
        return None
    try:
        frag = Fragment(kernel, symbolic, fixed)
        for role in frag.build_roles():
            for item in role.items:
                for bop in item.ops:
                    if _touches_smem(bop.op) and \
                            not own_copies_retired(frag, role, item, bop, touches=False):
                        return (f"`{bop.op.describe()}` ({bop.op.loc}) may still be running "
                                "when its thread ends (BP105), or no wait of its group was "
                                "proved to retire it on every way")
    except Unsupported as err:
        return f"whether asynchronous shared-memory accesses end before the exit: {err}"
    return None
