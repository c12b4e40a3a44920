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
