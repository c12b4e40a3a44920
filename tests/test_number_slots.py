"""Ring slots that are numbers (checker/symbolic/number_slots.py): a concrete ring that every
loop steps a multiple of its size per iteration has its indices and lap counts written as
numbers and linear terms. The rewrite must be the same program: the explorer's verdict, rules
and state count agree on a grid, on the ping-pong with bare parity waits and its broken twins;
and a ring stepped one slot per iteration is left as it is."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.number_slots import number_slots
from barrierproof.checker.symbolic.prove import prove
from barrierproof.checker.symbolic.unroll import (split_ring_arrays, strip_mine_loops,
                                                   unroll_fixed_loops)
from barrierproof.loader import resolve
from barrierproof.model.ir import BinOp, Const, Op, walk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPING = os.path.join(ROOT, "examples", "patterns", "parity_skipping.py")


def _prepared(name, **fixed):
    (target,) = resolve(f"{SKIPPING}::{name}")
    kernel = target.build()
    fixed = {**{n: p.default for n, p in kernel.params.items() if n != "tiles_per_wg"},
             **fixed}
    kernel = split_ring_arrays(unroll_fixed_loops(strip_mine_loops(kernel, fixed), fixed),
                               fixed)
    return kernel, fixed


def _outcome(verdict):
    return verdict.verdict, tuple(verdict.codes), verdict.coverage.split(" distinct states")[0]


@pytest.mark.parametrize("name, stages, k_tiles", [
    ("pingpong_bare_parity", 2, 3), ("pingpong_bare_parity", 2, 2),
    ("pingpong_bare_parity_deep_ring", 2, 4),
    ("pingpong_bare_parity_without_order_barrier", 2, 3)])
def test_numbered_slots_are_the_same_program_on_a_grid(name, stages, k_tiles):
    """The explorer on the kernel and on its rewrite, tiles_per_wg = 0..2: the same outcome
    (the broken twin's BP101 included). About 3 s."""
    kernel, fixed = _prepared(name, stages=stages, k_tiles=k_tiles)
    numbered = number_slots(kernel, ["tiles_per_wg"], fixed)
    assert numbered is not kernel
    slots = [op.barrier.index[0] for op in walk(numbered.body) if isinstance(op, Op)
             and op.barrier is not None and op.barrier.alloc.name in ("full", "empty")]
    assert slots and all(isinstance(e, Const) for e in slots)
    for tiles in range(3):
        values = {**fixed, "tiles_per_wg": tiles}
        before = check_kernel(kernel, values)
        after = check_kernel(numbered, values)
        assert _outcome(after) == _outcome(before), (name, tiles)


def test_a_ring_stepped_by_a_non_multiple_of_its_size_is_left_as_it_is():
    """Stages 3 and 2 k-tiles: a tile takes 4 positions of the 3-slot ring, so no slot of
    `full` or `empty` is a number and they keep their ring indices (the turn barriers, 2 turns
    per tile on a depth of 2, become numbers)."""
    kernel, fixed = _prepared("pingpong_bare_parity_deep_ring")
    numbered = number_slots(kernel, ["tiles_per_wg"], fixed)
    ring = [op.barrier.index[0] for op in walk(numbered.body) if isinstance(op, Op)
            and op.barrier is not None and op.barrier.alloc.name in ("full", "empty")]
    assert ring and all(isinstance(e, BinOp) and e.op == "%" for e in ring), ring
    turns = [op.barrier.index for op in walk(numbered.body) if isinstance(op, Op)
             and op.barrier is not None and op.barrier.alloc.name == "turn"]
    assert turns and all(isinstance(e, Const) for ix in turns for e in ix), turns


def test_lap_counts_are_folded_linear():
    """`(6m + 3w + j) // 2` becomes `3m + c`: no division left in a numbered wait's phase."""
    kernel, fixed = _prepared("pingpong_bare_parity")
    numbered = number_slots(kernel, ["tiles_per_wg"], fixed)

    def divides(e):
        return isinstance(e, BinOp) and (e.op == "//" or divides(e.lhs) or divides(e.rhs))

    waits = [op for op in walk(numbered.body) if isinstance(op, Op) and op.barrier is not None
             and op.barrier.alloc.name == "full" and op.parity is not None]
    assert waits and not any(divides(op.parity) for op in waits)


def test_without_the_turn_barrier_the_pairs_are_no_proof():
    """The broken twin (no order barrier) has no barrier to join its pairs with: no proof,
    and the explorer's BP101 at tiles_per_wg = 1 says why. About 4 s."""
    (target,) = resolve(f"{SKIPPING}::pingpong_bare_parity_without_order_barrier")
    kernel = target.build()
    fixed = {"stages": 2, "k_tiles": 3}
    proof = prove(kernel, ["tiles_per_wg"], fixed, timeout=20)
    assert proof.status != "proved", proof
    assert "BP101" in check_kernel(kernel, {**fixed, "tiles_per_wg": 1}).codes
