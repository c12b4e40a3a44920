"""Prover coverage of parity waits for a stated phase (`wait_parity(phase=n)`, CUTLASS's
PipelineState): the class systems hold such a wait to the hardware's rule on the phase it names
(return for completion n + 1 and no other; never sit at it once the barrier ran past it), so a
thread may skip phases on purpose. Every protocol proved here is cross-checked against
model/semantics.py at small values, and every broken neighbour is refuted with its smallest
breaking values."""

from __future__ import annotations

import pytest

from barrierproof.checker.check import check_kernel
from crosscheck import simulation_gaps
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.checker.symbolic.order import TauRun, TauSearch, tau_static_ok
from barrierproof.checker.symbolic.prove import tau_points, points, prove_kernel
from barrierproof.checker.symbolic.unroll import (split_ring_arrays, strip_mine_loops,
                                                  unroll_fixed_loops)
from barrierproof.model.dsl import protocol
from barrierproof.model.semantics import compile_systems


def _ring(k, stages, steps, producer_phase=-1, consumer_phase=0):
    """A TMA ring whose threads keep their own pipeline state: slot i % stages, phase
    i // stages (the producer starts one phase back: a fresh `empty` slot is free)."""
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 0):
        with k.loop(steps, name="i") as i:
            k.wait_parity(empty.at[i % stages], phase=i // stages + producer_phase)
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096)
    with k.otherwise():
        with k.loop(steps, name="i") as i:
            k.wait_parity(full.at[i % stages], phase=i // stages + consumer_phase)
            k.arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def stated_phase_ring(k, stages=2, steps=3):
    _ring(k, stages, steps)


@protocol(expect="violation:BP100", symbolic=("stages", "steps"))
def producer_without_start_state(k, stages=2, steps=3):
    """The producer waits for phase 0 of a fresh `empty` slot: nobody completes it first."""
    _ring(k, stages, steps, producer_phase=0)


@protocol(expect="violation:BP101", symbolic=("stages", "steps"))
def consumer_one_phase_behind(k, stages=2, steps=3):
    """The consumer names the phase before the one it means: its first wait returns at once."""
    _ring(k, stages, steps, consumer_phase=-1)


@protocol(expect="violation:BP101", symbolic=("stages", "steps"))
def consumer_one_phase_ahead(k, stages=2, steps=3):
    """The consumer names the phase after the one it means (parity aliasing the other way)."""
    _ring(k, stages, steps, consumer_phase=1)


def _skip(k, steps, go: bool):
    """The waiter wants only the odd completions of `full`; the producer completes each of
    them, waits for the waiter's ack, completes the next one, then lets the waiter go on."""
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    after = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps, name="m") as m:
            k.arrive(full)
            k.wait_parity(ack, phase=m)
            k.arrive(full)
            if go:
                k.arrive(after)
    with k.otherwise():
        with k.loop(steps, name="m") as m:
            k.wait_parity(full, phase=2 * m)
            k.arrive(ack)
            if go:
                k.wait_parity(after, phase=m)


@protocol(expect="verified", symbolic=("steps",))
def skip_every_other_phase(k, steps=2):
    """Phases skipped on purpose, and the waiter held back until the skipped one is done."""
    _skip(k, steps, go=True)


@protocol(expect="violation:BP101", symbolic=("steps",))
def skip_without_holding_back(k, steps=2):
    """Without `after` the waiter may reach its next wait a phase early: that phase has the
    parity it waits for, so the wait returns for the wrong one."""
    _skip(k, steps, go=False)


def _alternating(k, pairs, turns: bool):
    """A producer hands round r to consumer r % 2 and waits for its ack; with `turns` the
    consumers take turns (the ping-pong's order barrier), so each waits only for the phases of
    its own rounds, once the other has consumed the round before."""
    k.threads(3, name="wg")
    k.assume(pairs >= 0)
    data = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    turn = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.when(k.thread == 2):
        with k.loop(2 * pairs) as r:
            k.arrive(data)
            k.wait_parity(ack, phase=r)
    with k.otherwise():
        w = k.thread
        with k.loop(pairs) as m:
            if turns:
                k.wait_parity(turn.at[w], phase=m - 1 + w)
            k.wait_parity(data, phase=2 * m + w)
            k.arrive(ack)
            if turns:
                k.arrive(turn.at[1 - w])


@protocol(expect="verified", symbolic=("pairs",))
def consumers_in_turn(k, pairs=2):
    _alternating(k, pairs, turns=True)


@protocol(expect="violation:BP101", symbolic=("pairs",))
def consumers_not_in_turn(k, pairs=2):
    """Consumer 1 may reach its wait for phase 1 before round 0 completed: phase -1 of a fresh
    barrier has the parity it waits for, so it returns at once, for the wrong phase."""
    _alternating(k, pairs, turns=False)


def test_a_ring_of_stated_phases_is_proved_for_every_size():
    v = prove_kernel(stated_phase_ring.build())
    assert v.verdict == "proved", v.coverage
    assert "stages, steps" in v.coverage


@pytest.mark.parametrize("proto,name", [(skip_every_other_phase, "steps"),
                                        (consumers_in_turn, "pairs")])
def test_phases_skipped_on_purpose_are_proved(proto, name):
    v = prove_kernel(proto.build())
    assert v.verdict == "proved", v.coverage
    for value in range(5):
        assert check_kernel(proto.build(), {name: value}).verdict == "verified", value


@pytest.mark.parametrize("proto,code,smallest", [
    (producer_without_start_state, "BP100", dict(stages=1, steps=1)),
    (consumer_one_phase_behind, "BP101", dict(stages=1, steps=1)),
    (consumer_one_phase_ahead, "BP101", dict(stages=1, steps=1)),
    (skip_without_holding_back, "BP101", dict(steps=2)),
    (consumers_not_in_turn, "BP101", dict(pairs=1)),
])
def test_broken_stated_phases_are_refuted_at_their_smallest_values(proto, code, smallest):
    k = proto.build()
    v = prove_kernel(k)
    assert v.verdict == "violation" and v.codes[0] == code, (v.label, v.coverage)
    assert {n: v.params[n] for n in smallest} == smallest
    assert v.trace is not None


def _systems(k, symbolic):
    """The fragment of `k` as prove() builds it (same rewrites, first static order that
    passes the tau-ordered runs)."""
    fixed = {n: x for n, x in k.param_values().items() if n not in symbolic}
    k = split_ring_arrays(unroll_fixed_loops(strip_mine_loops(k, fixed), fixed), fixed)
    frag = Fragment(k, symbolic, fixed)
    frag.build_roles()
    frag.build_classes()
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in tau_points(k, symbolic, fixed, frag)
            for system in compile_systems(k, values, races=False)]
    for tau in search.candidates():
        if tau_static_ok(frag, search, tau):
            search.apply(tau)
            if all(run.check(search) is None for run in runs):
                return frag, fixed, frag.build_systems()
    raise AssertionError("no static order")


@pytest.mark.parametrize("proto,top", [(stated_phase_ring, 3), (skip_every_other_phase, 3),
                                       (consumers_in_turn, 3)])
def test_class_systems_of_stated_phases_cover_the_semantics(proto, top):
    """Every reachable state of model/semantics.py, projected on a class, is reached by the
    class system (the over-approximation the proofs rest on), on a grid of small values."""
    k = proto.build()
    symbolic = [p.name for p in k.params.values() if p.symbolic]
    frag, fixed, systems = _systems(k, symbolic)
    for values in points(frag.kernel, symbolic, fixed, top):
        gaps = simulation_gaps(frag, systems, values)
        assert not gaps, (values, gaps[:1])


@protocol(expect="verified", symbolic=("steps",))
def mixed_waits(k, steps=2):
    """Correct, but one thread waits on `bar` by stated phases and by observed parity."""
    k.threads(2, name="wg")
    k.assume(steps >= 1)
    bar = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(2 * steps, name="n") as n:
            k.arrive(bar)
            k.wait_parity(ack, phase=n)
    with k.otherwise():
        with k.loop(steps, name="m") as m:
            k.wait_parity(bar, phase=2 * m)
            k.arrive(ack)
            k.wait_parity(bar, 1)
            k.arrive(ack)


def test_a_thread_that_mixes_stated_and_observed_phases_is_left_to_the_explorer():
    k = mixed_waits.build()
    assert check_kernel(k, {"steps": 2}).verdict == "verified"
    v = prove_kernel(k)
    assert v.verdict == "unknown"
    assert "both for stated phases" in v.coverage, v.coverage


@protocol(expect="violation:BP101", symbolic=("steps",))
def second_consumer_names_a_phase_two_ahead(k, steps=2):
    """Consumer 1 is written apart from consumer 0 with a phase two ahead (same parity): its
    first wait returns at completion 1 while it means completion 3 (the parities of both
    threads' phases are equal terms; their phases are not)."""
    k.threads(3, name="wg")
    k.assume(steps >= 1)
    data = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 2):
        with k.loop(steps, name="m") as m:
            k.arrive(data)
            k.wait_parity(ack, phase=m)
    with k.when(k.thread == 0):
        with k.loop(steps, name="m") as m:
            k.wait_parity(data, phase=m)
            k.arrive(ack)
    with k.when(k.thread == 1):
        with k.loop(steps, name="m") as m:
            k.wait_parity(data, phase=m + 2)
            k.arrive(ack)


def test_threads_naming_different_phases_are_not_one_role():
    v = prove_kernel(second_consumer_names_a_phase_two_ahead.build())
    assert v.verdict == "violation" and v.codes[0] == "BP101", (v.label, v.coverage)
    assert v.params["steps"] == 1


def _mutant(producer_phase, consumer_phase, drain):
    @protocol(symbolic=("stages", "steps"))
    def ring(k, stages=2, steps=3):
        k.threads(2, name="wg")
        k.assume(stages >= 1, steps >= 1)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages)
        with k.when(k.thread == 0):
            with k.loop(steps, name="i") as i:
                k.wait_parity(empty.at[i % stages], phase=i // stages + producer_phase)
                k.copy_gmem_to_smem(full.at[i % stages], bytes=4096)
            if drain:       # wait for the last releases (phases the consumer completes)
                with k.loop(stages, name="j") as j:
                    n = steps + j
                    k.wait_parity(empty.at[n % stages], phase=n // stages - 1)
        with k.otherwise():
            with k.loop(steps, name="i") as i:
                k.wait_parity(full.at[i % stages], phase=i // stages + consumer_phase)
                k.arrive(empty.at[i % stages])
    return ring


@pytest.mark.parametrize("producer_phase", [-2, -1, 0])
@pytest.mark.parametrize("consumer_phase", [-1, 0, 1])
@pytest.mark.parametrize("drain", [False, True])
def test_stated_phase_mutants_are_proved_only_when_the_explorer_agrees(producer_phase,
                                                                      consumer_phase, drain):
    """Every stated-phase ring proved is verified by the explorer on a grid of small values;
    every one the explorer refutes there is not proved."""
    k = _mutant(producer_phase, consumer_phase, drain).build()
    v = prove_kernel(k)
    grid = [dict(stages=s, steps=n) for s in (1, 2, 3) for n in range(1, 6)]
    bad = [g for g in grid if check_kernel(k, g).verdict != "verified"]
    if v.verdict == "proved":
        assert not bad, bad
    else:
        assert bad or v.verdict == "unknown", (v.label, v.coverage)
    # the correct pipeline state (-1, 0) is proved, with or without the drain
    assert (v.verdict == "proved") == ((producer_phase, consumer_phase) == (-1, 0)), \
        (v.label, v.coverage)
