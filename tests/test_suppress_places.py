"""A suppression at one place, against an oracle that walks every schedule of the unreduced
System itself (no explorer): with every violation's state a dead end, a set of places is
tolerated; the explorer, in both orders and with or without its reductions, must report a
violation at a reachable place outside that set when one exists (replayed on the interpreter),
and pass when none does."""

import dataclasses
import itertools

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from barrierproof.checker.engines.explore import explore
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import BarrierRef, Loc, ModelError, Op, WarpRegion, When
from barrierproof.model.parity import bare_waits
from barrierproof.model.semantics import System, compile_systems
from barrierproof.model.violations import place, tolerance

from test_por_memory import memory_protocols
from test_properties import protocols

SETTINGS = [dict(), dict(partial_order=False), dict(reduction=False)]


def located(kernel):
    """`kernel` with a line of its own for every barrier and every operation (the generator
    leaves them all at one unknown place)."""
    lines = itertools.count(1)
    allocs = {id(b): dataclasses.replace(b, loc=Loc("k.py", next(lines))) for b in kernel.barriers}

    def walk(node):
        if isinstance(node, tuple):
            return tuple(walk(n) for n in node)
        if isinstance(node, (When, WarpRegion)):      # a statement with statements in it
            return dataclasses.replace(node, **{f: walk(getattr(node, f)) for f in
                                                ("then", "orelse", "body") if hasattr(node, f)})
        if isinstance(node, Op):
            ref = node.barrier
            if isinstance(ref, BarrierRef):
                ref = dataclasses.replace(ref, alloc=allocs[id(ref.alloc)])
            return dataclasses.replace(node, barrier=ref, loc=Loc("k.py", next(lines)))
        return node
    return dataclasses.replace(kernel, body=walk(kernel.body),
                               barriers=tuple(allocs[id(b)] for b in kernel.barriers))


def reachable_places(system):
    """Every (code, file, line) a violation shows on some schedule, each violation's state a
    dead end: a plain walk of `System.step`, no reduction."""
    found, seen = set(), set()
    stack = [system.initial_state()]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        bad = system.state_violations(state)
        if bad:
            found |= {place(v.code, system.location(v)) for v in bad}
            continue
        moves = [a for a in range(system.n_actions) if system.enabled(state, a)]
        if not moves and not system.is_done(state):
            v = system.deadlock(state)
            found.add(place(v.code, system.location(v)))
        for a in moves:
            nxt, v = system.step(state, a)
            if v is not None:
                found.add(place(v.code, system.location(v)))
            else:
                stack.append(nxt)
    return found


def _agree(system, data):
    assume(not bare_waits(system))       # aliasing is judged across schedules: not walked here
    places = reachable_places(system)
    tolerate = frozenset(data.draw(st.sets(st.sampled_from(sorted(places)))) if places
                         else frozenset())
    left = places - tolerate
    for kw in SETTINGS:
        for order in ("bfs", "dfs"):
            r = explore(system, order=order, tolerate=tolerate, **kw)
            assert r.status == ("violation" if left else "verified"), (kw, order, r.reason)
            if left:
                run = replay(system, r.actions, frozenset(), r.witness,
                             tolerance(system, tolerate))
                assert place(run.violation.code, system.location(run.violation)) in left


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols(), st.data())
def test_a_tolerated_place_hides_that_place_only(kernel, data):
    _agree(System(located(kernel)), data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memory_protocols(), st.data())
def test_a_tolerated_race_hides_that_race_only(kernel, data):
    """Races are checked in the symmetric images of each state kept, too (explore.py)."""
    try:
        (system,) = compile_systems(located(kernel))
    except (ModelError, ValueError):     # rejected as input, or several cluster behaviours
        assume(False)
    _agree(system, data)
