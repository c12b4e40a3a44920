"""The step rules: one guard and one effect per opcode of an unrolled program (SEMANTICS.md).

A guard says when a thread may take the step (None: always); an effect changes the barrier state
of a `System` and returns the rule it breaks, if any (None: only the program counter moves).
`System.step` and `System.successors` (semantics.py) apply them; the barrier micro-steps they
share (an arrival, a tx change, a phase completion) are `System` methods, as the state layout
they index is. The TLA+ emitter and the Z3 encoding each have one row per opcode too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .instructions import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, AWAIT_FORK, BARRIER_FIELDS,
                           BARRIER_TEST, COMPLETE_TX, EXPECT_TX, EXPECTED, FORK, ISSUE_ASYNC,
                           ISSUE_TCGEN05, JOIN, SEM_SIGNAL, SEM_SIGNAL_SET, SEM_WAIT,
                           SIGNALS_LANDED, UNMODELED, WAIT, WAIT_PARITY, WAIT_PHASE, Instr)
from .violations import Violation

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System


def _phase(system: System, state, inst: int) -> int:
    return state[system.barrier_base + BARRIER_FIELDS * inst]


def guard_wait(system: System, state, instr: Instr) -> bool:
    """barrier_wait: the thread's private parity bit counts its own waits; it waits for the phase
    after the last one it observed. Passes iff the current parity differs from that bit."""
    seen = state[instr.aux]
    parity = seen & 1 if seen > 0 else 0
    return (_phase(system, state, instr.target) & 1) != parity


def guard_wait_parity(system: System, state, instr: Instr) -> bool:
    """try_wait.parity(P): true iff the phase with parity P has completed (current parity != P)."""
    return (_phase(system, state, instr.target) & 1) != instr.amount


def guard_wait_phase(system: System, state, instr: Instr) -> bool:
    """try_wait.parity((c - 1) % 2) for the thread's completion c: passes iff the barrier's
    parity is that of c."""
    return (_phase(system, state, instr.target) & 1) == (instr.amount & 1)


def intended_completion(instr: Instr, seen: int) -> int:
    """The completion a parity wait means (the phase the thread means, plus one).

    WAIT_PHASE states it: the thread's own phase count, which is what the rules check. For a
    bare WAIT_PARITY it is only a guess, which no rule checks (model/parity.py judges bare
    waits by what they return after; tests show where the guess goes wrong): the next
    completion this agent has not observed whose number has parity P + 1 (it passes once the
    barrier's parity differs from P): after observing `seen` completions (-1: none yet) that is
    seen + 1 or seen + 2. A fresh barrier (seen -1) with P = 1 means completion 0: the initial
    phase, which has already passed (CUTLASS's producer_acquire).

    >>> [intended_completion(Instr(WAIT_PARITY, 0, p, 0, 0), -1) for p in (1, 0)]
    [0, 1]
    >>> intended_completion(Instr(WAIT_PARITY, 0, 0, 0, 0), 1)   # parity not toggled
    3
    """
    if instr.op == WAIT_PHASE:
        return instr.amount
    return seen + 1 if (seen - instr.amount) % 2 == 0 else seen + 2


def guard_sem_wait(system: System, state, instr: Instr) -> bool:
    """semaphore_wait: the counter has reached the value."""
    return _phase(system, state, instr.target) >= instr.amount


def effect_sem_signal(system: System, s: list, instr: Instr, agent: int, events) -> None:
    s[system.barrier_base + BARRIER_FIELDS * instr.target] += instr.amount


def effect_sem_wait(system: System, s: list, instr: Instr, agent: int, events) -> None:
    if instr.aux:
        s[system.barrier_base + BARRIER_FIELDS * instr.target] -= instr.amount


def guard_await_fork(system: System, state, instr: Instr) -> bool:
    parent, fork_pc = instr.aux
    return state[parent] >= fork_pc


def guard_join(system: System, state, instr: Instr) -> bool:
    return all(state[w] >= end for w, end in instr.aux)


def effect_arrive(system: System, s: list, instr: Instr, agent: int, events) -> Violation | None:
    violation = None
    for inst in instr.target:
        violation = violation or system._arrive(s, inst, instr.amount, agent, instr.src, events)
    return violation


def effect_arrive_drop(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        b = system.barrier_base + BARRIER_FIELDS * inst
        s[b + EXPECTED] -= 1
        if s[b + EXPECTED] < 0 and violation is None:
            violation = Violation("BP121", f"arrive_drop lowers the expected count of "
                                  f"{system.instances[inst].name} below zero",
                                  agent, inst, instr.src)
        violation = violation or system._arrive(s, inst, 1, agent, instr.src, events)
    return violation


def effect_expect_tx(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, instr.amount, agent, instr.src, events)
    return violation


def effect_arrive_expect_tx(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, instr.amount, agent, instr.src, events)
        violation = violation or system._arrive(s, inst, 1, agent, instr.src, events)
    return violation


def effect_complete_tx(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, -instr.amount, agent, instr.src, events)
    return violation


def effect_wait(system: System, s: list, instr: Instr, agent: int, events) -> None:
    # The wait observed every completion so far.
    s[instr.aux] = _phase(system, s, instr.target)


def effect_barrier_test(system: System, s: list, instr: Instr, agent: int, events) -> None:
    """barrier_test: true iff barrier_wait would pass now; then it flips the private bit, as
    the wait would (Mosaic GPU stores the new parity only when the test succeeds). The
    protocol's control flow does not depend on the answer."""
    if guard_wait(system, s, instr):
        s[instr.aux] = _phase(system, s, instr.target)


def effect_wait_parity(system: System, s: list, instr: Instr, agent: int, events):
    """A wait for a stated phase must return for it. (One the barrier has already run past is
    caught before, as a state: `state_violations`.) A bare parity wait states no phase: what it
    returns after is judged across schedules (model/parity.py)."""
    phase = _phase(system, s, instr.target)
    s[instr.aux] = phase
    if instr.op != WAIT_PHASE:
        return None
    meant = instr.amount
    if phase != meant:
        return Violation(
            "BP101", f"{system.agents[agent].name}'s wait on {system.instances[instr.target].name} "
            f"means completion {meant} but returns after completion {phase}, a phase it does "
            "not mean (its parity bit is stale)", agent, instr.target, instr.src)
    return None


def effect_issue_async(system: System, s: list, instr: Instr, agent: int, events):
    # The issuer's arrive.expect_tx (Pallas copies), then the copy is in flight.
    violation = effect_arrive_expect_tx(system, s, instr, agent, events)
    for slot in instr.aux:
        s[system.slot_base + slot] += 1
    return violation


def effect_sem_signal_set(system: System, s: list, instr: Instr, agent: int, events) -> None:
    for slot in instr.aux:
        s[system.slot_base + slot] += 1


def guard_signals_landed(system: System, state, instr: Instr) -> bool:
    return not any(state[system.slot_base + slot] for slot in instr.aux)


def effect_issue_tcgen05(system: System, s: list, instr: Instr, agent: int, events) -> None:
    q = system.queue_pos[agent]
    s[q] = s[q] + (instr.aux,)


GUARDS = {
    ARRIVE: None, ARRIVE_DROP: None, EXPECT_TX: None, ARRIVE_TX: None, COMPLETE_TX: None,
    WAIT: guard_wait, WAIT_PARITY: guard_wait_parity, ISSUE_ASYNC: None, ISSUE_TCGEN05: None,
    FORK: None, AWAIT_FORK: guard_await_fork, JOIN: guard_join, UNMODELED: None,
    WAIT_PHASE: guard_wait_phase, SEM_SIGNAL: None, SEM_WAIT: guard_sem_wait,
    BARRIER_TEST: None, SEM_SIGNAL_SET: None, SIGNALS_LANDED: guard_signals_landed,
}   # and the plug-ins' (extensions.py)
EFFECTS = {
    ARRIVE: effect_arrive, ARRIVE_DROP: effect_arrive_drop, EXPECT_TX: effect_expect_tx,
    ARRIVE_TX: effect_arrive_expect_tx, COMPLETE_TX: effect_complete_tx, WAIT: effect_wait,
    WAIT_PARITY: effect_wait_parity, ISSUE_ASYNC: effect_issue_async,
    ISSUE_TCGEN05: effect_issue_tcgen05, FORK: None, AWAIT_FORK: None, JOIN: None,
    UNMODELED: None, WAIT_PHASE: effect_wait_parity, SEM_SIGNAL: effect_sem_signal,
    SEM_WAIT: effect_sem_wait, BARRIER_TEST: effect_barrier_test,
    SEM_SIGNAL_SET: effect_sem_signal_set, SIGNALS_LANDED: None,
}   # and the plug-ins' (extensions.py)
