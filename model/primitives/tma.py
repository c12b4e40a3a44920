"""Family: TMA copies and st.async that complete transaction bytes on an mbarrier when they
land (copy_gmem_to_smem: arrive.expect_tx at issue; tma_load: complete_tx only;
async_store_smem: into a peer block's SMEM, both on the destination block's barrier).

A multicast copy splits its bytes evenly among the blocks it reaches, one in-flight slot each.
A tma_load on another block's barrier (leader-tracked, 2-CTA) lands in the issuer's SMEM.
"""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..ir import MAX_TX, ModelError
from ..kinds import Primitive
from ..static_rules import StaticFinding
from ..steps import Step, Tla, Touch, barriers, tla_seq
from .mbarrier import bytes_text, effect_arrive_expect_tx

COPY_GMEM_TO_SMEM = "copy_gmem_to_smem"
TMA_LOAD = "tma_load"
ASYNC_STORE_SMEM = "async_store_smem"


def _compile_copy(arrives: bool):
    def compile_copy(system, op, env, agent: int, block) -> None:
        inst, src, nbytes = system.barrier_site(op, env, block)
        if system.instances[inst].alloc.cluster:
            return  # BP111, reported statically
        if not 0 <= nbytes <= MAX_TX:
            system.findings.append(StaticFinding(
                "BP121", f"copy of {nbytes} bytes is outside the tx-count range 0..{MAX_TX}",
                op.loc))
            return
        peers = system._peers(system.instances[inst].block, op.collective_axes, op.loc)
        if nbytes % len(peers):
            raise ModelError(f"a multicast copy of {nbytes} bytes cannot be split evenly "
                             f"among {len(peers)} blocks", loc=op.loc)
        share = nbytes // len(peers)
        index = system.instances[inst].index
        # a load completing on another block's barrier (a leader-tracked / 2-CTA copy) still
        # lands in the issuer's shared memory; a multicast lands in every block it reaches
        own = not arrives and not op.collective_axes
        slots = tuple(system._slot(ins.EFFECT_COMPLETE_TX,
                                   system._inst_index[(op.barrier.alloc.name, index, p)],
                                   share, "tma",
                                   system._copy_write(op, env, block if own else p, src),
                                   issuer=agent, multicast=bool(op.collective_axes))
                      for p in peers)
        system._emit(agent, ins.Instr(ins.ISSUE_ASYNC, (inst,) if arrives else (), nbytes,
                                      slots, src))
    return compile_copy


def effect_issue_async(system, s: list, instr, agent: int, events):
    # The issuer's arrive.expect_tx (Pallas copies), then the copy is in flight.
    violation = effect_arrive_expect_tx(system, s, instr, agent, events)
    for slot in instr.aux:
        s[system.slot_base + slot] += 1
    return violation


def touches_issue(system, agent: int, instr) -> Touch:
    landing = tuple(system.slots[k].inst for k in instr.aux)
    return Touch(writes=barriers(instr.target), issues=tuple(instr.aux),
                 reaches=tuple(instr.target) + landing)


# Also the step of try_cluster_cancel's and cp.async's asynchronous arrivals (clc.py,
# cp_async_arrive.py): an issue with no arrival set and one slot.
STEPS = (
    Step(ins.ISSUE_ASYNC, guard=None, effect=effect_issue_async, touches=touches_issue,
         resources="writes P(its arrival set), causes P(its slots' instances)", waits=False,
         symmetry="arrival set and slots",
         tla=Tla("issue_async(tgt, amount, slots)", "IssueAsync",
                 lambda system, instr: f"issue_async({tla_seq(i + 1 for i in instr.target)}, "
                                       f"{instr.amount}, {tla_seq(k + 1 for k in instr.aux)})")),
)

_COMMON = dict(needs=frozenset({"barrier", "bytes", "memory"}), blocking=False, waits_for="",
               opcodes=("issue_async",), reference="machine",
               prover="counter program (program.py)", async_arrival=True, shows=("bytes",),
               text=bytes_text)

EXTENSION = Extension("TMA copies", steps=STEPS, primitives=(
    Primitive(COPY_GMEM_TO_SMEM, "TMA load: arrive.expect_tx(bytes) at issue, complete_tx at "
              "landing", dsl="copy_gmem_to_smem", pallas=True,
              repair=frozenset({"arrives", "fills"}), counter="copy", compile=_compile_copy(True),
              **_COMMON),
    Primitive(TMA_LOAD, "TMA load that only does complete_tx(bytes) when it lands",
              dsl="tma_load", repair=frozenset(), counter="landing", compile=_compile_copy(False),
              **_COMMON),
    Primitive(ASYNC_STORE_SMEM, "st.async into a (peer) block's SMEM: the issuer's "
              "arrive.expect_tx and the landing's complete_tx on the destination's barrier",
              dsl="async_store_smem", pallas=True, repair=frozenset({"arrives"}), counter="copy",
              compile=_compile_copy(True), **_COMMON),
))
