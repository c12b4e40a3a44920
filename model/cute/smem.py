"""Shared-memory data: which bytes of which buffer each access of a warp touches (races,
BP200; BP105 at exit).

A tensor in shared memory is a `Data` value: its allocation (`smem.allocate_tensor`, one
`cute.memref.alloca` each, named after the Python variable) and the byte offset of its first
element, per lane when it depends on the thread (`sA[(tidx, None, stage)]`). Views that keep
the iterator (group_modes, logical_divide, a TMA partition, ...) keep the offset; `cute.slice`
moves it by the coordinate's element index in the operand's layout; any other op that makes a
shared-memory tensor from one is the whole buffer (said in the verdict's notes). An access
covers, in each active lane, the offset plus each element offset of the operand's layout, and
the warp's access is the union over its lanes, as disjoint byte ranges (spans.py): a thread's
strided row of a column-major tile is its elements, not the range over the other warps' rows
between them. Past the ranges or elements listed it is the range covering the lanes, coarser
(said in the notes), never missing an element. A swizzled
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
from .layouts import _size as size_of, crd2idx, cosize, layout_of, parse_tuple, swizzle_block
from .spans import byte_ranges, element_offsets
from . import tmem
from .values import WARP, Coord, Data, Lanes, Ptr, Unknown, elem_bytes, lane_values

# (buffer, first byte, one past the last byte) of one range of an access; (buffer, None, None):
# the whole buffer
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
                   if data is not None and (_smem_type(text) or tmem.is_tmem(text))
                   else Unknown(node.name))
    return out


def tma_partition(warp, node, active):
    """cpasync.tma_partition(atom, cta coord, cta layout, smem tensor, gmem tensor): with one
    block in the CTA layout the shared-memory side keeps the tensor's first element; a
    multicast's slice of it is not followed (the whole buffer)."""
    data = data_of(warp.get(node.operands[3])) if len(node.operands) > 3 else None
    alone = len(node.operand_types) > 2 and node.operand_types[2] == '!cute.layout<"1:0">'
    return [Data(node.name, data.buffer, data.offset if alone else None, data.elem_bytes)
            if data is not None and _smem_type(t) else Unknown(node.name) for t in node.types]


def slice_(warp, node, active):
    """`tensor[coord]` of a shared-memory tensor: the offset of the coordinate's element (of
    descriptors: of the tensor they describe, whose remaining modes they keep)."""
    data = data_of(warp.get(node.operands[0]))
    if data is not None and data.desc is not None:
        shape, stride, block = data.desc
        coord = warp.get(node.operands[1])
        index = element_index((shape, stride), coord)
        rest = _remaining(shape, stride, coord.tree) if isinstance(coord, Coord) else None
        return [Data(node.name, data.buffer, moved(data.offset, index, data.elem_bytes),
                     data.elem_bytes, rest + (block,) if rest and index is not None else None)]
    if data is None or not (_smem_type(node.operand_types[0]) or
                            tmem.is_tmem(node.operand_types[0])):
        return warp.other(node, active)
    coord = warp.get(node.operands[1])
    index = element_index(node.operand_types[0], coord)
    return [Data(node.name, data.buffer, moved(data.offset, index, data.elem_bytes),
                 data.elem_bytes)]


def _remaining(shape, stride, coord):
    """(shape, stride) of the modes a coordinate leaves (`_`), or None."""
    if coord == "_":
        return shape, stride
    if not isinstance(coord, tuple):
        return (), ()
    if not isinstance(shape, tuple) or len(coord) != len(shape):
        return None
    kept = [_remaining(s, d, c) for s, d, c in zip(shape, stride, coord)]
    if any(k is None for k in kept):
        return None
    kept = [k for k in kept if k != ((), ())]
    return tuple(k[0] for k in kept), tuple(k[1] for k in kept)


def make_fragment(warp, node, active):
    """`tiled_mma.make_fragment_A(smem tensor)`: descriptors of the tensor, one per MMA
    block; slicing them slices the tensor (same modes after the first, which the descriptor
    covers whole)."""
    accumulator = tmem.fragment(warp, node)
    if accumulator is not None:
        return accumulator
    data = data_of(warp.get(node.operands[1])) if len(node.operands) > 1 else None
    layout = layout_of(node.operand_types[1]) if data is not None else None
    if data is None or not _smem_type(node.operand_types[1]):
        return [Unknown(node.name)]
    if layout is None:
        return [Data(node.name, data.buffer, None, data.elem_bytes)]
    return [Data(node.name, data.buffer, data.offset, data.elem_bytes,
                 layout + (swizzle_block(node.operand_types[1]),))]


def element_index(type_text, coord):
    """The element index of a coordinate in a tensor of this type (or (shape, stride)), as an
    int or Lanes, or None."""
    layout = layout_of(type_text) if isinstance(type_text, str) else type_text
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


def moved(offset, index, size: int):
    if offset is None or index is None:
        return None
    if isinstance(offset, int) and isinstance(index, int):
        return offset + index * size
    return Lanes(tuple(lane_values(offset, l) + lane_values(index, l) * size
                       for l in range(WARP)))


def smem_result(warp, node, active) -> list | None:
    """An op with no row that makes a shared-memory tensor from one: a view holds some of the
    tensor's elements, so one whose layout reaches as far as the tensor's (equal cosize, same
    element type) starts at its first element (an MMA's partition of an operand tile);
    otherwise the whole buffer (not followed). None when no result is such a tensor."""
    if not any(_smem_type(t) for t in node.types):
        return None
    found = next(((d, t) for d, t in zip(map(data_of, warp.args(node)), node.operand_types)
                  if d is not None), None)
    if found is None:
        return None
    data, source = found
    if len(node.types) == 1 and _smem_type(source) and data.offset is not None and \
            _same_reach(source, node.types[0]):
        return [Data(node.name, data.buffer, data.offset, data.elem_bytes)]
    warp.memory_note(node, data.buffer, f"the view `{node.name}` of `{data.buffer}` is not "
                                        "followed: its accesses count as the whole buffer")
    return [Data(node.name, data.buffer, None, data.elem_bytes) if _smem_type(t)
            else Unknown(node.name) for t in node.types]


def _same_reach(source: str, result: str) -> bool:
    a, b = layout_of(source), layout_of(result)
    return a is not None and b is not None and elem_bytes(source) == elem_bytes(result) and \
        cosize(*a) == cosize(*b) and swizzle_block(source) == swizzle_block(result)


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
def footprint(warp, node, data: Data, type_text: str, active, index=None) -> tuple:
    """The bytes an access through `data` (of this type, or of its descriptors' layout) covers
    in the active lanes, as footprints of disjoint byte ranges (spans.py): each lane's elements
    of the tensor, or its one element at `index`; the range covering the lanes when the
    elements are too many to enumerate (said in the notes); the whole buffer when not known."""
    if data.desc is not None:
        layout, block = data.desc[:2], data.desc[2]
        size = data.elem_bytes
    else:
        layout, block = layout_of(type_text), swizzle_block(type_text)
        size = elem_bytes(type_text) or data.elem_bytes
    offset = data.offset if index is None else moved(data.offset, index, size)
    if offset is None or layout is None:
        warp.memory_note(node, data.buffer, f"an access to `{data.buffer}` whose place in it "
                                            "is not known counts as the whole buffer")
        return ((data.buffer, None, None),)
    starts = [lane_values(offset, lane) for lane in active]
    if index is not None:
        offsets, run = [0], size
    elif size_of(layout[0]) == cosize(*layout):      # a compact layout: one run per lane
        offsets, run = [0], cosize(*layout) * size
    else:
        offsets, run = element_offsets(*layout), size
    ranges = byte_ranges(starts, offsets, run, block) if offsets is not None else None
    if ranges is None:
        warp.memory_note(node, data.buffer, f"an access to `{data.buffer}` with too many "
                                            "elements or separate ranges to list counts as the "
                                            "range covering its lanes")
        span = size if index is not None else cosize(*layout) * size
        lo, hi = min(starts), max(starts) + span
        ranges = [(lo - lo % block, -(-hi // block) * block)]
    total = warp.allocations.get(("bytes", data.buffer))
    if total is None:
        warp.memory_note(node, data.buffer, f"the size of `{data.buffer}` is not known: its "
                                            "accesses count as the whole buffer")
        return ((data.buffer, None, None),)
    if ranges[0][0] < 0 or ranges[-1][1] > total:
        warp.memory_note(node, data.buffer, f"an access to `{data.buffer}` outside the bytes "
                                            "it allocates counts as the whole buffer")
        return ((data.buffer, None, None),)
    return tuple((data.buffer, lo, hi) for lo, hi in ranges)


def _access(warp, node, active, reads=(), writes=()) -> None:
    if reads:
        warp.emit(K.READ, node, reads=tuple(reads))
    if writes:
        warp.emit(K.WRITE, node, writes=tuple(writes))


def simt_copy(warp, node, active) -> None:
    """`cute.copy(atom, src, dst)` with a SIMT atom: the threads read src and write dst (the
    shared-memory ones of them)."""
    reads, writes = [], []
    for k, out in ((1, reads), (2, writes)):
        if k < len(node.operands) and _smem_type(node.operand_types[k]):
            data = data_of(warp.get(node.operands[k]))
            if data is None:
                not_followed(warp, node, "a copy")
                continue
            out.extend(footprint(warp, node, data, node.operand_types[k], active))
    _access(warp, node, active, reads, writes)


def not_followed(warp, node, what: str) -> None:
    """An access to shared memory whose tensor was not followed to a buffer: not read."""
    warp.memory_note(node, "", f"{what} whose shared-memory tensor is not followed to its "
                               f"allocation (`{node.name}`): its accesses are not checked")


def memref_vec(tensor_at: int, write: bool):
    """`tensor.load()` / `tensor.store(v)` of a shared-memory tensor: every element of it."""
    def rule(warp, node, active):
        if len(node.operands) <= tensor_at or not _smem_type(node.operand_types[tensor_at]):
            return None
        data = data_of(warp.get(node.operands[tensor_at]))
        if data is None:
            not_followed(warp, node, "a tensor load or store")
            return None
        fps = footprint(warp, node, data, node.operand_types[tensor_at], active)
        _access(warp, node, active, writes=fps) if write else _access(warp, node, active, fps)
        return None
    return rule


def memref_load(warp, node, active):
    """`tensor[coord]` read from shared memory: one element per lane."""
    _element(warp, node, active, tensor_at=0, write=False)
    return None


def memref_store(warp, node, active):
    """`tensor[coord] = value` into shared memory: (tensor, coord, value) in the DSL 4.8
    releases this frontend reads; the memref operand is found by its type, so an operand
    order of another release is read too rather than dropped."""
    at = next((i for i, t in enumerate(node.operand_types[:2]) if t.startswith("!cute.memref")),
              None)
    if at is not None:
        _element(warp, node, active, tensor_at=at, write=True)
    return None


def _element(warp, node, active, tensor_at: int, write: bool) -> None:
    if len(node.operands) <= tensor_at or not _smem_type(node.operand_types[tensor_at]):
        return
    data = data_of(warp.get(node.operands[tensor_at]))
    if data is None:
        not_followed(warp, node, "an element access")
        return
    coord = warp.get(node.operands[tensor_at + 1]) if len(node.operands) > tensor_at + 1 \
        else None
    index = element_index(node.operand_types[tensor_at], coord) if coord is not None else None
    if coord is not None and index is None:
        fps = footprint(warp, node, Data("", data.buffer, None, data.elem_bytes),
                        node.operand_types[tensor_at], active)
    else:
        fps = footprint(warp, node, data, node.operand_types[tensor_at], active, index)
    _access(warp, node, active, writes=fps) if write else _access(warp, node, active, fps)


def tma_store(warp, node, active) -> None:
    """A TMA store reads its shared-memory source until the issuing thread's
    cp.async.bulk.wait_group retires its bulk group (one per warp: issued from one lane)."""
    data = data_of(warp.get(node.operands[1]))
    if data is None:
        not_followed(warp, node, "a TMA store")
        return
    fps = footprint(warp, node, data, node.operand_types[1], [min(active)])
    warp.bulk_pending += 1
    warp.emit(K.COPY_SMEM_TO_GMEM, node, reads=fps)


def gemm(warp, node, active):
    """`cute.gemm(tiled_mma, d, a, b, c)` with shared-memory descriptors for a and b: a Hopper
    WGMMA reads them until the warp's wgmma.wait_group retires its commit group; a Blackwell
    tcgen05 MMA until it completes in the issuing thread's tensor-core queue (before a later
    tcgen05.commit arrives). Consecutive MMAs of one warp with nothing between them are one
    access (one commit group, one queue entry): the hull of their footprints per buffer."""
    kind_text = node.operand_types[0] if node.operand_types else ""
    kind = K.WGMMA if ".sm90." in kind_text else K.TCGEN05_MMA \
        if ".sm100." in kind_text or "tcgen05" in kind_text else None
    operands = [(warp.get(node.operands[k]), node.operand_types[k]) for k in (2, 3)
                if k < len(node.operands)]
    sources = [(data_of(v), t) for v, t in operands
               if data_of(v) is not None and not tmem.is_tmem(t)]
    if kind is None:
        if sources:
            unread_access(warp, node, active)
        return None
    # a tcgen05 MMA's accumulator (d) and an operand in TMEM (a of a TS MMA): tmem.py
    in_tmem = {k: tmem.access(warp, node, k, "a tcgen05 MMA")
               for k in (1, 2, 3) if kind == K.TCGEN05_MMA and k < len(node.operands) and
               tmem.is_tmem(node.operand_types[k])}
    writes = tuple(fp for k, fp in in_tmem.items() if k == 1 and fp is not None)
    reads = [fp for k, fp in in_tmem.items() if k != 1 and fp is not None]
    if not sources and not in_tmem:
        return None
    reads += [fp for d, t in sources for fp in footprint(warp, node, d, t, [min(active)])]
    last = warp.events[-1] if warp.events else None
    if last is not None and last.kind == kind and last.barrier is None and \
            warp.mma_joinable == len(warp.events):
        reads = _hulls(last.reads + tuple(reads))
        writes = _hulls(last.writes + writes)
        warp.events.pop()
    elif kind == K.WGMMA:
        warp.wgmma_open += 1            # WGMMAs of the commit group being built
    warp.emit(kind, node, reads=tuple(reads), writes=tuple(writes))
    warp.mma_joinable = len(warp.events)
    return None


def _hulls(fps) -> tuple:
    out: dict[str, tuple] = {}
    for buffer, lo, hi in fps:
        if buffer in out:
            _, a, b = out[buffer]
            out[buffer] = (buffer, None, None) if lo is None or a is None else \
                (buffer, min(a, lo), max(b, hi))
        else:
            out[buffer] = (buffer, lo, hi)
    return tuple(out.values())


def wgmma_commit(warp, node, active):
    """wgmma.commit_group: the WGMMAs since the last commit are one group."""
    warp.wgmma_groups.append(warp.wgmma_open)
    warp.wgmma_open = 0
    warp.mma_joinable = -1
    return None


def wgmma_wait(warp, node, active):
    """wgmma.wait_group(n): all but the newest n commit groups are done. Emitted once the warp
    has issued a WGMMA that reads shared memory (before, it waits for nothing this model
    tracks); n > 0 needs each group to be one access (its MMAs back to back)."""
    if not any(e.kind == K.WGMMA for e in warp.events):
        return None
    n = node.attrs.get("group")
    if not isinstance(n, int):
        warp.unmodeled(node, "wgmma.wait_group with a group count not known")
    elif warp.wgmma_open:
        warp.unmodeled(node, "wgmma.wait_group after a WGMMA not committed to a group")
    elif n and any(size != 1 for size in warp.wgmma_groups if size):
        warp.unmodeled(node, f"wgmma.wait_group({n}) after a commit group of WGMMAs split by "
                             "other operations")
    else:
        warp.emit(K.WGMMA_WAIT, node, count=n)
    return None


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
    if node.name in ("cute.memref.load", "cute.memref.store", "cute.memref.load_vec",
                     "cute.memref.store_vec", "cute.gemm") or \
            node.name in MEMORY_ONLY:
        return True
    return node.name == "cute.copy" and any(_smem_type(t) or tmem.is_tmem(t)
                                            for t in node.operand_types[1:])


# The ops whose results are views of a tensor with the same first element.
SAME_ITERATOR = ("cute.group_modes", "cute.logical_divide", "cute.zipped_divide",
                 "cute.tiled_divide", "cute.flat_divide", "cute.append_to_rank",
                 "cute.prepend_to_rank", "cute.coalesce", "cute.composition",
                 "cute.make_view", "cute.get_iter", "cute.recast_iter", "cute.filter_zeros",
                 "cute.memref.make_view")

# Rows that order or issue memory accesses only: no thread waits on them for another, so they
# never count as synchronizing (a wait skipped under a branch on data keeps accesses live
# longer: more races, never fewer).
MEMORY_ONLY = frozenset({"nvvm.cp.async.bulk.commit.group", "nvvm.cp.async.bulk.wait_group",
                         "nvvm.cp.async.commit.group", "nvvm.cp.async.wait.group",
                         "nvvm.wgmma.commit.group.sync.aligned",
                         "nvvm.wgmma.wait.group.sync.aligned"})

RULES = {
    "cute.make_coord": make_coord, "cute.slice": slice_,
    "cute.mma.make_fragment": make_fragment, "cute.gemm": gemm,
    "nvvm.wgmma.commit.group.sync.aligned": wgmma_commit,
    "nvvm.wgmma.wait.group.sync.aligned": wgmma_wait,
    "cute_nvgpu.atom.tma_partition": tma_partition,
    "cute.memref.load": memref_load, "cute.memref.store": memref_store,
    "cute.memref.load_vec": memref_vec(0, False), "cute.memref.store_vec": memref_vec(1, True),
    "nvvm.cp.async.bulk.commit.group": bulk_commit,
    "nvvm.cp.async.bulk.wait_group": bulk_wait,
    **{name: same_iterator for name in SAME_ITERATOR
       if name not in ("cute.make_view", "cute.get_iter", "cute.recast_iter")},
}
