"""The work a proof may still spend, applied to every Z3 query and every counted step.

Z3's `rlimit` counts resource units from the start of each `check`, so a limit set once for
a run of queries lets each of them spend the whole remainder again: a budget of N units could
buy N per query. `checked` sets, before each query, what is left of the budget in force
(budget.z3_limits pushes it), so the sum over the queries stays within the budget, up to the
one query that exhausts it. The Python work around the queries is counted here too (`tick`,
in the same units, budget.py): a step that finds the budget in force spent raises
BudgetSpent, so no phase outlives the budget by more than one step."""

from __future__ import annotations

_budgets: list = []     # the budgets in force, innermost last (budget.Budget)
_ticks = 0              # counted Python work of this process, in units



class BudgetSpent(Exception):
    """Raised by counted Python work when the budget in force is spent (`tick`)."""


def push(budget) -> None:
    _budgets.append(budget)


def pop() -> None:
    _budgets.pop()


def top():
    return _budgets[-1] if _budgets else None


def ticks() -> int:
    return _ticks


def tick(units: int) -> None:
    """Count `units` of Python work; BudgetSpent when the budget in force has nothing left."""
    global _ticks
    _ticks += units
    if _budgets and _budgets[-1].exhausted():
        raise BudgetSpent(_budgets[-1].spent_text())


def charge(units: int) -> None:
    """Count `units` of work done (the explorer's states, which it bounds itself)."""
    global _ticks
    _ticks += units


def limit(solver) -> None:
    """The solver's next query may spend what the budget in force has left, and wait no longer
    than its nets allow."""
    if _budgets:
        solver.set("rlimit", max(1, _budgets[-1].z3_left()))


def checked(solver, *assumptions):
    """solver.check(*assumptions) within what the budget in force has left (unknown, with
    reason "max. resource limit exceeded", when that is nothing)."""
    limit(solver)
    return solver.check(*assumptions)


__all__ = ["charge", "checked", "limit", "pop", "push", "tick", "ticks", "top"]
