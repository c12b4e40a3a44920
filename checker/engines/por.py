"""Partial-order reduction by local steps: a state where some agent's next step touches nothing
but that agent expands that step alone.

A *local step* is a thread's instruction that reads and writes only its own program counter and
its own tcgen05 queue: `unmodeled`, `fork`, `await_fork`, `join`, `issue_tcgen05`. Once enabled
it stays enabled (the guards of `await_fork` and `join` read program counters, which only grow),
it commutes with every other action, and no other action can enable or disable it. The singleton
{t} is then a persistent (ample) set. It is also *invisible* to every rule when the instruction
after it is not a wait and it does not finish the last running agent: the rules read an agent's
position only through "is it at a wait" (BP101, BP102) and "has every agent finished" (BP103,
BP104, BP105, BP130 at exit). The state graph has no cycles (every action advances a program
counter or delivers an in-flight operation, and deliveries are bounded by the issues before
them), so no cycle proviso is needed. docs/POR.md argues rule by rule why verdicts are kept.

Counterexamples: the reduced graph finds a violation whenever the full one has one, but not
always at the least depth, so the explorer searches again without this reduction up to that
depth and reports the shortest counterexample that search finds.
"""

from __future__ import annotations

from typing import Callable

from ...model.semantics import (AWAIT_FORK, FORK, ISSUE_TCGEN05, JOIN, UNMODELED, WAIT,
                                WAIT_PARITY, System, guard_await_fork, guard_join)

LOCAL = {UNMODELED, FORK, AWAIT_FORK, JOIN, ISSUE_TCGEN05}


def local_steps(system: System) -> Callable[[tuple], int | None] | None:
    """A function from a state to one agent whose next step is local and invisible, or None
    when there is none; None instead of a function when no program has a local step."""
    # kind[a][pc]: 0 not a candidate, 1 candidate, 2 candidate if another agent still runs.
    kinds = []
    for prog in system.programs:
        row = []
        for pc, instr in enumerate(prog):
            if instr.op not in LOCAL:
                row.append(0)
            elif pc + 1 == len(prog):
                row.append(2)
            else:
                row.append(0 if prog[pc + 1].op in (WAIT, WAIT_PARITY) else 1)
        kinds.append(row)
    if not any(any(row) for row in kinds):
        return None
    agents = [a for a, row in enumerate(kinds) if any(row)]
    lengths = system.lengths
    programs = system.programs
    n_agents = system.n_agents

    def choose(state: tuple) -> int | None:
        for a in agents:
            pc = state[a]
            if pc >= lengths[a]:
                continue
            kind = kinds[a][pc]
            if not kind:
                continue
            instr = programs[a][pc]
            if instr.op == AWAIT_FORK and not guard_await_fork(system, state, instr):
                continue
            if instr.op == JOIN and not guard_join(system, state, instr):
                continue
            if kind == 2 and not any(state[b] < lengths[b] for b in range(n_agents) if b != a):
                continue
            return a
        return None
    return choose
