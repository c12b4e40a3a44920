"""Family: cluster launch control (try_cluster_cancel), whose response arrives asynchronously
on an mbarrier, once."""

from __future__ import annotations

from .. import instructions as ins
from ..extensions import Extension
from ..kinds import Primitive

TRY_CLUSTER_CANCEL = "try_cluster_cancel"


def compile_async_arrival(system, op, env, agent: int, block) -> None:
    """One arrival that lands on its barrier at some time after the issue (an in-flight slot);
    also cp.async's arrival (cp_async_arrive.py)."""
    inst, src, _ = system.barrier_site(op, env, block)
    if system.instances[inst].alloc.cluster:
        return  # BP111, reported statically
    slot = system._slot(ins.EFFECT_ARRIVE, inst, 1, "async")
    system._emit(agent, ins.Instr(ins.ISSUE_ASYNC, (), 0, (slot,), src))


EXTENSION = Extension("cluster launch control", primitives=(
    Primitive(TRY_CLUSTER_CANCEL, "asynchronous arrival (the cancellation's response)",
              needs=frozenset({"barrier"}), blocking=False, waits_for="", opcodes=("issue_async",),
              dsl="try_cluster_cancel", reference="machine",
              prover="counter program (program.py)", repair=frozenset({"arrives", "refills"}),
              counter="async_arrival", pallas=True, async_arrival=True,
              compile=compile_async_arrival),
))
