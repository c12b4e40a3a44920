"""Persistent sets that keep the shortest phase overrun (BP101 at a completion) and late join
(BP102) of Pallas barriers: arrivals counted per barrier (docs/POR.md, "Keeping BP101 and
BP102 at their depth").

A Pallas waiter w of barrier i that will wait on it again is *behind* by
`lag = phase(i) - max(seen_w, 0)` completions. Both rules need some such waiter behind by two:
BP101 fires at a completion that leaves it two behind, BP102 where it stands at its first wait
with the phase at 2 or more. On a path of steps outside a persistent set T, seen entries only
grow and a waiter only stops waiting on i, so a waiter's lag grows at most by the completions of
i on the path. Those need arrivals: the first `pending(i)` of them, each further one
`expected(i)` more. The arrivals the actors outside T can make are bounded by their futures up to
their horizons (por.py): a thread does not pass a wait whose guard is false and whose inputs
only actors in T write. So T keeps both rules when, for every Pallas barrier, either no actor
outside T writes it, or its largest lag plus the completions those arrivals allow is at most 1.
Where that fails the chooser adds the barrier's writers outside T (or, with a waiter already two
behind, every actor whose future touches it) and closes the set again.

Kept only in Systems whose BP101 is this rule alone: no stated-phase waits (a state rule a
waiter's own step creates) and no bare parity waits (aliasing judged across schedules).
"""

from __future__ import annotations

from ...model import instructions as ins
from ...model.instructions import (BARRIER_FIELDS, EFFECT_ARRIVE, EFFECT_COMPLETE_TX, EXPECTED,
                                   PENDING, PHASE)

# An arrival count past this (or a step whose arrivals on a barrier are not stated below)
# counts as unbounded: the barrier's writers then join any set it is at risk in.
COUNTED = 1024
# Arrivals per step on each instance of its arrival set, by opcode: what the effect passes
# to System._arrive. A step that writes a barrier otherwise (arrive_drop lowers the expected
# count) is unbounded.
_ARRIVALS = {ins.ARRIVE: lambda instr: instr.amount, ins.ARRIVE_TX: lambda instr: 1,
             ins.EXPECT_TX: lambda instr: 0, ins.COMPLETE_TX: lambda instr: 0}


def keepable(system) -> bool:
    """BP101 and BP102 are the completion and late-join rules of Pallas waits only."""
    return not any(i.op in (ins.WAIT_PHASE, ins.WAIT_PARITY)
                   for prog in system.programs for i in prog)


class Arrivals:
    """What depends on the program: the Pallas barriers (`insts`, index k), their waiters
    (agent, seen position, last pc waiting on it), and per thread prefix sums over its program
    of the arrivals each instruction makes or causes on each (`cum`, and `unbounded`, the
    prefix count of steps that make an uncounted number)."""

    def __init__(self, system, sets):
        P = sets.P
        self.insts = [i for i, parts in enumerate(system.participants)
                      if any(pos in system.pallas_seen for _, pos in parts)]
        self.index = {i: k for k, i in enumerate(self.insts)}
        self.bits = [P[i] for i in self.insts]
        self.waiters = []
        for i in self.insts:
            row = []
            for a, pos in system.participants[i]:
                if pos in system.pallas_seen:
                    last = max(pc for pc, x in enumerate(system.programs[a])
                               if x.op in ins.WAITS and x.target == i)
                    row.append((a, pos, last))
            self.waiters.append(tuple(row))
        n = len(self.insts)
        self.slot = [self._slot(system, k) for k in range(len(system.slots))]
        self.entry = [self._entry(system, e) for e in range(len(system.arrival_sets))]
        self.cum, self.unbounded = [], []
        for a, prog in enumerate(system.programs):
            cum, unb = [[0] * n], [[0] * n]
            for pc, instr in enumerate(prog):
                made, wild = self._step(system, sets, a, pc, instr)
                cum.append([c + m for c, m in zip(cum[-1], made)])
                unb.append([u + x for u, x in zip(unb[-1], wild)])
            self.cum.append(cum)
            self.unbounded.append(unb)

    def _slot(self, system, k) -> tuple[int, int]:
        """(index k of its Pallas barrier or -1, arrivals per delivery or -1 unbounded)."""
        slot = system.slots[k]
        if slot.inst not in self.index:
            return -1, 0
        per = 1 if slot.effect == EFFECT_ARRIVE else 0 if slot.effect == EFFECT_COMPLETE_TX \
            else -1
        return self.index[slot.inst], per

    def _entry(self, system, e) -> tuple[int, ...]:
        return tuple(self.index[i] for i in system.arrival_sets[e] if i in self.index)

    def _step(self, system, sets, a, pc, instr):
        n = len(self.insts)
        made, wild = [0] * n, [0] * n
        counted = set()
        per = _ARRIVALS.get(instr.op)
        if per is not None:
            amount = per(instr)
            for i in instr.target:
                k = self.index.get(i)
                if k is None:
                    continue
                counted.add(k)
                if amount > COUNTED:
                    wild[k] = 1
                else:
                    made[k] += amount
        t = sets.touched[a][pc]
        for s in t.issues:
            k, d = self.slot[s]
            if k >= 0:
                if d < 0:
                    wild[k] = 1
                else:
                    made[k] += d
        if t.enqueues is not None:
            for k in self.entry[t.enqueues]:
                made[k] += 1
        # what the step writes itself, beyond what it is counted for
        for k, b in enumerate(self.bits):
            if sets.writes[a][pc] & b and k not in counted:
                wild[k] = 1
        return made, wild


def completions(arrivals: int, wild: bool, pending: int, expected: int) -> int:
    """How many times a barrier can complete given at most `arrivals` more (2 standing for
    'enough': only 0, 1 and more than 1 matter). With none pending, the phase waits for tx
    bytes and may complete without an arrival."""
    if wild or expected <= 0:
        return 2
    if pending > 0:
        if arrivals < pending:
            return 0
        return min(2, 1 + (arrivals - pending) // expected)
    return min(2, 1 + arrivals // expected)


def lag(system, arrivals: Arrivals, state: tuple, k: int) -> int:
    """How many completions behind its most lagging waiter that will wait again is (-1: none
    will)."""
    phase = state[system.barrier_base + BARRIER_FIELDS * arrivals.insts[k] + PHASE]
    worst = -1
    for a, pos, last in arrivals.waiters[k]:
        if state[a] <= last:
            worst = max(worst, phase - max(state[pos], 0))
    return worst


def fields(system, state: tuple, inst: int) -> tuple[int, int]:
    b = system.barrier_base + BARRIER_FIELDS * inst
    return state[b + PENDING], state[b + EXPECTED]
