"""Views into shared memory that are not a slot of their allocation: a `.slice` of a tile's rows,
or an `.index` of a `.reinterpret` whose slots are not the allocation's (a two-stage A ring seen
as four half-tile staging buffers). Each is a window of bytes of the allocation; an access
through one touches only that window (rows of a tile are whole rows of bytes whatever the
swizzle, which moves 16-byte chunks within a row). A window the translator cannot place (a
slot index it cannot follow, a slice of inner columns) is the whole view it was taken from:
coarser, never missing an overlap."""

from __future__ import annotations

import dataclasses
import math
import re

from ..ir import Const, Expr, MemAlloc, MemRef, Slice
from .values import _ELEM_BYTES, Mem


def _bytes(dims: tuple[int, ...], elem: str) -> int | None:
    size = _ELEM_BYTES.get(elem)
    return None if size is None else math.prod(dims) * size


def _types(text: str) -> list[tuple[tuple[int, ...], str]]:
    """Dims and element type of each `!ttg.memdesc<...>` on a line (source first)."""
    return [(tuple(int(d) for d in dims.split("x") if d), elem)
            for dims, elem in re.findall(r"memdesc<((?:\d+x)*)(\w+)\s*[,>]", text)]


def slot_bytes(mem: Mem, buf: MemAlloc) -> int | None:
    total = _bytes(mem.alloc.dims, mem.alloc.elem)
    slots = int(buf.shape[0].value) if isinstance(buf.shape[0], Const) else None
    return None if total is None or not slots else total // slots


def window(mem: Mem, buf: MemAlloc) -> tuple[int, int] | None:
    """The bytes of the allocation `mem` views, when the translator can place them."""
    if mem.window is not None or mem.span is not None:
        return mem.window
    sb = slot_bytes(mem, buf)
    if sb is None:
        return None
    if not mem.index:
        return (0, sb * int(buf.shape[0].value))
    if len(mem.index) == 1 and isinstance(mem.index[0], Const) and not buf.scalar:
        i = mem.index[0].value
        return (i * sb, (i + 1) * sb)
    return None


def _natural(mem: Mem, dims: tuple[int, ...]) -> bool:
    """Is `dims` the shape the allocation has at `mem`'s depth of indexing (no reshaped view)?"""
    return mem.window is None and mem.span is None and dims == mem.alloc.dims[len(mem.index):]


def index_view(mem: Mem, buf: MemAlloc, index: Expr, text: str) -> Mem | None:
    """`view.index(i)` where the view's slots are not the allocation's; None when they are."""
    types = _types(text)
    if not types or _natural(mem, types[0][0]):
        return None
    dims, elem = types[0]
    view_slot = _bytes(dims[1:], elem)
    where = window(mem, buf)
    sb = slot_bytes(mem, buf)
    if where is None or view_slot is None or sb is None:
        return dataclasses.replace(mem, window=where)
    lo = where[0]
    if isinstance(index, Const):
        start = lo + index.value * view_slot
        return Mem(mem.alloc, window=(start, start + view_slot))
    if view_slot == sb and lo % sb == 0 and not buf.scalar:
        # the view's slots are the allocation's, shifted: a slot the model can still follow
        return Mem(mem.alloc, index=(index + Const(lo // sb) if lo else index,))
    return Mem(mem.alloc, window=where)


def row_slice(mem: Mem, buf: MemAlloc, text: str) -> Mem:
    """`tile.slice(start, n)` along the leading dimension: whole rows, a window of bytes; a
    slice along an inner dimension stays the whole view."""
    types = _types(text)
    offsets = re.search(r"\[([\d,\s]+)\]\s*:", text)
    if len(types) < 2 or offsets is None:
        return mem
    (src, elem), (dst, _) = types[0], types[-1]
    first, *rest = (int(o) for o in offsets.group(1).split(","))
    row = _bytes(src[1:], elem)
    if any(rest) or dst[1:] != src[1:] or row is None:
        return mem
    rows = (first * row, (first + dst[0]) * row)
    if len(mem.index) == 1 and mem.window is None and mem.span is None and not buf.scalar \
            and src == mem.alloc.dims[1:] and not isinstance(mem.index[0], Const):
        return dataclasses.replace(mem, span=rows)      # rows of the slot `index` names
    where = window(mem, buf)
    if where is None or where[1] - where[0] != row * src[0]:
        return mem
    return Mem(mem.alloc, window=(where[0] + rows[0], where[0] + rows[1]))


def ref(mem: Mem, buf: MemAlloc) -> MemRef:
    """The slot, or the bytes of one slot, a windowed view touches; a window across slots is
    the whole buffer."""
    if mem.span is not None:
        lo, hi = mem.span
        return MemRef(buf, mem.index, (Slice(Const(lo), Const(hi - lo)),))
    lo, hi = mem.window
    sb = slot_bytes(mem, buf)
    slot = lo // sb
    if hi > (slot + 1) * sb:
        return MemRef(buf, ())
    index = (Const(slot),)
    if lo == slot * sb and hi == (slot + 1) * sb:
        return MemRef(buf, () if buf.scalar else index)
    return MemRef(buf, index, (Slice(Const(lo - slot * sb), Const(hi - lo)),))


def widen(buffers: dict, refs) -> dict[str, MemAlloc]:
    """Shared-memory buffers some access names bytes of: a second dimension, the bytes of a
    slot, in cells as wide as the windows allow (a tile touched by halves has two)."""
    bounds: dict[str, list[int]] = {}
    for r in refs:
        if r.alloc.space == "smem" and r.region:
            bounds.setdefault(r.alloc.name, []).extend(
                int(e.value) for sl in r.region for e in (sl.start, sl.size))
    wider = {}
    for key, buf in list(buffers.items()):
        if buf.space != "smem" or buf.name not in bounds or len(buf.shape) != 1:
            continue
        sb = slot_bytes(Mem(key), buf)
        g = math.gcd(sb, *bounds[buf.name])
        wider[buf.name] = buffers[key] = dataclasses.replace(
            buf, shape=(buf.shape[0], Const(sb)), scalar=False, granule=(1, g))
    return wider
