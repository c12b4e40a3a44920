"""Family: cp.async's mbarrier arrival (`cp.async.mbarrier.arrive.noinc`), CuTe's
PipelineCpAsync producer commit.

Each executing thread's arrival reaches the barrier asynchronously, once every earlier cp.async
copy of the thread is done (PTX: the arrive-on is triggered by the completion of all prior
cp.async operations the thread initiated). The copies complete at times the model leaves open,
so the arrival may land at any time after it is issued; the copies' writes end when it lands:
the thread's cp.async copies still in flight become the writes of the arrival (live until it
lands, as a TMA copy's until its bytes do), and no longer the thread's own, so a thread waiting
on the barrier reads what they wrote. A wait_group of the thread after the arrival does not end
them sooner (at most a race reported the hardware would not show: never a race missed). The
form without `.noinc` also raises the expected count for the phase; it is not modelled (the
frontends say BP190).
"""

from __future__ import annotations

from .. import exit_async
from .. import instructions as ins
from ..extensions import Extension
from ..kinds import Primitive
from ..memory import Access

GROUP = "cp.async"      # the thread's copies a wait_gmem_to_smem counts (memory.py's group)


def _in_flight(events: list, group: str) -> list[Access]:
    """The accesses of `group` the thread issued and no wait of its program retired yet."""
    pending: list[tuple] = []
    for event in events:
        if event[0] == "issue" and event[2] == group:
            pending.append(event[3])
        elif event[0] == "wait" and event[2] == group:
            pending = pending[max(len(pending) - event[3], 0):]
    return [acc for accs in pending for acc in accs]


def compile_cp_async_arrival(system, op, env, agent: int, block) -> None:
    """One arrival landing at some time after the issue; the thread's cp.async copies in flight
    are handed to it: retired from the thread at this point, written until it lands."""
    inst, src, _ = system.barrier_site(op, env, block)
    if system.instances[inst].alloc.cluster:
        return  # BP111, reported statically
    pc = len(system.programs[agent])
    handed = _in_flight(system.memory.events[agent], GROUP) if system.memory is not None else []
    exit_async.record_wait(system, GROUP, 0, agent, pc)
    access = None
    if handed:
        system.memory.events[agent].append(("wait", pc, GROUP, 0))
        mask = 0
        for acc in handed:
            mask |= acc.mask
        access = Access(GROUP, True, mask, handed[0].src, ", ".join(a.text for a in handed),
                        tuple(box for a in handed for box in a.boxes))
    slot = system._slot(ins.EFFECT_ARRIVE, inst, 1, "async", access)
    system._emit(agent, ins.Instr(ins.ISSUE_ASYNC, (), 0, (slot,), src))

CP_ASYNC_ARRIVE = "cp_async_arrive"

EXTENSION = Extension("cp.async arrivals", primitives=(
    Primitive(CP_ASYNC_ARRIVE, "an asynchronous arrive(1) once the thread's earlier cp.async "
              "copies are done", needs=frozenset({"barrier"}), blocking=False, waits_for="",
              opcodes=("issue_async",), dsl="cp_async_arrive", reference="machine",
              prover="counter program (program.py)", repair=frozenset({"arrives"}),
              counter="async_arrival", async_arrival=True, compile=compile_cp_async_arrival),
))
