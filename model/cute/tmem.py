"""Tensor memory: which columns of TMEM each tcgen05 access of a warp touches (races, BP201).

A TMEM address is a lane (bits 16 and up) and a 32-bit column (the low 16 bits); a CuTe
tensor in TMEM of 32-bit elements has its layout's strides in those address units (an
accumulator `((128,128),1,1,2):((65536,1),0,0,128)`: lanes, columns, and a stage every 128
columns). The frontend tracks columns only: every access covers all the lanes its warp may
reach, so two accesses conflict when their column ranges meet (coarser across lanes, never
missing a conflict). A TMEM tensor is a `Data` in the one buffer TENSOR_MEMORY, its offset the
address times 4 (bytes, so slices move it as shared-memory ones do).

Where the address comes from:
- `retrieve_tmem_ptr` (TmemAllocator.retrieve_ptr): the start of the kernel's one TMEM
  allocation (a kernel that allocates at more than one place is not read: its addresses are
  unknown, as is one that allocates none);
- `tiled_mma.make_fragment_C(...)`: a fragment on address 0, which is what an MMA given it
  directly writes.
A view of a TMEM tensor keeps its first column when its layout reaches the same columns as the
tensor's (a per-thread partition of a TMEM copy or MMA differs from the tensor only in lanes);
otherwise, and for elements that are not 32 bits wide, the place is unknown, and an access
through it is BP190 at its line (never a silent pass).

Accesses: a tcgen05 MMA writes its accumulator (the `d` operand), and reads an `a` operand in
TMEM, while queued, as it reads its shared-memory operands (smem.gemm); a `cute.copy` with a
tcgen05.ld atom reads the source columns as a load waited at once: CUTLASS's own epilogues
(cutlass.utils.gemm.sm100) release the accumulator right after the copy with no
`fence_view_async_tmem_load` (tcgen05.wait::ld) between, so the copy is taken as complete when
it returns (a release between an unwaited tcgen05.ld and its wait is not flagged). A
copy into TMEM (tcgen05.st, tcgen05.cp) is not read: BP190 at its line. When one warp's MMAs
are all that touch TMEM, no access can race on it and the footprints are dropped (`unshared`).
"""

from __future__ import annotations

import dataclasses

from .. import primitives as K
from .layouts import layout_of
from .values import Data, Lanes, WARP, elem_bytes, lane_values

TENSOR_MEMORY = "tensor_memory"
COLUMNS = 512                  # columns of TMEM per SM
LANE_BITS = 16
WORD = 4                       # bytes per 32-bit column


def is_tmem(type_text: str) -> bool:
    return type_text.startswith(("!cute.memref<", "!cute.ptr<")) and ", tmem" in type_text


def _data(why: str, type_text: str, offset):
    """A TMEM Data at `offset` bytes, or None when its elements are not 32 bits wide."""
    return Data(why, TENSOR_MEMORY, offset, WORD) if elem_bytes(type_text) == WORD else \
        Data(why, TENSOR_MEMORY, None, WORD)


def allocate(warp, node, active):
    """`alloc_tmem(columns, dst)`: the buffer is the columns allocated (all of TMEM when the
    count is not a constant); the address it writes to `dst` is what retrieve_ptr reads."""
    columns = warp.get(node.operands[0]) if node.operands else None
    if isinstance(columns, int) and 0 < columns <= COLUMNS:
        warp.allocations[("bytes", TENSOR_MEMORY)] = columns * WORD
    return None


def retrieve_ptr(warp, node, active):
    """`retrieve_tmem_ptr`: the start of the kernel's one TMEM allocation."""
    warp.allocations.setdefault(("bytes", TENSOR_MEMORY), COLUMNS * WORD)
    sites = sum(op.name == "cute_nvgpu.arch.sm100.alloc_tmem"
                for top in warp.kernel.body.ops for op in top.walk())
    return [_data("the TMEM address", node.types[0], 0 if sites == 1 else None)]


def fragment(warp, node) -> list | None:
    """`make_fragment_C` in TMEM: a tensor on address 0."""
    if not node.types or not is_tmem(node.types[0]):
        return None
    warp.allocations.setdefault(("bytes", TENSOR_MEMORY), COLUMNS * WORD)
    return [_data("an MMA accumulator fragment", node.types[0], 0)]


def view(warp, node) -> list | None:
    """A view (no row) of a TMEM tensor: its first column when it reaches the same columns as
    the tensor, else unknown. None when no result is in TMEM."""
    if not any(is_tmem(t) for t in node.types):
        return None
    found = next(((v, t) for v, t in zip(warp.args(node), node.operand_types)
                  if isinstance(v, Data) and v.buffer == TENSOR_MEMORY and is_tmem(t)), None)
    if found is None:
        return [Data(node.name, TENSOR_MEMORY, None, WORD) if is_tmem(t) else None
                for t in node.types]
    data, source = found
    keep = len(node.types) == 1 and _reach(source) is not None and \
        _reach(source) == _reach(node.types[0])
    return [Data(node.name, TENSOR_MEMORY, data.offset if keep else None, WORD)
            if is_tmem(t) else None for t in node.types]


def _reach(type_text: str) -> int | None:
    """Columns past the first one a TMEM layout reaches (None: not a column/lane layout)."""
    layout = layout_of(type_text)
    if layout is None:
        return None
    total = 0
    for size, stride in zip(_flat(layout[0]), _flat(layout[1])):
        if not isinstance(size, int) or not isinstance(stride, int) or stride < 0:
            return None
        lane, column = divmod(stride, 1 << LANE_BITS)
        if lane and column:              # a stride across both lanes and columns
            return None
        total += (size - 1) * column
    return total


def _flat(t) -> list:
    return [x for s in t for x in _flat(s)] if isinstance(t, tuple) else [t]


def footprint(data, type_text: str) -> tuple | None:
    """The columns an access through `data` covers, as one footprint (TENSOR_MEMORY, first
    byte, end byte), or None when not known."""
    reach = _reach(type_text)
    if not isinstance(data, Data) or data.buffer != TENSOR_MEMORY or data.offset is None or \
            reach is None or elem_bytes(type_text) != WORD:
        return None
    if isinstance(data.offset, Lanes):
        columns = {_column(lane_values(data.offset, lane)) for lane in range(WARP)}
    else:
        columns = {_column(data.offset)}
    lo, hi = min(columns), max(columns) + reach + 1
    if hi > COLUMNS:        # past TMEM (past the allocation: a buffer that far, buffers.py)
        return None
    return (TENSOR_MEMORY, lo * WORD, hi * WORD)


def _column(offset: int) -> int:
    return (offset // WORD) & ((1 << LANE_BITS) - 1)


def access(warp, node, at: int, what: str) -> tuple | None:
    """The footprint of operand `at` (a TMEM tensor); BP190 at the op when its place is
    unknown."""
    fp = footprint(warp.get(node.operands[at]), node.operand_types[at])
    if fp is None:
        warp.unmodeled(node, f"{what} whose tensor-memory columns are not known (an address "
                             "not from retrieve_tmem_ptr / make_fragment_C, a view that "
                             "changes the columns, or elements not 32 bits wide)")
    return fp


def copy(warp, node, active) -> bool:
    """`cute.copy` with a TMEM operand (True when it has one): a tcgen05.ld atom reads its
    source; any other copy touching TMEM (tcgen05.st, tcgen05.cp) is BP190 at its line."""
    atom_type = node.operand_types[0] if node.operand_types else ""
    if not any(is_tmem(t) for t in node.operand_types[1:]):
        return False
    if "tmem_load" in atom_type and is_tmem(node.operand_types[1]):
        fp = access(warp, node, 1, "a tcgen05.ld")
        if fp is not None:
            warp.emit(K.READ, node, reads=(fp,))
    else:
        warp.unmodeled(node, "a copy into tensor memory (tcgen05.st / tcgen05.cp)")
    return True


def wait(warp, node, active):
    """`tcgen05.wait::ld` / `::st` (`fence_view_async_tmem_load/store`): completes the warp's
    own TMEM copies, which are read as complete already (loads) or not read (stores)."""
    return None


def _touches(e) -> bool:
    return any(fp[0] == TENSOR_MEMORY for fp in e.reads + e.writes)


def unshared(programs: list) -> tuple[list, bool]:
    """One block's warp programs without their TMEM footprints when only one warp touches
    TMEM, and only with tcgen05 MMAs: they run in order in that warp's tensor-core queue, so
    no two of them race, and nothing else reads their columns (an accumulator never loaded in
    the kernel). (programs, whether they were dropped.)"""
    users = [w for w, events in enumerate(programs) if any(_touches(e) for e in events)]
    if len(users) != 1 or any(_touches(e) and e.kind != K.TCGEN05_MMA
                               for e in programs[users[0]]):
        return programs, False
    strip = [dataclasses.replace(e, reads=_others(e.reads), writes=_others(e.writes))
             if _touches(e) else e for e in programs[users[0]]]
    return programs[:users[0]] + [strip] + programs[users[0] + 1:], True


def _others(fps) -> tuple:
    return tuple(fp for fp in fps if fp[0] != TENSOR_MEMORY)
