"""A flat buffer indexed stage by stage read as a ring's stages of rows (ring_rows.py): each
reference rewritten names the same slots, and a buffer with a reference that is not a stage and
row range stays as it is. Instant."""

from barrierproof.checker.symbolic.ring_rows import ring_rows
from barrierproof.model.expr import mk
from barrierproof.model.ir import (BarrierAlloc, Const, Kernel, Loc, Loop, MemAlloc, MemRef, Op,
                                   Slice, Var)

LOC = Loc("k.py", 3, "k")


def _kernel(extra_index=None):
    bars = BarrierAlloc("full", Const(1), shape=(Const(2),))
    buf = MemAlloc("ring", shape=(Const(4),), scalar=False)
    i = Var("i")
    fill = Op("tma_load", writes=(MemRef(buf, (), (Slice(mk("*", mk("%", i, Const(2)),
                                                                 Const(2)), Const(2)),)),),
              loc=LOC)
    row1 = Op("read", reads=(MemRef(buf, (mk("%", mk("+", mk("*", i, Const(2)), Const(1)),
                                             Const(4)),)),), loc=LOC)
    ops = (fill, row1)
    if extra_index is not None:
        ops += (Op("read", reads=(MemRef(buf, (extra_index,)),), loc=LOC),)
    return Kernel("k", (Loop("i", Var("n"), ops, LOC),), barriers=(bars,), buffers=(buf,))


def _refs(kernel):
    return [(repr(r.index), repr(r.region)) for op in kernel.ops() for r in op.reads + op.writes]


def test_a_flat_buffer_indexed_stage_by_stage_is_a_ring_of_rows():
    new, notes = ring_rows(_kernel(), {})
    [buf] = new.buffers
    assert [repr(d) for d in buf.shape] == ["2", "2"] and len(notes) == 1
    assert _refs(new) == [("((i % 2),)", "(ds(0, 2),)"),
                          ("((i % 2),)", "(ds(1, 1),)")]
    assert all(r.alloc is buf for op in new.ops() for r in op.reads + op.writes)


def test_a_reference_across_stages_keeps_the_buffer_flat():
    """`(i + 1) % 4` walks the slots one by one, not stage by stage: no rewrite."""
    kernel = _kernel(extra_index=mk("%", mk("+", Var("i"), Const(1)), Const(4)))
    new, notes = ring_rows(kernel, {})
    assert new is kernel and notes == []
