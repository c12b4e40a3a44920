"""Bare parity waits that skip phases, proved through the phase they return after.

A bare `wait_parity(bar, P)` states no phase: it is correct when it returns after the same
completion on every schedule (docs/parity.md). The class systems hold such a wait to the Pallas
rule (observe every completion, never pass with nothing new), which a waiter that skips the
phases of another (CUTLASS's sm90 ping-pong: two math warpgroups share one ring, each waits only
on its own loads) breaks on purpose, so that rule cannot prove it.

What such a wait returns after is, in every protocol of the field, a linear function of its
iteration: the lap its pipeline state counts, `P = L % 2` with the completion L + 1 + 2c for a
constant c (c = 0 for consumer_wait, -1 for producer_acquire's opposite bit on a fresh slot).
This module reads L off the parity expression, runs the kernel concretely at a few small
parameter values to find c, and states the phase: `wait_parity(bar, phase=L + 2c)`, the same
try_wait.parity (its parity is P's) held to the stricter stated-phase rule (return after
completion L + 2c + 1 and no other, never sit at the wait once the barrier ran past it). A
proof of that rule fixes every wait's returning completion as one function of its iteration on
every schedule, so it proves the bare wait's rule (and deadlock freedom, the waits passing on
the same states); the samples only propose c, Z3 decides. A wait whose samples disagree, or that
no sample reached, keeps its bare parity and the class systems' rule: no proof is claimed from
a guess.

Only barriers on which some sampled wait skips or repeats a completion (returns after a
completion other than the one after its thread's last observed one) are rewritten: the others
the Pallas rule proves, with the observation abstraction that counts identical threads.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from ...model import primitives
from ...model.instructions import BARRIER_FIELDS, WAIT_PARITY, WAIT_PHASE
from ...model.ir import BinOp, Const, Kernel, ModelError, Op, map_ops, walk
from ...model.semantics import compile_systems

# Stated phases of the sampling copy are shifted by 2 * SHIFT so that none is below -1 (the
# shift keeps their parity; it is taken off again when c is read).
SHIFT = 1 << 20
MAX_STEPS = 200_000


def lift(parity):
    """An integer expression with the parity of `parity` whose value counts phases: the
    expression under its `% 2`, with xor as a sum (`((n // S) % 2) ^ 1` is n // S + 1)."""
    if isinstance(parity, BinOp):
        if parity.op == "%" and _is_two(parity.rhs):
            return lift(parity.lhs)
        if parity.op in ("xor", "+"):
            return BinOp("+", lift(parity.lhs), lift(parity.rhs))
        if parity.op == "-":
            return BinOp("-", lift(parity.lhs), lift(parity.rhs))
    return parity


def _is_two(e) -> bool:
    return (isinstance(e, int) and e == 2) or (isinstance(e, Const) and e.value == 2)


def _bare(op) -> bool:
    return isinstance(op, Op) and op.kind == primitives.WAIT_PARITY and op.phase is None \
        and op.barrier is not None


def _run(system, pick_last: bool) -> list[tuple[int, int, int, int]]:
    """(agent, pc, completion count, observed before) of every bare parity wait passed on one
    schedule: the first (or last) enabled action at every step, to the end or a stuck state."""
    state = system.initial_state()
    out = []
    for _ in range(MAX_STEPS):
        succ = system.successors(state)
        if not succ:
            break
        action, after, _ = succ[-1] if pick_last else succ[0]
        if action < system.n_agents:
            instr = system.current(state, action)
            if instr.op == WAIT_PARITY:
                phase = state[system.barrier_base + BARRIER_FIELDS * instr.target]
                out.append((action, state[action], phase, state[instr.aux]))
        state = after
    return out


def infer_phases(kernel: Kernel, points: Sequence[Mapping[str, int]]
                 ) -> tuple[Kernel, list[str]]:
    """The kernel with the bare parity waits of every barrier on which a sampled wait skips a
    phase given the phase they return after (module docstring), and a note per barrier whose
    skipping waits keep their bare parity (why)."""
    bare = [op for op in walk(kernel.body) if _bare(op)]
    if not bare:
        return kernel, []
    sample: dict[int, Op] = {}         # id of the sampling copy's op -> the kernel's op

    def stated(op):
        if not _bare(op):
            return op
        new = dataclasses.replace(op, phase=BinOp("+", lift(op.parity), Const(2 * SHIFT)))
        sample[id(new)] = op
        return new

    copy = kernel.replace(body=map_ops(kernel.body, stated))
    offsets: dict[int, set[int]] = {}   # id(op) -> the c each sampled return shows
    skipping: set[str] = set()          # barriers some sampled wait skips a phase of
    for values in points:
        try:
            systems = compile_systems(kernel, values, races=False)
            copies = compile_systems(copy, values, races=False)
        except (ModelError, ArithmeticError):     # a point the bits cannot be evaluated at
            continue
        if len(systems) != len(copies):
            continue
        for system, twin in zip(systems, copies):
            for pick_last in (False, True):
                for agent, pc, phase, seen in _run(system, pick_last):
                    instr = twin.programs[agent][pc]
                    op = sample.get(id(twin.sources[instr.src].op))
                    if instr.op != WAIT_PHASE or op is None:
                        continue
                    # stated completion: lift + 2 SHIFT + 1; returned: lift + 1 + 2c
                    offsets.setdefault(id(op), set()).add((phase - instr.amount) // 2 + SHIFT)
                    if phase != seen + 1 and not (seen < 0 and phase <= 1):
                        skipping.add(op.barrier.alloc.name)
    if not skipping:
        return kernel, []
    notes = []
    chosen: dict[int, int] = {}
    for name in sorted(skipping):
        ops = [op for op in bare if op.barrier.alloc.name == name]
        seen = [offsets.get(id(op), set()) for op in ops]
        bad = [op for op, cs in zip(ops, seen) if len(cs) != 1]
        if bad:
            op = bad[0]
            why = "no sample reached it" if not offsets.get(id(op)) else \
                "its sampled returns are not one completion of its lap"
            notes.append(f"{op.describe()} ({op.loc}) skips phases of {name} and keeps its bare "
                         f"parity ({why}): its returning completion (BP101) is not proved "
                         "by the stated-phase rule")
            continue
        for op, cs in zip(ops, seen):
            chosen[id(op)] = next(iter(cs))

    def rewrite(op):
        if not _bare(op) or id(op) not in chosen:
            return op
        c = chosen[id(op)]
        phase = lift(op.parity)
        if c:
            phase = BinOp("+", phase, Const(2 * c))
        return dataclasses.replace(op, phase=phase)

    if not chosen:
        return kernel, notes
    return kernel.replace(body=map_ops(kernel.body, rewrite)), notes
