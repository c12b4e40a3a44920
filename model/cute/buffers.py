"""The IR buffers of a CuTe kernel's shared-memory data, from the footprints its warps
recorded (smem.py): one MemAlloc per allocation that is read or written, in units of the
largest byte count that divides every footprint's bounds (a ring read by stage is one slot per
stage; rows read per warp are one slot per warp's rows), and each footprint as the slot, the
run of slots, or the whole buffer it covers.
"""

from __future__ import annotations

import math

from ..ir import Const, Loc, MemAlloc, MemRef, Slice
from .tmem import TENSOR_MEMORY

MAX_CELLS = 256          # cells per buffer the explorer tracks; wider footprints join cells


def data_buffers(programs, allocations: dict, barrier_names: set[str], loc: Loc):
    """(buffers, refs): the MemAllocs, and for each footprint its MemRef (keyed
    ("mem", buffer, lo, hi))."""
    seen: dict[str, list] = {}
    where: dict[str, Loc] = {}
    owners: dict[str, dict[tuple, set[int]]] = {}   # buffer -> footprint -> programs using it
    for n, events in enumerate(programs):
        for e in events:
            for fp in e.reads + e.writes:
                seen.setdefault(fp[0], []).append(fp)
                where.setdefault(fp[0], e.loc or loc)
                owners.setdefault(fp[0], {}).setdefault(fp, set()).add(n)
    buffers, refs = [], {}
    for buffer, fps in seen.items():
        total = allocations.get(("bytes", buffer))
        bounds = [b for fp in fps for b in fp[1:] if b is not None]
        if buffer == TENSOR_MEMORY and total and bounds:
            total = max(total, *bounds)     # columns past the allocation are TMEM's still
        unit = math.gcd(total or 0, *bounds) if bounds and total else (total or 1)
        slots = (total or unit) // unit
        granule = _granule(slots, unit, owners[buffer])
        name = buffer if buffer not in barrier_names else f"{buffer}_data"
        space = "tmem" if buffer == TENSOR_MEMORY else "smem"
        alloc = MemAlloc(name, space, (Const(slots),), where[buffer], scalar=False,
                         granule=(granule,) if granule > 1 else ())
        buffers.append(alloc)
        for fp in set(fps):
            _, lo, hi = fp
            if lo is None:
                ref = MemRef(alloc)
            elif hi - lo == unit:
                ref = MemRef(alloc, (Const(lo // unit),))
            else:
                ref = MemRef(alloc, (), (Slice(Const(lo // unit), Const((hi - lo) // unit)),))
            refs[("mem",) + fp] = ref
    return tuple(buffers), refs


def _granule(slots: int, unit: int, owners: dict[tuple, set[int]]) -> int:
    """Slots per cell: the least count that keeps the buffer within MAX_CELLS cells and puts
    no two slots that different programs (warps) touch in one cell, so that a shared cell is a
    shared slot; where none does within a few times the least count, the least count (a race
    found on a cell that joins slots is replayed on the slot-exact reference, which refuses it
    if no slot is shared)."""
    least = -(-slots // MAX_CELLS)
    if least <= 1:
        return 1
    touched: dict[int, frozenset[int]] = {}
    for fp, progs in owners.items():
        if fp[1] is None:
            continue                        # the whole buffer: every cell, whatever the size
        for slot in range(fp[1] // unit, fp[2] // unit):
            touched[slot] = touched.get(slot, frozenset()) | progs
    for g in range(least, min(slots, 8 * least) + 1):
        cells: dict[int, frozenset[int]] = {}
        if all(cells.setdefault(slot // g, who) == who for slot, who in touched.items()):
            return g
    return least


def memory_notes(warps, buffers, barrier_names: set[str]) -> tuple[str, ...]:
    """The notes of what was read coarsely or not at all, once each, skipping buffers that
    hold only barriers (a pipeline's storage passed around is no data access)."""
    data = {b.name for b in buffers} | {b.name[:-len("_data")] for b in buffers
                                        if b.name.endswith("_data")}
    out: dict[str, None] = {}
    for warp in warps:
        for (buffer, what), where in warp.memory_notes.items():
            if buffer and buffer in barrier_names and buffer not in data:
                continue
            at = f"{where.file}:{where.line}: " if where is not None else ""
            out.setdefault(at + what, None)
    return tuple(out)
