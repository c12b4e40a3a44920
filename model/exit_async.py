"""BP105 for a thread's own asynchronous shared-memory accesses: the kernel must not exit while
one is still running.

A TMA store reads its shared-memory source (`cp.async.bulk ... bulk_group`), a WGMMA its
shared-memory operands (`wgmma.mma_async`), a cp.async writes its destination, each until the
issuing thread's wait of that group retires it (`cp.async.bulk.wait_group.read`,
`wgmma.wait_group`, `cp.async.wait_group`). When the block exits, its shared memory goes to the
next block on the SM, so an access still running reads or overwrites memory that is no longer
the kernel's. Neither Mosaic GPU (Pallas) nor Triton (Gluon) adds a wait at the end of a kernel
for a store the program issued itself, and the CUDA programming guide waits for the bulk group
before exiting: the wait is the program's.

Such an access is no step of the model (it touches no barrier), so which of them are still
running when a thread ends is fixed by the thread's program: those issued after the last wait
of their group that leaves fewer in flight than came before. They are recorded while the System
compiles (model/primitives/memory.py calls `record`), whether or not races are checked, and
every state in which all threads have finished (a property of that state alone, so any
reduction that keeps terminal states keeps it) reports one BP105 per such access. Accesses to
tensor memory (tcgen05.st) are left to the TMEM rules: TMEM is freed explicitly before exit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from .ir import Op, evaluate
from .kinds import ASYNC_WAITS
from .regions import region_text, runs

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System
    from .violations import Violation


@dataclass(frozen=True)
class ExitAccess:
    """An asynchronous shared-memory access a thread leaves running when it ends."""

    agent: int
    group: str          # "TMA store", "WGMMA", "cp.async"
    write: bool
    text: str           # the memory it names, with concrete slots
    src: int            # its issue, an index into System.sources


def ref_text(ref, env: Mapping[str, int], block: tuple[int, ...], multi_block: bool,
             loc) -> str:
    """The memory a reference names with concrete slots, as model/memory.py writes it."""
    shape = tuple(evaluate(n, env) for n in ref.alloc.shape)
    named = len(ref.index) + len(ref.region)
    text = ref.alloc.name if ref.alloc.scalar or not named else \
        region_text(ref.alloc.name, runs(ref, shape, env, loc), named, shape)
    return text + ("@" + ",".join(map(str, block)) if multi_block else "")


def record_issue(system: "System", op: Op, group: str, src: int, texts: list[str],
                 agent: int, pc: int) -> None:
    refs = [(r, False) for r in op.reads] + [(w, True) for w in op.writes]
    smem = tuple((write, text) for (ref, write), text in zip(refs, texts)
                 if ref.alloc.space == "smem")
    # an issue touching no shared memory (an empty cp.async group) still takes its place in
    # the count a later wait keeps in flight
    system.async_ledger[agent].append(("issue", pc, group, src, smem))


def record_wait(system: "System", group: str, keep: int, agent: int, pc: int) -> None:
    system.async_ledger[agent].append(("wait", pc, group, keep))


def finish(system: "System") -> tuple[ExitAccess, ...]:
    """Per agent, the shared-memory accesses its program leaves running at its end."""
    out = []
    for agent, ledger in enumerate(system.async_ledger):
        outstanding: dict[str, list[tuple]] = {}
        for event in ledger:
            if event[0] == "issue":
                outstanding.setdefault(event[2], []).append(event)
            else:                      # a wait retires all but the newest `keep` of its group
                pending = outstanding.get(event[2], [])
                outstanding[event[2]] = pending[max(len(pending) - event[3], 0):]
        for pending in outstanding.values():
            for _, _, group, src, accesses in pending:
                out += [ExitAccess(agent, group, write, text, src)
                        for write, text in accesses]
    return tuple(out)


def _wait_of(group: str) -> str:
    return next((kind for kind, (g, _) in sorted(ASYNC_WAITS.items()) if g == group), "a wait")


def exit_violations(system: "System") -> list["Violation"]:
    """One BP105 per shared-memory access still running when every thread has finished."""
    from .violations import Violation
    out = []
    for acc in system.exit_live:
        source = system.sources[acc.src]
        name = system.agents[acc.agent].name
        verb = "writing" if acc.write else "reading"
        out.append(Violation(
            "BP105", f"{name} exits with its {acc.group} ({source.loc}) still {verb} "
            f"{acc.text} in shared memory: no {_wait_of(acc.group)} retires it before the "
            "kernel ends", acc.agent, None, acc.src,
            [f"{name} issues {source.text} at {source.loc}",
             f"the block's shared memory is released at exit while the {acc.group} may "
             f"still be {verb} it"]))
    return out
