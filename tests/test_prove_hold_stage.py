"""Several consumers that each hold one ring stage: every consumer waits for the next stage
before it releases the previous one (CUTLASS's WGMMA mainloop keeps one group in flight), so
at any time the consumers may stand one lap apart on the empty barrier. What a slot's empty
barrier has received then depends on whether the last position each consumer passed landed on
that slot; the candidate facts state it through the lap-count differences U[x + 1] - U[x]
(invariants.py). Each proof is checked against the explorer at small values."""

from __future__ import annotations

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol


def _hold_one(k, consumers, steps, early=False, empty_arrivals=None):
    k.threads(consumers + 1, name="warp")
    k.assume(steps >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=empty_arrivals or consumers, num_barriers=2)
    with k.when(k.thread < consumers):
        k.wait_parity(full.at[0], 0)
        with k.loop(steps - 1) as t:
            if early:                          # releases the stage it is about to read
                k.arrive(empty.at[(t + 1) % 2])
            k.wait_parity(full.at[(t + 1) % 2], ((t + 1) // 2) % 2)
            if not early:                      # releases the previous stage
                k.arrive(empty.at[t % 2])
        if not early:
            k.arrive(empty.at[(steps + 1) % 2])
    with k.otherwise():                        # the TMA producer, then its tail
        with k.loop(steps) as t:
            k.wait_parity(empty.at[t % 2], ((t // 2) + 1) % 2)
            k.arrive_expect_tx(full.at[t % 2], 16384)
            k.tma_load(full.at[t % 2], 8192)
            k.tma_load(full.at[t % 2], 8192)
        with k.loop(2) as j:
            k.wait_parity(empty.at[(j + steps) % 2], (((j + steps) // 2) + 1) % 2)


@protocol(symbolic=("steps",))
def two_consumers_each_holding_a_stage(k, steps=3):
    _hold_one(k, 2, steps)


@protocol(symbolic=("steps",))
def two_consumers_releasing_before_reading(k, steps=3):
    _hold_one(k, 2, steps, early=True)


@protocol(symbolic=("steps",))
def two_consumers_empty_counts_one(k, steps=3):
    _hold_one(k, 2, steps, empty_arrivals=1)


def _explored(kernel, steps):
    return check_kernel(kernel, {"steps": steps}, Options(Limits(max_states=200_000)))


def test_two_consumers_each_holding_a_stage_are_proved_for_every_step_count():
    """About 15 s."""
    kernel = two_consumers_each_holding_a_stage.build()
    v = prove_kernel(kernel, options=Options(Limits(timeout=120)))
    assert v.verdict == "proved", (v.label, v.notes)
    for steps in range(1, 6):
        assert _explored(kernel, steps).verdict == "verified", steps


@pytest.mark.parametrize("twin", [two_consumers_releasing_before_reading,
                                  two_consumers_empty_counts_one])
def test_the_twins_are_refuted_where_the_explorer_fails(twin):
    kernel = twin.build()
    v = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert v.verdict == "violation", (v.label, v.notes)
    at = next(n for n in v.notes if "smallest breaking values found" in n)
    steps = int(at.split("steps=")[1].split()[0].rstrip(",;"))
    explored = _explored(kernel, steps)
    assert explored.verdict == "violation" and explored.codes[0] == v.codes[0], explored.label


def test_ring_hits_pair_the_lap_counts_one_position_apart():
    from barrierproof.checker.symbolic.invariants import _ring_hits
    names = ["steps", "s", "U[steps]", "U[-1 + steps]", "U[1 + steps]", "U[0]", "U[-1]"]
    hits = dict(_ring_hits(names, len(names)))
    assert hits == {"[U[1 + steps]-U[steps]]": (2, 4), "[U[steps]-U[-1 + steps]]": (3, 2)}
