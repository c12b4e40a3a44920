"""Memory effects under control that depends on data (model/pallas/data_control.py): a branch
or loop on a value loaded from memory, with no barrier inside, is checked as if it always
happens, or is unmodelled (BP190) where that could hide a race; never dropped."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from barrierproof.testing import check

ROWS, COLS, F32 = 4, 128, jnp.float32


def _launch(body, tiles=2, out_slots=()):
    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((tiles * ROWS, COLS), F32),
                     grid=(1,), grid_names=("sm",),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.SMEM((*out_slots, ROWS, COLS), F32),
                                    plgpu.Barrier(num_arrivals=1)])
    return k(jnp.zeros((1,), jnp.int32), jnp.zeros((tiles * ROWS, COLS), F32))


def _ladder(wait, tiles=2):
    """A ragged epilogue: each tile stores `size` rows (read from memory) of its staging buffer
    by TMA stores of 4, 2 and 1 rows, then waits with `wait` (None: no wait) before the next
    tile writes the buffer again."""
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        @pl.loop(0, tiles)
        def _(t):
            size = jnp.clip(sizes_gmem[0] - t * ROWS, 0, ROWS)
            plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(t * ROWS, ROWS)], x_smem, loaded)
            plgpu.barrier_wait(loaded)
            o_smem[...] = x_smem[...] * 2
            plgpu.commit_smem()
            start = jnp.int32(0)
            for n in (4, 2, 1):
                @pl.when(size & n != 0)
                def _():
                    plgpu.copy_smem_to_gmem(o_smem.at[pl.ds(start, n)],
                                            o_gmem.at[pl.ds(t * ROWS + start, n)])
                start = start + (size & n)
            if wait is not None:
                plgpu.wait_smem_to_gmem(wait, wait_read_only=True)

        plgpu.wait_smem_to_gmem(0)
    return _launch(body, tiles)


def _one(fn):
    (verdict,) = check(fn)
    return verdict


def test_ragged_ladder_stores_are_checked_not_dropped():
    missing = _one(functools.partial(_ladder, None))
    assert missing.label == "violation:BP200", missing.label
    (d,) = [d for d in missing.diagnostics if d.code == "BP200"]
    assert "TMA store" in d.message and "o_smem" in d.message, d.message
    waited = _one(functools.partial(_ladder, 0))
    assert waited.label == "verified", [x.one_line() for x in waited.diagnostics]
    assert any("as if it always happens" in n for n in waited.notes), waited.notes


def test_a_counted_wait_on_what_a_data_branch_issues_is_not_verified():
    # wait(1): on the GPU the store of 1 row may be the only one issued and stay in flight
    # while the next tile writes o_smem; the model issuing all three would retire it early
    v = _one(functools.partial(_ladder, 1))
    assert v.label != "verified"
    unread = [d for d in v.diagnostics if d.code == "BP190"]
    assert unread and all("count above 0" in d.message for d in unread), \
        [d.one_line() for d in v.diagnostics]
    line = open(__file__).read().splitlines().index("                @pl.when(size & n != 0)") + 1
    assert all(d.location.endswith(f":{line}") for d in unread), [d.location for d in unread]


def _wait_in_branch():
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        o_smem[...] = jnp.zeros((ROWS, COLS), F32)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[pl.ds(0, ROWS)])

        @pl.when(sizes_gmem[0] > 0)
        def _():
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)
        o_smem[...] = jnp.ones((ROWS, COLS), F32)      # races when the branch is not taken
        plgpu.wait_smem_to_gmem(0)
    return _launch(body)


def test_a_wait_under_a_data_branch_is_unmodelled_at_its_line():
    v = _one(_wait_in_branch)
    assert v.label != "verified"
    assert any(d.code == "BP190" and "waits for asynchronous operations" in d.message
               for d in v.diagnostics), [d.one_line() for d in v.diagnostics]



def _fence_in_branch(always):
    """o_smem written, then fenced only when a size read from memory is positive (or always),
    then read by a TMA store: unfenced on the GPU whenever the size is 0."""
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        o_smem[...] = jnp.ones((ROWS, COLS), F32)
        if always:
            plgpu.commit_smem()
        else:
            @pl.when(sizes_gmem[0] > 0)
            def _():
                plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[pl.ds(0, ROWS)])
        plgpu.wait_smem_to_gmem(0)
    return _launch(body)


def test_a_fence_under_a_data_branch_covers_no_store_before_it():
    # taken as always happening, the branch's fence must not cover the store before it
    v = _one(functools.partial(_fence_in_branch, False))
    assert v.label == "unknown", v.label
    assert any(d.code == "BP190" and "no proxy fence since" in d.message
               for d in v.diagnostics), [d.one_line() for d in v.diagnostics]
    assert _one(functools.partial(_fence_in_branch, True)).label == "verified"


def _fenced_arm(fence_in_arm):
    """An arm on loaded data that stores o_smem and fences (or not) before the TMA store that
    follows the branch: the fence covers the arm's own store."""
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        o_smem[...] = jnp.ones((ROWS, COLS), F32)
        plgpu.commit_smem()

        @pl.when(sizes_gmem[0] > 0)
        def _():
            o_smem[...] = jnp.zeros((ROWS, COLS), F32)
            if fence_in_arm:
                plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[pl.ds(0, ROWS)])
        plgpu.wait_smem_to_gmem(0)
    return _launch(body)


def test_a_fence_in_a_data_branch_covers_the_branch_own_stores():
    assert _one(functools.partial(_fenced_arm, True)).label == "verified"
    v = _one(functools.partial(_fenced_arm, False))
    assert any(d.code == "BP190" and "no proxy fence since" in d.message
               for d in v.diagnostics), [d.one_line() for d in v.diagnostics]

# -- loops whose trip count is data: two iterations stand for every trip count ----------------

def _store_loop(trips, wait_after, wait_inside=False):
    """`trips` (an int, or None: read from memory) TMA stores of o_smem; then o_smem is written
    again, after a wait(0) or not."""
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        o_smem[...] = jnp.zeros((ROWS, COLS), F32)
        plgpu.commit_smem()
        n = sizes_gmem[0] if trips is None else trips

        def step(i, carry):
            plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[pl.ds(0, ROWS)])
            if wait_inside:
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)
            return carry
        lax.fori_loop(0, n, step, 0)
        if wait_after:
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)
        o_smem[...] = jnp.ones((ROWS, COLS), F32)
        plgpu.commit_smem()
        plgpu.wait_smem_to_gmem(0)
    return _launch(body)


@pytest.mark.parametrize("wait_after", [False, True])
def test_a_data_trip_count_is_checked_for_every_trip_count(wait_after):
    """The data loop's verdict reports a race whenever the loop unrolled at some trip count
    0..4 has one, and is verified only when all of them are."""
    data = _one(functools.partial(_store_loop, None, wait_after))
    concrete = [_one(functools.partial(_store_loop, t, wait_after)).label for t in range(5)]
    if all(c == "verified" for c in concrete):
        assert data.label == "verified", [d.one_line() for d in data.diagnostics]
    else:
        assert {c for c in concrete if c != "verified"} == {data.label}, (concrete, data.label)
    assert any("stands for every trip count" in n for n in data.notes), data.notes
    assert not any("parameter `trips" in n for n in data.notes), data.notes


def _slot_loop(trips):
    """Step i stores slot i % 2 of a 2-slot buffer; then slot 1 is written with no wait: a race
    from 2 steps on."""
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        o_smem[...] = jnp.zeros((2, ROWS, COLS), F32)
        plgpu.commit_smem()
        n = sizes_gmem[0] if trips is None else trips

        def step(i, carry):
            plgpu.copy_smem_to_gmem(o_smem.at[i % 2], o_gmem.at[pl.ds(0, ROWS)])
            return carry
        lax.fori_loop(0, n, step, 0)
        o_smem[1] = jnp.ones((ROWS, COLS), F32)
        plgpu.commit_smem()
        plgpu.wait_smem_to_gmem(0)
    return _launch(body, out_slots=(2,))


def test_slots_of_the_iteration_are_whole_in_a_data_trip_loop():
    concrete = [_one(functools.partial(_slot_loop, t)).label for t in range(5)]
    assert concrete == ["verified"] * 2 + ["violation:BP200"] * 3, concrete
    assert _one(functools.partial(_slot_loop, None)).label == "violation:BP200"


def test_a_wait_inside_a_data_trip_loop_is_unmodelled():
    # a wait inside a loop that may run no iteration cannot be taken as always happening
    v = _one(functools.partial(_store_loop, None, False, True))
    assert any(d.code == "BP190" for d in v.diagnostics), [d.one_line() for d in v.diagnostics]
    assert v.label != "verified"


# -- branches on a carry without a closed form inside a loop -----------------------------------

def _carried_branch(wait):
    """Each step stores o_smem under a branch on a carried value with no closed form (c * 3 + 1),
    waits with `wait` (None: no wait), and the next step writes o_smem again."""
    def body(sizes_gmem, x_gmem, o_gmem, x_smem, o_smem, loaded):
        def step(i, c):
            o_smem[...] = jnp.zeros((ROWS, COLS), F32) + i
            plgpu.commit_smem()

            @pl.when(c % 2 == 0)
            def _():
                plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[pl.ds(0, ROWS)])
            if wait is not None:
                plgpu.wait_smem_to_gmem(wait, wait_read_only=True)
            return c * 3 + 1
        lax.fori_loop(0, 3, step, sizes_gmem[0] * 0)
        plgpu.wait_smem_to_gmem(0)
    return _launch(body)


def test_carried_branches_follow_the_same_policy():
    assert _one(functools.partial(_carried_branch, None)).label == "violation:BP200"
    waited = _one(functools.partial(_carried_branch, 0))
    assert waited.label == "verified", [d.one_line() for d in waited.diagnostics]
    counted = _one(functools.partial(_carried_branch, 1))
    assert counted.label != "verified"
    assert any(d.code == "BP190" and "count above 0" in d.message
               for d in counted.diagnostics), [d.one_line() for d in counted.diagnostics]
