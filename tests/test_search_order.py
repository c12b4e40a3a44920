"""Depth-first search with branch and bound (explore(order="dfs"), the CLI's default) against the
breadth-first search: run to the end, the same verdict, violation code, counterexample length
and distinct states, with and without every reduction, on every example and on random
protocols; stopped by a limit, a violation in hand is still reported (replayed), and says it
may not be shortest."""

import json

import pytest
from hypothesis import HealthCheck, given, settings

from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.cli import main
from barrierproof.model.interpreter import replay
from barrierproof.model.semantics import System, compile_systems
from barrierproof.model.ir import ModelError

from test_examples import TARGETS
from test_por import local_step_protocols
from test_por_memory import memory_protocols
from test_properties import protocols

SETTINGS = [dict(), dict(partial_order=False), dict(reduction=False)]


def _agree(system, ignore=frozenset(), **kw):
    bfs = explore(system, ignore=ignore, order="bfs", **kw)
    dfs = explore(system, ignore=ignore, order="dfs", **kw)
    assert dfs.status == bfs.status, (kw, dfs.reason)
    assert dfs.reason is None
    if bfs.status == "violation":
        assert dfs.violation.code == bfs.violation.code
        assert len(dfs.actions) == len(bfs.actions)          # shortest, like breadth first
        run = replay(system, dfs.actions, ignore, dfs.witness)
        assert run.violation is not None and run.violation.code == dfs.violation.code
    else:
        # the reductions depend on the state only: both orders reach the same states
        assert (dfs.states, dfs.transitions, dfs.depth) == (bfs.states, bfs.transitions, bfs.depth)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_examples_get_the_same_answer_in_both_orders(target):
    try:
        systems = compile_systems(target.build())
    except ModelError:     # input errors: covered by test_examples
        return
    for system in systems:
        for kw in SETTINGS:
            _agree(system, **kw)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_random_protocols_get_the_same_answer_in_both_orders(kernel):
    system = System(kernel)
    for kw in SETTINGS:
        _agree(system, **kw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(local_step_protocols())
def test_random_warp_protocols_get_the_same_answer_in_both_orders(kernel):
    try:
        systems = compile_systems(kernel)
    except ModelError:     # the generated protocol is rejected as input
        return
    for system in systems:
        _agree(system)
        _agree(system, reduction=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memory_protocols())
def test_random_memory_protocols_get_the_same_answer_in_both_orders(kernel):
    try:
        systems = compile_systems(kernel)
    except ModelError:     # the generated protocol is rejected as input
        return
    for system in systems:
        _agree(system)


PROTOCOL = """
@protocol(expect="violation:BP101")
def late_or_early(k):
    \"\"\"Thread 2 waits once on `bar`; a second completion before that wait overruns its
    phase. Thread 0 gets there after a long prologue, thread 1 at once: depth first meets the
    long way first (thread 0 moves first).\"\"\"
    k.threads(3)
    bar = k.Barrier(num_arrivals=1)
    own = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        for _ in range(6):
            k.barrier_arrive(own)
            k.barrier_wait(own)
        k.barrier_arrive(bar)
        k.barrier_arrive(bar)
    with k.when(k.thread == 1):
        k.barrier_arrive(bar)
        k.barrier_arrive(bar)
    with k.when(k.thread == 2):
        k.barrier_wait(bar)
"""
exec("from barrierproof.model.dsl import protocol\n" + PROTOCOL)


def test_the_first_violation_met_is_long_and_is_shortened():
    system = System(late_or_early.build())
    bfs = explore(system, order="bfs", reduction=False)
    assert bfs.status == "violation" and bfs.violation.code == "BP101"
    # the least state limit that lets a violation be met: it stands, replayed, and says why
    cap = next(n for n in range(1, 200)
               if explore(system, Limits(max_states=n), order="dfs",
                          reduction=False).status == "violation")
    early = explore(system, Limits(max_states=cap), order="dfs", reduction=False)
    assert early.violation.code == "BP101"
    assert len(early.actions) > len(bfs.actions)
    assert early.reason == f"found depth first; the search for a shorter one stopped " \
                           f"(state limit {cap} reached)"
    for n in range(1, cap):
        r = explore(system, Limits(max_states=n), order="dfs", reduction=False)
        assert r.status == "bounded" and r.reason.startswith(f"state limit {n} reached depth first")
    run = replay(system, early.actions, witness=early.witness)
    assert run.violation is not None and run.violation.code == "BP101"
    full = explore(system, order="dfs", reduction=False)
    assert full.reason is None and len(full.actions) == len(bfs.actions)


def test_cli_search_flag(tmp_path, capsys):
    path = tmp_path / "proto.py"
    path.write_text("from barrierproof.model.dsl import protocol\n" + PROTOCOL)
    lengths = {}
    for order in ("bfs", "dfs"):
        code = main(["check", str(path), "--search", order, "--format", "json", "--no-cache",
                     "--no-reduction", "-q"])
        out = json.loads(capsys.readouterr().out)[0]
        assert code == 1 and out["verdict"] == "violation" and out["diagnostics"][0]["code"] == "BP101"
        assert "shortest counterexample" in out["coverage"]
        lengths[order] = len(out["trace"]["actions"])
    assert lengths["bfs"] == lengths["dfs"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_a_depth_limit_means_the_same_in_both_orders(kernel):
    system = System(kernel)
    for limit in (1, 2, 4):
        for kw in SETTINGS[::2]:
            bfs = explore(system, Limits(max_depth=limit), order="bfs", **kw)
            dfs = explore(system, Limits(max_depth=limit), order="dfs", **kw)
            assert dfs.status == bfs.status, (limit, kw, bfs.reason, dfs.reason)
            if bfs.status == "violation":
                assert dfs.violation.code == bfs.violation.code
                assert len(dfs.actions) == len(bfs.actions)
            elif bfs.status == "verified":
                assert dfs.states == bfs.states


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_every_rule_ignored_both_orders_enumerate_the_same_space(kernel):
    """No violation stops either search: the same states, transitions and depth."""
    from barrierproof.model.semantics import CODES
    system = System(kernel)
    for kw in SETTINGS:
        _agree(system, ignore=frozenset(CODES), **kw)


def test_a_trail_is_its_path_and_shares_its_prefix():
    """Depth first, the path to a state where a dynamic wait returns is recorded as a trail
    (parity_returns.py `Trail`): its keys in order from the first step, the prefix shared with
    the trails it extends, not copied (a copy per state grew with the square of the depth)."""
    from barrierproof.checker.engines.parity_returns import Trail
    a = Trail("a", None)
    ab = Trail("b", a)
    abc, abd = Trail("c", ab), Trail("d", ab)
    assert list(abc) == ["a", "b", "c"] and list(abd) == ["a", "b", "d"] and list(a) == ["a"]
    assert abc.before is abd.before is ab
