"""The explorer with checker/engines/por.py's chooser searches exactly the graph it searched with
the chooser before its per-state work was cut down (tests/por_reference.py): the same verdict,
distinct states, transitions, depth, violation and counterexample, breadth and depth first, on
every example, on a grid of the benchmark family (bench/family.py) and on the CUTLASS pipeline
and multicast pair at the sizes bench/regenerate.py records (about 10 CPU s in all).
tests/test_por_tables.py compares the two choosers state by state."""

import os
import sys

import pytest

from barrierproof.checker.engines import explore as explorer
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.checker.engines.por import PersistentSets
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems

from por_reference import ReferenceSets
from test_examples import TARGETS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from family import cluster, cluster_buffers, pipeline, pipeline_buffers  # noqa: E402

CAP = Limits(max_states=20_000, timeout=None)


def _reference(system, classes=None, keep_overruns=False):
    # the oracle is the chooser without the arrival count (por_overrun.py), which these
    # searches (no rule ignored) do not ask for
    assert not keep_overruns
    if system.n_agents + len(system.slots) + len(system.queue_agents) <= 1:
        return None
    return ReferenceSets(PersistentSets(system, classes)).chooser()


def _search(system, **kw):
    # the reduced search alone: a confirmation searches another graph (no persistent sets, or
    # sets that count arrivals, which the oracle does not state)
    r = explore(system, CAP, confirm=False, **kw)
    return (r.status, r.states, r.transitions, r.depth, r.partial_order_off,
            r.violation.code if r.violation else None, r.actions, r.witness)


def _same(system_of, monkeypatch, orders=("bfs", "dfs")) -> int:
    """Both choosers, breadth and depth first, on fresh copies of one system."""
    for order in orders:
        now = _search(system_of(), order=order)
        with monkeypatch.context() as m:
            m.setattr(explorer, "persistent_sets", _reference)
            before = _search(system_of(), order=order)
        assert now == before, (order, now[:6], before[:6])
    return now[1]


def _systems(target):
    try:
        return compile_systems(target.build())
    except ModelError:      # input errors: covered by test_examples
        return []


def test_every_example_searches_the_same_graph(monkeypatch):
    searched = 0
    for target in TARGETS:
        for n, _ in enumerate(_systems(target)):
            searched += _same(lambda t=target, n=n: _systems(t)[n], monkeypatch)
    assert searched > 10_000


GRID = [(p, dict(stages=s, consumers=c, steps=n)) for p in (pipeline, pipeline_buffers)
        for s, c, n in [(2, 1, 4), (2, 3, 4), (3, 2, 6), (2, 6, 2)]] + \
       [(p, dict(blocks=b, consumers=c, steps=n)) for p in (cluster, cluster_buffers)
        for b, c, n in [(2, 1, 4), (2, 2, 2), (3, 1, 2)]]


@pytest.mark.parametrize("proto, params", GRID,
                         ids=[f"{p.name}{tuple(k.values())}" for p, k in GRID])
def test_the_family_searches_the_same_graph(proto, params, monkeypatch):
    assert _same(lambda: System(proto.build(), params), monkeypatch) > 0


@pytest.mark.parametrize("name, params", [
    ("pipeline_tma_async", dict(stages=3, consumers=5, steps=8)),
    ("persistent_multicast_pair", dict(tiles=3, steps=3))])
def test_recorded_rows_search_the_same_graph(name, params, monkeypatch):
    """Breadth first only (the order bench/regenerate.py records): about 4 CPU s."""
    target = next(t for t in TARGETS if t.name == name)
    assert _same(lambda: System(target.build(), params), monkeypatch, ("bfs",)) > 2_000
