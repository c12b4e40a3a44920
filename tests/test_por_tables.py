"""The persistent sets of checker/engines/por.py are, state by state, the sets of the reference
chooser (tests/por_reference.py: the chooser before its per-state work was cut down) with its
horizons read from the compile-time tables (`_stops`) and with them walked instruction by
instruction in each state, on every state the search meets (up to a cap) of every example, of
the CUTLASS pipeline and multicast pair at larger sizes, of the benchmark family, and of random
protocols; and the explorer's switch that turns a reduction off where it left nothing out keeps
verdicts and shortest counterexamples."""

import pytest
from hypothesis import HealthCheck, given, settings

from barrierproof.checker.engines import explore as explorer
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.checker.engines.por import PersistentSets
from barrierproof.checker.engines.symmetry import Symmetry
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems

from por_reference import ReferenceSets
from test_examples import TARGETS
from test_por import local_step_protocols
from test_por_memory import memory_protocols

CAP = 400       # states compared per system


def _compare(system: System, cap: int = CAP) -> int:
    """The three choosers on the states of a breadth-first search over the symmetry-reduced graph
    (every enabled step expanded, so states a persistent set would skip are compared too)."""
    if getattr(system, "init_insts", ()) or system.n_agents + len(system.slots) + \
            len(system.queue_agents) <= 1:
        return 0        # no partial-order reduction for these (explore.py, por.py)
    symmetry = Symmetry(system)
    canon = symmetry.canonicalizer() or (lambda s: s)
    sets = PersistentSets(system, symmetry.classes)
    reference = ReferenceSets(sets)
    chosen, tables, walked = sets.chooser(), reference.chooser(), reference.chooser(walk=True)
    remembered = sets.chooser(always_remember=True)
    start = canon(system.initial_state())
    seen, frontier = {start}, [start]
    while frontier and len(seen) < cap:
        nxt = []
        for state in frontier:
            got = chosen(state)
            assert got == tables(state) == walked(state) == remembered(state), state
            for _, succ, violation in system.successors(state):
                succ = canon(succ)
                if violation is None and succ not in seen and len(seen) < cap:
                    seen.add(succ)
                    nxt.append(succ)
        frontier = nxt
    return len(seen)


def _compiled(kernel):
    try:
        return compile_systems(kernel)
    except ModelError:      # input errors: covered by test_examples
        return []


def _systems(target):
    return _compiled(target.build())


def test_tables_choose_the_walked_sets_on_every_example():
    compared = sum(_compare(s) for t in TARGETS for s in _systems(t))
    assert compared > 5_000


@pytest.mark.parametrize("name, params", [
    ("pipeline_tma_async", dict(stages=3, consumers=5, steps=8)),
    ("persistent_multicast_pair", dict(tiles=3, steps=3))])
def test_tables_choose_the_walked_sets_at_larger_sizes(name, params):
    target = next(t for t in TARGETS if t.name == name)
    assert _compare(System(target.build(), params), cap=2_000) == 2_000


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(local_step_protocols())
def test_tables_choose_the_walked_sets_on_random_protocols(kernel):
    for system in _compiled(kernel):
        _compare(system)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memory_protocols())
def test_tables_choose_the_walked_sets_on_random_memory_protocols(kernel):
    for system in _compiled(kernel):
        _compare(system)


def _watch(monkeypatch, sample):
    monkeypatch.setattr(explorer, "POR_SAMPLE", sample)


SWITCHED = [t.name for t in TARGETS if t.name in ("step_semaphore_each_takes_its_own_signal",
                                                   "parallel_signals_to_two_semaphores")]


@pytest.mark.parametrize("name", SWITCHED)
def test_a_reduction_that_leaves_nothing_out_is_switched_off(name, monkeypatch):
    _watch(monkeypatch, 4)
    system = _systems(next(t for t in TARGETS if t.name == name))[0]
    on, off = explore(system), explore(system, partial_order=False)
    assert on.status == off.status == "verified"
    assert on.states == off.states
    assert "first 4 states" in (on.partial_order_off or ""), on.partial_order_off
    # a matter of speed: not a note of the verdict (a note may only name the core that ran)
    from barrierproof.checker.engines import compiled
    assert set(on.notes) <= {compiled.NOTE, compiled.SYMMETRY_NOTE, compiled.POR_NOTE}, on.notes


def test_a_reduction_that_reduces_stays_on(monkeypatch):
    _watch(monkeypatch, 4)
    target = next(t for t in TARGETS if t.name == "pipeline_tma_async")
    on = explore(System(target.build(), dict(stages=2, consumers=4, steps=4)))
    off = explore(System(target.build(), dict(stages=2, consumers=4, steps=4)),
                  partial_order=False)
    assert on.partial_order_off is None and on.states < off.states


@pytest.mark.parametrize("sample", [1, 3, 1_000])
def test_switching_off_keeps_the_shortest_counterexample(sample, monkeypatch):
    """Examples with a violation: switched off early or never, the counterexample has the code
    and the length of the search without any reduction, and replays."""
    _watch(monkeypatch, sample)
    for target in TARGETS:
        if not target.expect.startswith("violation"):
            continue
        for system in _systems(target)[:1]:
            full = explore(system, Limits(max_states=20_000), reduction=False)
            if full.status != "violation":
                continue
            got = explore(system, Limits(max_states=20_000))
            assert got.status == "violation", target.name
            assert (got.violation.code, len(got.actions)) == \
                (full.violation.code, len(full.actions)), target.name
