"""Family: tcgen05 MMAs and commits, which arrive on their barrier (if any) once every earlier
tcgen05 operation of the thread has completed (one in-order queue per issuing thread).

Their barrier must be a plain Barrier declared orders_tensor_core=True (BP110, BP111: reported
statically; the compiled program leaves such an arrival out).
"""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..kinds import Primitive, lookup
from ..steps import Step, Tla, Touch

TCGEN05_MMA = "tcgen05_mma"
TCGEN05_COMMIT_ARRIVE = "tcgen05_commit_arrive"


def _entry(system, op, env, block, src, targets) -> int:
    # a collective (2-CTA) op reads its operands and writes its accumulator in every block of
    # the pair, not only in the issuer's
    blocks = system._peers(block, op.collective_axes, op.loc) if op.collective_axes else [block]
    accesses = tuple(a for b in blocks for a in system._accesses(op, "tcgen05", env, b, src)) \
        if system.memory is not None else ()
    return system._tcgen05_entry(targets, accesses)


def compile_tcgen05(system, op, env, agent: int, block) -> None:
    if op.barrier is None and "barrier?" in lookup(op.kind).needs:
        system.refuse_lane_split(op, env)
        src = system._source(op, f"{op.kind}()", op.loc)
        system._emit(agent, ins.Instr(ins.ISSUE_TCGEN05, None, 0,
                                      _entry(system, op, env, block, src, ()), src))
        return
    inst, src, _ = system.barrier_site(op, env, block)
    alloc = system.instances[inst].alloc
    if alloc.cluster or not alloc.orders_tensor_core:
        return  # BP110 / BP111, reported statically
    targets = (inst,)
    if op.collective_axes:
        targets = tuple(system._inst_index[(alloc.name, system.instances[inst].index, p)]
                        for p in system._peers(block, op.collective_axes, op.loc))
    system._emit(agent, ins.Instr(ins.ISSUE_TCGEN05, None, 0,
                                  _entry(system, op, env, block, src, targets), src))


def effect_issue_tcgen05(system, s: list, instr, agent: int, events) -> None:
    q = system.queue_pos[agent]
    s[q] = s[q] + (instr.aux,)


STEPS = (
    Step(ins.ISSUE_TCGEN05, guard=None, effect=effect_issue_tcgen05,
         touches=lambda system, agent, instr: Touch(enqueues=instr.aux),
         resources="causes P(its arrival set)", waits=False, symmetry="tcgen05 arrival set",
         tla=Tla("issue_tcgen05(set)", "IssueTcgen05",
                 lambda system, instr: f"issue_tcgen05({instr.aux})")),
)

_COMMON = dict(blocking=False, waits_for="", opcodes=("issue_tcgen05",), reference="machine",
               prover="counter program (program.py)", counter="tcgen05", pallas=True,
               async_arrival=True, tensor_core=True, compile=compile_tcgen05)

EXTENSION = Extension("tcgen05", steps=STEPS, primitives=(
    Primitive(TCGEN05_MMA, "tensor-core op; arrives on `barrier` (if any) when it completes",
              needs=frozenset({"barrier?", "memory"}), dsl="tcgen05_mma",
              repair=frozenset({"arrives"}), **_COMMON),
    Primitive(TCGEN05_COMMIT_ARRIVE, "arrives once all earlier tcgen05 ops of the thread "
              "completed", needs=frozenset({"barrier"}), dsl="tcgen05_commit_arrive",
              repair=frozenset({"arrives", "refills"}), **_COMMON),
))
