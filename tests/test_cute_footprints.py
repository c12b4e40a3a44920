"""The CuTe frontend's shared-memory footprints (model/cute/smem.py, spans.py) against the
bytes the lanes really touch, enumerated element by element from the layout: never fewer (a
race missed), and exactly those (in swizzle blocks) while the ranges are few enough to list."""

import itertools

from barrierproof.model.cute.layouts import _leaves, crd2idx, layout_of
from barrierproof.model.cute.smem import footprint
from barrierproof.model.cute.spans import MAX_RANGES
from barrierproof.model.cute.values import WARP, Data, Lanes, elem_bytes

BUFFER_BYTES = 1 << 16


class _Warp:
    """What footprint asks of a warp: the buffer sizes, and where its notes go."""

    def __init__(self):
        self.allocations = {("bytes", "sA"): BUFFER_BYTES}
        self.notes = []

    def memory_note(self, node, buffer, what):
        self.notes.append(what)


def _swizzled(byte: int, text: str) -> int:
    """CuTe's Swizzle<B,M,S> on a byte offset: bits [M+S, M+S+B) xor'ed into [M, M+B)."""
    if "S<" not in text:
        return byte
    b, m, s = (int(x) for x in text.split("S<")[1].split(">")[0].split(","))
    return byte ^ ((byte & (((1 << b) - 1) << (m + s))) >> s)


def _touched(text: str, starts: list[int]) -> set[int]:
    """Every byte the lanes' elements occupy, each lane's tensor (of type `text`) starting at
    its byte in `starts`."""
    shape, stride = layout_of(text)
    size = elem_bytes(text)
    out = set()
    for start in starts:
        for index in itertools.product(*(range(n) for n in _leaves(shape))):
            element = start + size * sum(i * d for i, d in zip(index, _leaves(stride)))
            out.update(_swizzled(b, text) for b in range(element, element + size))
    return out


def _covered(fps) -> set[int]:
    return {b for _, lo, hi in fps for b in range(lo, hi)}


def _rows(full: str, row: str, coord):
    """Lane t's part of the tile `full`: its elements at `coord(t)` (a coordinate with `_` for
    the modes it keeps), as the tensor type `row` at that element's byte."""
    shape, stride = layout_of(full)
    return row, [crd2idx(coord(t), shape, stride) * elem_bytes(full) for t in range(WARP)]


CASES = {
    # each thread its row of a (64, 4) f32 tile
    "row-major": _rows('!cute.memref<f32, smem, "(64,4):(4,1)">',
                       '!cute.memref<f32, smem, "(4):(1)">', lambda t: (t, 0)),
    "column-major": _rows('!cute.memref<f32, smem, "(64,4):(1,64)">',
                          '!cute.memref<f32, smem, "(4):(64)">', lambda t: (t, 0)),
    # a tiled (8 x 8) x (4 x 8) f16 tile: lane t at ((t % 8, t // 8), (0, 0)) keeps the
    # column modes ((4, 8) : (8, 512))
    "tiled": _rows('!cute.memref<f16, smem, "((8,8),(4,8)):((1,64),(8,512))">',
                   '!cute.memref<f16, smem, "((4,8)):((8,512))">',
                   lambda t: ((t % 8, t // 8), (0, 0))),
    # a 128-byte-swizzled (64, 64, 2) f16 ring: lane t's column of rows 0..7, both stages
    "swizzled": _rows('!cute.memref<f16, smem, S<3,4,3>, "(64,64,2):(64,1,4096)">',
                      '!cute.memref<f16, smem, S<3,4,3>, "(8,2):(64,4096)">',
                      lambda t: (0, t, 0)),
}


def test_footprints_are_the_bytes_the_lanes_touch():
    """Every lane, every third lane, one lane: the footprint holds every byte touched; it is
    those bytes (in whole swizzle blocks), as disjoint ranges, unless the notes say it is the
    range covering them (more than MAX_RANGES: every third lane of the column-major and of the
    tiled tile)."""
    exact, hulls = [], []
    for name, (text, starts) in CASES.items():
        for active in (range(WARP), range(0, WARP, 3), [5]):
            warp = _Warp()
            fps = footprint(warp, None, Data("", "sA", Lanes(tuple(starts)), 1), text, active)
            touched = _touched(text, [starts[lane] for lane in active])
            covered = _covered(fps)
            assert touched <= covered, name
            bounds = [b for _, lo, hi in fps for b in (lo, hi)]
            assert all(a < b for a, b in zip(bounds, bounds[1:])), (name, fps)   # disjoint
            if warp.notes:
                assert [n for n in warp.notes if "range covering" in n] == warp.notes, name
                assert fps == (("sA", min(touched), max(touched) + 1),), (name, fps)
                hulls.append(name)
                continue
            block = 1024 if "S<" in text else 1
            assert covered == {b - b % block + k for b in touched for k in range(block)}, name
            exact.append((name, len(active)))
    assert {name for name, lanes in exact if lanes == WARP} == set(CASES)
    assert hulls == ["column-major", "tiled"] and len(exact) == 3 * len(CASES) - 2


def test_interleaved_rows_of_two_warps_are_disjoint():
    """The column-major tile: warp 0's rows and warp 1's rows share no byte."""
    text, _ = CASES["column-major"]
    warps = [footprint(_Warp(), None, Data("", "sA", Lanes(tuple(4 * (32 * w + t)
                                                                   for t in range(WARP))), 4),
                       text, range(WARP)) for w in (0, 1)]
    assert [len(fps) for fps in warps] == [4, 4]
    assert not _covered(warps[0]) & _covered(warps[1])


def test_too_many_ranges_cover_their_hull_and_say_so():
    """One lane's column of a (64, 64) f32 tile is 64 separate elements: past MAX_RANGES the
    access is the range covering them, coarser, and the notes say it."""
    text = '!cute.memref<f32, smem, "(64):(64)">'
    assert 64 > MAX_RANGES
    warp = _Warp()
    fps = footprint(warp, None, Data("", "sA", 8, 4), text, [0])
    assert fps == (("sA", 8, 8 + 4 * (63 * 64 + 1)),)
    assert _touched(text, [8]) <= _covered(fps)
    assert any("range covering" in note for note in warp.notes)
