"""The Z3 work a proof may still spend, applied to every query.

Z3's `rlimit` counts resource units from the start of each `check`, so a limit set once for
a run of queries lets each of them spend the whole remainder again: a budget of N units could
buy N per query. `checked` sets, before each query, what is left of the budget in force
(prove.z3_limits pushes it), so the sum over the queries stays within the budget, up to the
one query that exhausts it."""

from __future__ import annotations

from typing import Callable

import z3

_left: list[Callable[[], int]] = []     # the innermost budget's remaining units, as a function


def push(left: Callable[[], int]) -> None:
    _left.append(left)


def pop() -> None:
    _left.pop()


def limit(solver) -> None:
    """The solver's next query may spend what the budget in force has left."""
    if _left:
        solver.set("rlimit", max(1, _left[-1]()))


def checked(solver, *assumptions):
    """solver.check(*assumptions) within what the budget in force has left (unknown, with
    reason "max. resource limit exceeded", when that is nothing)."""
    limit(solver)
    return solver.check(*assumptions)


__all__ = ["checked", "limit", "pop", "push"]
