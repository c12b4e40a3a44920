"""Static rules: what is wrong with a kernel before any parameter is fixed or any state explored
(BP110, BP111, BP112, BP120, BP190), and the finding type every compile-time rule reports with.

`System` (semantics.py) and the hardware-barrier rules (hw_barriers.py) add the findings that
need concrete parameters (an index out of range, a count outside the hardware's range) to
`System.findings` with the same type.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import kinds
from .ir import BarrierAlloc, Kernel, Loc


@dataclass
class StaticFinding:
    code: str
    message: str
    loc: Loc
    hint: str = ""


def _arrival_targets_ok(alloc: BarrierAlloc, kind: str, loc: Loc) -> list[StaticFinding]:
    """BP110 / BP111: which barriers an asynchronous arrival may target."""
    findings = []
    prim = kinds.lookup(kind)
    if prim is None:
        return findings     # an unknown kind: the compiler refuses it
    if prim.async_arrival and alloc.cluster:
        findings.append(StaticFinding(
            "BP111", f"{kind} arrives on ClusterBarrier `{alloc.name}`: Unsupported barrier type",
            loc, "asynchronous arrivals (TMA, tcgen05) need a plain plgpu.Barrier"))
    elif prim.tensor_core and not alloc.orders_tensor_core:
        findings.append(StaticFinding(
            "BP110", f"{kind} arrives on `{alloc.name}`, a Barrier that does not order the "
            "tensor core", loc, f"declare `{alloc.name}` with orders_tensor_core=True"))
    return findings


def static_findings(kernel: Kernel) -> list[StaticFinding]:
    """Rules that need no parameters and no exploration: BP110, BP111, BP120 (unindexed array),
    BP190 (unmodelled synchronization)."""
    findings: list[StaticFinding] = []
    for op in kernel.ops():
        prim = kinds.lookup(op.kind)
        if prim is not None and prim.unmodelled:
            # a construct's name, or a frontend's whole sentence (ending with a period) saying
            # what is not modelled and how to avoid it
            what = op.name.rstrip(".") if op.name.endswith(".") else \
                f"`{op.name}` is synchronization the model does not cover"
            findings.append(StaticFinding(
                "BP190", what, op.loc,
                "the verdict cannot be verified while it is ignored; pass --ignore BP190 to "
                "accept the risk"))
            continue
        ref = op.barrier
        if ref is None:
            continue
        findings += _arrival_targets_ok(ref.alloc, op.kind, op.loc)
        if not ref.index and not ref.alloc.scalar:
            findings.append(StaticFinding(
                "BP120", f"array barrier `{ref.alloc.name}` used without an index", op.loc,
                f"index it: {ref.alloc.name}.at[i]"))
        if ref.block is not None and prim is not None and prim.local_wait:
            findings.append(StaticFinding(
                "BP112", f"wait on another block's instance of `{ref.alloc.name}`", op.loc,
                "waits are local: wait on your own block's barrier"))
    return findings
