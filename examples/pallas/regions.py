"""Warp-specialized Pallas kernels whose compute warpgroups split one SMEM buffer by rows.

Each compute warpgroup owns the rows `pl.ds(wg * HALF, HALF)` of the accumulator: it zeroes
them, adds its rows of every stage a TMA ring delivers, and stores them back to GMEM. Nothing
orders the two warpgroups' writes against each other, and nothing has to: their rows never
meet. Shift the second half up by one row and row HALF - 1 is written by both: BP200, naming
both halves and the shared row.

- `row_halves`: a hand-written TMA ring (warpgroup 2 produces, `empty` counts both consumers);
- `pipelined_halves`: the same through `emit_pipeline_warp_specialized` with manual consumed
  barriers, the accumulator written in the pipeline body and stored in the compute context;
- `split_copy`: two TMA copies fill the two halves of one stage, one barrier each, and each
  warpgroup waits only for the copy of its own half.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS, COLS, SLOTS = 128, 64, 2

EXPECT = {
    "row_halves": "verified",
    "row_halves_off_by_one": "violation:BP200",
    "pipelined_halves": "verified",
    "pipelined_halves_off_by_one": "violation:BP200",
    "split_copy": "verified",
    "split_copy_wrong_barrier": "violation:BP200",
}


def _own_rows(shift: int, rows: int):
    half = rows // 2
    return lambda wg: pl.ds(wg * (half - shift), half)


def _ring_halves(steps, shift, rows=ROWS, cols=COLS):
    half = rows // 2
    own = _own_rows(shift, rows)

    def body(x_gmem, o_gmem, ring, acc, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 2)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS

                @pl.when(i >= SLOTS)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_gmem.at[i], ring.at[slot], full.at[slot])

            @pl.loop(steps - SLOTS, steps)
            def _drain(i):
                plgpu.barrier_wait(empty.at[i % SLOTS])

        @pl.when(wg < 2)
        def _consumer():
            rows_ = own(wg)
            acc[rows_] = jnp.zeros((half, cols), jnp.float32)

            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS
                plgpu.barrier_wait(full.at[slot])
                acc[rows_] += ring[slot, rows_]
                plgpu.barrier_arrive(empty.at[slot])
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(acc.at[rows_], o_gmem.at[rows_])
            plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM((SLOTS, rows, cols), jnp.float32),
               plgpu.SMEM((rows, cols), jnp.float32),
               plgpu.Barrier(num_barriers=SLOTS),
               plgpu.Barrier(num_arrivals=2, num_barriers=SLOTS)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
                          num_threads=3, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.ones((steps, rows, cols), jnp.float32))


def row_halves(steps=3, rows=ROWS, cols=COLS):
    """Warpgroup wg accumulates rows wg*HALF .. wg*HALF + HALF - 1: disjoint, race-free."""
    return _ring_halves(steps, 0, rows, cols)


def row_halves_off_by_one(steps=3, rows=ROWS, cols=COLS):
    """The second half starts at HALF - 1: both warpgroups write that row."""
    return _ring_halves(steps, 1, rows, cols)


def _pipelined(steps, shift, rows=ROWS, cols=COLS):
    half = rows // 2
    own = _own_rows(shift, rows)

    def body(x_gmem, o_gmem, acc):
        wg = jax.lax.axis_index("wg")
        rows_ = own(wg)

        def compute_context(eval_pipeline):
            acc[rows_] = jnp.zeros((half, cols), jnp.float32)
            eval_pipeline(())
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(acc.at[rows_], o_gmem.at[rows_])
            plgpu.wait_smem_to_gmem(0)

        def step(_, x_smem, consumed, carry):
            acc[rows_] += x_smem[rows_]
            plgpu.barrier_arrive(consumed)
            return carry

        pipeline = plgpu.emit_pipeline_warp_specialized(
            step, grid=(steps,), memory_registers=40, max_concurrent_steps=2,
            num_compute_wgs=2, wg_axis="wg", manual_consumed_barriers=True,
            compute_context=compute_context,
            in_specs=[plgpu.BlockSpec((rows, cols), lambda i: (i, 0))])
        pipeline(x_gmem)

    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
                          num_threads=3, thread_name="wg",
                          scratch_types=[plgpu.SMEM((rows, cols), jnp.float32)])
    return kernel(jnp.ones((steps * rows, cols), jnp.float32))


def pipelined_halves(steps=3, rows=ROWS, cols=COLS):
    """emit_pipeline_warp_specialized, manual consumed barriers, one half per warpgroup."""
    return _pipelined(steps, 0, rows, cols)


def pipelined_halves_off_by_one(steps=3, rows=ROWS, cols=COLS):
    """The same pipeline with the second half shifted up by one row."""
    return _pipelined(steps, 1, rows, cols)


def _split_copy(wait_own: bool, rows=ROWS, cols=COLS):
    half = rows // 2

    def body(x_gmem, o_gmem, stage, halves):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 2)
        def _producer():
            for h in range(2):                       # one copy per half, each its own barrier
                part = pl.ds(h * half, half)
                plgpu.copy_gmem_to_smem(x_gmem.at[part], stage.at[part], halves.at[h])

        @pl.when(wg < 2)
        def _consumer():
            mine = pl.ds(wg * half, half)
            plgpu.barrier_wait(halves.at[wg if wait_own else 1 - wg])
            o_gmem[mine] = stage[mine] * 2
            plgpu.barrier_wait(halves.at[1 - wg if wait_own else wg])  # observe the other

    scratch = [plgpu.SMEM((rows, cols), jnp.float32), plgpu.Barrier(num_barriers=2)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
                          num_threads=3, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.ones((rows, cols), jnp.float32))


def split_copy(rows=ROWS, cols=COLS):
    """Warpgroup wg waits for the copy of its own half, then reads that half."""
    return _split_copy(True, rows, cols)


def split_copy_wrong_barrier(rows=ROWS, cols=COLS):
    """Each warpgroup waits for the other half's copy: its own may still be landing."""
    return _split_copy(False, rows, cols)
