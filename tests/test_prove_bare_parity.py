"""The prover on bare parity waits that skip phases (checker/symbolic/phases.py): a wait whose
sampled returns are one completion of its lap is held to that stated phase, so a proof fixes the
completion it returns after on every schedule; the others keep the Pallas rule, and a failed
proof says which wait was left bare. Every protocol proved here is checked by the explorer on a
grid of small values, every broken neighbour is refuted."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.phases import infer_phases, lift
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.unroll import strip_mine_loops
from barrierproof.model.dsl import protocol
from barrierproof.model.instructions import WAIT_PARITY, WAIT_PHASE
from barrierproof.model.ir import Loop, Op, Var, walk
from barrierproof.model.semantics import compile_systems


def _example(name):
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    (target,) = resolve(os.path.join(EXAMPLES, "patterns", "parity_skipping.py") + "::" + name)
    return target


def _pingpong(k, stages, k_tiles, tiles, *, offset=True, turn_bit=1, order=True):
    """The sm90 ping-pong's mainloop with CUTLASS's parity bits (examples/patterns/
    parity_skipping.py), with switches that break it."""
    k.threads(3, name="wg")
    k.assume(tiles >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    turn = k.Barrier(num_arrivals=1, num_barriers=(2, 2))
    with k.when(k.thread == 2):
        with k.loop(2 * tiles * k_tiles) as n:
            k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
            k.arrive_expect_tx(full.at[n % stages], 4096)
            k.tma_load(full.at[n % stages], 4096)
        with k.loop(stages) as j:
            n = 2 * tiles * k_tiles + j
            k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
    with k.otherwise():
        w = k.thread
        with k.loop(tiles) as m:
            for step in range(2):
                r = 2 * m + step
                if order:
                    k.wait_parity(turn.at[r % 2, w], (r // 2 + turn_bit + (w == 1)) % 2)
                if step == 0:
                    with k.loop(k_tiles) as j:
                        n = (2 * m + w) * k_tiles + j if offset else 2 * m * k_tiles + j
                        k.wait_parity(full.at[n % stages], (n // stages) % 2)
                        k.arrive(empty.at[n % stages])
                if order:
                    k.arrive(turn.at[r % 2, 1 - w])


@protocol(expect="violation:BP101", symbolic=("tiles",))
def second_state_not_advanced(k, stages=2, k_tiles=3, tiles=1):
    """The second warpgroup's pipeline state is not advanced: it waits for the first one's
    loads, which it then releases a second time; a wait of it returns after one completion on
    one schedule and is passed by the next on another, where nothing moves any more."""
    _pingpong(k, stages, k_tiles, tiles, offset=False)


@protocol(expect="violation:BP101", symbolic=("tiles",))
def order_barrier_bit_not_offset(k, stages=2, k_tiles=3, tiles=1):
    """Both warpgroups start the order barrier on the same phase: the second does not wait, and
    its early release is an empty slot's completion the producer's acquire may come before or
    after (an early return, or a deadlock past it)."""
    _pingpong(k, stages, k_tiles, tiles, turn_bit=0)


@protocol(expect="violation:BP101", symbolic=("tiles",))
def without_order_barrier(k, stages=2, k_tiles=3, tiles=1):
    _pingpong(k, stages, k_tiles, tiles, order=False)


def test_lift_reads_the_phase_count_under_a_parity():
    n, s = Var("n"), Var("stages")
    assert repr(lift((n // s) % 2)) == repr(n // s)
    # xor with a constant bit is a sum (CUTLASS's `phase ^ 1`)
    assert repr(lift(((n // s) % 2) ^ 1)) == repr(n // s + 1)
    assert repr(lift(n)) == repr(n)


def test_a_producer_of_both_warpgroups_loads_is_strip_mined_per_tile():
    """`2 * tiles * k_tiles` loads with k_tiles fixed: one iteration per tile of the
    consumers, 2 * k_tiles loads each, so the static order can align them."""
    k = _example("pingpong_bare_parity").build()
    mined = strip_mine_loops(k, {"stages": 2, "k_tiles": 3})
    trips = [repr(s.trip) for s in walk(mined.body) if isinstance(s, Loop)]
    assert trips.count("tiles_per_wg") == 2, trips    # the producer's and the consumers'


def test_the_phases_inferred_for_the_pingpong_are_its_pipeline_states():
    """The warpgroups' waits on `full` skip each other's phases: each gets a stated phase, and
    the kernel with them stated passes the explorer's stated-phase rule, so they are the
    phases CUTLASS's PipelineState counts. The waits on `empty` and on the order barrier
    observe every completion of their instance and keep their bare parity."""
    k = _example("pingpong_bare_parity").build()
    stated, notes = infer_phases(k, [dict(stages=2, k_tiles=3, tiles_per_wg=n) for n in (1, 2)])
    assert not notes
    waits = [op for op in walk(stated.body) if isinstance(op, Op) and op.kind == "wait_parity"]
    phases = {op.barrier.alloc.name: op.phase is not None for op in waits}
    assert phases == {"full": True, "turn": False, "empty": False}, phases
    for n in range(4):
        values = dict(stages=2, k_tiles=3, tiles_per_wg=n)
        (system,) = compile_systems(stated, values, races=False)
        kinds = {system.instances[i.target].alloc.name: i.op for p in system.programs
                 for i in p if i.op in (WAIT_PARITY, WAIT_PHASE)}
        assert kinds == ({"empty": WAIT_PARITY, "full": WAIT_PHASE, "turn": WAIT_PARITY}
                         if n else {"empty": WAIT_PARITY}), (n, kinds)
        assert check_kernel(stated, values).verdict == "verified", n


def test_a_ring_whose_waiters_observe_every_phase_is_left_as_it_is():
    """Nothing skips: the Pallas rule of the class systems (which counts identical threads)
    proves it, and nothing is rewritten."""
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    (target,) = resolve(os.path.join(EXAMPLES, "cutlass.py") + "::pipeline_tma_async")
    k = target.build()
    stated, notes = infer_phases(k, [dict(stages=2, consumers=2, steps=3)])
    assert stated is k and not notes


def test_the_cutlass_pingpong_with_bare_parity_is_proved_for_every_tile_count():
    """Within `--timeout 60` (the coverage table's budget): each slot's hand-off pair joined
    with the MMA turn barriers that order the warpgroups (checker/symbolic/number_slots.py,
    classes.py), and the epilogue's turn pair with them. About 15 s of CPU."""
    k = _example("pingpong_bare_parity").build()
    for n in range(4):
        assert check_kernel(k, {"tiles_per_wg": n}).verdict == "verified", n
    v = prove_kernel(k, options=Options(Limits(timeout=60)))
    assert v.verdict == "proved", v.coverage
    assert "tiles_per_wg" in v.coverage
    assert "full[0], empty[0]; ordered by turn[0,0], turn[0,1]" in v.coverage, v.coverage


@pytest.mark.parametrize("proto", [second_state_not_advanced, order_barrier_bit_not_offset,
                                   without_order_barrier])
def test_broken_pingpongs_with_bare_parity_are_refuted(proto):
    k = proto.build()
    v = prove_kernel(k)
    assert v.verdict == "violation" and v.matches(proto.expect), (v.label, v.coverage)
    again = check_kernel(k, {"tiles": v.params["tiles"]})
    assert again.verdict == "violation" and again.codes == v.codes
    assert v.trace is not None


@protocol(expect="verified", symbolic=("steps",))
def odd_completions_with_a_constant_bit(k, steps=2):
    """Correct: the waiter takes every odd completion of `full` with bit 0 in every iteration
    (the producer holds it back until the skipped one is done). Its returns, 1, 3, 5, ..., are
    no single completion of a lap of its bit's expression."""
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    after = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            k.arrive(full)
            k.wait_parity(ack, i % 2)
            k.arrive(full)
            k.arrive(after)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full, 0)
            k.arrive(ack)
            k.wait_parity(after, i % 2)


def test_a_skipping_wait_with_no_lap_formula_is_unknown_naming_the_rule():
    k = odd_completions_with_a_constant_bit.build()
    for n in range(4):
        assert check_kernel(k, {"steps": n}).verdict == "verified", n
    v = prove_kernel(k)
    assert v.verdict == "unknown", (v.verdict, v.coverage)
    assert "wait_parity(full, parity=0)" in v.coverage and "keeps its bare parity" in v.coverage
    assert "BP101" in v.coverage


def test_fa3_with_bare_parity_is_proved_for_every_block_count():
    """FA3's two-warpgroup K/V rings with the parity bits its PipelineStates compile to
    (examples/patterns/flash_attention.py): both warpgroups wait on every phase, the order
    barrier's bits skip wg0's first turn. Checked by the explorer on a grid, then proved for
    every block count within `--timeout 60`. About 15 s of CPU."""
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    (target,) = resolve(os.path.join(EXAMPLES, "patterns", "flash_attention.py")
                        + "::fa3_forward_pingpong_bare_parity")
    k = target.build()
    for stages in (1, 2, 3):
        for blocks in (1, 2, 4):
            values = {"stages": stages, "blocks": blocks}
            assert check_kernel(k, values).verdict == "verified", values
    v = prove_kernel(k, options=Options(Limits(timeout=60)))
    assert v.verdict == "proved", v.coverage
    assert "blocks" in v.coverage
