"""The state stores: exact packed bytes and 64-bit fingerprints reach the same verdict, the same
number of states and an equally short, replayable counterexample as the tuple store."""

import pytest

from barrierproof.checker.engines.explore import explore
from barrierproof.checker.engines.store import Packer, StateStore
from barrierproof.model.interpreter import replay
from barrierproof.model.semantics import compile_systems
from barrierproof.model.ir import ModelError

from test_examples import TARGETS


def _systems(target):
    try:
        return compile_systems(target.build())
    except ModelError:     # input errors: covered by test_examples
        return []


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_every_store_gives_the_same_search(target):
    for system in _systems(target):
        reference = explore(system, store_mode="tuple")
        for mode in ("exact", "fingerprint"):
            other = explore(system, store_mode=mode)
            assert (other.status, other.states, other.depth) == \
                (reference.status, reference.states, reference.depth), mode
            if other.violation is not None:
                assert other.violation.code == reference.violation.code
                run = replay(system, other.actions, witness=other.witness)
                assert run.violation is not None and run.violation.code == other.violation.code
            if mode == "fingerprint":
                assert 0 <= other.collision_probability < 1e-9
            else:
                assert other.collision_probability is None


def test_packing_is_injective_on_reachable_states():
    target = next(t for t in TARGETS if t.name == "tma_ring")
    system = _systems(target)[0]
    pack = Packer(system).pack
    states = {system.initial_state()}
    frontier = list(states)
    while frontier:
        nxt = {n for s in frontier for _, n, v in system.successors(s) if v is None}
        frontier = [n for n in nxt if n not in states]
        states.update(frontier)
    assert len(states) > 50
    assert len({pack(s) for s in states}) == len(states)
    # a value outside its static range still packs, apart from every in-range state
    odd = (10**12,) + system.initial_state()[1:]
    assert pack(odd) not in {pack(s) for s in states}


def test_unknown_store_is_refused():
    system = _systems(TARGETS[0])[0]
    with pytest.raises(ValueError, match="unknown state store"):
        StateStore(system, "zip")


def test_store_flag_reports_memory_and_collision_probability():
    from test_cli import run_cli
    import json
    runs = {}
    for mode in ("tuple", "fingerprint"):
        code, out, err = run_cli("check", "examples/hopper_ring.py::tma_ring", "--param",
                                 "steps=12", "--store", mode, "--no-cache", "--format", "json")
        assert code == 0, err
        runs[mode] = json.loads(out)[0]
    assert runs["tuple"]["states"] == runs["fingerprint"]["states"] > 0
    assert runs["tuple"]["store"] == "tuple" and runs["tuple"]["collision_probability"] is None
    assert runs["fingerprint"]["bytes_per_state"] >= 0
    assert 0 < runs["fingerprint"]["collision_probability"] < 1e-9
    assert "collision probability" in runs["fingerprint"]["coverage"]
