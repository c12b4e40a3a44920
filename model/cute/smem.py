"""Shared-memory data: which bytes of which buffer each access of a warp touches (races,
BP200; BP105 at exit).

A tensor in shared memory is a `Data` value: its allocation (`smem.allocate_tensor`, one
`cute.memref.alloca` each, named after the Python variable) and the byte offset of its first
element, per lane when it depends on the thread (`sA[(tidx, None, stage)]`). Views that keep
the iterator (group_modes, logical_divide, a TMA partition, ...) keep the offset; `cute.slice`
moves it by the coordinate's element index in the operand's layout; any other op that makes a
shared-memory tensor from one is the whole buffer (said in the verdict's notes). An access
covers, in each active lane, the offset plus the operand layout's cosize, and the warp's
access is the hull over its lanes: coarser than the elements, never missing one. A swizzled
layout (`S<B,M,S>`) permutes bytes within aligned 2^(B+M+S)-byte blocks, so an access that
covers part of a block covers the whole block (blocks counted from the allocation's start,
which the DSL aligns for a swizzled TMA tile).

Read: TMA load destinations (on the copy, handlers.py), SIMT copies between shared memory and
registers (`cute.copy` with a universal/SIMT atom, `cute.autovec_copy`), element loads and
stores (`cute.memref.load` / `store`), TMA stores (`cute.copy` with a TMA store atom, which read
their source until `cp.async.bulk.wait_group`). An op that passes shared-memory data to
anything else (an MMA's operand descriptors, ldmatrix, a raw pointer load) is not read: the
verdict's notes name it.
"""

from __future__ import annotations

import re

from .. import primitives as K
from .layouts import crd2idx, cosize, layout_of, parse_tuple, swizzle_block
from .values import WARP, Coord, Data, Lanes, Ptr, Unknown, elem_bytes, lane_values, uniform

# (buffer, first byte, one past the last byte) of an access; (buffer, None, None): the whole
# buffer
Footprint = tuple


def data_of(value) -> Data | None:
    """A shared-memory data position (from a Ptr, a plain pointer, or a Data value)."""
    if isinstance(value, Data):
        return value
    if isinstance(value, Ptr) and value.space == "smem":
        return Data("", value.buffer, value.offset, value.elem_bytes)
    return None


def _smem_type(text: str) -> bool:
    return text.startswith(("!cute.memref<", "!cute.ptr<")) and ", smem" in text


# -- values ------------------------------------------------------------------------------------
def make_coord(warp, node, active):
    """`cute.make_coord`: the static text with `?` filled by the operands in order."""
    m = re.search(r'coord<"([^"]*)">', node.types[0]) if node.types else None
    if not m:
        return None
    operands = iter(warp.args(node))

    def fill(t):
        if isinstance(t, tuple):
            return tuple(fill(x) for x in t)
        return next(operands, Unknown("a coordinate")) if t is None else t
    try:
        tree = fill(parse_tuple(m.group(1).replace(" ", "")))
    except (ValueError, IndexError):
        return None
    return [Coord("a CuTe coordinate", tree)]


def same_iterator(warp, node, active):
    """A view of a tensor that keeps its first element (group_modes, logical_divide, ...)."""
    data = data_of(warp.get(node.operands[0])) if node.operands else None
    out = []
    for text in node.types:
        out.append(Data(node.name, data.buffer, data.offset, elem_bytes(text) or data.elem_bytes)
                   if data is not None and _smem_type(text) else Unknown(node.name))
    return out


def tma_partition(warp, node, active):
    """cpasync.tma_partition(atom, cta coord, cta layout, smem tensor, gmem tensor): the shared-
    memory side keeps the tensor's first element (one block, no multicast slices)."""
    data = data_of(warp.get(node.operands[3])) if len(node.operands) > 3 else None
    smem = [Data(node.name, data.buffer, data.offset, data.elem_bytes)
            if data is not None and _smem_type(t) and "num_cta" not in node.operand_types[0]
            else Data(node.name, data.buffer, None, data.elem_bytes)
            if data is not None and _smem_type(t) else Unknown(node.name) for t in node.types]
    return smem


def slice_(warp, node, active):
    """`tensor[coord]` of a shared-memory tensor: the offset of the coordinate's element."""
    data = data_of(warp.get(node.operands[0]))
    if data is None or not _smem_type(node.operand_types[0]):
        return warp.other(node, active)
    coord = warp.get(node.operands[1])
    index = element_index(node.operand_types[0], coord)
    return [Data(node.name, data.buffer, _moved(data.offset, index, data.elem_bytes),
                 data.elem_bytes)]


def element_index(type_text: str, coord):
    """The element index of a coordinate in a tensor of this type (int or Lanes), or None."""
    layout = layout_of(type_text)
    if layout is None or not isinstance(coord, Coord):
        return None
    leaves = []

    def collect(t):
        if isinstance(t, tuple):
            for x in t:
                collect(x)
        elif t != "_":
            leaves.append(t)
    collect(coord.tree)
    if any(not isinstance(v, (int, Lanes)) for v in leaves):
        return None
    lanes = any(isinstance(v, Lanes) for v in leaves)

    def at(lane):
        def pick(t):
            if isinstance(t, tuple):
                return tuple(pick(x) for x in t)
            return t if t == "_" else lane_values(t, lane)
        try:
            return crd2idx(pick(coord.tree), *layout)
        except (ValueError, TypeError, ZeroDivisionError):
            return None
    values = [at(lane) for lane in range(WARP)] if lanes else [at(0)]
    if any(v is None for v in values):
        return None
    return Lanes(tuple(values)) if lanes and len(set(values)) > 1 else values[0]


def _moved(offset, index, size: int):
    if offset is None or index is None:
        return None
    if isinstance(offset, int) and isinstance(index, int):
        return offset + index * size
    return Lanes(tuple(lane_values(offset, l) + lane_values(index, l) * size
                       for l in range(WARP)))


def smem_result(warp, node, active) -> list | None:
    """An op with no row that makes a shared-memory tensor from one: the whole buffer (not
    followed). None when no result is such a tensor."""
    if not any(_smem_type(t) for t in node.types):
        return None
    data = next((d for d in map(data_of, warp.args(node)) if d is not None), None)
    if data is None:
        return None
    warp.memory_note(node, data.buffer, f"the view `{node.name}` of `{data.buffer}` is not "
                                        "followed: its accesses count as the whole buffer")
    return [Data(node.name, data.buffer, None, data.elem_bytes) if _smem_type(t)
            else Unknown(node.name) for t in node.types]


def unread_access(warp, node, active) -> None:
    """An op with no row that is given shared-memory data and makes no view of it: it may
    read or write the buffer, which this frontend does not read (said in the notes)."""
    if any(t.startswith("!cute.") and not t.startswith("!cute_nvgpu") for t in node.types):
        return        # layout algebra on a tensor (get_layout, size, ...)
    for value in warp.args(node):
        data = data_of(value)
        if data is not None:
            warp.memory_note(node, data.buffer, f"`{node.name}` uses `{data.buffer}` in a way "
                                                "this frontend does not read: races through it "
                                                "are not checked")
            return


# -- footprints --------------------------------------------------------------------------------
def footprint(warp, node, data: Data, type_text: str, active, index=None) -> Footprint:
    """The bytes an access through `data` (of this type) covers in the active lanes: the
    tensor's cosize, or one element at `index`; the whole buffer when not known."""
    layout = layout_of(type_text)
    size = elem_bytes(type_text) or data.elem_bytes
    offset = data.offset if index is None else _moved(data.offset, index, size)
    if offset is None or layout is None:
        warp.memory_note(node, data.buffer, f"an access to `{data.buffer}` whose place in it "
                                            "is not known counts as the whole buffer")
        return (data.buffer, None, None)
    span = size if index is not None else cosize(*layout) * size
    starts = [lane_values(offset, lane) for lane in active]
    lo, hi = min(starts), max(starts) + span
    block = swizzle_block(type_text)
    if block > 1:
        lo, hi = lo - lo % block, -(-hi // block) * block
    total = warp.allocations.get(("bytes", data.buffer))
    if lo < 0 or total is None or hi > total:
        warp.memory_note(node, data.buffer, f"an access to `{data.buffer}` outside the bytes "
                                            "it allocates counts as the whole buffer")
        return (data.buffer, None, None)
    return (data.buffer, lo, hi)


def _access(warp, node, active, reads=(), writes=()) -> None:
    if reads:
        warp.emit(K.READ, node, reads=tuple(reads))
    if writes:
        warp.emit(K.WRITE, node, writes=tuple(writes))


def simt_copy(warp, node, active) -> bool:
    """`cute.copy(atom, src, dst)` with a SIMT atom: the threads read src and write dst (the
    shared-memory ones of them). True when it was read."""
    reads, writes = [], []
    for k, out in ((1, reads), (2, writes)):
        if k < len(node.operands) and _smem_type(node.operand_types[k]):
            data = data_of(warp.get(node.operands[k]))
            if data is None:
                unread_access(warp, node, active)
                continue
            out.append(footprint(warp, node, data, node.operand_types[k], active))
    _access(warp, node, active, reads, writes)
    return True


def memref_load(warp, node, active):
    """`tensor[coord]` read from shared memory: one element per lane."""
    _element(warp, node, active, tensor_at=0, write=False)
    return None


def memref_store(warp, node, active):
    """`tensor[coord] = value` into shared memory (value, tensor, coord)."""
    _element(warp, node, active, tensor_at=1, write=True)
    return None


def _element(warp, node, active, tensor_at: int, write: bool) -> None:
    if len(node.operands) <= tensor_at or not _smem_type(node.operand_types[tensor_at]):
        return
    data = data_of(warp.get(node.operands[tensor_at]))
    if data is None:
        unread_access(warp, node, active)
        return
    coord = warp.get(node.operands[tensor_at + 1]) if len(node.operands) > tensor_at + 1 \
        else None
    index = element_index(node.operand_types[tensor_at], coord) if coord is not None else None
    if coord is not None and index is None:
        fp = footprint(warp, node, Data("", data.buffer, None, data.elem_bytes),
                       node.operand_types[tensor_at], active)
    else:
        fp = footprint(warp, node, data, node.operand_types[tensor_at], active, index)
    _access(warp, node, active, writes=[fp]) if write else _access(warp, node, active, [fp])


def tma_store(warp, node, active) -> None:
    """A TMA store reads its shared-memory source until the issuing thread's
    cp.async.bulk.wait_group retires its bulk group (one per warp: issued from one lane)."""
    data = data_of(warp.get(node.operands[1]))
    if data is None:
        unread_access(warp, node, active)
        return
    fp = footprint(warp, node, data, node.operand_types[1], [min(active)])
    warp.bulk_pending += 1
    warp.emit(K.COPY_SMEM_TO_GMEM, node, reads=(fp,))


def bulk_commit(warp, node, active):
    """cp.async.bulk.commit_group: the stores issued since the last commit are one group."""
    if warp.bulk_pending:
        warp.bulk_groups.append(warp.bulk_pending)
    warp.bulk_pending = 0
    return None


def bulk_wait(warp, node, active):
    """cp.async.bulk.wait_group(n): all but the newest n bulk groups are done (their sources
    read, with `.read`). The model counts stores, so n > 0 is read only when every group seen
    holds one store; a store not committed before the wait is not waited for."""
    n = node.attrs.get("group")
    if not isinstance(n, int):
        warp.unmodeled(node, "cp.async.bulk.wait_group with a group count not known")
        return None
    if warp.bulk_pending:
        warp.unmodeled(node, "cp.async.bulk.wait_group after a TMA store not committed to a "
                             "bulk group (cp.async.bulk.commit_group)")
        return None
    if n and any(size != 1 for size in warp.bulk_groups):
        warp.unmodeled(node, f"cp.async.bulk.wait_group({n}) after a bulk group of several "
                             "TMA stores (the model counts stores)")
        return None
    warp.emit(K.WAIT_SMEM_TO_GMEM, node, count=n)
    return None


def touches_memory(node) -> bool:
    """Does the op access shared-memory data (a row of this module)?"""
    if node.name in ("cute.memref.load", "cute.memref.store"):
        return True
    return node.name == "cute.copy" and any(_smem_type(t) for t in node.operand_types[1:])


# The ops whose results are views of a tensor with the same first element.
SAME_ITERATOR = ("cute.group_modes", "cute.logical_divide", "cute.zipped_divide",
                 "cute.tiled_divide", "cute.flat_divide", "cute.append_to_rank",
                 "cute.prepend_to_rank", "cute.coalesce", "cute.composition",
                 "cute.make_view", "cute.get_iter", "cute.recast_iter", "cute.filter_zeros",
                 "cute.memref.make_view")

RULES = {
    "cute.make_coord": make_coord, "cute.slice": slice_,
    "cute_nvgpu.atom.tma_partition": tma_partition,
    "cute.memref.load": memref_load, "cute.memref.store": memref_store,
    "nvvm.cp.async.bulk.commit.group": bulk_commit,
    "nvvm.cp.async.bulk.wait_group": bulk_wait,
    **{name: same_iterator for name in SAME_ITERATOR
       if name not in ("cute.make_view", "cute.get_iter", "cute.recast_iter")},
}
