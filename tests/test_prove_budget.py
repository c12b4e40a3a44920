"""`prove --timeout T` is one budget for the whole run (checker/symbolic/budget.py): every phase
draws from it, a spent budget's `unknown` names the phase it ran out in, the same input and T give
the same verdict, and progress shows the phase."""

from __future__ import annotations

from barrierproof.checker.check import Options
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.budget import (STATES_PER_SECOND, UNITS_PER_EXPLORED_STATE,
                                                  Z3_UNITS_PER_SECOND, Budget, units_spent)
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol


@protocol(symbolic=("rounds",))
def handoff(k, rounds=1):
    k.threads(2, name="wg")
    k.assume(rounds >= 0)
    ready = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(rounds):
            k.barrier_arrive(ready)
            k.barrier_wait(done)
    with k.otherwise():
        with k.loop(rounds):
            k.barrier_wait(ready)
            k.barrier_arrive(done)


def _prove(seconds: float, progress=None):
    return prove_kernel(handoff.build(), options=Options(Limits(timeout=seconds),
                                                         progress=progress))


def test_a_spent_budget_is_unknown_naming_its_phase_every_time():
    phases = []
    first = _prove(0.005, lambda info: phases.append(info["phase"]))
    second = _prove(0.005)
    assert first.verdict == second.verdict == "unknown", first.coverage
    assert "work budget of --timeout 0.005 spent during " in first.coverage, first.coverage
    assert first.coverage == second.coverage        # counted, not timed
    # progress saw the phases, the last one the explorer's search for breaking values
    assert any(p.startswith("partition: ") for p in phases), phases
    assert phases[-1] == "search for breaking values", phases


def test_the_whole_run_stays_within_its_budget_and_the_search_floor():
    """Proof, races and searches draw from one count: a run spends at most its budget (plus
    the one query or step that exhausts it) and the floor the search for breaking values keeps
    (a quarter of T's states, at least 1000)."""
    for seconds in (0.02, 0.2):
        before = units_spent()
        assert _prove(seconds).verdict == "unknown"
        floor = max(1000, int(seconds * STATES_PER_SECOND / 4)) * UNITS_PER_EXPLORED_STATE
        assert units_spent() - before <= 1.05 * seconds * Z3_UNITS_PER_SECOND + floor + 50_000


def test_a_share_is_spent_for_its_parent_and_capped_by_it():
    run = Budget(1.0)
    part = run.share(2 / 3)
    assert part.z3_left() <= run.z3_left()
    assert part.units == int(2 / 3 * Z3_UNITS_PER_SECOND)
    from barrierproof.checker.symbolic import work
    before = run.z3_left()
    work.charge(100_000)
    assert run.z3_left() <= before - 100_000
    work.charge(10 * Z3_UNITS_PER_SECOND)
    assert part.exhausted() and run.exhausted()
    run.enter("sampling class x")
    assert part.phase == "sampling class x" and "during sampling class x" in part.spent_text()


def test_enough_budget_still_proves():
    assert _prove(20).verdict == "proved"


def test_a_part_that_ends_early_passes_its_unused_share_on():
    """Partitions tried in turn: one that ends under its share adds what it left to the next
    one's (prove.py), still within what the run has left."""
    run = Budget(1.0)
    first = run.share(2 / 3)
    assert first.unused() == first.units            # skipped: nothing spent
    from barrierproof.checker.symbolic import work
    work.charge(100_000)
    assert first.unused() <= first.units - 100_000
    second = run.share(1 / 3, first.unused())
    assert abs(second.units - (Z3_UNITS_PER_SECOND // 3 + first.unused())) <= 2
    assert second.z3_left() <= run.z3_left()
    work.charge(first.units)
    assert first.unused() == 0
