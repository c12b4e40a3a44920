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

from ...model.semantics import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, AWAIT_FORK, COMPLETE_TX,
                                EXPECT_TX, FORK, ISSUE_ASYNC, ISSUE_TCGEN05, JOIN, UNMODELED,
                                SEM_WAIT, WAITS, System, guard_await_fork, guard_join)

LOCAL = {UNMODELED, FORK, AWAIT_FORK, JOIN, ISSUE_TCGEN05}


def local_steps(system: System) -> Callable[[tuple], int | None] | None:
    """A function from a state to one agent whose next step is local and invisible, or None
    when there is none; None instead of a function when no program has a local step.

    With several blocks, BP146 reads whether a block has exited and whether a thread is at an
    access to another block's barrier: a last step counts only while another thread of its
    block runs, and a step onto such an access is never taken alone. Kernels with hardware
    (named) barriers are not reduced: their rules read more of a thread's position; nor are
    kernels whose memory accesses are checked for races (BP200/BP201 read every position)."""
    if getattr(system, "hw_instances", None) or system.memory is not None:
        return None
    # kind[a][pc]: 0 not a candidate, 1 candidate, 2 candidate if another agent (of the same
    # block, when there are several) still runs.
    kinds = []
    for a, prog in enumerate(system.programs):
        row = []
        for pc, instr in enumerate(prog):
            if instr.op not in LOCAL:
                row.append(0)
            elif pc + 1 == len(prog):
                row.append(2)
            else:
                row.append(0 if _visible_next(system, a, prog[pc + 1]) else 1)
        kinds.append(row)
    if not any(any(row) for row in kinds):
        return None
    agents = [a for a, row in enumerate(kinds) if any(row)]
    lengths = system.lengths
    programs = system.programs
    blocks = len(system.blocks) > 1
    # who must still run for a last step to stay invisible
    others = {a: [b for b in range(system.n_agents) if b != a and
                  (not blocks or system.agents[b].block == system.agents[a].block)]
              for a in agents}

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
            if kind == 2 and not any(state[b] < lengths[b] for b in others[a]):
                continue
            return a
        return None
    return choose


def _visible_next(system: System, agent: int, instr) -> bool:
    """Does arriving at `instr` change a rule's view of the agent: a wait (BP101, BP102), or,
    with several blocks, an access to another block's barrier (BP146)?"""
    if instr.op in WAITS or instr.op == SEM_WAIT:
        return True
    if len(system.blocks) > 1 and instr.op in (ARRIVE, ARRIVE_DROP, EXPECT_TX, ARRIVE_TX,
                                                COMPLETE_TX, ISSUE_ASYNC):
        own = system.agents[agent].block
        insts = list(instr.target)
        if instr.op == ISSUE_ASYNC:
            insts += [system.slots[k].inst for k in instr.aux]
        return any(system.instances[i].block != own for i in insts)
    return False
