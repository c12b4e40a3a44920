"""Race proofs on nested tiles x K loops and on a WGMMA of a peeled first stage
(checker/symbolic/races_nested.py, retired.py), each against the explorer.

Persistent kernels walk their tiles in an outer loop around the K steps: the race proof takes
them through the barrier proof's rewrites (the nest as one loop over the running position, or
the two per-tile projections, each buffer judged in the one keeping every access to it). A
pipeline's peeled first stage keeps its WGMMA in flight into the ring loop's first iteration.
Each proof is checked by the explorer on a grid of small values; each racy twin is refuted at
its smallest values and the race proof alone does not prove it."""

from __future__ import annotations

import functools
import itertools
from types import SimpleNamespace

import pytest

from barrierproof import minimum
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.budget import Budget
from barrierproof.checker.symbolic.prove import points, prove_kernel, prove_races
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import evaluate

TILE = 16384


def ring_reads(k, stages, tiles, ksteps, *, release_first=False):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    tiles_buf = k.SMEM(slots=stages)
    with k.when(k.thread == 1):
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                with k.when(i >= stages):
                    k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)
                k.arrive_expect_tx(full.at[i % stages], TILE)
                k.tma_load(full.at[i % stages], TILE, dst=tiles_buf.at[i % stages])
        steps = tiles * ksteps
        last = minimum(steps, stages)
        with k.loop(last) as j:
            v = steps - last + j
            k.wait_parity(empty.at[v % stages], (v // stages) % 2)
    with k.otherwise():
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                k.wait_parity(full.at[i % stages], (i // stages) % 2)
                if release_first:
                    k.arrive(empty.at[i % stages])
                k.read(tiles_buf.at[i % stages])
                if not release_first:
                    k.arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def nested_ring_reads(k, stages=2, tiles=2, ksteps=2):
    k.assume(tiles >= 1, ksteps >= 1)
    ring_reads(k, stages, tiles, ksteps)


@protocol(expect="violation:BP200", symbolic=("tiles", "ksteps"))
def nested_ring_released_before_read(k, stages=2, tiles=2, ksteps=2):
    k.assume(tiles >= 1, ksteps >= 1)
    ring_reads(k, stages, tiles, ksteps, release_first=True)


def acc_pipeline(k, tiles, ksteps, *, early_release=False, stages=2):
    """Thread 2 loads a ring, thread 1 reads each slot and accumulates into one of two
    accumulators per tile (acc.at[t % 2]), handing it to thread 0 per tile."""
    k.threads(3, name="th")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    acc_full = k.Barrier(num_arrivals=1, num_barriers=2)
    acc_empty = k.Barrier(num_arrivals=1, num_barriers=2)
    ring = k.SMEM(slots=stages)
    acc = k.SMEM(slots=2)
    with k.when(k.thread == 2):
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                with k.when(i >= stages):
                    k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)
                k.arrive_expect_tx(full.at[i % stages], TILE)
                k.tma_load(full.at[i % stages], TILE, dst=ring.at[i % stages])
        steps = tiles * ksteps
        last = minimum(steps, stages)
        with k.loop(last) as j:
            v = steps - last + j
            k.wait_parity(empty.at[v % stages], (v // stages) % 2)
    with k.when(k.thread == 1):
        with k.loop(tiles) as t:
            with k.when(t >= 2):
                k.wait_parity(acc_empty.at[t % 2], ((t // 2) % 2) ^ 1)
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                k.wait_parity(full.at[i % stages], (i // stages) % 2)
                k.read(ring.at[i % stages])
                k.write(acc.at[t % 2])
                k.arrive(empty.at[i % stages])
            k.arrive(acc_full.at[t % 2])
        lastt = minimum(tiles, 2)
        with k.loop(lastt) as j:
            v = tiles - lastt + j
            k.wait_parity(acc_empty.at[v % 2], (v // 2) % 2)
    with k.when(k.thread == 0):
        with k.loop(tiles) as t:
            k.wait_parity(acc_full.at[t % 2], (t // 2) % 2)
            if early_release:
                k.arrive(acc_empty.at[t % 2])
            k.read(acc.at[t % 2])
            if not early_release:
                k.arrive(acc_empty.at[t % 2])


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def per_tile_accumulator(k, tiles=3, ksteps=2):
    k.assume(tiles >= 1, ksteps >= 1)
    acc_pipeline(k, tiles, ksteps)


@protocol(expect="violation:BP200", symbolic=("tiles", "ksteps"))
def per_tile_accumulator_released_before_read(k, tiles=3, ksteps=2):
    k.assume(tiles >= 1, ksteps >= 1)
    acc_pipeline(k, tiles, ksteps, early_release=True)


def peeled_wgmma(k, stages, steps, release_current=False):
    k.threads(2, name="wg")
    k.assume(stages >= 2, steps >= stages)
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
        k.barrier_wait(full.at[0])
        k.wgmma(a=a.at[0])
        k.wgmma_wait(1)
        if release_current:
            k.barrier_arrive(empty.at[0])
        with k.loop(steps - 1) as i:
            k.barrier_wait(full.at[(i + 1) % stages])
            k.wgmma(a=a.at[(i + 1) % stages])
            k.wgmma_wait(1)
            k.barrier_arrive(empty.at[(i + (1 if release_current else 0)) % stages])
        k.wgmma_wait(0)
        if not release_current:
            k.barrier_arrive(empty.at[(steps - 1) % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def peeled_wgmma_release_previous(k, stages=2, steps=3):
    peeled_wgmma(k, stages, steps)


@protocol(expect="violation:BP200", symbolic=("stages", "steps"))
def peeled_wgmma_release_current(k, stages=2, steps=3):
    peeled_wgmma(k, stages, steps, release_current=True)


def _grid(**ranges) -> list[dict]:
    return [dict(zip(ranges, c)) for c in itertools.product(*ranges.values())]


RACE_FREE = {
    nested_ring_reads: _grid(tiles=[1, 2, 3], ksteps=[1, 2, 3]),
    per_tile_accumulator: _grid(tiles=[1, 2, 3], ksteps=[1, 2]),
    peeled_wgmma_release_previous: _grid(stages=[2, 3], steps=[2, 3, 4]),
}
RACY = {
    nested_ring_released_before_read: nested_ring_reads,
    per_tile_accumulator_released_before_read: per_tile_accumulator,
    peeled_wgmma_release_current: peeled_wgmma_release_previous,
}


def _symbolic(k) -> list[str]:
    return [p.name for p in k.params.values() if p.symbolic]


@functools.lru_cache(maxsize=None)
def _proved(proto):
    return _prove(proto.build())


def _prove(k):
    # no short search first: the race proof itself meets the racy twins and must fail on them
    return prove_kernel(k, {}, Options(), None,
                        SimpleNamespace(symbolic=_symbolic(k), search_first=False))


def _holds(k, values) -> bool:
    full = k.param_values(values)
    return all(evaluate(a, full) for a in k.assumptions)


@pytest.mark.parametrize("proto", list(RACE_FREE), ids=lambda p: p.name)
def test_race_freedom_proved_and_the_explorer_agrees(proto):
    k = proto.build()
    v = _proved(proto)
    assert v.verdict == "proved", (v.label, v.coverage)
    assert "race-free (BP200/BP201)" in v.coverage
    checked = 0
    for values in RACE_FREE[proto]:
        if _holds(k, values):
            got = check_kernel(k, values, Options(Limits(max_states=200_000)))
            assert got.verdict == "verified", (values, got.label)
            checked += 1
    assert checked >= 5


def test_nested_proofs_name_their_rewrites():
    notes = " ".join(_proved(per_tile_accumulator).notes)
    assert "races on acc judged in the projection on the per-tile barriers" in notes
    assert "races on ring judged in the projection on the K loop's barriers" in notes


@pytest.mark.parametrize("proto", list(RACY), ids=lambda p: p.name)
def test_racy_twin_refuted_at_its_smallest_values(proto):
    k = proto.build()
    sym = _symbolic(k)
    fixed = {n: d for n, d in k.param_values({n: 0 for n in sym}).items() if n not in sym}
    alone = prove_races(k, sym, fixed, Budget(60))
    assert alone.status != "proved", alone.reason
    v = _prove(k)
    assert v.label == "violation:BP200", (v.label, v.coverage)
    smallest = {n: v.params[n] for n in sym}
    order = [{n: p[n] for n in sym} for p in points(k, sym, fixed, 8)]
    for values in order[:order.index(smallest)]:     # every point before it is race-free
        assert check_kernel(k, values).verdict == "verified", values
    assert check_kernel(k, v.params).label == "violation:BP200"
