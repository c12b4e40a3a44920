"""Why no static order fits: loops that step through one ring at different strides.

The static order tau (order.py) aligns loops of different roles iteration by iteration, with a
shift of the key: loop b's iteration i meets loop a's iteration i + c. Two consumers that take
alternate k-blocks of one ring (consumer c's iteration j is block 2j + c) step through the ring
two slots per iteration while the producer steps one: no shift aligns them, the order that
would (the producer's iteration 2j + c beside consumer c's j) scales the key, which the method
does not. This module finds that shape: stride_split.py rewrites it where it can, and its
`stride_mismatch` names it in an `unknown` where it cannot, instead of only saying that no
candidate order passed.
"""

from __future__ import annotations

from typing import Mapping

from ...model.ir import BinOp, Loop, Op, evaluate, free_vars, walk


def _stride(position, var: str, fixed: Mapping[str, int]) -> int | None:
    """How far `position` moves per iteration of `var`, when it moves by the same amount at
    every step (others at their fixed values, or 0: thread and block indices only shift it)."""
    env = {n: fixed.get(n, 0) for n in free_vars(position)}
    try:
        at = [evaluate(position, {**env, var: v}) for v in range(3)]
    except Exception:       # an expression the values cannot evaluate is not diagnosed
        return None
    return at[1] - at[0] if at[2] - at[1] == at[1] - at[0] else None


def ring_strides(kernel, fixed: Mapping[str, int]) -> dict[str, dict[int, tuple]]:
    """barrier array -> stride -> (loop, op, slot expression) of its accesses `v % S` in loops."""
    seen: dict[str, dict[int, tuple]] = {}
    for loop in (s for s in walk(kernel.body) if isinstance(s, Loop)):
        for op in walk(loop.body):
            if not isinstance(op, Op) or op.barrier is None:
                continue
            for e in op.barrier.index:
                if not (isinstance(e, BinOp) and e.op == "%") or loop.var not in free_vars(e.lhs):
                    continue
                step = _stride(e.lhs, loop.var, fixed)
                if step is not None and step != 0:
                    seen.setdefault(op.barrier.alloc.name, {}).setdefault(step, (loop, op, e))
    return seen


def strided_arrays(kernel, fixed: Mapping[str, int]) -> set[str]:
    """The barrier arrays two loops step through at different strides."""
    return {name for name, by_step in ring_strides(kernel, fixed).items() if len(by_step) > 1}


def lap_arrays(kernel, fixed: Mapping[str, int]) -> set[str]:
    """The barrier arrays of a concrete size S that every loop steps through at one stride d
    that neither divides S nor is a multiple of it (K then V of one ring: 2 positions per
    iteration on 3 slots). A slot is passed (d*i + c) // S times, no lap count of one loop
    counter; strip-mined to whole laps (stride_split.py) every slot is a number."""
    sizes = {}
    for alloc in kernel.barriers:
        if len(alloc.shape) == 1 and not free_vars(alloc.shape[0]) - set(fixed):
            sizes[alloc.name] = evaluate(alloc.shape[0], fixed)
    out = set()
    for name, by_step in ring_strides(kernel, fixed).items():
        S = sizes.get(name)
        if S is None or len(by_step) != 1:
            continue
        (d,) = by_step
        if S > 1 and d % S and S % d:
            out.add(name)
    return out


def ring_step_reason(ref, var: str, lin, S) -> str:
    """Why a ring index is outside the ring classes' `(i + c) % S`: not linear in the loop
    index, or linear at a step a != 1. A ring class reads a slot's phase as the lap count
    (i + c) // S of one loop counter; a loop that takes a positions per iteration (a thread
    that reads k_tiles of every 2*k_tiles positions, as a ping-pong warpgroup skipping the
    other's loads does, strip-mined per tile) passes one slot (a*i + c) // S times, which is no
    lap count when S is symbolic. With S concrete the rewrites of stride_split.py (strip-mined
    to whole laps, or relabelled into sub-rings) and number_slots.py apply instead."""
    if lin is None:
        return f"ring index `{ref}` is not (i + c) % {S}"
    a = lin[0]
    return (f"ring index `{ref}` moves {a} ring positions per iteration of {var}, not one: "
            f"a ring class of symbolic size {S} reads a slot's phase as one loop counter's lap "
            f"count (i + c) // {S}, and a loop taking {a} positions per iteration reaches one "
            f"slot a number of times per iteration that depends on {S} (({a}*i + c) // {S} "
            f"is not linear in a lap count), so a symbolic ring size is beyond the method "
            f"here; with {S} fixed the ring is strip-mined to whole laps or relabelled "
            f"(stride_split.py) or its slots are numbers (number_slots.py)")
