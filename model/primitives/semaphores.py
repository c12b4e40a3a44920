"""Family: global semaphores (counters without phases): semaphore_signal, semaphore_wait and
semaphore_signal_parallel. `copies` clusters of the grid signal in lockstep with the modelled
one unless they are modelled as blocks of their own (grid.lockstep_blocks)."""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..ir import ModelError, evaluate
from ..kinds import Primitive
from ..static_rules import StaticFinding

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


_COMMON = dict(reference="semaphores", prover="semaphores (semaphores.py)", repair=frozenset())

EXTENSION = Extension("semaphores", primitives=(
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
