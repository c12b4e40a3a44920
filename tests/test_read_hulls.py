"""Reads told apart by the thread only through their regions (checker/symbolic/read_hulls.py):
widened to their slots for the race proof's ring partition, so that two consumers reading their
own rows of a ring slot are one counted role. The proof must agree with the explorer on a grid,
and a consumer that releases its slot before reading it must still be refuted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from barrierproof import minimum
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.checker.symbolic.lowering import lowered
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.read_hulls import widen_thread_reads
from barrierproof.model.dsl import protocol

ROWS = 8


def _ring(k, stages, steps, release_first=False, write_rows=False):
    """wg0, wg1 consume a TMA ring, each its own half of the slot's rows; wg2 fills it."""
    k.threads(3, name="wg")
    k.assume(stages >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=2, num_barriers=stages)
    tiles = k.SMEM(slots=(stages, ROWS))
    half = ROWS // 2
    with k.when(k.thread == 2):
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096, dst=tiles.at[i % stages])
        drain = minimum(steps, stages)
        with k.loop(drain) as j:
            k.barrier_wait(empty.at[(steps - drain + j) % stages])
    with k.otherwise():
        with k.loop(steps) as i:
            mine = tiles.at[i % stages, k.ds(k.thread * half, half)]
            k.barrier_wait(full.at[i % stages])
            if release_first:
                k.barrier_arrive(empty.at[i % stages])
            (k.write if write_rows else k.read)(mine)
            if not release_first:
                k.barrier_arrive(empty.at[i % stages])


@protocol(symbolic=("steps",))
def own_rows(k, stages=2, steps=3):
    _ring(k, stages, steps)


@protocol(symbolic=("steps",))
def own_rows_released_first(k, stages=2, steps=3):
    _ring(k, stages, steps, release_first=True)


@protocol(symbolic=("steps",))
def own_rows_written(k, stages=2, steps=3):
    _ring(k, stages, steps, write_rows=True)


GRID = [dict(steps=n) for n in range(0, 9)]


def prove(k):
    return prove_kernel(k, {}, Options(limits=Limits(timeout=120)), None,
                        SimpleNamespace(symbolic=["steps"], search_first=False))


def test_thread_regions_of_reads_are_widened_writes_kept():
    reads = widen_thread_reads(own_rows.build())
    assert all(not r.region for op in reads.ops() for r in op.reads)
    writes = own_rows_written.build()
    assert widen_thread_reads(writes) is writes      # writes stay apart by their regions
    assert any(w.region for op in writes.ops() for w in op.writes)


def test_widened_consumers_are_one_counted_role():
    fixed = {"stages": 2}
    for widen, want in ((False, 3), (True, 2)):
        k = own_rows.build()
        k = widen_thread_reads(k) if widen else k
        frag = Fragment(lowered(k, ["steps"], fixed)[0], ["steps"], fixed, concrete_rings=True)
        assert len(frag.build_roles()) == want, [r.name for r in frag.roles]


def test_own_rows_proved_and_the_explorer_agrees():
    k = own_rows.build()
    v = prove(k)
    assert v.verdict == "proved" and "race-free" in v.coverage, (v.label, v.coverage, v.notes)
    for values in GRID:
        got = check_kernel(k, values, Options(Limits(max_states=200_000)))
        assert got.verdict == "verified", (values, got.label)


@pytest.mark.parametrize("racy", [own_rows_released_first])
def test_a_consumer_releasing_before_it_reads_is_refuted(racy):
    k = racy.build()
    v = prove(k)
    assert v.label == "violation:BP200", (v.label, v.coverage, v.notes)
    assert check_kernel(k, v.params).label == "violation:BP200"


def test_consumers_writing_their_own_rows_agree_with_the_explorer():
    k = own_rows_written.build()
    v = prove(k)
    assert v.verdict != "violation", (v.label, v.params)
    if v.verdict == "proved":
        for values in GRID:
            assert check_kernel(k, values, Options(Limits(max_states=200_000))).verdict \
                == "verified", values
