"""Shared-memory views that are not a slot of their allocation (model/gluon/smem_views.py): a
`.slice` of a tile's rows and an `.index` of a `.reinterpret` with other slots are windows of
bytes; what the translator cannot place stays the whole view (coarser, never missing a race)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("triton")

from barrierproof.loader import import_file  # noqa: E402
from barrierproof.model import primitives as K  # noqa: E402
from barrierproof.model.gluon import load  # noqa: E402
from barrierproof.model.gluon.smem_views import index_view, ref, row_slice  # noqa: E402
from barrierproof.model.gluon.values import Alloc, Mem  # noqa: E402
from barrierproof.model.ir import UNKNOWN_LOC, Const, MemAlloc, Var  # noqa: E402

from conftest import ROOT  # noqa: E402

RING = Alloc("a_bufs", (2, 128, 64), "f16", "smem", UNKNOWN_LOC)        # two 16384-byte stages
RING_BUF = MemAlloc("a_bufs", "smem", (Const(2),), UNKNOWN_LOC, scalar=False)
TILE = Alloc("tile", (64, 64), "f16", "smem", UNKNOWN_LOC)
TILE_BUF = MemAlloc("tile", "smem", (Const(1),), UNKNOWN_LOC, scalar=True)

AS_FOUR = ("ttg.memdesc_index %c_bufs[%c] : !ttg.memdesc<4x64x64xf16, #s, #smem, mutable> -> "
           "!ttg.memdesc<64x64xf16, #s, #smem, mutable>")
AS_STAGES = ("ttg.memdesc_index %c_bufs[%c] : !ttg.memdesc<2x128x64xf16, #s, #smem, mutable> -> "
             "!ttg.memdesc<128x64xf16, #s, #smem, mutable>")


def _slice(offsets: str, src: str, dst: str) -> str:
    return (f"ttg.memdesc_subslice %t[{offsets}] : !ttg.memdesc<{src}xf16, #s, #smem, mutable> "
            f"-> !ttg.memdesc<{dst}xf16, #s, #smem, mutable, 64x64>")


def test_an_index_into_a_reinterpreted_ring_is_the_bytes_it_names():
    """Buffer 1 of four half-stage buffers is the second half of stage 0, not stage 1 (which
    the slot index alone would name)."""
    view = index_view(Mem(RING), RING_BUF, Const(1), AS_FOUR)
    assert view.window == (8192, 16384)
    r = ref(view, RING_BUF)
    assert [i.value for i in r.index] == [0]
    assert [(s.start.value, s.size.value) for s in r.region] == [(8192, 8192)]
    # buffer 3: stage 1's second half; an index in the allocation's own slots is not a view
    assert index_view(Mem(RING), RING_BUF, Const(3), AS_FOUR).window == (24576, 32768)
    assert index_view(Mem(RING), RING_BUF, Var("k"), AS_STAGES) is None


def test_a_slot_the_translator_cannot_place_is_the_whole_view():
    # a symbolic half-stage buffer may be any of the four: the whole ring
    view = index_view(Mem(RING), RING_BUF, Var("k"), AS_FOUR)
    assert view.window == (0, 32768)
    assert not ref(view, RING_BUF).index
    # a slice of a slice of a slot whose index is symbolic: the outer slice, whole
    slot = Mem(RING, index=(Var("s"),))
    half = row_slice(slot, RING_BUF, _slice("64, 0", "128x64", "64x64"))
    assert row_slice(half, RING_BUF, _slice("32, 0", "64x64", "32x64")) is half


def test_rows_of_a_slot_with_a_symbolic_index_stay_in_that_slot():
    slot = Mem(RING, index=(Var("s"),))
    half = row_slice(slot, RING_BUF, _slice("64, 0", "128x64", "64x64"))
    r = ref(half, RING_BUF)
    assert r.index == slot.index
    assert [(s.start.value, s.size.value) for s in r.region] == [(8192, 8192)]


def test_a_row_slice_is_a_window_and_a_column_slice_the_whole_tile():
    top = row_slice(Mem(TILE), TILE_BUF, _slice("0, 0", "64x64", "32x64"))
    bottom = row_slice(Mem(TILE), TILE_BUF, _slice("32, 0", "64x64", "32x64"))
    assert (top.window, bottom.window) == ((0, 4096), (4096, 8192))
    assert [(s.start.value, s.size.value) for s in ref(bottom, TILE_BUF).region] == [(4096, 4096)]
    left = Mem(TILE)
    assert row_slice(left, TILE_BUF, _slice("0, 32", "64x64", "64x32")) is left


def test_kernels_see_the_windows_they_touch():
    data = import_file(os.path.join(ROOT, "tests", "data", "unseen_gluon7.py"))
    kernel = load(data.reuse_ring_fills_early)
    fill = [op for op in kernel.ops() if op.kind == K.WRITE]
    assert [repr(r) for op in fill for r in op.writes] == ["a_bufs[1, ds(8192, 8192)]"]
    (a_bufs,) = [b for b in kernel.buffers if b.name == "a_bufs"]
    assert [int(d.value) for d in a_bufs.shape] == [2, 16384] and a_bufs.granule == (1, 8192)
    halves = load(data.halves_ok)
    writes = sorted(repr(r) for op in halves.ops() if op.kind == K.WRITE for r in op.writes)
    assert writes == ["tile[0, ds(0, 4096)]", "tile[0, ds(4096, 4096)]"]
