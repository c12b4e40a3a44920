"""Shortest counterexamples without the confirming search (docs/POR.md, "Shortest
counterexamples"): where every rule not ignored is one the persistent sets meet at its depth in
the full graph (por.py `depth_unkept` is empty), the reduced breadth-first search's
counterexample is reported as it stands, and it is as short as the unreduced search's, with the
same code, on every example and on generated protocols, Python and compiled cores. Where a rule
is left that they may put off (BP101 here), the confirmation stays."""

import re

import pytest
from hypothesis import HealthCheck, given, settings

from barrierproof.checker.engines import compiled, explore as explore_module
from barrierproof.checker.engines.explore import DEPTH_KEPT_NOTE, Limits, explore
from barrierproof.checker.engines.por import DEPTH_KEPT, OVERRUNS, depth_unkept, keeps_overruns
from barrierproof.model.ir import BarrierAlloc, BarrierRef, Const, Kernel, Op, Var, When
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems
from barrierproof.model.violations import CODES

from test_compiled_core import examples, hw_protocols  # noqa: F401 (a fixture)
from test_properties import protocols

CAP = Limits(max_states=50_000, timeout=None)
# every rule but those the persistent sets keep at their depth
ONLY_KEPT = frozenset(CODES) - DEPTH_KEPT
# and BP101 and BP102 too, which sets that count arrivals keep (por_overrun.py)
WITH_OVERRUNS = ONLY_KEPT - OVERRUNS
CORES = ["python"] + (["compiled"] if compiled.available() else [])


def _shortest(r):
    return r.status, r.violation.code if r.violation else None, \
        len(r.actions) if r.actions is not None else None


def _compare(system, core, order="bfs", cap=CAP, ignore=ONLY_KEPT):
    """The reduced search against the unreduced one; whether it skipped the confirmation."""
    reduced = explore(system, cap, ignore=ignore, order=order, core=core)
    full = explore(system, cap, reduction=False, ignore=ignore, order="bfs", core=core)
    if "bounded" in (reduced.status, full.status):
        return None
    assert _shortest(reduced) == _shortest(full)
    skipped = DEPTH_KEPT_NOTE in reduced.notes
    # only a violation of a search that kept its persistent sets skips the confirmation
    assert not skipped or (reduced.status == "violation" and reduced.partial_order_off is None)
    return skipped


def test_examples_keep_their_shortest_deadlocks_and_exit_violations(examples):  # noqa: F811
    """Every accepted example, compiled core when built: about 3 s."""
    core = CORES[-1]
    skipped = [_compare(system, core) for system in examples[0]]
    assert skipped.count(True) >= 40, skipped.count(True)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_generated_protocols_keep_their_shortest_deadlocks_and_exit_violations(kernel):
    """Both cores, breadth and depth first: about 3 s."""
    system = System(kernel)
    for core in CORES:
        _compare(system, core)
    _compare(system, "python", order="dfs")


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hw_protocols())
def test_generated_protocols_beyond_the_mbarrier_core_keep_them_too(kernel):
    """tcgen05 commits, named and cluster barriers (BP144), semaphores, memory effects: both
    cores, searches of up to 5,000 states: about 1-2 s."""
    try:
        systems = compile_systems(kernel)
    except ModelError:
        return
    for system in systems:
        for core in CORES:
            _compare(system, core, cap=Limits(max_states=5_000, timeout=None))


def test_rules_left_keep_the_confirmation():
    ignore = frozenset({"BP101"})
    system = System(_overrun())
    assert "BP101" in depth_unkept(system) and "BP101" not in depth_unkept(system, ignore)
    assert "BP121" in depth_unkept(system, ignore)


def _overrun():
    """Two threads commit tcgen05 arrivals on a barrier of count 1 and wait on it; a third
    issues MMAs that touch no barrier. Completing the barrier twice before the second waiter
    returns is BP101 in 4 steps; the third thread's MMA is a persistent set of its own, so the
    reduced graph takes it first and meets that BP101 one step later."""
    bar = BarrierAlloc("b0", Const(1), (Const(1),), orders_tensor_core=True, scalar=False)
    ref = BarrierRef(bar, (Const(0),))
    mma = Op("tcgen05_mma", ref, bytes=Const(64), parity=Const(0))
    waiter = (Op("tcgen05_commit_arrive", ref, bytes=Const(0), parity=Const(0)),
              Op("barrier_wait", ref, bytes=Const(0), parity=Const(1)))
    body = (When(Var("t") == 0, (mma, mma), waiter),)
    return Kernel("overrun", body, (bar,), num_threads=Const(3), thread_axis="t")


@pytest.mark.parametrize("core", CORES)
def test_a_phase_overrun_the_persistent_sets_put_off_is_confirmed(core, monkeypatch):
    """BP101 is not kept: the reduced graph's first overrun is deeper than the full graph's,
    and the explorer reports the full graph's, found by the confirming search. Under 1 s."""
    system = System(_overrun())
    full = explore(system, CAP, reduction=False, order="bfs", core=core)
    assert _shortest(full) == ("violation", "BP101", 4)
    confirmed = explore(system, CAP, order="bfs", core=core)
    assert _shortest(confirmed) == _shortest(full) and DEPTH_KEPT_NOTE not in confirmed.notes
    # the reduced graph alone, were BP101 taken as kept
    monkeypatch.setattr(explore_module, "depth_unkept", lambda system, ignore, overruns=False: [])
    alone = explore(system, CAP, order="bfs", core=core)
    assert _shortest(alone) == ("violation", "BP101", 5)
    assert DEPTH_KEPT_NOTE in alone.notes


# -- BP101 and BP102 kept by counting arrivals (docs/POR.md, "Keeping BP101 and BP102") --------

def test_examples_keep_their_shortest_overruns(examples):  # noqa: F811
    """Every accepted example with BP101 and BP102 left, compiled core when built: about 3 s."""
    kept = [system for system in examples[0] if keeps_overruns(system, WITH_OVERRUNS)]
    assert len(kept) >= 20, len(kept)
    skipped = [_compare(system, CORES[-1], ignore=WITH_OVERRUNS) for system in kept]
    assert skipped.count(True) >= 10, skipped.count(True)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_generated_protocols_keep_their_shortest_overruns(kernel):
    """Both cores, breadth and depth first: about 3 s."""
    system = System(kernel)
    for core in CORES:
        _compare(system, core, ignore=WITH_OVERRUNS)
    _compare(system, "python", order="dfs", ignore=WITH_OVERRUNS)


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hw_protocols())
def test_generated_hardware_protocols_keep_their_shortest_overruns(kernel):
    """tcgen05 commits, named and cluster barriers, semaphores: searches of up to 5,000
    states on the compiled core when built (tests/test_compiled_por.py compares it with the
    Python one on these), about 3 s."""
    try:
        systems = compile_systems(kernel)
    except ModelError:
        return
    for system in systems:
        for core in CORES[-1:]:
            _compare(system, core, cap=Limits(max_states=5_000, timeout=None),
                     ignore=WITH_OVERRUNS)


@pytest.mark.parametrize("core", CORES)
def test_a_phase_overrun_a_naive_set_would_put_off_is_met_at_its_depth(core):
    """The kernel above, where the MMA thread's step alone is a persistent set that puts the
    overrun off by a step: counting the arrivals the other two threads can still make (two
    commits on a barrier of count 1, no waiter behind yet: two completions) adds them to the
    set, and the reduced search meets the 4-step overrun with no confirming search. Under 1 s."""
    system = System(_overrun())
    ignore = frozenset({"BP121"})
    assert keeps_overruns(system, ignore) and not depth_unkept(system, ignore, True)
    full = explore(system, CAP, reduction=False, ignore=ignore, order="bfs", core=core)
    kept = explore(system, CAP, ignore=ignore, order="bfs", core=core)
    assert _shortest(full) == _shortest(kept) == ("violation", "BP101", 4)
    assert DEPTH_KEPT_NOTE in kept.notes and kept.partial_order_off is None
    assert kept.states < full.states


def _late_waiter():
    """Thread 0 arrives twice on b0 (count 1), thread 1 waits on it twice, thread 2 arrives on
    and waits for b1 of its own. The second completion of b0 before thread 1 observes the
    first is BP101 in 2 steps; thread 2's steps touch only b1, so a set of its step alone is
    persistent, and the search without the count meets the overrun 2 steps later."""
    bars = [BarrierAlloc(f"b{k}", Const(1), (Const(1),), orders_tensor_core=False, scalar=False)
            for k in range(2)]
    b0, b1 = (BarrierRef(bar, (Const(0),)) for bar in bars)

    def arrive(ref):
        return Op("barrier_arrive", ref, bytes=Const(0), parity=Const(0))

    def wait(ref):
        return Op("barrier_wait", ref, bytes=Const(0), parity=Const(0))
    body = (When(Var("t") == 0, (arrive(b0), arrive(b0)),
                 (When(Var("t") == 1, (wait(b0), wait(b0)), (arrive(b1), wait(b1))),)),)
    return Kernel("late_waiter", body, tuple(bars), num_threads=Const(3), thread_axis="t")


@pytest.mark.parametrize("core", CORES)
def test_a_naive_set_hides_the_shortest_overrun_the_count_keeps(core, monkeypatch):
    """Plain arrivals and Pallas waits: the count adds the arriving thread to thread 2's set,
    and the reduced search meets the 2-step overrun; taken as kept without the count, the
    reduced graph's first overrun is 4 steps deep. Under 1 s."""
    system = System(_late_waiter())
    ignore = frozenset({"BP121"})
    full = explore(system, CAP, reduction=False, ignore=ignore, order="bfs", core=core)
    kept = explore(system, CAP, ignore=ignore, order="bfs", core=core)
    assert _shortest(full) == _shortest(kept) == ("violation", "BP101", 2)
    assert DEPTH_KEPT_NOTE in kept.notes and kept.states < full.states
    monkeypatch.setattr(explore_module, "keeps_overruns", lambda system, ignore: False)
    monkeypatch.setattr(explore_module, "depth_unkept", lambda system, ignore, overruns=False: [])
    naive = explore(system, CAP, ignore=ignore, order="bfs", core=core)
    assert _shortest(naive) == ("violation", "BP101", 4) and DEPTH_KEPT_NOTE in naive.notes


def _absent_noted(result) -> bool:
    return any(n.startswith("shortest without a confirming search: ") and
               "no violation anywhere" in n for n in result.notes)


def _compare_all_rules(system, core, order="bfs", cap=CAP):
    """Nothing ignored: the reduced search (with its search of the rules it may put off, alone,
    when it has a violation) against the unreduced one; whether those rules were shown absent."""
    reduced = explore(system, cap, order=order, core=core)
    if reduced.status != "violation" or reduced.reason:
        return None
    full = explore(system, cap, reduction=False, order="bfs", core=core)
    if full.status == "bounded":
        return None
    assert _shortest(reduced) == _shortest(full), (reduced.notes, full.notes)
    return _absent_noted(reduced)


def test_rules_with_no_violation_anywhere_leave_the_counterexample_shortest(examples):  # noqa: F811
    """docs/POR.md, "Rules with no violation anywhere": every example with nothing ignored.
    Where the rules the persistent sets may put off (races, BP121, ...) are met nowhere by a
    search of them alone, the reduced counterexample is reported as it stands (or the search
    again with sets that count arrivals), and it is as short as the unreduced search's."""
    core = CORES[-1]
    shown = [_compare_all_rules(system, core) for system in examples[0]]
    assert shown.count(True) >= 25, shown.count(True)     # docs/POR.md: at least 25


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hw_protocols())
def test_generated_protocols_with_nothing_ignored_keep_their_shortest(kernel):
    """Memory effects, tcgen05, named and cluster barriers, nothing ignored: both cores, breadth
    and depth first."""
    try:
        systems = compile_systems(kernel)
    except ModelError:
        return
    for system in systems:
        for core in CORES:
            _compare_all_rules(system, core, cap=Limits(max_states=5_000, timeout=None))
        _compare_all_rules(system, "python", order="dfs", cap=Limits(max_states=5_000,
                                                                      timeout=None))


_BOUND = re.compile(r"none of fewer than (\d+) steps")


def test_a_counting_search_stopped_by_a_limit_bounds_the_shortest_below(examples):  # noqa: F811
    """docs/POR.md, "What a search stopped by a limit still shows": where the search that counts
    arrivals stops at a state limit (swept between the sizes of the first reduced search and of
    the counting one), the bound given is at most the unreduced search's shortest length, and
    both cores give the same one."""
    bounded = 0
    for system in examples[0]:
        unkept = frozenset(r for r in depth_unkept(system) if r not in OVERRUNS)
        if keeps_overruns(system) or not unkept or not keeps_overruns(system, unkept):
            continue
        first = explore(system, CAP, order="bfs", core=CORES[-1], confirm=False)
        counting = explore(system, CAP, order="bfs", core=CORES[-1], absent=unkept)
        if first.status != "violation" or counting.states <= first.states:
            continue
        full = explore(system, CAP, reduction=False, order="bfs", core=CORES[-1])
        step = max(1, (counting.states - first.states) // 6)
        for cap in range(first.states, counting.states, step):
            bounds = set()
            for core in CORES:
                r = explore(system, Limits(max_states=cap, timeout=None), order="bfs", core=core)
                found = _BOUND.search(r.reason or "")
                bounds.add(int(found.group(1)) if found else None)
            assert len(bounds) == 1, bounds
            bound, = bounds
            if bound is not None:
                bounded += 1
                assert 0 < bound <= len(full.actions), (bound, full.actions)
    assert bounded >= 4, bounded
