"""One shared-memory array of barriers used as several rings: split into one array per ring.

A pipeline's full and empty barriers are one allocation when both count the same arrivals
(`PipelineAsync` with 32-thread producer and consumer groups: four barriers, full ones first),
and translate.py keeps slots of one count side by side as one array. Once the loops are rolled
every access is `b + e % m` (or a constant slot): when every access of an array of N barriers
uses one period m < N dividing N and stays in one group [g*m, (g+1)*m), the groups are separate
rings. Splitting the array is the same program (each barrier is its own object, and no access
crosses a group), and gives the prover the ring shape it reasons about: one array per ring,
indexed `e % m`.
"""

from __future__ import annotations

import dataclasses

from ..expr import mk
from ..ir import BarrierAlloc, BarrierRef, BinOp, Const, Expr, Kernel, map_ops


def _form(index: Expr) -> tuple[int | None, int, Expr | None] | None:
    """(m, b, e) for `e % m + b`, (None, c, None) for the constant slot c, else None."""
    if isinstance(index, Const):
        return None, index.value, None
    base = 0
    if isinstance(index, BinOp) and index.op == "+" and isinstance(index.rhs, Const):
        index, base = index.lhs, index.rhs.value
    if isinstance(index, BinOp) and index.op == "%" and isinstance(index.rhs, Const) \
            and index.rhs.value > 0:
        return index.rhs.value, base, index.lhs
    return None


def _period(alloc: BarrierAlloc, forms: list) -> int | None:
    """The one period m every access of the array walks, if the array splits into rings."""
    size = alloc.shape[0].value if len(alloc.shape) == 1 and isinstance(alloc.shape[0], Const) \
        else None
    if size is None or any(f is None for f in forms):
        return None
    periods = {m for m, _, _ in forms if m is not None}
    if len(periods) != 1:
        return None
    [m] = periods
    if m >= size or size % m:
        return None
    for period, base, _ in forms:
        if period is None and not 0 <= base < size:
            return None
        if period is not None and (base % m or not 0 <= base < size):
            return None
    return m


def split_rings(kernel: Kernel) -> Kernel:
    """The kernel with each array used as several rings split into one array per ring."""
    uses: dict[str, list] = {}
    for op in kernel.ops():
        ref = op.barrier
        if ref is not None and len(ref.index) == 1 and ref.block is None:
            uses.setdefault(ref.alloc.name, []).append(_form(ref.index[0]))
        elif ref is not None:
            uses.setdefault(ref.alloc.name, []).append(None)
    groups: dict[str, tuple[int, list[BarrierAlloc]]] = {}
    allocs: list[BarrierAlloc] = []
    for alloc in kernel.barriers:
        m = _period(alloc, uses.get(alloc.name, [None]))
        if m is None or alloc.cluster or alloc.semaphore:
            allocs.append(alloc)
            continue
        parts = [dataclasses.replace(alloc, name=alloc.name if g == 0 else f"{alloc.name}_{g * m}",
                                     shape=(Const(m),), scalar=m == 1)
                 for g in range(alloc.shape[0].value // m)]
        groups[alloc.name] = (m, parts)
        allocs.extend(parts)
    if not groups:
        return kernel

    made: dict[int, object] = {}        # one op per op: roles sharing an instruction keep it

    def regroup(op):
        if id(op) not in made:
            made[id(op)] = _regroup(op)
        return made[id(op)]

    def _regroup(op):
        ref = op.barrier
        if ref is None or ref.alloc.name not in groups:
            return op
        m, parts = groups[ref.alloc.name]
        period, base, walk = _form(ref.index[0])
        part = parts[base // m]
        index = Const(base % m) if period is None else mk("%", walk, Const(m))
        return dataclasses.replace(op, barrier=BarrierRef(part, () if m == 1 else (index,),
                                                          ref.block))
    return kernel.replace(barriers=tuple(allocs), body=map_ops(kernel.body, regroup))
