"""Scoped shared memory as Mosaic GPU stacks it (model/pallas/scopes.py): where each
`pl.run_scoped` buffer lies, and which exited scope's buffer a later one reuses. The kernels
that depend on it are in tests/data/unseen_pallas8.py (checked by test_unseen_frontends.py)."""

from __future__ import annotations

import numpy as np

from barrierproof.model.pallas.scopes import SMEM_ALIGNMENT, ScopeStack, _Placed
from barrierproof.model.pallas.values import MemRef

F32 = np.dtype(np.float32)


def _buffer(shape, dtype=F32, name="buf"):
    return MemRef(shape, dtype, "smem", alloc=type("Alloc", (), {"name": name})())


def _scope(stack, *buffers, transforms=()):
    """Place `buffers` in one scope and exit it; the placements."""
    mark, placed = stack.top, []
    for b in buffers:
        offset, nbytes, layout = stack.place(b, transforms)
        placed.append(_Placed(offset, nbytes, layout, b))
    stack.leave(mark, placed)
    return placed


def test_each_buffer_starts_aligned_where_the_live_ones_end():
    stack = ScopeStack()
    first = stack.place(_buffer((3,)), ())            # 12 bytes take a whole alignment unit
    second = stack.place(_buffer((300, 4)), ())       # 4800 bytes: five units
    assert first[:2] == (0, SMEM_ALIGNMENT)
    assert second[:2] == (SMEM_ALIGNMENT, 5 * SMEM_ALIGNMENT)
    assert stack.top == 6 * SMEM_ALIGNMENT


def test_a_later_scope_reuses_an_exited_buffer_of_the_same_layout():
    stack = ScopeStack()
    [old] = _scope(stack, _buffer((64, 128), name="old"))
    assert stack.top == 0                              # the exit gives the bytes back
    offset, nbytes, layout = stack.place(_buffer((64, 128)), ())
    assert stack.reused(offset, nbytes, layout) == (old.value, True)


def test_another_shape_dtype_or_transform_on_the_same_bytes_is_not_related():
    for shape, dtype, transforms in (((128, 64), F32, ()), ((64, 128), np.dtype(np.int32), ()),
                                     ((64, 128), F32, ("swizzle 128",))):
        stack = ScopeStack()
        _scope(stack, _buffer((64, 128)))
        offset, nbytes, layout = stack.place(_buffer(shape, dtype), transforms)
        assert stack.reused(offset, nbytes, layout) == (None, False), (shape, dtype, transforms)


def test_a_buffer_overlapping_two_exited_ones_is_not_related():
    stack = ScopeStack()
    _scope(stack, _buffer((256,)), _buffer((256,)))    # one unit each
    offset, nbytes, layout = stack.place(_buffer((512,)), ())
    assert stack.reused(offset, nbytes, layout) == (None, False)


def test_buffers_of_live_scopes_and_fresh_bytes_are_new():
    stack = ScopeStack()
    outer = stack.place(_buffer((64, 128)), ())
    inner = stack.place(_buffer((64, 128)), ())        # the outer scope is still live
    assert inner[0] == outer[0] + outer[1]
    assert stack.reused(*inner) == (None, True)
