"""Cells of a CuTe buffer wider than the explorer's cells (model/cute/buffers.py): joined slots
never put two warps' different slots in one cell where a wider granule keeps them apart (a
shared cell would be a race on no shared byte), and the buffer stays within MAX_CELLS cells."""

from barrierproof.model.cute.buffers import MAX_CELLS, _granule, data_buffers
from barrierproof.model.ir import UNKNOWN_LOC


class _Event:
    def __init__(self, writes=(), reads=()):
        self.writes, self.reads, self.loc = tuple(writes), tuple(reads), None


def _rows(warp, rows=32, cols=8, elem=2, stages=3, stage=0):
    """Each lane of `warp` writes the first element of its row of a (64, 8) fp16 stage."""
    base = stage * 64 * cols * elem
    return [("sC", base + (warp * rows + lane) * cols * elem,
             base + (warp * rows + lane) * cols * elem + elem) for lane in range(rows)]


def test_two_warps_rows_get_cells_of_whole_rows():
    programs = [[_Event(_rows(0, stage=s)) for s in range(3)],
                [_Event(_rows(1, stage=s)) for s in range(3)]]
    (buf,), refs = data_buffers(programs, {("bytes", "sC"): 3 * 64 * 8 * 2}, set(), UNKNOWN_LOC)
    slots = buf.shape[0].value
    assert slots == 3 * 64 * 8 > MAX_CELLS           # one slot per fp16 element: joined
    (g,) = buf.granule
    assert -(-slots // g) <= MAX_CELLS
    owner = {}
    for n, events in enumerate(programs):
        for e in events:
            for fp in e.writes:
                ref = refs[("mem",) + fp]
                cell = ref.index[0].value // g
                assert owner.setdefault(cell, n) == n, (cell, n)


def test_without_a_granule_that_separates_the_warps_the_least_is_kept():
    # warps interleaved slot by slot: no cell of more than one slot keeps them apart
    owners = {("b", 2 * s, 2 * s + 1): {s % 2} for s in range(1024)}
    assert _granule(2048, 1, owners) == -(-2048 // MAX_CELLS)
    # a buffer within MAX_CELLS slots is never joined
    assert _granule(MAX_CELLS, 1, owners) == 1
