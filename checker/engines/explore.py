"""Explicit-state search: every interleaving of threads and asynchronous agents, breadth first.

Breadth-first order makes the first violation found a shortest one. States are the flat tuples
of `semantics.System`; the visited set maps each state to its predecessor and the action taken, so
a counterexample is rebuilt without storing paths.

Reduction: symmetry between identical threads. Threads of one block whose unrolled programs are
equal are interchangeable, so a state and any permutation of those threads' local parts (program
counter, observed phases, tcgen05 queue) have the same future up to renaming. The search keeps one
sorted representative per orbit; deadlock and every rule are invariant under the permutation, so
verdicts do not change (tests check this against the unreduced search). A counterexample found in
the quotient is mapped back to a concrete schedule before it is replayed.
"""

from __future__ import annotations

import gc
import resource
import time
from dataclasses import dataclass, field
from typing import Callable

from ...model.semantics import (AWAIT_FORK, FORK, HW_ARRIVE, HW_WAIT, JOIN, WAIT, WAIT_PARITY,
                               System, Violation, primary)


@dataclass
class Limits:
    max_states: int | None = 5_000_000
    max_depth: int | None = None
    timeout: float | None = None        # seconds
    max_memory_mb: int | None = 16_000


@dataclass
class ExploreResult:
    status: str                          # verified, violation, bounded
    states: int
    transitions: int
    depth: int
    seconds: float
    actions: list[int] | None = None     # concrete schedule to the violation
    violation: Violation | None = None
    reason: str | None = None            # why a search stopped early
    reduction: bool = True
    symmetry_classes: list[list[str]] = field(default_factory=list)


def symmetry_classes(system: System) -> list[list[int]]:
    """Groups of interchangeable agents: same block, same unrolled program, no fork/join links."""
    groups: dict[tuple, list[int]] = {}
    for a, agent in enumerate(system.agents):
        prog = system.programs[a]
        if any(i.op in (FORK, AWAIT_FORK, JOIN) for i in prog):
            continue
        # Waits carry the agent's own seen position; compare programs without it.
        prog = tuple(i._replace(aux=None) if i.op in (WAIT, WAIT_PARITY, HW_WAIT) else
                     i._replace(aux=i.aux._replace(pos=None)) if i.op == HW_ARRIVE else i
                     for i in prog)
        groups.setdefault((agent.block, prog), []).append(a)
    return [g for g in groups.values() if len(g) > 1]


def canonicalizer(system: System, classes: list[list[int]]) -> Callable[[tuple], tuple] | None:
    """A function mapping a state to the representative of its symmetry orbit."""
    if not classes:
        return None
    fields: dict[int, tuple[int, ...]] = {}
    for cls in classes:
        for a in cls:
            own = sorted((inst, pos) for (ag, inst), pos in system.seen_pos.items() if ag == a)
            positions = [a] + [pos for _, pos in own]
            # ... and the phase it last arrived in at each hardware barrier it waits on
            positions += [pos for (ag, _), pos in sorted(system.hw_seen_pos.items()) if ag == a]
            if a in system.queue_pos:
                positions.append(system.queue_pos[a])
            fields[a] = tuple(positions)
    plan = [[fields[a] for a in cls] for cls in classes]

    def canon(state: tuple) -> tuple:
        out = None
        for group in plan:
            local = [tuple(state[p] for p in f) for f in group]
            ordered = sorted(local)
            if ordered != local:
                if out is None:
                    out = list(state)
                for f, values in zip(group, ordered):
                    for p, v in zip(f, values):
                        out[p] = v
        return state if out is None else tuple(out)

    return canon


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def explore(system: System, limits: Limits | None = None, reduction: bool = True,
            ignore: frozenset[str] = frozenset(),
            progress: Callable[[dict], None] | None = None) -> ExploreResult:
    """Breadth-first search for the shortest violation; `verified` when the space is exhausted.

    >>> from barrierproof.model.dsl import protocol
    >>> @protocol
    ... def lost_arrival(k):
    ...     k.threads(2)
    ...     bar = k.Barrier(num_arrivals=2)
    ...     with k.when(k.thread == 0):
    ...         k.barrier_arrive(bar)
    ...     with k.otherwise():
    ...         k.barrier_wait(bar)
    >>> result = explore(System(lost_arrival.build()))
    >>> result.status, result.violation.code, result.actions
    ('violation', 'BP100', [0])
    """
    limits = limits or Limits()
    start = time.perf_counter()
    classes = symmetry_classes(system) if reduction else []
    reduce = canonicalizer(system, classes)
    canon = reduce or (lambda s: s)

    def kept(violations):
        return [v for v in violations if v.code not in ignore]

    def result(status, **kw) -> ExploreResult:
        return ExploreResult(status, len(parent), transitions, depth,
                             time.perf_counter() - start, reduction=reduction,
                             symmetry_classes=[[system.agents[a].name for a in c] for c in classes],
                             **kw)

    def found(pred: tuple | None, action: int | None, violation: Violation) -> ExploreResult:
        actions = _concretize(system, canon, parent, pred, action, ignore)
        return result("violation", actions=actions, violation=violation)

    init = canon(system.initial_state())
    parent: dict[tuple, tuple | None] = {init: None}   # state -> predecessor
    transitions = 0
    depth = 0
    first = kept(system.state_violations(init))
    if first:
        return found(None, None, primary(first))
    frontier = [init]
    next_report = start + 0.25
    next_memory_check = start + 1.0
    # The visited set holds millions of tuples that never form cycles: the cyclic collector
    # would rescan them over and over.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while frontier:
            if limits.max_depth is not None and depth >= limits.max_depth:
                return result("bounded", reason=f"depth limit {limits.max_depth} reached with "
                              f"{len(frontier)} states unexpanded")
            next_frontier: list[tuple] = []
            # The level is finished before a verdict, and ties between violations at the same
            # depth go to the lowest code, so the answer does not depend on search order.
            dead: tuple | None = None   # (state, None, violation) at this depth
            best: tuple | None = None   # (predecessor, action, violation) one level deeper
            for n, state in enumerate(frontier):
                succ = system.successors(state)
                if not succ and not system.is_done(state):
                    stuck = system.deadlock(state)
                    if stuck.code not in ignore and (dead is None or stuck.code < dead[2].code):
                        dead = (state, None, stuck)
                for action, nxt, violation in succ:
                    transitions += 1
                    if violation is not None and violation.code not in ignore:
                        if best is None or violation.code < best[2].code:
                            best = (state, action, violation)
                        continue
                    if reduce is not None:
                        nxt = reduce(nxt)
                    if nxt in parent:
                        continue
                    parent[nxt] = state
                    bad = kept(system.state_violations(nxt))
                    if bad:
                        if best is None or primary(bad).code < best[2].code:
                            best = (state, action, primary(bad))
                        continue
                    next_frontier.append(nxt)
                if (n & 255) == 0:
                    now = time.perf_counter()
                    if limits.timeout is not None and now - start > limits.timeout:
                        return result("bounded", reason=f"time limit {limits.timeout:g}s reached "
                                      f"at depth {depth}")
                    if limits.max_states is not None and len(parent) > limits.max_states:
                        return result("bounded", reason=f"state limit {limits.max_states} "
                                      f"reached at depth {depth}")
                    if limits.max_memory_mb is not None and now >= next_memory_check:
                        next_memory_check = now + 1.0
                        if _rss_mb() > limits.max_memory_mb:
                            return result("bounded", reason=f"memory limit "
                                          f"{limits.max_memory_mb} MB reached at depth {depth}")
                    if progress is not None and now >= next_report:
                        next_report = now + 0.25
                        progress({"states": len(parent), "depth": depth,
                                  "frontier": len(frontier) - n + len(next_frontier),
                                  "rate": len(parent) / max(now - start, 1e-9),
                                  "seconds": now - start})
            if dead is not None:
                return found(*dead)
            if best is not None:
                depth += 1
                return found(*best)
            if next_frontier:
                depth += 1
            frontier = next_frontier
    except KeyboardInterrupt:
        return result("bounded", reason=f"interrupted at depth {depth}")
    finally:
        if gc_was_enabled:
            gc.enable()
    return result("verified")


def _path(parent: dict, state: tuple | None) -> list[tuple]:
    """The states from the initial state's successor up to `state`. Only predecessors are
    stored (no actions): the schedule is re-derived when it is made concrete."""
    chain = []
    while state is not None and parent.get(state) is not None:
        chain.append(state)
        state = parent[state]
    chain.reverse()
    return chain


def _concretize(system: System, canon, parent: dict, pred: tuple | None, action: int | None,
                ignore: frozenset[str]) -> list[int]:
    """Map a path through orbit representatives to one concrete schedule."""
    chain = _path(parent, pred)
    current = system.initial_state()
    actions: list[int] = []

    def follow(target_canon: tuple, want_code: str | None) -> None:
        nonlocal current
        for b in range(system.n_actions):
            if system.enabled(current, b):
                nxt, v = system.step(current, b)
                code = v.code if v is not None and v.code not in ignore else None
                if canon(nxt) == target_canon and code == want_code:
                    actions.append(b)
                    current = nxt
                    return
        raise AssertionError("symmetry reduction lost a step of the counterexample")

    for state in chain:
        follow(state, None)
    if action is not None:
        nxt, v = system.step(pred, action)
        want = v.code if v is not None and v.code not in ignore else None
        follow(canon(nxt), want)
    return actions
