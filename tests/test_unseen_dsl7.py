"""Protocols no one on the project wrote (tests/data/unseen_dsl7.py): barrier patterns of CUTLASS's
sm90/sm100 pipelines and the PTX mbarrier rules, each correct one beside a buggy twin, written
from their public descriptions. `check` gives each the verdict decided from the semantics;
`prove` proves every correct one for all values of its parameters (each proof then checked by
the explorer on a grid of small values) and refutes every buggy one at its smallest breaking
values, where the explorer finds the same diagnostic.

Where `prove`'s first finding differs from `check`'s, it is the same fault at smaller values:
`empty_counts_one_consumer_short` at stages=1, consumers=2, steps=1 (BP101: with one stage
the producer's refill completes `empty` twice before a consumer's wait), `consumer_waits_parity_of_step`
at stages=2, steps=2 (BP101 in the producer's drain), `cluster_empty_counts_own_block` at
steps=1 (BP146: the peer's release reaches a block whose consumer's own release already let it
exit); `check` at the declared values finds BP200 / BP200 / BP121 first.
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.loader import import_file, targets_in_module

from conftest import ROOT

FIELD = os.path.join(ROOT, "tests", "data", "unseen_dsl7.py")
TARGETS = {t.name: t for t in targets_in_module(FIELD, import_file(FIELD))}

CHECK = {
    "empty_counts_every_consumer": "verified",
    "empty_counts_one_consumer_short": "violation:BP200",
    "acc_ring_released_after_load": "verified",
    # a tensor-memory race: the next tile's MMA writes the accumulator the tcgen05.ld reads
    "acc_ring_released_with_load_in_flight": "violation:BP201",
    "store_ring_bounds_stores_in_flight": "verified",
    "store_ring_allows_one_store_too_many": "violation:BP200",
    "cluster_empty_counts_both_blocks": "verified",
    # the peer's early release lets the producer re-arm `full` while its phase is still open
    "cluster_empty_counts_own_block": "violation:BP121",
    "cluster_ring_without_producer_tail": "violation:BP146",
    "consumer_waits_parity_of_lap": "verified",
    "consumer_waits_parity_of_step": "violation:BP200",
    "split_barrier_every_step": "verified",
    "split_barrier_arrival_skipped_on_last_step": "violation:BP100",
}

# prove's verdict and, for a refutation, the smallest breaking values it names
PROVE = {
    "empty_counts_every_consumer": ("proved", None),
    "empty_counts_one_consumer_short": ("violation:BP101",
                                        {"stages": 1, "consumers": 2, "steps": 1}),
    "acc_ring_released_after_load": ("proved", None),
    "acc_ring_released_with_load_in_flight": ("violation:BP201", {"tiles": 3}),
    "store_ring_bounds_stores_in_flight": ("proved", None),
    "store_ring_allows_one_store_too_many": ("violation:BP200", {"stages": 1, "steps": 2}),
    "cluster_empty_counts_both_blocks": ("proved", None),
    "cluster_empty_counts_own_block": ("violation:BP146", {"steps": 1}),
    "cluster_ring_without_producer_tail": ("violation:BP146", {"steps": 1}),
    "consumer_waits_parity_of_lap": ("proved", None),
    "consumer_waits_parity_of_step": ("violation:BP101", {"stages": 2, "steps": 2}),
    "split_barrier_every_step": ("proved", None),
    "split_barrier_arrival_skipped_on_last_step": ("violation:BP100", {"groups": 1, "steps": 1}),
}
# the grid each proof is checked on by the explorer
GRID = {
    "empty_counts_every_consumer": {"stages": (1, 2, 3), "consumers": (1, 2), "steps": (0, 1, 3, 5)},
    "acc_ring_released_after_load": {"tiles": range(6)},
    "store_ring_bounds_stores_in_flight": {"stages": (1, 2, 3), "steps": range(6)},
    "cluster_empty_counts_both_blocks": {"steps": range(5)},
    "consumer_waits_parity_of_lap": {"stages": (1, 2, 3), "steps": range(6)},
    "split_barrier_every_step": {"groups": (1, 2, 3), "steps": range(4)},
}
SLOW = {"empty_counts_every_consumer"}     # about a minute of proof on one core


def test_the_tables_cover_every_protocol_and_agree_with_its_decorator():
    assert set(CHECK) == set(TARGETS) == set(PROVE)
    assert all(TARGETS[n].expect == v for n, v in CHECK.items())
    assert {n for n, (v, _) in PROVE.items() if v == "proved"} == set(GRID)
    assert all(CHECK[n] == "verified" for n in GRID)


@pytest.mark.parametrize("name", sorted(CHECK))
def test_check_gives_the_verdict_decided_from_the_semantics(name):
    got = check_kernel(TARGETS[name].build(), source=name)
    assert got.label == CHECK[name], (got.label, got.diagnostics)
    if got.verdict == "violation":
        assert got.trace is not None


@functools.lru_cache(maxsize=None)
def _prove(name: str):
    return prove_kernel(TARGETS[name].build(), {}, Options(Limits(timeout=60)), name,
                        SimpleNamespace(symbolic=[]))


def _grid(axes):
    points = [{}]
    for axis, values in axes.items():
        points = [dict(p, **{axis: v}) for p in points for v in values]
    return points


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(PROVE)])
def test_prove_proves_the_correct_and_refutes_the_buggy_without_contradicting_the_explorer(name):
    verdict, values = PROVE[name]
    got = _prove(name)
    kernel = TARGETS[name].build()
    if verdict == "proved":
        assert got.verdict == "proved", got.reason
        for point in _grid(GRID[name]):
            assert check_kernel(kernel, point).verdict == "verified", point
        return
    assert got.label == verdict, (got.label, got.notes)
    assert {n: got.params[n] for n in values} == values
    assert check_kernel(kernel, values).label == verdict
