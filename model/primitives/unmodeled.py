"""Family: synchronization the model does not cover, kept so the verdict can say so (BP190,
reported statically); it compiles to a step that does nothing."""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..kinds import Primitive
from ..steps import Step, Tla, Touch

UNMODELED = "unmodeled"


def compile_unmodeled(system, op, env, agent: int, block) -> None:
    system.refuse_lane_split(op, env)
    system._emit(agent, ins.Instr(ins.UNMODELED, None, 0, None,
                                  system._source(op, op.describe(), op.loc)))


STEPS = (
    Step(ins.UNMODELED, guard=None, effect=None, touches=lambda system, agent, instr: Touch(),
         resources="local: a no-op", waits=False, symmetry="literal",
         tla=Tla("unmodeled", "Unmodeled", lambda system, instr: "unmodeled")),
)

EXTENSION = Extension("unmodelled synchronization", steps=STEPS, primitives=(
    Primitive(UNMODELED, "synchronization the model does not cover (BP190)",
              needs=frozenset({"name"}), blocking=False, waits_for="", opcodes=("unmodeled",),
              dsl="unmodeled", reference="machine", prover="outside: BP190, unknown",
              repair=frozenset(), unmodelled=True, describe=lambda op: f"{op.name} (not modelled)",
              compile=compile_unmodeled),
))
