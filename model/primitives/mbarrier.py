"""Family: mbarrier arrivals and transaction counts (Pallas's barrier_arrive and the PTX-level
arrive, arrive_drop, expect_tx, arrive.expect_tx, complete_tx).

A local arrival on a ClusterBarrier fans out along its collective axes; a remote one
(`bar.on(block)`) reaches that block's instance only, as mbarrier.arrive.shared::cluster does.
"""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..instructions import BARRIER_FIELDS, EXPECTED
from ..ir import MAX_ARRIVALS, MAX_TX, evaluate
from ..kinds import Primitive
from ..static_rules import StaticFinding
from ..steps import Step, Tla, Touch, barriers, tla_seq
from ..violations import Violation

BARRIER_ARRIVE = "barrier_arrive"
ARRIVE = "arrive"
ARRIVE_DROP = "arrive_drop"
EXPECT_TX = "expect_tx"
ARRIVE_EXPECT_TX = "arrive_expect_tx"
COMPLETE_TX = "complete_tx"


def _targets(system, op, inst: int) -> tuple[int, ...]:
    return (inst,) if op.barrier.block is not None else system._fan_out(inst)


def compile_arrive(system, op, env, agent: int, block) -> None:
    inst, src, _ = system.barrier_site(op, env, block)
    targets = _targets(system, op, inst)
    count = evaluate(op.count, env)
    if not 1 <= count <= MAX_ARRIVALS:
        system.findings.append(StaticFinding(
            "BP121", f"arrive count {count} is outside 1..{MAX_ARRIVALS}", op.loc))
        return
    system._emit(agent, ins.Instr(ins.ARRIVE, targets, count, None, src))


def compile_arrive_drop(system, op, env, agent: int, block) -> None:
    inst, src, _ = system.barrier_site(op, env, block)
    system._emit(agent, ins.Instr(ins.ARRIVE_DROP, _targets(system, op, inst), 1, None, src))


def _compile_tx(opcode: int):
    def compile_tx(system, op, env, agent: int, block) -> None:
        inst, src, nbytes = system.barrier_site(op, env, block)
        targets = _targets(system, op, inst)
        if not 0 <= nbytes <= MAX_TX:
            system.findings.append(StaticFinding(
                "BP121", f"tx-count {nbytes} is outside 0..{MAX_TX}", op.loc))
            return
        system._emit(agent, ins.Instr(opcode, targets, nbytes, None, src))
    return compile_tx


def bytes_text(op, name: str, nbytes: int, env) -> str:
    """A compiled transaction's text: the kind, the instance and the bytes."""
    return f"{op.kind}({name}, {nbytes}B)"


def arrive_text(op, name: str, nbytes: int, env) -> str:
    count = evaluate(op.count, env)
    return f"arrive({name}{'' if count == 1 else f', count={count}'})"


# Step rules (SEMANTICS.md): each arrives or moves the tx-count on every instance of its
# arrival set.

def effect_arrive(system, s: list, instr, agent: int, events) -> Violation | None:
    violation = None
    for inst in instr.target:
        violation = violation or system._arrive(s, inst, instr.amount, agent, instr.src, events)
    return violation


def effect_arrive_drop(system, s: list, instr, agent: int, events):
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


def effect_expect_tx(system, s: list, instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, instr.amount, agent, instr.src, events)
    return violation


def effect_arrive_expect_tx(system, s: list, instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, instr.amount, agent, instr.src, events)
        violation = violation or system._arrive(s, inst, 1, agent, instr.src, events)
    return violation


def effect_complete_tx(system, s: list, instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, -instr.amount, agent, instr.src, events)
    return violation


def touches_arrival_set(system, agent: int, instr) -> Touch:
    return Touch(writes=barriers(instr.target), reaches=tuple(instr.target))


def _arrival_step(opcode: int, effect, constructor: str, action: str, amount: bool) -> Step:
    name = constructor.split("(")[0]

    def text(system, instr) -> str:
        tgt = tla_seq(i + 1 for i in instr.target)
        return f"{name}({tgt}, {instr.amount})" if amount else f"{name}({tgt})"
    return Step(opcode, guard=None, effect=effect, touches=touches_arrival_set,
                resources="writes P(its arrival set)", waits=False, symmetry="arrival set",
                tla=Tla(constructor, action, text))


STEPS = (
    _arrival_step(ins.ARRIVE, effect_arrive, "arrive(tgt, amount)", "Arrive", True),
    _arrival_step(ins.ARRIVE_DROP, effect_arrive_drop, "arrive_drop(tgt)", "ArriveDrop", False),
    _arrival_step(ins.EXPECT_TX, effect_expect_tx, "expect_tx(tgt, amount)", "ExpectTx", True),
    _arrival_step(ins.ARRIVE_TX, effect_arrive_expect_tx, "arrive_expect_tx(tgt, amount)",
                  "ArriveExpectTx", True),
    _arrival_step(ins.COMPLETE_TX, effect_complete_tx, "complete_tx(tgt, amount)", "CompleteTx",
                  True),
)

_COMMON = dict(blocking=False, waits_for="", reference="machine",
               prover="counter program (program.py)")
_TX = dict(_COMMON, needs=frozenset({"barrier", "bytes"}), shows=("bytes",), text=bytes_text)

EXTENSION = Extension("mbarrier arrivals", steps=STEPS, primitives=(
    Primitive(BARRIER_ARRIVE, "1 logical arrival (ClusterBarrier: fan-out along collective axes)",
              needs=frozenset({"barrier"}), opcodes=("arrive",), dsl="barrier_arrive",
              repair=frozenset({"arrives", "fills"}), counter="arrive", pallas=True,
              compile=compile_arrive, **_COMMON),
    Primitive(ARRIVE, "arrive(count)", needs=frozenset({"barrier", "count"}),
              opcodes=("arrive",), dsl="arrive", repair=frozenset({"arrives", "fills"}),
              counter="arrive", shows=("count_if_not_1",), text=arrive_text,
              compile=compile_arrive, **_COMMON),
    Primitive(ARRIVE_DROP, "lower the expected count for later phases, then arrive",
              needs=frozenset({"barrier"}), opcodes=("arrive_drop",), dsl="arrive_drop",
              repair=frozenset({"arrives"}), counter="arrive_drop", compile=compile_arrive_drop,
              **_COMMON),
    Primitive(EXPECT_TX, "tx += bytes", opcodes=("expect_tx",), dsl="expect_tx",
              repair=frozenset(), counter="expect_tx", compile=_compile_tx(ins.EXPECT_TX),
              **_TX),
    Primitive(ARRIVE_EXPECT_TX, "tx += bytes, then arrive(1)", opcodes=("arrive_expect_tx",),
              dsl="arrive_expect_tx", repair=frozenset({"arrives", "fills"}),
              counter="arrive_tx", compile=_compile_tx(ins.ARRIVE_TX), **_TX),
    Primitive(COMPLETE_TX, "tx -= bytes (by the thread itself)", opcodes=("complete_tx",),
              dsl="complete_tx", repair=frozenset(), counter="complete_tx",
              compile=_compile_tx(ins.COMPLETE_TX), **_TX),
))
