"""Race proofs for asynchronous accesses that stay live past other instructions of their thread
(CUTLASS's `wgmma_wait(1)`, which keeps one WGMMA in flight and releases the previous slot):
checker/symbolic/races.py proves, per ring slot, that the issue is retired before its thread's
next event on that slot, so the ACCESS at the issue covers the whole live interval. Each proof is
checked against the explorer on a grid; the racy neighbours are refuted at their smallest
values."""

from __future__ import annotations

import itertools
import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import points, prove_kernel
from barrierproof.loader import resolve
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import evaluate

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def example(ref):
    path, _, name = ref.partition("::")
    return resolve(os.path.join(EXAMPLES, path) + "::" + name)[0].build()


def _consumer_keeps_one_wgmma(k, stages, steps, *, release="previous"):
    """A TMA producer and a consumer whose WGMMA reads slot i % stages and stays in flight
    until the next iteration's wgmma_wait(1)."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    a = k.SMEM(slots=stages)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096, dst=a.at[i % stages])
        with k.loop(stages) as j:
            k.barrier_wait(empty.at[(steps - stages + j) % stages])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            k.wgmma(a=a.at[i % stages])
            k.wgmma_wait(1)
            if release == "previous":
                with k.when(i >= 1):
                    k.barrier_arrive(empty.at[(i - 1) % stages])
            else:
                k.barrier_arrive(empty.at[i % stages])
        k.wgmma_wait(0)
        if release == "previous":
            k.barrier_arrive(empty.at[(steps - 1) % stages])


@protocol(expect="violation:BP100", symbolic=("stages", "steps"))
def release_previous_single_stage(k, stages=1, steps=2):
    """With one stage the previous slot is the current one: the consumer waits for the refill
    of the slot it has not released yet (why the example assumes stages >= 2)."""
    k.assume(stages >= 1, steps >= stages)
    _consumer_keeps_one_wgmma(k, stages, steps)


@protocol(expect="violation:BP200", symbolic=("stages", "steps"))
def release_current_slot(k, stages=2, steps=3):
    """wgmma_wait(1) leaves this iteration's WGMMA in flight, and the slot it reads is released."""
    k.assume(stages >= 2, steps >= stages)
    _consumer_keeps_one_wgmma(k, stages, steps, release="current")


def test_keeping_one_wgmma_in_flight_is_race_free_for_every_ring():
    k = example("races.py::wgmma_release_previous")
    v = prove_kernel(k)
    assert v.verdict == "proved", (v.label, v.coverage)
    assert "race-free (BP200/BP201)" in v.coverage
    checked = 0
    for stages, steps in itertools.product((2, 3), range(2, 7)):
        values = dict(stages=stages, steps=steps)
        if not all(evaluate(a, k.param_values(values)) for a in k.assumptions):
            continue
        got = check_kernel(k, values, Options(Limits(max_states=200_000)))
        assert got.verdict == "verified", (values, got.label)
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("proto,code,smallest", [
    (release_previous_single_stage, "BP100", dict(stages=1, steps=2)),
    (release_current_slot, "BP200", dict(stages=2, steps=3)),
])
def test_broken_neighbours_are_refuted_at_their_smallest_values(proto, code, smallest):
    k = proto.build()
    v = prove_kernel(k)
    assert v.verdict == "violation" and v.codes[0] == code, (v.label, v.coverage)
    assert {n: v.params[n] for n in smallest} == smallest, v.params
    assert check_kernel(k, smallest).verdict == "violation"
    sym = list(smallest)
    for values in points(k, sym, {}, 4):
        if (sum(values.values()), tuple(values.values())) >= \
                (sum(smallest.values()), tuple(smallest.values())):
            break
        assert check_kernel(k, values).verdict == "verified", values


# -- cp.async copies awaited by their own thread (checker/symbolic/own_copies.py) -----------------

def _prefetch(k, steps, *, keep=1, reader=False, distance=1, slots=2):
    k.threads(2 if reader else 1, name="wg")
    k.assume(steps >= 1)
    tile = k.SMEM(slots=slots)
    with k.when(k.thread == 0):
        for d in range(distance):
            k.cp_async(tile.at[d])
        with k.loop(steps, name="i") as i:
            with k.when(i + distance < steps):
                k.cp_async(tile.at[(i + distance) % slots])
                k.wait_gmem_to_smem(keep)
            with k.otherwise():
                k.wait_gmem_to_smem(0)
            k.read(tile.at[i % slots])
    if reader:
        with k.otherwise():
            k.read(tile.at[0])


@protocol(expect="verified", symbolic=("steps",))
def prefetch_two_ahead(k, steps=4):
    """Three slots, two copies in flight: wait_gmem_to_smem(2) after each new copy retires the
    one two iterations old, the tile about to be read."""
    _prefetch(k, steps, keep=2, distance=2, slots=3)


@protocol(expect="violation:BP200", symbolic=("steps",))
def prefetch_two_ahead_in_two_slots(k, steps=4):
    """Two copies ahead in two slots: the second copy lands on the slot being read."""
    _prefetch(k, steps, keep=2, distance=2, slots=2)


@protocol(expect="violation:BP200", symbolic=("steps",))
def prefetched_tile_read_by_another_thread(k, steps=3):
    """Another thread reads a slot with no synchronization at all."""
    _prefetch(k, steps, reader=True)


def test_copies_awaited_by_their_own_thread_are_race_free_for_every_trip_count():
    for k in (example("patterns/cp_async.py::double_buffered_cp_async"),
              prefetch_two_ahead.build()):
        v = prove_kernel(k)
        assert v.verdict == "proved" and "race-free" in v.coverage, (v.label, v.coverage)
        for steps in range(1, 9):
            assert check_kernel(k, {"steps": steps}).verdict == "verified", steps


@pytest.mark.parametrize("k,smallest", [
    (example("patterns/cp_async.py::wait_leaves_two_copies_in_flight"), 2),
    (prefetch_two_ahead_in_two_slots.build(), 3),
    (prefetched_tile_read_by_another_thread.build(), 1),
])
def test_copies_still_in_flight_are_refuted_at_the_smallest_trip_count(k, smallest):
    # the race proof runs first (no short search): it must fail on them and say why
    v = prove_kernel(k, settings={"search_first": False})
    assert v.label == "violation:BP200" and v.params["steps"] == smallest, (v.label, v.coverage)
    assert any("why races are not proved" in n for n in v.notes), v.notes
    for steps in range(1, smallest):
        assert check_kernel(k, {"steps": steps}).verdict == "verified", steps
