"""Tensor memory in the CuTe frontend (model/cute/tmem.py): a persistent tcgen05 GEMM with a
two-stage TMEM accumulator (tests/data/cute_tmem.py) is verified, and its two accumulator bugs
are BP201 races between the MMA warp's tcgen05 MMA and the epilogue's tcgen05.ld, at the
kernel's own lines; a TMEM access whose columns are not known is BP190, never a pass."""

import os
import re

import pytest

pytest.importorskip("cutlass.cute")

from barrierproof.checker.check import check_kernel             # noqa: E402
from barrierproof.loader import import_file, resolve            # noqa: E402
from barrierproof.model import primitives as K                  # noqa: E402
from barrierproof.model.cute import tmem                        # noqa: E402
from barrierproof.model.cute.values import Data, Lanes, Unknown  # noqa: E402

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cute_tmem.py")
EXPECT = import_file(PATH).EXPECT
ACC = '!cute.memref<f32, tmem, align<16>, "((128,128),1,1,2):((65536,1),0,0,128)">'
STAGE = '!cute.memref<f32, tmem, align<16>, "((128,128),1,1):((65536,1),0,0)">'
PER_THREAD = '!cute.memref<f32, tmem, align<16>, "(((128,32),1),1,1):(((1,65536),0),0,0)">'


@pytest.fixture(scope="module")
def targets():
    return {t.name: t for t in resolve(PATH)}


def _line(loc: str) -> str:
    path, line = loc.rsplit(":", 1)
    return open(path, encoding="utf-8").read().splitlines()[int(line) - 1]


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_accumulator_stages_are_checked_for_races(targets, name):
    target = targets[name]
    kernel = target.build()
    assert [b.space for b in kernel.buffers if b.name == tmem.TENSOR_MEMORY] == ["tmem"]
    assert not [op for op in kernel.ops() if op.kind == K.UNMODELED], name
    v = check_kernel(kernel, source=target.ref)
    assert v.matches(EXPECT[name]), (name, v.label, [d.message for d in v.diagnostics])
    races = [d for d in v.diagnostics if d.code == "BP201"]
    if EXPECT[name] == "verified":
        assert not races
        return
    # the MMA's write and the epilogue's tcgen05.ld of one stage, on the kernel's own lines
    (race,) = races
    lines = [_line(loc) for loc in
             re.findall(r"\((tests/data/cute_tmem\.py:\d+)\)", race.message)]
    assert any("cute.gemm(" in t for t in lines) and any("cute.copy(tmem_copy" in t
                                                          for t in lines), race.message


def test_a_stage_is_its_own_columns():
    """Stage s of the accumulator is columns [128 s, 128 s + 128); a thread's partition of a
    TMEM copy differs from its tensor in lanes only, so it keeps the first column."""
    assert tmem._reach(ACC) == 255 and tmem._reach(STAGE) == 127
    stage1 = Data("", tmem.TENSOR_MEMORY, 128 * tmem.WORD, tmem.WORD)
    assert tmem.footprint(stage1, STAGE) == (tmem.TENSOR_MEMORY, 512, 1024)
    lanes = Data("", tmem.TENSOR_MEMORY,
                 Lanes(tuple(l * 65536 * tmem.WORD for l in range(32))), tmem.WORD)
    assert tmem.footprint(lanes, PER_THREAD) == (tmem.TENSOR_MEMORY, 0, 512)


class _Warp:
    """The part of a warp an access reads: its values, and what it cannot read."""

    def __init__(self, value):
        self.value, self.cut = value, []

    def get(self, key):
        return self.value

    def unmodeled(self, node, what):
        self.cut.append(what)


class _Node:
    operands = (0, 1)
    operand_types = ("", STAGE)


@pytest.mark.parametrize("value", [
    Data("a view that changes the columns", tmem.TENSOR_MEMORY, None, tmem.WORD),
    Unknown("an address read from data"),
    Data("past the last column", tmem.TENSOR_MEMORY, 500 * tmem.WORD, tmem.WORD)])
def test_an_access_whose_columns_are_unknown_is_not_read(value):
    warp = _Warp(value)
    assert tmem.access(warp, _Node(), 1, "a tcgen05.ld") is None
    assert len(warp.cut) == 1 and "tensor-memory columns are not known" in warp.cut[0]


def test_mixed_lane_and_column_strides_are_not_guessed():
    assert tmem._reach('!cute.memref<f32, tmem, "(4,2):(65537,1)">') is None
    assert tmem.footprint(Data("", tmem.TENSOR_MEMORY, 0, tmem.WORD),
                          '!cute.memref<f16, tmem, "(128,64):(65536,1)">') is None


def test_prove_covers_the_accumulator_ring_for_every_tile_count(targets):
    """The tile count is a kernel argument: `prove` answers for every count, races on TMEM
    included, and refutes the early release at the smallest count that shows it. About 25 s."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    target = targets["tmem_gemm"]
    proved = prove_kernel(target.build(), source=target.ref)
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all num_tiles" in proved.coverage and "race-free" in proved.coverage
    twin = targets["tmem_gemm_released_before_load"]
    refuted = prove_kernel(twin.build(), source=twin.ref)
    assert refuted.verdict == "violation" and refuted.codes[0] == "BP201", refuted.label
