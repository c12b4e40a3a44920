"""Seventh set of Mosaic GPU Pallas kernels in the style of JAX's shipped GPU kernels
(jax.experimental.pallas.ops.gpu): `emit_pipeline_warp_specialized` with three compute
warpgroups carrying a row sum, a barrier two warpgroups arrive on where one of them arrives only
when a flag loaded from memory says so, a staging buffer reloaded by TMA after a TMA store (with
the read-only wait), a hand-written TMA store followed by a TMA load of the same global rows,
and a Blackwell K loop of tcgen05 MMAs completed by one `tcgen05_commit_arrive`. Correct and
with the bugs the field reports. Checked by tests/test_unseen_frontends.py against EXPECT
(decided from the hardware rules before running; where the code is not the obvious one, the
kernel's docstring says why).

Before any fix, 9 of the 10 verdicts were as expected: `store_then_load_read_only_wait` (a real
global-memory race: `wait_read_only=True` leaves the TMA store's writes in flight when the rows
are loaded back) was `verified`, since global memory is not modelled and a read-only wait was
taken as retiring the store. Global rows read back while a TMA store of them may still write are
now BP190 at the read (model/pallas/readback.py): `unknown`, never `verified`."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {
    "ws_three_groups": "verified",
    "ws_three_groups_one_store": "violation:BP200",
    "flagged_arrival_unconditional": "verified",
    "flagged_arrival_on_data": "violation:BP100",
    "reload_after_read_only_wait": "verified",
    "reload_before_store_read": "violation:BP200",
    "store_then_load_full_wait": "verified",
    # a global-memory race (outside the model): BP190 at the load of the rows back
    "store_then_load_read_only_wait": "unknown",
    "commit_after_k_loop": "verified",
    "commit_after_first_mma": "violation:BP201",
}

F16, F32 = jnp.float16, jnp.float32
ROWS, COLS = 96, 128
WARP_SPECIALIZED = plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup)


# -- 1. emit_pipeline_warp_specialized with three compute warpgroups (a fourth loads): each
#       carries the sum of its 32 rows over the K steps and stores them -----------------------

def _ws_three(steps, one_store):
    groups, part = 3, ROWS // 3

    def body(x_gmem, o_gmem, out_smem):
        wg = lax.axis_index("wg")
        mine = pl.ds(wg * part, part)

        def compute_context(run):
            total = run(jnp.zeros((part, COLS), F32))
            out_smem[mine] = total
            plgpu.commit_smem()
            if one_store:
                @pl.when(wg == 0)               # warpgroup 0 stores every group's rows
                def _():
                    plgpu.copy_smem_to_gmem(out_smem, o_gmem)
                    plgpu.wait_smem_to_gmem(0)
            else:
                plgpu.copy_smem_to_gmem(out_smem.at[mine], o_gmem.at[mine])
                plgpu.wait_smem_to_gmem(0)

        def step(_, x_smem, total):
            return total + x_smem[mine]

        spec = plgpu.BlockSpec((ROWS, COLS), lambda i: (i, 0))
        plgpu.emit_pipeline_warp_specialized(
            step, grid=(steps,), memory_registers=40, max_concurrent_steps=2,
            num_compute_wgs=groups, wg_axis="wg", compute_context=compute_context,
            in_specs=[spec])(x_gmem)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     num_threads=groups + 1, thread_name="wg",
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32)])
    return k(jnp.ones((steps * ROWS, COLS), F32))


def ws_three_groups(steps=4):
    return _ws_three(steps, False)


def ws_three_groups_one_store():
    """Warpgroup 0 issues one TMA store of all 96 rows right after writing its own 32: nothing
    orders warpgroups 1 and 2's writes of their rows before the store reads them."""
    return _ws_three(4, True)


# -- 2. two warpgroups fill halves of a buffer and arrive on one barrier counting both; a third
#       waits and stores the buffer. Warpgroup 1's half is written only when a flag in memory is
#       set -------------------------------------------------------------------------------------

def _flagged(arrive_on_data):
    half = ROWS // 2

    def body(flag_gmem, o_gmem, buf, filled):
        wg = lax.axis_index("wg")
        flag = flag_gmem[0]

        @pl.when(wg == 0)
        def _():
            buf[pl.ds(0, half)] = jnp.zeros((half, COLS), F32)
            plgpu.commit_smem()
            plgpu.barrier_arrive(filled)

        @pl.when(wg == 1)
        def _():
            if arrive_on_data:
                @pl.when(flag != 0)
                def _():
                    buf[pl.ds(half, half)] = jnp.ones((half, COLS), F32)
                    plgpu.commit_smem()
                    plgpu.barrier_arrive(filled)
            else:
                @pl.when(flag != 0)
                def _():
                    buf[pl.ds(half, half)] = jnp.ones((half, COLS), F32)
                plgpu.commit_smem()
                plgpu.barrier_arrive(filled)

        @pl.when(wg == 2)
        def _():
            plgpu.barrier_wait(filled)
            plgpu.copy_smem_to_gmem(buf, o_gmem)
            plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     num_threads=3, thread_name="wg", compiler_params=WARP_SPECIALIZED,
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.Barrier(num_arrivals=2)])
    return k(jnp.zeros((1,), jnp.int32))


def flagged_arrival_unconditional():
    """Only the write is under the flag; the arrival is not, so the barrier always completes."""
    return _flagged(False)


def flagged_arrival_on_data():
    """The arrival is under the flag too: when the flag is 0 the barrier (two arrivals) never
    completes and warpgroup 2 waits forever."""
    return _flagged(True)


# -- 3. one warpgroup, one staging buffer: load x, scale it, store it; then reload the buffer
#       with y by TMA. The TMA store must have read the buffer before the TMA load rewrites it;
#       the read-only wait (wait_read_only=True) is enough for that -----------------------------

def _reload(wait):
    def body(x_gmem, y_gmem, o_gmem, p_gmem, buf, loaded):
        plgpu.copy_gmem_to_smem(x_gmem, buf, loaded)
        plgpu.barrier_wait(loaded)
        buf[...] = buf[...] * 2
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(buf, o_gmem)
        if wait:
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)
        plgpu.copy_gmem_to_smem(y_gmem, buf, loaded)
        plgpu.barrier_wait(loaded)
        buf[...] = buf[...] + 1
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(buf, p_gmem)
        plgpu.wait_smem_to_gmem(0)

    shape = jax.ShapeDtypeStruct((ROWS, COLS), F32)
    k = plgpu.kernel(body, out_type=(shape, shape),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32), plgpu.Barrier()])
    return k(jnp.zeros((ROWS, COLS), F32), jnp.zeros((ROWS, COLS), F32))


def reload_after_read_only_wait():
    return _reload(True)


def reload_before_store_read():
    """No wait between the TMA store of the buffer and the TMA load into it: the load may
    overwrite the buffer while the store still reads it (an async write against an async
    read)."""
    return _reload(False)


# -- 4. a TMA store of a tile to the output, then a TMA load of the same rows back (a second
#       pass reading the first pass's result). The load reads global memory the store writes:
#       only the full wait (not the read-only one) orders it after the store's writes ---------

def _round_trip(read_only):
    def body(x_gmem, o_gmem, buf, back, loaded):
        plgpu.copy_gmem_to_smem(x_gmem, buf, loaded)
        plgpu.barrier_wait(loaded)
        buf[...] = buf[...] * 2
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(buf, o_gmem)
        plgpu.wait_smem_to_gmem(0, wait_read_only=read_only)
        plgpu.copy_gmem_to_smem(o_gmem, back, loaded)
        plgpu.barrier_wait(loaded)
        buf[...] = back[...] + 1
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(buf, o_gmem)
        plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.SMEM((ROWS, COLS), F32), plgpu.Barrier()])
    return k(jnp.zeros((ROWS, COLS), F32))


def store_then_load_full_wait():
    return _round_trip(False)


def store_then_load_read_only_wait():
    """wait_read_only=True only waits until the store has read shared memory: its writes to the
    output may not be done when the TMA load reads the same rows back (a global-memory race,
    which the model does not represent: BP190 at the load, `unknown`)."""
    return _round_trip(True)


# -- 5. Blackwell: one warp issues a K loop of tcgen05 MMAs with no barrier each and completes
#       them with one tcgen05_commit_arrive; the epilogue warpgroup reads the accumulator -----

def _transforms(minor):
    swizzle = plgpu.find_swizzle(minor * 16)
    return (plgpu.TilingTransform((8, swizzle // 2)), plgpu.SwizzleTransform(swizzle))


def _commit(k_steps, commit_first):
    tm, tn, tk = 128, 128, 64

    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, out_smem, loaded, mma_done):
        wg = lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
            def _per_warp():
                warp = lax.axis_index("warp")

                @pl.when(warp == 0)
                def _mma():
                    for k in range(k_steps):     # every K slice resident: one load each
                        plgpu.copy_gmem_to_smem(a_gmem.at[:, pl.ds(k * tk, tk)], a_smem.at[k],
                                                loaded.at[k])
                        plgpu.copy_gmem_to_smem(b_gmem.at[pl.ds(k * tk, tk)], b_smem.at[k],
                                                loaded.at[k])
                    for k in range(k_steps):
                        plgpu.barrier_wait(loaded.at[k])
                        plgpu.tcgen05_mma(acc_tmem, a_smem.at[k], b_smem.at[k],
                                          accumulate=k > 0)
                        if commit_first and k == 0:
                            plgpu.tcgen05_commit_arrive(mma_done)
                    if not commit_first:
                        plgpu.tcgen05_commit_arrive(mma_done)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(mma_done)
            out_smem[...] = plgpu.async_load_tmem(acc_tmem).astype(F16)
            plgpu.wait_load_tmem()
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem)
            plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((tm, tn), F16), num_threads=2, thread_name="wg",
        compiler_params=WARP_SPECIALIZED,
        scratch_types=[
            plgpu.SMEM((k_steps, tm, tk), F16, transforms=_transforms(tk)),
            plgpu.SMEM((k_steps, tk, tn), F16, transforms=_transforms(tn)),
            plgpu.TMEM((tm, tn), F32),
            plgpu.SMEM((tm, tn), F16),
            plgpu.Barrier(num_arrivals=2, num_barriers=k_steps),
            plgpu.Barrier(num_arrivals=1, orders_tensor_core=True),
        ])
    return k(jnp.zeros((tm, k_steps * tk), F16), jnp.zeros((k_steps * tk, tn), F16))


def commit_after_k_loop():
    return _commit(3, False)


def commit_after_first_mma():
    """The commit is issued after the first MMA only: it tracks that MMA, so the epilogue's
    tcgen05.ld of the accumulator races the two MMAs issued after it."""
    return _commit(3, True)
