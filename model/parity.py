"""Bare parity waits judged by what the hardware does (SEMANTICS.md, docs/parity.md).

A `wait_parity(bar, P)` without `phase=` carries no phase number, so there is no intent to check
it against. What can go wrong is behaviour: the wait never returns (BP100), or the same dynamic
wait (one thread, one point of its unrolled program) returns after completion n on one schedule
and after completion m != n on another (BP101, parity aliasing: on one of them the thread was
two phases behind, or the barrier two phases ahead). A deadlock with a thread at a bare wait
whose barrier has completed p > n times, n a completion the wait returns after on another
schedule, is that aliasing too (the barrier ran past the phase the wait returns for, onto one
of the parity it waits out): `aliasing` reports it with the deadlock as `this` run. A wait that returns after the same
completion on every schedule is correct whatever its thread observed before: CUTLASS's sm90
ping-pong has each math warpgroup skip the other's phases of a shared ring on purpose.

The wait at program point pc of agent a returns from a state s iff a is at pc and the barrier's
parity differs from P in s; it then returns after completion phase(s). So the completions it
can return after are {phase(s) : s reachable, a at pc, guard true}: a function of the set of
reachable states, which the explorer collects state by state (explore.py `ParityReturns`) and
the reduced searches keep (docs/POR.md, "Parity aliasing").

>>> from barrierproof.model.dsl import protocol
>>> @protocol
... def once(k):
...     k.threads(2, name="wg")
...     bar = k.Barrier()
...     with k.when(k.thread == 0):
...         k.arrive(bar)
...     with k.otherwise():
...         k.wait_parity(bar, 0)
>>> from barrierproof.model.semantics import System
>>> system = System(once.build())
>>> s = system.step(system.initial_state(), 0)[0]
>>> returning(system, s)
[(1, 0, 1)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .instructions import BARRIER_FIELDS, WAIT_PARITY
from .violations import Violation

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System


def bare_waits(system: System) -> list[tuple[int, dict[int, tuple[int, int]]]]:
    """(agent, {pc: (state position of the barrier's phase, parity)}) for the bare parity
    waits of every agent that has one."""
    out = []
    for a, prog in enumerate(system.programs):
        at = {pc: (system.barrier_base + BARRIER_FIELDS * i.target, i.amount)
              for pc, i in enumerate(prog) if i.op == WAIT_PARITY}
        if at:
            out.append((a, at))
    return out


def returning(system: System, state: tuple, waits=None) -> list[tuple[int, int, int]]:
    """(agent, pc, completion) for every agent at a bare parity wait that can return in `state`,
    with the completion count it would return after."""
    out = []
    for a, at in (waits if waits is not None else bare_waits(system)):
        pc = state[a]
        wait = at.get(pc)
        if wait is not None:
            phase = state[wait[0]]
            if (phase & 1) != wait[1]:
                out.append((a, pc, phase))
    return out


def blocked(system: System, state: tuple, waits=None) -> list[tuple[int, int, int]]:
    """(agent, pc, completions so far) for every agent at a bare parity wait in `state` when
    `state` is a deadlock (an unfinished agent, nothing enabled)."""
    if system.is_done(state) or any(system.enabled(state, x) for x in range(system.n_actions)):
        return []
    out = []
    for a, at in (waits if waits is not None else bare_waits(system)):
        wait = at.get(state[a])
        if wait is not None:
            out.append((a, state[a], state[wait[0]]))
    return out


def _return_at_end(system: System, states: Sequence[tuple]) -> tuple[int, int, int] | None:
    """(agent, pc, completion) when the run's last step is one agent's step off a bare parity
    wait, returning after that completion."""
    if len(states) < 2:
        return None
    before, after = states[-2], states[-1]
    moved = [a for a in range(system.n_agents) if after[a] != before[a]]
    if len(moved) != 1:
        return None
    a = moved[0]
    found = [r for r in returning(system, before) if r[0] == a]
    if not found or after[a] != before[a] + 1:
        return None
    return found[0]


def aliasing(system: System, this: Sequence[tuple], other: Sequence[tuple]) -> Violation | None:
    """BP101 when two runs (their state sequences) show one bare parity wait returning after
    different completions: both end with one agent's step off it, or `other` does and `this`
    ends in a deadlock with the agent at that wait while the barrier has already completed
    more often than when the wait returned on `other` (a phase of the parity it waits out: the
    alias the deadlock follows from). `this` is the run the report's trace shows."""
    theirs = _return_at_end(system, other)
    if theirs is None:
        return None
    b, pc2, m = theirs
    mine = _return_at_end(system, this)
    if mine is not None and mine[:2] == (b, pc2):
        return None if mine[2] == m else _violation(system, b, pc2, mine[2], m, this, other)
    stuck = [(a, pc, p) for a, pc, p in blocked(system, this[-1]) if (a, pc) == (b, pc2)]
    if not stuck or stuck[0][2] <= m:
        return None
    return _violation(system, b, pc2, stuck[0][2], m, this, other, deadlock=True)


def _violation(system: System, a: int, pc: int, n: int, m: int, this, other,
               deadlock: bool = False) -> Violation:
    instr = system.programs[a][pc]
    source = system.sources[instr.src]
    name, barrier = system.agents[a].name, system.instances[instr.target].name
    where = f"{name}'s {source.text} ({source.loc})"
    if deadlock:
        return Violation(
            "BP101", f"{where} returns after completion {m} of {barrier} on another schedule "
            f"({len(other) - 1} steps), but on this schedule ({len(this) - 1} steps) {barrier} "
            f"has already completed {n} time(s) when {name} waits there, a phase of the parity "
            f"its bit waits out, so it could return only after completion {n + 1}, which never "
            "comes (deadlock): its parity bit cannot tell these phases apart, so which phase it "
            "returns for depends on the schedule (parity aliasing)",
            a, instr.target, instr.src,
            [f"on the other schedule {barrier} has {m} completion(s) when {name} passes the "
             "wait",
             f"on this schedule it has {n} when {name} reaches the wait, and nothing can "
             "move any more"])
    return Violation(
        "BP101", f"{where} returns after completion {n} "
        f"of {barrier} on this schedule ({len(this) - 1} steps) and after completion {m} on "
        f"another ({len(other) - 1} steps): its parity bit cannot tell these phases apart, so "
        "which phase it returns for depends on the schedule (parity aliasing)",
        a, instr.target, instr.src,
        [f"on this schedule {barrier} has {n} completion(s) when {name} passes the wait",
         f"on the other schedule it has {m}"])
