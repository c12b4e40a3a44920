"""Parity waits follow the hardware's rule (docs/parity.md), barrier_wait the Pallas rules; a
Pallas barrier nobody waits on must not complete (rule 2, BP103)."""

import json
from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
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
    """The consumer waits with parity 0 every time: its second wait passes at once on the phase
    it has already observed, before the producer's second arrival, or, once that arrival is in,
    never (parity 0 again)."""
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


def test_a_stale_parity_bit_returns_early_or_is_passed_by_the_next_fill():
    """Judged by behaviour, the second wait returns after completion 1 on one schedule, and on
    the one where the producer's second arrival came first the barrier stands at completion 2,
    a phase of the parity its bit waits out, so it never returns: the same wait's phase
    depends on the schedule, BP101, reported on the deadlock schedule with the early return
    as the other one, both replayed (tilelang#3087's single-slot stale bit). The stale data it
    reads at the early return is a race, BP200, where memory effects are declared: see
    test_stale_parity_behind_a_handshake_is_a_race_only."""
    v = verdict(stale_bit)
    assert v.label == "violation:BP101", v.label
    text = v.diagnostics[0].message
    assert "wg1's wait_parity(data, 0)" in text, text
    assert "returns after completion 1 of data on another schedule" in text, text
    assert "has already completed 2 time(s)" in text, text
    assert v.trace is not None and v.trace.witness is not None
    # a genuine deadlock with no early return stays BP100
    assert verdict(stale_bit, steps=1).label == "verified"


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


# -- bare parity waits judged by behaviour (model/parity.py) ----------------------------------

from barrierproof.checker.engines.explore import explore          # noqa: E402
from barrierproof.checker.rules import describe, undecided        # noqa: E402
from barrierproof.model import reference                          # noqa: E402
from barrierproof.model.interpreter import ReplayError, Trace     # noqa: E402


def _example(name):
    import os
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    (target,) = resolve(os.path.join(EXAMPLES, "patterns", "parity_skipping.py") + "::" + name)
    return target


def test_cutlass_pingpong_with_bare_parity_is_verified_where_the_old_guess_cried_wolf():
    k = _example("pingpong_bare_parity").build()
    v = check_kernel(k, None, Options())
    assert v.verdict == "verified", v.diagnostics
    # The old guess: wg1's first wait on full[0] (its load k_tiles = 3, bit 1) meant
    # completion 0 and the barrier had completed once: a false BP101. The wait really blocks
    # until full[0]'s second completion, on every schedule.
    system = System(k)
    first = next(pc for pc, i in enumerate(system.programs[1])
                 if i.op == WAIT_PARITY and system.instances[i.target].name == "full[1]")
    assert intended_completion(system.programs[1][first], -1) == 0
    assert reference.explore(k, max_states=50_000).status == "verified"


def test_two_schedules_on_which_one_wait_returns_after_different_completions_are_bp101():
    target = _example("producer_laps_consumer")
    v = check_kernel(target.build(), None, Options(), source=target.ref)
    assert v.label == "violation:BP101"
    message = v.diagnostics[0].message
    assert "wg1's wait_parity(full, 0)" in message
    assert "after completion 3 of full on this schedule" in message
    assert "after completion 1 on another" in message
    assert any(d.startswith("the other schedule: wg0: arrive(full); wg1: wait_parity(full, 0)")
               for d in v.diagnostics[0].details), v.diagnostics[0].details
    # both schedules are in the trace, and replay: on the interpreter and on the reference
    data = json.loads(v.trace.dumps())
    trace = Trace.from_json(data)
    assert trace.witness is not None and trace.witness_actions[-1] == trace.actions[-1]
    system = System(target.build())
    run = replay(system, trace.actions, witness=trace.witness_actions)
    assert run.violation.code == "BP101"
    assert reference.replay_trace(target.build(), data).code == "BP101"
    # neither schedule alone shows BP101: the violation is the pair (the 3-fill schedule ends
    # in a deadlock too, a later consequence)
    for alone in (trace.actions, trace.witness_actions):
        run = replay(system, alone)
        assert run.violation is None or run.violation.code != "BP101", run.violation


def test_a_pair_whose_waits_return_after_the_same_completion_does_not_replay_as_a_violation():
    system = System(_example("producer_laps_consumer").build())
    with pytest.raises(ReplayError):
        replay(system, [0, 1], witness=[0, 1])       # the same schedule twice
    with pytest.raises(ReplayError):
        replay(system, [0, 1], witness=[0, 0, 0])    # the other one ends with no wait


@protocol
def symmetric_consumers_lapped(k, steps=3, consumers=2):
    """Identical consumers (one thread-symmetry class) behind a producer that never waits."""
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread == consumers):
        with k.loop(steps):
            k.arrive(full)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full, i % 2)


@protocol
def lapped_in_every_block(k, steps=3):
    """The lapped ring in each block of a 2-block cluster (block symmetry)."""
    k.cluster(x=2)
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps):
            k.arrive(full)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full, i % 2)


@protocol
def pipeline_bare(k, stages=2, steps=3, consumers=1, lap=0):
    """PipelineAsync with bare parity; `lap`: the producer's acquire bit is stale."""
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    with k.when(k.thread == consumers):
        with k.loop(steps) as i:
            k.wait_parity(empty.at[i % stages], lap + (1 - lap) * ((i // stages + 1) % 2))
            k.arrive(full.at[i % stages])
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % stages], (i // stages) % 2)
            k.arrive(empty.at[i % stages])


REDUCTION_CASES = [
    (symmetric_consumers_lapped, {}), (symmetric_consumers_lapped, {"consumers": 3}),
    (lapped_in_every_block, {}),
    *[(pipeline_bare, {"stages": s, "steps": n, "consumers": c, "lap": lap})
      for s in (1, 2) for n in (2, 3, 4) for c in (1, 2) for lap in (0, 1)],
]


@pytest.mark.parametrize("proto, params", REDUCTION_CASES)
def test_the_reductions_keep_every_returning_completion(proto, params):
    """docs/POR.md "Parity aliasing": symmetry and persistent sets keep, for every dynamic wait,
    every completion it can return after, so the reduced search finds the same verdict and a
    conflict as short as the unreduced search and the reference; the reported pair replays
    (check_kernel replays both schedules and asks the reference)."""
    kernel = proto.build()
    system = System(kernel, params or None)
    reduced = explore(system)
    full = explore(system, reduction=False)
    dfs = explore(system, order="dfs")
    ref = reference.explore(kernel, params or None, max_states=50_000)
    assert reduced.status == full.status == dfs.status == ref.status
    if full.status == "violation":
        assert reduced.violation.code == full.violation.code == dfs.violation.code \
            == ref.finding.code
        assert len(reduced.actions) == len(full.actions) == len(dfs.actions)
        assert (reduced.witness is None) == (full.witness is None)
        v = check_kernel(kernel, params or None, Options())
        assert v.label == f"violation:{full.violation.code}"


def test_the_lapped_symmetric_consumers_are_caught_with_both_schedules_on_one_thread():
    v = check_kernel(symmetric_consumers_lapped.build(), None, Options())
    assert v.label == "violation:BP101" and v.trace.witness is not None
    assert v.trace.steps[-1].agent == v.trace.witness["steps"][-1]["agent"]


@protocol
def stale_behind_a_handshake(k):
    """The consumer's second wait uses the stale bit 0, but a handshake holds the second fill
    back until after it: the wait returns after completion 1 on every schedule (no aliasing),
    and the consumer then reads the slot while the second copy writes it."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    ack2 = k.Barrier(num_arrivals=1)
    tile = k.SMEM()
    with k.when(k.thread == 0):
        k.copy_gmem_to_smem(full, bytes=4096, dst=tile)
        k.wait_parity(ack, 0)
        k.wait_parity(ack2, 0)
        k.copy_gmem_to_smem(full, bytes=4096, dst=tile)
        k.wait_parity(full, 1)                  # the producer's own second fill landed
    with k.otherwise():
        k.wait_parity(full, 0)
        k.read(tile)
        k.arrive(ack)
        k.wait_parity(full, 0)                  # stale: should be 1
        k.arrive(ack2)
        k.read(tile)


def test_stale_parity_behind_a_handshake_is_a_race_only():
    k = stale_behind_a_handshake.build()
    assert check_kernel(k, None, Options(races=False)).verdict == "verified"
    v = check_kernel(k, None, Options())
    assert v.label == "violation:BP200", v.diagnostics


def test_engines_that_cannot_compare_schedules_leave_bp101_open_for_bare_parity():
    bare = _example("pingpong_bare_parity").build()
    stated = alternating_consumers.build()
    assert "BP101" in undecided(bare, "tlc")
    assert "BP101" not in undecided(stated, "tlc")
    for engine in ("explore", "symbolic", "reference"):
        assert "BP101" not in undecided(bare, engine)
    assert describe({"BP101"}, "tlc") == \
        "BP101 (phase-overrun: parity waits without a stated phase)"


def test_the_prover_never_calls_a_skipping_ring_broken():
    """The prover's stricter rule for bare parity cannot follow phase skipping: it may fail to
    prove, and then the explorer's search (no violation) makes it `unknown`, never a false
    violation. A --timeout of 30 s: the proof runs out of its work budget as at the default
    300 s, and the search for breaking values covers the same parameter points."""
    k = _example("alternate_k_blocks_in_turn").build()
    v = prove_kernel(k, {}, Options(Limits(timeout=30)), "turns",
                     SimpleNamespace(symbolic=["k_blocks"]))
    assert v.verdict in ("proved", "unknown"), (v.verdict, v.coverage)
    assert v.verdict == "proved" or "no violation" in v.coverage, v.coverage


def test_the_cli_replays_both_schedules_of_a_trace_file(tmp_path, capsys):
    from barrierproof.cli import main
    target = _example("producer_laps_consumer")
    v = check_kernel(target.build(), None, Options(), source=target.ref)
    path = tmp_path / "laps.trace.json"
    path.write_text(v.trace.dumps())
    code = main(["replay", str(path), "--protocol", target.ref])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 1, captured.err
    assert "the other schedule:" in out and "independent reference (model/reference): " \
        "violation BP101" in out
