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
    return bool(s.classes) and not s.blocks and not race_permutations(system, s.classes)


def _same(system, ignore=frozenset(), limits=CAP):
    python = explore(system, limits, partial_order=False, ignore=ignore, order="bfs",
                     core="python")
    core = explore(system, limits, partial_order=False, ignore=ignore, order="bfs",
                   core="compiled")
    assert compiled.SYMMETRY_NOTE in core.notes and compiled.SYMMETRY_NOTE not in python.notes
    assert _outcome(core) == _outcome(python)
    return core


@built
def test_every_example_with_interchangeable_threads_searches_the_same_orbits(examples):  # noqa: F811
    systems = [s for s in examples[0] if _symmetric(s)]
    for system in systems:
        for ignore in IGNORES:
            _same(system, ignore)
    assert len(systems) >= 15


@built
def test_threads_touching_different_memory_are_refused_by_name(examples):  # noqa: F811
    """The race rule looks at the images of such a state (explore.py): not stated in C, so
    Python searches it, with the reason in a note, and finds what it finds alone."""
    mixed = [s for s in examples[0] if Symmetry(s).classes and not Symmetry(s).blocks
             and race_permutations(s, Symmetry(s).classes)]
    assert mixed
    for system in mixed[:3]:
        core = explore(system, CAP, partial_order=False, order="bfs", core="compiled")
        python = explore(system, CAP, partial_order=False, order="bfs", core="python")
        assert compiled.SYMMETRY_NOTE not in core.notes
        assert "the compiled core does not state thread symmetry between threads that touch " \
            "different memory" in " ".join(core.notes)
        assert _outcome(core)[:-1] == _outcome(python)[:-1]


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
