"""BP105 for a thread's own asynchronous shared-memory accesses (model/exit_async.py), for every
parameter value: the Z3 encoding of the barrier rules has no memory effects, so a TMA store, a
WGMMA or a cp.async still running when its thread ends would otherwise pass unseen.

Each such issue is followed along its thread's program (own_copies.py, with no regard to what
the thread touches meanwhile): on every way the thread can go after it, a wait of its group
must retire it before the thread ends. Where that is not proved, the prover says why and proves
nothing (fail closed); prove.py then searches small parameter values for the violation.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ...model.compile import ASYNC_GROUPS
from ...model.ir import Kernel
from .fragment import Fragment
from .own_copies import own_copies_retired
from .terms import Unsupported


def _touches_smem(op) -> bool:
    return op.kind in ASYNC_GROUPS and \
        any(r.alloc.space == "smem" for r in op.reads + op.writes)


def exit_open(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]) -> str | None:
    """None when every thread retires each of its asynchronous shared-memory accesses before
    it ends, for every value of `symbolic`; else the reason it is not proved."""
    if not any(_touches_smem(op) for op in kernel.ops()):
        return None
    try:
        frag = Fragment(kernel, symbolic, fixed)
        for role in frag.build_roles():
            for item in role.items:
                for bop in item.ops:
                    if _touches_smem(bop.op) and \
                            not own_copies_retired(frag, role, item, bop, touches=False):
                        return (f"`{bop.op.describe()}` ({bop.op.loc}) may still be running "
                                "when its thread ends (BP105), or no wait of its group was "
                                "proved to retire it on every way")
    except Unsupported as err:
        return f"whether asynchronous shared-memory accesses end before the exit: {err}"
    return None
