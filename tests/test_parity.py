"""Parity waits follow the hardware's rule (docs/parity.md), barrier_wait the Pallas rules; a
Pallas barrier nobody waits on must not complete (rule 2, BP103)."""

from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import ModelError
from barrierproof.model.instructions import WAIT_PARITY, WAIT_PHASE, Instr
from barrierproof.model.semantics import System
from barrierproof.model.steps import intended_completion


def verdict(proto, **params):
    return check_kernel(proto.build(), params or None, Options())


# -- the phase a wait means -------------------------------------------------------------------

@pytest.mark.parametrize("parity, seen, meant", [
    (1, -1, 0),    # producer_acquire on a fresh slot: the phase before the first, passed
    (0, -1, 1),    # consumer_wait on a fresh slot: completion 1
    (1, 0, 2), (0, 0, 1), (0, 1, 3), (1, 1, 2), (1, 4, 6), (0, 4, 5),
])
def test_a_bare_parity_means_the_next_unobserved_completion_of_its_parity(parity, seen, meant):
    assert intended_completion(Instr(WAIT_PARITY, 0, parity, 0, 0), seen) == meant
    # the wait passes once the barrier's parity differs from P: on completion numbers of
    # parity P + 1, which `meant` has
    assert meant % 2 != parity


def test_a_stated_phase_means_the_completion_that_ends_it():
    assert intended_completion(Instr(WAIT_PHASE, 0, 5, 0, 0), -1) == 5
    assert intended_completion(Instr(WAIT_PHASE, 0, 5, 0, 0), 40) == 5


def test_wait_parity_needs_a_parity_or_a_phase():
    @protocol
    def neither(k):
        k.threads(1)
        bar = k.Barrier()
        k.wait_parity(bar)

    with pytest.raises(ModelError) as err:
        neither.build()
    assert "parity or a phase=" in str(err.value) and "test_parity.py" in str(err.value.loc)


# -- skipping phases on purpose -----------------------------------------------------------------

def _alternating(k, pairs, pallas):
    """A producer hands round r to consumer r % 2 and waits for its ack; the consumers take
    turns (like the ping-pong's order barrier), so each waits only on the phases of its own
    rounds, and only once the other has consumed the round before."""
    k.threads(3, name="wg")
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
            k.wait_parity(turn.at[w], phase=m - 1 + w)
            if pallas:
                k.barrier_wait(data)
            else:
                k.wait_parity(data, phase=2 * m + w)
            k.arrive(ack)
            k.arrive(turn.at[1 - w])


@protocol
def alternating_consumers(k, pairs=2):
    _alternating(k, pairs, pallas=False)


@protocol
def alternating_consumers_with_barrier_wait(k, pairs=2):
    _alternating(k, pairs, pallas=True)


def test_parity_waits_may_skip_the_phases_they_do_not_mean():
    v = verdict(alternating_consumers)
    assert v.verdict == "verified", v.diagnostics


def test_barrier_wait_keeps_the_pallas_rule():
    v = verdict(alternating_consumers_with_barrier_wait)
    # consumer 1's barrier_wait passes on round 0's completion (its private bit starts at 0)
    assert v.label == "violation:BP101", v.label


@protocol
def wrong_phase(k, rounds=2):
    """Consumer 1 names the phase of consumer 0's round: it has already completed."""
    k.threads(3, name="wg")
    data = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 2):
        with k.loop(rounds) as r:
            k.arrive(data)
            k.wait_parity(ack, phase=r)
    with k.otherwise():
        k.wait_parity(data, phase=0)
        k.arrive(ack)


def test_a_wait_for_a_phase_long_gone_is_a_violation_replayed_on_the_interpreter():
    v = verdict(wrong_phase)
    assert v.label == "violation:BP101"
    system = System(wrong_phase.build(), v.params)
    run = replay(system, v.trace.actions)
    assert run.violation is not None and run.violation.code == "BP101"


@protocol
def stale_bit(k, steps=2):
    """The consumer waits with parity 0 every time: its second wait passes on the phase it
    has already observed, before the producer's second arrival."""
    k.threads(2, name="wg")
    data = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            k.arrive(data)
            k.wait_parity(ack, i % 2)
    with k.otherwise():
        with k.loop(steps):
            k.wait_parity(data, 0)
            k.arrive(ack)


def test_a_stale_parity_bit_returns_for_a_phase_it_does_not_mean():
    v = verdict(stale_bit)
    assert v.label == "violation:BP101"
    assert "returns after completion 1" in v.diagnostics[0].message


def test_the_prover_proves_phase_skipping_for_every_pair_count():
    """Stated phases are held to the hardware's rule in the class systems (see
    tests/test_prove_parity.py); the explorer agrees on a grid."""
    k = alternating_consumers.build()
    v = prove_kernel(k, {}, Options(), "alternating", SimpleNamespace(symbolic=["pairs"]))
    assert v.verdict == "proved", (v.verdict, v.coverage)
    for pairs in range(0, 6):
        assert verdict(alternating_consumers, pairs=pairs).verdict == "verified", pairs


def test_the_prover_catches_a_stale_parity_bit():
    k = stale_bit.build()
    v = prove_kernel(k, {}, Options(), "stale", SimpleNamespace(symbolic=["steps"]))
    assert v.verdict == "violation" and v.codes[0] == "BP101", (v.verdict, v.coverage)


# -- Pallas rule 2 on a barrier nobody waits on ------------------------------------------------

def test_a_pallas_barrier_nobody_waits_on_must_not_complete():
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    import os
    (target,) = resolve(os.path.join(EXAMPLES, "handoff.py") + "::arrivals_nobody_waits_for")
    k = target.build()
    v = check_kernel(k, None, Options())
    assert v.label == "violation:BP103"
    assert "no thread ever waits for" in v.diagnostics[0].message
    # the prover leaves it to the explorer, naming the barrier and the line
    p = prove_kernel(k, {}, Options(), "nobody", SimpleNamespace(symbolic=["steps"]))
    assert p.verdict == "violation" and p.codes[0] == "BP103"
    assert any("no thread waits on it" in n for n in p.notes), p.notes


def test_ptx_arrivals_nobody_waits_on_are_harmless():
    @protocol
    def ptx_done(k):
        k.threads(2, name="wg")
        data = k.Barrier(num_arrivals=1)
        done = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            k.arrive(data)
            k.arrive(done)
        with k.otherwise():
            k.wait_parity(data, 0)

    assert verdict(ptx_done).verdict == "verified"


def test_one_thread_may_not_mix_barrier_wait_and_parity_waits_on_one_barrier():
    @protocol
    def mixed(k):
        k.threads(2)
        bar = k.Barrier()
        with k.when(k.thread == 0):
            k.arrive(bar)
            k.arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)
            k.wait_parity(bar, 1)

    with pytest.raises(ModelError) as err:
        System(mixed.build())
    assert "both with barrier_wait and with a parity wait" in str(err.value)
    assert "test_parity.py" in str(err.value.loc)
    result = verdict(mixed)
    assert result.label == "error:input", result.label
