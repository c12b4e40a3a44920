"""Family: the warp regions' fork and join (ir.WarpRegion), which the compiler emits itself
(model/compile.py): no IR kind is theirs (kinds.STRUCTURAL_OPCODES), only their steps.

A warpgroup forks its warps (FORK); each warp waits until its warpgroup has forked
(AWAIT_FORK); the warpgroup goes on once every warp has finished its body (JOIN). Program
counters only grow: once enabled, a fork's or join's guard stays true.

The JOIN also ends each warp's loads and stores after its last instruction in the body (its
tail, live until then): model/memory.py reads them off the warpgroup's pc (`retired`), and the
partial-order reduction counts them as what the JOIN stops touching (por.py `release_r/w`).
"""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..steps import ENDED, FORKED, Step, Tla, Touch, tla_seq


def guard_await_fork(system, state, instr) -> bool:
    parent, fork_pc = instr.aux
    return state[parent] >= fork_pc


def guard_join(system, state, instr) -> bool:
    return all(state[w] >= end for w, end in instr.aux)


def touches_await_fork(system, agent: int, instr) -> Touch:
    parent, fork_pc = instr.aux
    return Touch(guard_reads=((FORKED, parent),) if fork_pc > 0 else ())


def touches_join(system, agent: int, instr) -> Touch:
    ends = [(w, end) for w, end in instr.aux if end > 0]
    return Touch(guard_reads=tuple((ENDED, w) for w, _ in ends),
                 writes_at=tuple((w, end - 1, (ENDED, w)) for w, end in ends))


def _await_fork_text(system, instr) -> str:
    parent, at = instr.aux
    return f"await_fork({parent + 1}, {at})"


STEPS = (
    Step(ins.FORK, guard=None, effect=None,
         touches=lambda system, agent, instr: Touch(writes=((FORKED, agent),)),
         resources="writes F(self)", waits=False, symmetry="fork",
         tla=Tla("fork", "Fork", lambda system, instr: "fork")),
    Step(ins.AWAIT_FORK, guard=guard_await_fork, effect=None, touches=touches_await_fork,
         resources="guard reads F(parent)", waits=True, symmetry="parent agent",
         tla=Tla("await_fork(parent, at)", "AwaitFork", _await_fork_text)),
    Step(ins.JOIN, guard=guard_join, effect=None, touches=touches_join,
         resources="guard reads J(warps); ends their tails' loads and stores", waits=True, symmetry="warp agents",
         tla=Tla("join(joins)", "Join", lambda system, instr: "join(" + tla_seq(
             f"<<{w + 1}, {end}>>" for w, end in instr.aux) + ")")),
)

EXTENSION = Extension("warp regions", steps=STEPS)
