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
from ..steps import Step, Tla, Touch, barriers, phase, tla_seen
from ..violations import Violation

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


# Step rules (SEMANTICS.md). A wait's aux is the thread's seen entry for its instance.

def guard_wait(system, state, instr) -> bool:
    """barrier_wait: the thread's private parity bit counts its own waits; it waits for the phase
    after the last one it observed. Passes iff the current parity differs from that bit."""
    seen = state[instr.aux]
    parity = seen & 1 if seen > 0 else 0
    return (phase(system, state, instr.target) & 1) != parity


def guard_wait_parity(system, state, instr) -> bool:
    """try_wait.parity(P): true iff the phase with parity P has completed (current parity != P)."""
    return (phase(system, state, instr.target) & 1) != instr.amount


def guard_wait_phase(system, state, instr) -> bool:
    """try_wait.parity((c - 1) % 2) for the thread's completion c: passes iff the barrier's
    parity is that of c."""
    return (phase(system, state, instr.target) & 1) == (instr.amount & 1)


def effect_wait(system, s: list, instr, agent: int, events) -> None:
    # The wait observed every completion so far.
    s[instr.aux] = phase(system, s, instr.target)


def effect_barrier_test(system, s: list, instr, agent: int, events) -> None:
    """barrier_test: true iff barrier_wait would pass now; then it flips the private bit, as
    the wait would (Mosaic GPU stores the new parity only when the test succeeds). The
    protocol's control flow does not depend on the answer."""
    if guard_wait(system, s, instr):
        s[instr.aux] = phase(system, s, instr.target)


def effect_wait_parity(system, s: list, instr, agent: int, events):
    """A wait for a stated phase must return for it. (One the barrier has already run past is
    caught before, as a state: `state_violations`.) A bare parity wait states no phase: what it
    returns after is judged across schedules (model/parity.py)."""
    now = phase(system, s, instr.target)
    s[instr.aux] = now
    if instr.op != ins.WAIT_PHASE:
        return None
    meant = instr.amount
    if now != meant:
        return Violation(
            "BP101", f"{system.agents[agent].name}'s wait on {system.instances[instr.target].name} "
            f"means completion {meant} but returns after completion {now}, a phase it does "
            "not mean (its parity bit is stale)", agent, instr.target, instr.src)
    return None


def touches_instance(system, agent: int, instr) -> Touch:
    return Touch(reads=barriers((instr.target,)))


def touches_pallas_wait(system, agent: int, instr) -> Touch:
    return Touch(reads=barriers((instr.target,)), standing=(instr.target, instr.aux))


def _wait_step(opcode: int, guard, effect, touches, constructor: str, action: str,
               amount: bool) -> Step:
    name = constructor.split("(")[0]

    def text(system, instr) -> str:
        mid = f"{instr.amount}, " if amount else ""
        return f"{name}({instr.target + 1}, {mid}{tla_seen(system, instr.aux)})"
    # barrier_test never blocks, but counts among the waits where a horizon may end
    return Step(opcode, guard=guard, effect=effect, touches=touches,
                resources="reads P(target)", waits=True, symmetry="instance",
                tla=Tla(constructor, action, text))


STEPS = (
    _wait_step(ins.WAIT, guard_wait, effect_wait, touches_pallas_wait, "wait(inst, pos)",
               "Wait", False),
    _wait_step(ins.WAIT_PARITY, guard_wait_parity, effect_wait_parity, touches_instance,
               "wait_parity(inst, amount, pos)", "WaitParity", True),
    _wait_step(ins.WAIT_PHASE, guard_wait_phase, effect_wait_parity, touches_instance,
               "wait_phase(inst, amount, pos)", "WaitPhase", True),
    _wait_step(ins.BARRIER_TEST, None, effect_barrier_test, touches_instance,
               "barrier_test(inst, pos)", "BarrierTest", False),
)

_COMMON = dict(needs=frozenset({"barrier"}), waits_for="phase", reference="machine",
               local_wait=True)

EXTENSION = Extension("mbarrier waits", steps=STEPS, primitives=(
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
