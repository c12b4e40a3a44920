"""Thread symmetry in the compiled core (_core.c `canonical`, `twins`) against the Python
explorer's search without partial-order reduction: the same orbits, transitions, depth,
verdict, code and counterexample (schedule and witness), on every example with interchangeable
threads and on generated protocols; what the core does not state is refused by name and
searched by Python. About 10 s on one core."""

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from barrierproof.checker.engines import compiled
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.checker.engines.symmetry import Symmetry, race_permutations
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems
from barrierproof.model.steps import UNREDUCED, opcodes_in

from test_compiled_core import examples, hw_protocols  # noqa: F401 (a fixture)
from test_properties import protocols

CAP = Limits(max_states=50_000, timeout=None)
IGNORES = [frozenset(), frozenset({"BP101", "BP102", "BP103"}), frozenset({"BP101"})]
built = pytest.mark.skipif(not compiled.available(), reason="the compiled core is not built")


def _outcome(r):
    return (r.status, r.states, r.transitions, r.depth, r.reason,
            r.violation.code if r.violation else None,
            r.violation.message if r.violation else None, r.actions, r.witness,
            r.symmetry_classes)


def _symmetric(system) -> bool:
    """Whether the core quotients `system` by thread symmetry (else it is refused, or raw where
    the explorer turns the reductions off: explicit inits, UNREDUCED opcodes)."""
    if system.init_insts or opcodes_in(system, lambda step: step.touches == UNREDUCED):
        return False
    s = Symmetry(system)
    return bool(s.classes) and not s.blocks


def _same(system, ignore=frozenset(), limits=CAP):
    python = explore(system, limits, partial_order=False, ignore=ignore, order="bfs",
                     core="python")
    core = explore(system, limits, partial_order=False, ignore=ignore, order="bfs",
                   core="compiled")
    assert compiled.SYMMETRY_NOTE in core.notes and compiled.SYMMETRY_NOTE not in python.notes
    assert _outcome(core) == _outcome(python)
    return core


@built
def test_every_example_with_interchangeable_threads_searches_the_same_orbits(
        examples):  # noqa: F811
    systems = [s for s in examples[0] if _symmetric(s)]
    for system in systems:
        for ignore in IGNORES:
            _same(system, ignore)
    assert len(systems) >= 15


@built
def test_threads_touching_different_memory_race_in_their_images_alike(examples):  # noqa: F811
    """The race rule is not invariant under a permutation of threads that touch different
    memory: both searches look at the images of each state (explore.py `violations`), and a
    race found in an image is renamed onto a concrete schedule (`schedule_toward`) alike."""
    mixed = [s for s in examples[0] if _symmetric(s) and race_permutations(s, Symmetry(s).classes)]
    found = []
    for system in mixed:
        for ignore in IGNORES:
            found.append(_same(system, ignore))
    assert len(mixed) >= 5
    assert any(r.violation is not None and r.violation.code in ("BP200", "BP201") for r in found)


@built
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(protocols(), st.sampled_from(IGNORES))
def test_generated_protocols_search_the_same_orbits(kernel, ignore):
    system = System(kernel)
    assume(_symmetric(system))
    _same(system, ignore)


@built
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hw_protocols(), st.sampled_from(IGNORES + [frozenset({"BP141", "BP142"})]))
def test_generated_protocols_beyond_the_mbarrier_core_search_the_same_orbits(kernel, ignore):
    try:
        systems = compile_systems(kernel)
    except ModelError:
        assume(False)
    systems = [s for s in systems if _symmetric(s)]
    assume(systems)
    for system in systems:
        _same(system, ignore)


@built
def test_the_reduced_search_confirms_its_counterexample_on_the_core_alike(examples):  # noqa: F811
    """With partial-order reduction a violation is confirmed shortest by a search without it,
    which for interchangeable threads is now the compiled one: the outcome is Python's."""
    compared = 0
    for system in examples[0]:
        if not _symmetric(system):
            continue
        auto = explore(system, CAP)
        if auto.status != "violation" or auto.partial_order_off is not None:
            continue
        python = explore(system, CAP, core="python")
        assert _outcome(auto) == _outcome(python)
        compared += 1
    assert compared >= 3


@built
@pytest.mark.parametrize("partial_order", [True, False], ids=["por", "symmetry"])
def test_a_race_only_an_image_shows_is_renamed_onto_its_schedule_alike(partial_order,
                                                                       monkeypatch):
    """Thread 2 writes the cell thread 0 reads, thread 1 another: the representative of a state
    where thread 2 still writes while thread 1 is done puts thread 1 at the write, so only its
    image races; both searches report that race on the same concrete schedule."""
    from barrierproof import protocol

    @protocol
    def image_race(k):
        k.threads(3, name="t")
        bar = k.Barrier(num_arrivals=1)
        tiles = k.SMEM(slots=2)
        with k.when(k.thread == 0):
            k.wait_parity(bar, 0)
            k.read(tiles.at[1])
        with k.otherwise():
            k.write(tiles.at[k.thread - 1])
            k.arrive(bar)

    images = []
    core = compiled._core

    class Counting:
        @staticmethod
        def explore(*args):
            out = core.explore(*args)
            images.append(out.get("perm", -1))
            return out

    monkeypatch.setattr(compiled, "_core", Counting)
    system, = compile_systems(image_race.build())
    python = explore(system, CAP, partial_order=partial_order, order="bfs", core="python")
    found = explore(system, CAP, partial_order=partial_order, order="bfs", core="compiled")
    assert _outcome(found)[:-1] == _outcome(python)[:-1]
    assert found.violation.code == "BP200" and images[0] >= 0
