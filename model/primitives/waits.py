"""Family: waits on an mbarrier's phase (Pallas's barrier_wait and barrier_test with their
private parity bit; the hardware's try_wait.parity, with a stated phase or a bare parity).

A wait observes its own block's instance only (BP112, reported statically; the compiled
program leaves the remote wait out).
"""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..ir import ModelError, evaluate
from ..kinds import Primitive

BARRIER_WAIT = "barrier_wait"
BARRIER_TEST = "barrier_test"
WAIT_PARITY = "wait_parity"


def _local(system, op, env, block):
    """The instance waited on and the source, or None for a wait on another block's."""
    inst, src, _ = system.barrier_site(op, env, block)
    if op.barrier.block is not None and system.instances[inst].block != block:
        return None  # reported statically as BP112
    return inst, src


def _compile_pallas(opcode: int):
    def compile_wait(system, op, env, agent: int, block) -> None:
        site = _local(system, op, env, block)
        if site is not None:
            system._emit(agent, ins.Instr(opcode, site[0], 0, None, site[1]))
    return compile_wait


def compile_wait_parity(system, op, env, agent: int, block) -> None:
    site = _local(system, op, env, block)
    if site is None:
        return
    inst, src = site
    if op.phase is not None:
        phase = evaluate(op.phase, env)
        if phase < -1:
            raise ModelError(f"wait_parity means phase {phase}; phases count from 0 "
                             "(-1: the one before the first)", loc=op.loc)
        system._emit(agent, ins.Instr(ins.WAIT_PHASE, inst, phase + 1, None, src))
    else:
        parity = evaluate(op.parity, env) % 2
        system._emit(agent, ins.Instr(ins.WAIT_PARITY, inst, parity, None, src))


def parity_text(op, name: str, nbytes: int, env) -> str:
    if op.phase is not None:
        return f"wait_parity({name}, phase={evaluate(op.phase, env)})"
    return f"wait_parity({name}, {evaluate(op.parity, env) % 2})"


_COMMON = dict(needs=frozenset({"barrier"}), waits_for="phase", reference="machine",
               local_wait=True)

EXTENSION = Extension("mbarrier waits", primitives=(
    Primitive(BARRIER_WAIT, "wait for the next completion (private parity bit per thread)",
              blocking=True, opcodes=("wait",), dsl="barrier_wait", pallas=True,
              prover="counter program (program.py)", repair=frozenset({"waits"}), counter="wait",
              compile=_compile_pallas(ins.WAIT), **_COMMON),
    Primitive(BARRIER_TEST, "non-blocking barrier_wait: observes that completion if it has "
              "happened (flipping the bit), else nothing", blocking=False,
              opcodes=("barrier_test",), dsl="barrier_test", pallas=True,
              prover="outside: a test that may observe nothing", repair=frozenset(),
              compile=_compile_pallas(ins.BARRIER_TEST), **_COMMON),
    Primitive(WAIT_PARITY, "try_wait.parity(parity) until it succeeds (phase: which one)",
              blocking=True, opcodes=("wait_parity", "wait_phase"), dsl="wait_parity",
              prover="counter program (program.py); bare parities through phases.py",
              repair=frozenset({"waits"}), counter="wait_parity", shows=("parity",),
              text=parity_text, compile=compile_wait_parity,
              **dict(_COMMON, needs=frozenset({"barrier", "parity"}))),
))
