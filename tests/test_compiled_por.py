"""Partial-order reduction in the compiled core (_por.c over flatten_por.py's tables of por.py)
against the Python explorer's reduced breadth-first search: the same states, transitions,
depth, verdict, code, counterexample (schedule and witness) and the same confirmation of a
counterexample by the search without the persistent sets, on the examples and on generated
protocols; what the C chooser does not state is refused by name and searched by Python."""

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from barrierproof.checker.engines import compiled, explore as explore_module
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.checker.engines.flatten import Refused
from barrierproof.checker.engines.flatten_por import persistent_tables
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems
from barrierproof.model.violations import CODES
from barrierproof.checker.engines.por import DEPTH_KEPT, OVERRUNS, keeps_overruns

from test_compiled_core import examples, hw_protocols  # noqa: F401 (a fixture)
from test_properties import protocols

CAP = Limits(max_states=50_000, timeout=None)
IGNORES = [frozenset(), frozenset({"BP101", "BP102", "BP103"})]
# every rule left but BP101 and BP102 is one the sets keep: they count arrivals (por_overrun.py)
OVERRUNS_LEFT = frozenset(CODES) - DEPTH_KEPT - OVERRUNS
built = pytest.mark.skipif(not compiled.available(), reason="the compiled core is not built")


def _outcome(r):
    return (r.status, r.states, r.transitions, r.depth, r.reason,
            r.violation.code if r.violation else None,
            r.violation.message if r.violation else None, r.actions, r.witness,
            r.symmetry_classes, r.partial_order_off)


@pytest.fixture
def reduced(monkeypatch):
    """Counts the searches the compiled core ran with the persistent sets."""
    runs = []
    real = explore_module.explore_compiled

    def counting(*args, partial_order=False, **kw):
        found = real(*args, partial_order=partial_order, **kw)
        runs.append(partial_order)
        return found
    monkeypatch.setattr(explore_module, "explore_compiled", counting)
    return runs


def _same(system, ignore=frozenset(), limits=CAP):
    python = explore(system, limits, ignore=ignore, order="bfs", core="python")
    core = explore(system, limits, ignore=ignore, order="bfs", core="compiled")
    assert _outcome(core) == _outcome(python)
    return core


@built
def test_examples_search_the_same_reduced_graph(examples, reduced):  # noqa: F811
    """Every accepted example, with and without the exit rules: about 10 s."""
    for system in examples[0]:
        for ignore in IGNORES:
            _same(system, ignore)
    assert sum(reduced) >= 120, sum(reduced)


@built
def test_examples_search_the_same_graph_of_sets_that_keep_overruns(examples):  # noqa: F811
    """Every accepted example whose sets count arrivals: about 3 s."""
    kept = [system for system in examples[0] if keeps_overruns(system, OVERRUNS_LEFT)]
    assert len(kept) >= 20, len(kept)
    for system in kept:
        _same(system, OVERRUNS_LEFT)


@built
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(protocols(), st.sampled_from(IGNORES + [frozenset({"BP101"}), OVERRUNS_LEFT]))
def test_generated_protocols_search_the_same_reduced_graph(kernel, ignore):
    _same(System(kernel), ignore)


@built
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hw_protocols(), st.sampled_from(IGNORES + [frozenset({"BP141", "BP142"}),
                                                  frozenset({"BP147", "BP200"}),
                                                  OVERRUNS_LEFT]))
def test_generated_protocols_beyond_the_mbarrier_core_search_the_same_reduced_graph(kernel,
                                                                                    ignore):
    try:
        systems = compile_systems(kernel)
    except ModelError:
        assume(False)
    for system in systems:
        _same(system, ignore)


@built
def test_more_actors_than_a_word_are_refused_by_name():
    """Actor sets are one 64-bit word in C: a System with more is refused, and Python runs."""
    from barrierproof import protocol

    @protocol
    def many(k):
        k.threads(70, name="t")
        bar = k.Barrier(num_arrivals=70)
        k.arrive(bar)
        k.wait_parity(bar, 0)

    system = System(many.build())
    with pytest.raises(Refused, match="more than 64 actors"):
        persistent_tables(system, [])


@built
def test_the_bench_reduced_row_reproduces_its_states():
    """bench/COMPILED.md's reduced search of the 2-CTA Blackwell matmul at 1024^3 to the end
    (python bench/compiled_core.py --reduced): the same verdict, distinct states and depth,
    exactly. About 15-25 s (tracing the kernel, 1.5M states): the slowest test of the file."""
    pytest.importorskip("jax")
    import os
    import sys
    from barrierproof.model import pallas
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    import compiled_core
    from jax_sizes import with_contraction
    root = os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "bench", "COMPILED.md")) as f:
        text = f.read()
    ignore = compiled_core.REDUCED_IGNORES[-1]
    row = next(line for line in text.splitlines()
               if line.startswith(f"| compiled | {', '.join(ignore)} |"))
    verdict, states, depth = [c.strip() for c in row.split("|")[3:6]]
    module = pallas.import_file(os.path.join(root, "examples", "pallas", "jax_kernels.py"))
    saved = {name: getattr(module, name) for name in ("K", "_qkv", "blackwell_matmul_collective")}
    try:
        with_contraction(module, 1024, square=True)
        system, = compile_systems(pallas.load(module.blackwell_matmul_collective,
                                              name="blackwell_matmul_collective")[0])
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
    r = explore(system, Limits(max_states=None, timeout=None), order="bfs", core="compiled",
                ignore=frozenset(ignore))
    assert compiled.POR_NOTE in r.notes
    assert (r.status, f"{r.states:,}", str(r.depth)) == (verdict, states, depth)
