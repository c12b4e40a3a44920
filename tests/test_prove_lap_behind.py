"""Phases a lap behind their slot, and C division read as floor division.

Gluon kernels (Triton's tutorials) wait for the release of an earlier iteration's slot with the
phase of that iteration, `wait(empty[i % S], ((i - S) // S) & 1)`: the phase's position is not
the slot's, but the two differ by a constant, so at the lattice point i = s + k*S the phase is
k plus the carry of s + d (checker/symbolic/program.py). Triton divides like C; a quotient or
remainder of a dividend the op's predicate keeps non-negative (Z3 shows it) is the floor form
(model/gluon/arith.py). Each proof is checked against the explorer at small values."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _ring(k, steps, phase_of):
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=3)
    empty = k.Barrier(num_arrivals=1, num_barriers=3)
    with k.when(k.thread == 1):                    # the TMA producer
        with k.loop(steps) as i:
            with k.when(i >= 3):                   # the release of iteration i - 3
                k.wait_parity(empty.at[i % 3], phase_of(i))
            k.arrive_expect_tx(full.at[i % 3], 8192)
            k.tma_load(full.at[i % 3], 8192)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % 3], (i // 3) % 2)
            k.arrive(empty.at[i % 3])


@protocol(symbolic=("steps",))
def phase_a_lap_behind(k, steps=4):
    _ring(k, steps, lambda i: ((i - 3) // 3) % 2)


@protocol(symbolic=("steps",))
def phase_two_laps_behind(k, steps=4):
    _ring(k, steps, lambda i: ((i - 6) // 3) % 2)


def _explored(kernel, steps):
    return check_kernel(kernel, {"steps": steps}, Options(Limits(max_states=200_000)))


def test_a_phase_a_lap_behind_its_slot_is_proved_for_every_step_count():
    """About 12 s."""
    kernel = phase_a_lap_behind.build()
    v = prove_kernel(kernel, options=Options(Limits(timeout=120)))
    assert v.verdict == "proved", (v.label, v.coverage)
    for steps in range(0, 8):
        assert _explored(kernel, steps).verdict == "verified", steps


def test_a_phase_two_laps_behind_is_refuted_where_the_explorer_fails():
    kernel = phase_two_laps_behind.build()
    v = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert v.verdict == "violation", (v.label, v.notes)
    at = next(n for n in v.notes if "smallest breaking values found" in n)
    steps = int(at.split("steps=")[1].split()[0].rstrip(",;"))
    for smaller in range(0, steps):
        assert _explored(kernel, smaller).verdict == "verified", smaller
    explored = _explored(kernel, steps)
    assert explored.verdict == "violation" and explored.codes[0] == v.codes[0], explored.label


def _pipelined(name):
    pytest.importorskip("triton")
    from barrierproof.loader import resolve
    (target,) = resolve(os.path.join(EXAMPLES, "gluon", "tcgen05_pipeline.py") + "::" + name)
    return target.build()


def test_c_division_of_a_dividend_its_predicate_keeps_non_negative_is_floor_division():
    """`last = k_tiles - 1` divided under `pred=k_tiles > 0`, `(k - 1) // STAGES` under
    `pred=k > 0`: floor forms (no sign cases), since Z3 shows both dividends >= 0 there."""
    from barrierproof.model.ir import Op, iter_ops
    kernel = _pipelined("pipelined")
    mma_waits = [op for op in iter_ops(kernel.body) if isinstance(op, Op)
                 and op.kind == "wait_parity" and op.barrier.alloc.name == "mma_bars"]
    shown = [(repr(op.barrier.index[0]), repr(op.parity)) for op in mma_waits]
    assert shown == [("((k + 2) % 3)", "(((k - 1) // 3) % 2)"),
                     ("((((K + 63) // 64) - 1) % 3)", "(((((K + 63) // 64) - 1) // 3) % 2)")]
    assert not any("max(" in i or "max(" in p for i, p in shown)


def test_a_race_under_a_sound_barrier_protocol_is_found_before_the_barrier_proof():
    """The reload before the MMA completed keeps every barrier rule: the short search before
    the proofs finds the race at the smallest K, as the explorer does there."""
    kernel = _pipelined("reload_before_mma_done")
    v = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert v.verdict == "violation" and v.codes[0] == "BP200", v.label
    at = next(n for n in v.notes if "smallest breaking values found" in n)
    assert "before any proof" in at
    k_bad = int(at.split("K=")[1].split()[0].rstrip(",;"))
    assert check_kernel(kernel, {"K": k_bad}).verdict == "violation"
    assert check_kernel(kernel, {"K": k_bad - 64}).verdict == "verified"


def _guarded_mma(k, T, commit_from):
    """A pipeline's steady state under `i >= 2`: the MMA and the commit that covers it."""
    k.threads(1, name="wg")
    done = k.Barrier(num_arrivals=1, num_barriers=3, orders_tensor_core=True)
    with k.loop(T + 2) as i:
        with k.when(i >= 2):
            k.tcgen05_mma()
        with k.when(i >= commit_from):
            k.tcgen05_commit_arrive(done.at[(i - 2) % 3])
    with k.when(T > 0):
        k.wait_parity(done.at[(T - 1) % 3], ((T - 1) // 3) % 2)


@protocol(symbolic=("T",))
def mma_and_commit_under_one_guard(k, T=2):
    _guarded_mma(k, T, 2)


@protocol(symbolic=("T",))
def mma_whose_first_commit_is_skipped(k, T=2):
    _guarded_mma(k, T, 3)


def test_an_mma_is_covered_by_a_commit_under_no_other_condition():
    from barrierproof.checker.symbolic.fragment import Fragment
    from barrierproof.checker.symbolic.terms import Unsupported
    Fragment(mma_and_commit_under_one_guard.build(), ["T"], {}).build_roles()
    with pytest.raises(Unsupported, match="not followed by"):
        Fragment(mma_whose_first_commit_is_skipped.build(), ["T"], {}).build_roles()
