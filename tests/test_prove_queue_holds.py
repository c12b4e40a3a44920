"""A queued tcgen05 MMA's cells held until the arrivals issued right after it land
(checker/symbolic/queue_holds.py): the S/P hand-off of a Blackwell attention block loop.

The PV MMA reads P from the columns the QK MMA wrote S into and commits to three barriers in
a row: the V slot's `v_empty` first, then `s_free` (the S/P columns may be overwritten), then
`o_ready`. The softmax writes the next P once the next QK MMA, issued after `s_free`, is done.
Held on `v_empty` alone, P's read looked live to the race proof after `s_free` had landed (the
counters keep no order between the commits), a race the explorer never finds; held until all
three land, the proof goes through. The twin that writes P before waiting for the QK MMA is
refuted by the explorer, its race proof failing first."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol


def _sp_handoff(k, steps, p_early=False):
    """p0 loads K and V, p1 issues the MMAs, p2 is the softmax, p3 the correction."""
    k.threads(4, name="p")
    k.assume(steps >= 1)
    tc = dict(num_arrivals=1, orders_tensor_core=True)
    k_ready, k_empty = k.Barrier(num_arrivals=1), k.Barrier(**tc)
    v_ready, v_empty = k.Barrier(num_arrivals=1), k.Barrier(**tc)
    s_ready, s_free, p_ready = k.Barrier(**tc), k.Barrier(**tc), k.Barrier(num_arrivals=1)
    o_ready, o_fixed = k.Barrier(**tc), k.Barrier(num_arrivals=1)
    kb, vb = k.SMEM(), k.SMEM()
    s, o = k.TMEM(), k.TMEM()
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i >= 1):
                k.barrier_wait(k_empty)
            k.copy_gmem_to_smem(k_ready, bytes=1024, dst=kb)
            with k.when(i >= 1):
                k.barrier_wait(v_empty)
            k.copy_gmem_to_smem(v_ready, bytes=1024, dst=vb)
        k.barrier_wait(k_empty)
        k.barrier_wait(v_empty)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            k.barrier_wait(k_ready)
            with k.when(i >= 1):
                k.barrier_wait(s_free)                   # the last PV MMA has read P
            k.tcgen05_mma(a=kb, acc=s)                   # S = Q K^T
            k.tcgen05_commit_arrive(s_ready)
            k.tcgen05_commit_arrive(k_empty)
            k.barrier_wait(v_ready)
            k.barrier_wait(p_ready)
            with k.when(i >= 1):
                k.barrier_wait(o_fixed)
            k.tcgen05_mma(a=s, b=vb, acc=o)              # O += P V
            k.tcgen05_commit_arrive(v_empty)             # V's slot first,
            k.tcgen05_commit_arrive(s_free)              # then the S/P columns,
            k.tcgen05_commit_arrive(o_ready)             # then O
        k.barrier_wait(s_free)
    with k.when(k.thread == 2):
        with k.loop(steps):
            if p_early:
                k.write(s)                               # P before the QK MMA is known done
            k.barrier_wait(s_ready)
            k.read(s)
            if not p_early:
                k.write(s)                               # P over S
            k.barrier_arrive(p_ready)
    with k.when(k.thread == 3):
        with k.loop(steps) as j:
            k.barrier_wait(o_ready)
            with k.when(j + 1 < steps):
                k.barrier_arrive(o_fixed)


@protocol(symbolic=("steps",))
def sp_handoff(k, steps=2):
    _sp_handoff(k, steps)


@protocol(symbolic=("steps",))
def sp_handoff_p_early(k, steps=2):
    _sp_handoff(k, steps, p_early=True)


def _prove(kernel):
    # no short search first: the race proof itself meets the racy twin
    return prove_kernel(kernel, {}, Options(), None,
                        SimpleNamespace(symbolic=["steps"], search_first=False))


@pytest.mark.slow
def test_sp_handoff_is_proved_race_free_and_the_explorer_agrees():
    k = sp_handoff.build()
    v = _prove(k)
    assert v.verdict == "proved", (v.label, v.coverage, v.notes)
    assert "race-free (BP200/BP201)" in v.coverage
    for steps in range(1, 6):
        got = check_kernel(k, {"steps": steps}, Options(Limits(max_states=200_000)))
        assert got.verdict == "verified", (steps, got.label)


@pytest.mark.slow
def test_p_written_before_the_qk_mma_is_waited_is_refuted():
    k = sp_handoff_p_early.build()
    v = _prove(k)
    assert v.label == "violation:BP201", (v.label, v.coverage, v.notes)
    assert v.params["steps"] == 1
    assert any("why races are not proved" in n for n in v.notes), v.notes
    assert check_kernel(k, {"steps": 1}).label == "violation:BP201"
