"""Family: memory effects (races, BP200/BP201). These kinds exist only for what they read and
write: they compile to no instruction and annotate the gaps between a thread's instructions
(model/memory.py turns the events into live accesses per gap). An asynchronous access (a TMA
store, a WGMMA, a tcgen05.st, a cp.async) stays live until a wait of its group retires it.
"""

from __future__ import annotations

from .. import exit_async
from ..extensions import Extension
from ..ir import evaluate
from ..kinds import Primitive, lookup

READ = "read"
WRITE = "write"
COPY_SMEM_TO_GMEM = "copy_smem_to_gmem"
WAIT_SMEM_TO_GMEM = "wait_smem_to_gmem"
TCGEN05_STORE = "tcgen05_store"
TCGEN05_WAIT_STORE = "tcgen05_wait_store"
TCGEN05_LOAD = "tcgen05_load"
TCGEN05_WAIT_LOAD = "tcgen05_wait_load"
WGMMA = "wgmma"
WGMMA_WAIT = "wgmma_wait"
CP_ASYNC = "cp_async"
WAIT_GMEM_TO_SMEM = "wait_gmem_to_smem"


def compile_access(system, op, env, agent: int, block) -> None:
    """Recorded in program order at the gap before the agent's next instruction: for races
    (only when they are checked), and an asynchronous access to shared memory for BP105 at the
    kernel's exit (model/exit_async.py) in any case."""
    prim = lookup(op.kind)
    pc = len(system.programs[agent])
    if prim.memory == "retire":
        keep = evaluate(op.count, env) if prim.counted else 0
        exit_async.record_wait(system, prim.group, keep, agent, pc)
        if system.memory is not None:
            system.memory.events[agent].append(("wait", pc, prim.group, keep))
        return
    if system.memory is None and prim.memory == "thread":
        return
    texts = [system.memory.resolve(r, env, block, op.loc)[1] if system.memory is not None
             else exit_async.ref_text(r, env, block, len(system.blocks) > 1, op.loc)
             for r in op.reads + op.writes]
    src = system._source(op, f"{op.kind}({', '.join(texts)})", op.loc)
    if prim.memory != "thread":
        exit_async.record_issue(system, op, prim.group, src, texts, agent, pc)
    if system.memory is None:
        return
    who = "thread" if prim.memory == "thread" else prim.group
    accesses = system._accesses(op, who, env, block, src)
    system.memory.events[agent].append(("access" if prim.memory == "thread" else "issue", pc,
                                        who, accesses))


def _access(kind: str, doc: str, dsl: str, memory: str, group: str = "",
            counted: bool = False) -> Primitive:
    return Primitive(kind, doc, needs=frozenset({"count"} if counted else {"memory"}),
                     blocking=False, waits_for="", opcodes=(), dsl=dsl, reference="memory",
                     prover="races (races.py)", repair=frozenset(), memory=memory,
                     group=group, counted=counted, shows=("count_last",) if counted else (),
                     compile=compile_access)


EXTENSION = Extension("memory effects", primitives=(
    _access(READ, "thread loads (ref loads, ld.shared, tcgen05.ld waited at once)", "read",
            "thread"),
    _access(WRITE, "thread stores (ref stores, st.shared)", "write", "thread"),
    _access(COPY_SMEM_TO_GMEM, "TMA store: reads its source until a covering "
            "wait_smem_to_gmem", "copy_smem_to_gmem", "issue", "TMA store"),
    _access(WAIT_SMEM_TO_GMEM, "wait until at most `count` TMA stores of the thread are in "
            "flight", "wait_smem_to_gmem", "retire", "TMA store", counted=True),
    _access(TCGEN05_STORE, "tcgen05.st: writes TMEM asynchronously until tcgen05_wait_store",
            "tcgen05_store", "issue", "tcgen05.st"),
    _access(TCGEN05_WAIT_STORE, "tcgen05.wait::st: every earlier tcgen05.st of the thread is "
            "done", "tcgen05_wait_store", "retire", "tcgen05.st"),
    # Pallas's `async_load_tmem`: the registers may be used at once, but the read of TMEM is
    # done only at the thread's `wait_load_tmem` (tcgen05.wait::ld)
    _access(TCGEN05_LOAD, "tcgen05.ld left running: reads TMEM until tcgen05_wait_load",
            "tcgen05_load", "issue", "tcgen05.ld"),
    _access(TCGEN05_WAIT_LOAD, "tcgen05.wait::ld: every earlier tcgen05.ld of the thread is "
            "done", "tcgen05_wait_load", "retire", "tcgen05.ld"),
    _access(WGMMA, "Hopper WGMMA: reads its SMEM operands until a covering wgmma_wait",
            "wgmma", "issue", "WGMMA"),
    _access(WGMMA_WAIT, "wgmma.wait_group(count): at most `count` WGMMAs still in flight",
            "wgmma_wait", "retire", "WGMMA", counted=True),
    _access(CP_ASYNC, "copy_gmem_to_smem without a barrier (cp.async, pre-Hopper): writes its "
            "destination until a covering wait_gmem_to_smem", "cp_async", "issue", "cp.async"),
    _access(WAIT_GMEM_TO_SMEM, "cp.async.wait_group(count): at most `count` copies in flight",
            "wait_gmem_to_smem", "retire", "cp.async", counted=True),
))
