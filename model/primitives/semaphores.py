"""Family: global semaphores (counters without phases): semaphore_signal, semaphore_wait and
semaphore_signal_parallel. `copies` clusters of the grid signal in lockstep with the modelled
one unless they are modelled as blocks of their own (grid.lockstep_blocks)."""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..ir import ModelError, evaluate
from ..kinds import Primitive
from ..static_rules import StaticFinding
from ..steps import BARRIER, Step, Tla, Touch, barriers, phase, tla_seq

SEMAPHORE_SIGNAL = "semaphore_signal"
SEMAPHORE_WAIT = "semaphore_wait"
SEMAPHORE_SIGNAL_PARALLEL = "semaphore_signal_parallel"


def _semaphore(system, op, env, block) -> tuple[int, object, int]:
    inst = system.resolve_operand(op, env, block)
    alloc = system.instances[inst].alloc
    if not alloc.semaphore:
        raise ModelError(f"{op.kind} on `{alloc.name}`, which is a {alloc.kind}", loc=op.loc,
                         hint="signal and wait on semaphores; arrive and wait on barriers")
    copies = 1 if system.lockstep > 1 else evaluate(alloc.copies, env)
    return inst, alloc, copies


def compile_signal(system, op, env, agent: int, block) -> None:
    inst, alloc, copies = _semaphore(system, op, env, block)
    amount = evaluate(op.count, env)
    text = (f"semaphore_signal({alloc.name}, +{amount}"
            + (f" x{copies} clusters)" if copies > 1 else ")"))
    src = system._source(op, text, op.loc)
    system._emit(agent, ins.Instr(ins.SEM_SIGNAL, inst, amount * copies, None, src))


def compile_wait(system, op, env, agent: int, block) -> None:
    inst, alloc, copies = _semaphore(system, op, env, block)
    amount = evaluate(op.count, env)
    text = (f"semaphore_wait({alloc.name}, >={amount}"
            + (", decrement)" if op.decrement else ")"))
    src = system._source(op, text, op.loc)
    if op.decrement and copies > 1:
        # lockstep copies of a decrementing wait would race for one counter
        system.findings.append(StaticFinding(
            "BP190", f"a decrementing semaphore_wait on `{alloc.name}`, which {copies} "
            "clusters signal in lockstep, is outside the model", op.loc,
            "the lockstep model of a global semaphore needs monotone waits "
            "(decrement=False)"))
        system._emit(agent, ins.Instr(ins.UNMODELED, None, 0, None, src))
    else:
        system._emit(agent, ins.Instr(ins.SEM_WAIT, inst, amount, int(op.decrement), src))


def compile_signal_parallel(system, op, env, agent: int, block) -> None:
    """Signals that land in no guaranteed order (JAX: "the target device might observe a
    signal on semaphores[1] before it observes a signal on semaphores[0]"), all before the
    thread's next operation. On one semaphore the order cannot matter: the signals one
    after the other. On several: one in-flight slot per signal, delivered in any order."""
    signals = []
    for ref, inc in op.signals:
        inst = system._resolve(ref, env, block, op.loc)
        alloc = system.instances[inst].alloc
        if not alloc.semaphore:
            raise ModelError(f"semaphore_signal_parallel signals `{alloc.name}`, which is a "
                             f"{alloc.kind}", loc=op.loc, hint="signal semaphores only")
        copies = 1 if system.lockstep > 1 else evaluate(alloc.copies, env)
        signals.append((inst, evaluate(inc, env) * copies))
    names = ", ".join(f"{system.instances[i].name} +{n}" for i, n in signals)
    src = system._source(op, f"semaphore_signal_parallel({names})", op.loc)
    if len({i for i, _ in signals}) == 1:
        for inst, amount in signals:
            system._emit(agent, ins.Instr(ins.SEM_SIGNAL, inst, amount, None, src))
        return
    slots = tuple(system._slot(ins.EFFECT_SIGNAL, inst, amount, "async", owner=(agent, src, n))
                  for n, (inst, amount) in enumerate(signals))
    system._emit(agent, ins.Instr(ins.SEM_SIGNAL_SET, (), 0, slots, src))
    landed = system._source(op, "semaphore_signal_parallel: signals landed", op.loc)
    system._emit(agent, ins.Instr(ins.SIGNALS_LANDED, (), 0, slots, landed))


# Step rules (SEMANTICS.md): a semaphore's value is its instance's phase field.

def effect_signal(system, s: list, instr, agent: int, events) -> None:
    s[system.barrier_base + ins.BARRIER_FIELDS * instr.target] += instr.amount


def guard_wait(system, state, instr) -> bool:
    """semaphore_wait: the counter has reached the value."""
    return phase(system, state, instr.target) >= instr.amount


def effect_wait(system, s: list, instr, agent: int, events) -> None:
    if instr.aux:
        s[system.barrier_base + ins.BARRIER_FIELDS * instr.target] -= instr.amount


def effect_signal_set(system, s: list, instr, agent: int, events) -> None:
    for slot in instr.aux:
        s[system.slot_base + slot] += 1


def guard_signals_landed(system, state, instr) -> bool:
    return not any(state[system.slot_base + slot] for slot in instr.aux)


def _slots_text(name: str):
    return lambda system, instr: f"{name}({tla_seq(k + 1 for k in instr.aux)})"


STEPS = (
    Step(ins.SEM_SIGNAL, guard=None, effect=effect_signal,
         touches=lambda system, agent, instr: Touch(writes=barriers((instr.target,))),
         resources="writes P(target)", waits=False, symmetry="semaphore",
         tla=Tla("sem_signal(inst, amount)", "SemSignal",
                 lambda system, instr: f"sem_signal({instr.target + 1}, {instr.amount})")),
    Step(ins.SEM_WAIT, guard=guard_wait, effect=effect_wait,
         touches=lambda system, agent, instr: Touch(
             reads=((BARRIER, instr.target),),
             writes=((BARRIER, instr.target),) if instr.aux else ()),
         resources="reads P(target), writes it if it decrements", waits=True,
         symmetry="semaphore",
         tla=Tla("sem_wait(inst, amount, decrement)", "SemWait",
                 lambda system, instr: f"sem_wait({instr.target + 1}, {instr.amount}, "
                                       f"{instr.aux})")),
    # its signals land later, as deliveries
    Step(ins.SEM_SIGNAL_SET, guard=None, effect=effect_signal_set,
         touches=lambda system, agent, instr: Touch(issues=tuple(instr.aux)),
         resources="causes P(its slots' instances)", waits=False, symmetry="literal",
         tla=Tla("sem_signal_set(slots)", "SemSignalSet", _slots_text("sem_signal_set"))),
    # waits for those deliveries
    Step(ins.SIGNALS_LANDED, guard=guard_signals_landed, effect=None,
         touches=lambda system, agent, instr: Touch(
             reads=barriers(system.slots[k].inst for k in instr.aux)),
         resources="reads P(its slots)", waits=True, symmetry="literal",
         tla=Tla("signals_landed(slots)", "SignalsLanded", _slots_text("signals_landed"))),
)

_COMMON = dict(reference="semaphores", prover="semaphores (semaphores.py)", repair=frozenset())

EXTENSION = Extension("semaphores", steps=STEPS, primitives=(
    Primitive(SEMAPHORE_SIGNAL, "value += count (times the lockstep copies)",
              needs=frozenset({"barrier", "count"}), blocking=False, waits_for="",
              opcodes=("sem_signal",), dsl="semaphore_signal", shows=("inc",),
              compile=compile_signal, **_COMMON),
    Primitive(SEMAPHORE_WAIT, "block until value >= count; then value -= count if decrement",
              needs=frozenset({"barrier", "count"}), blocking=True, waits_for="value",
              opcodes=("sem_wait", "unmodeled"), dsl="semaphore_wait", shows=("value",),
              consumes=True, compile=compile_wait, **_COMMON),
    Primitive(SEMAPHORE_SIGNAL_PARALLEL, "one signal per (semaphore, increment), landing in no "
              "guaranteed order, all before the thread goes on", needs=frozenset({"signals"}),
              blocking=True, waits_for="",    # only for its own signals to land
              opcodes=("sem_signal", "sem_signal_set", "signals_landed"),
              dsl="semaphore_signal_parallel", shows=("signals",),
              compile=compile_signal_parallel, **_COMMON),
))
