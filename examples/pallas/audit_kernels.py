"""Kernels shaped like real Mosaic GPU kernels: a warp-specialized Hopper matmul, a
flash-attention-style ping-pong, a persistent Blackwell tcgen05 matmul, and a data-guarded
hand-off. Correct versions and the mistakes they invite.

Each function is a target: it builds its inputs and calls one `plgpu.kernel`. `EXPECT` is
barrierproof's verdict; `INTERPRETER` is what JAX's GPU interpret mode does with the kernel
(`barrierproof confirm`), which the tests compare. The Blackwell kernels use a WarpMesh, TMEM
and tcgen05, which JAX 0.10.2's interpreter cannot run (`unsupported`): barrierproof checks them
alone. Shapes are small so that the interpreter runs take seconds.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

TM, TN, TK = 128, 128, 64
F16 = jnp.float16
SWIZZLED = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))

EXPECT = {
    "ws_matmul": "verified",
    "ws_matmul_one_release_per_stage": "violation:BP101",
    "pingpong_attention_skips_last_schedule": "violation:BP100",
    "persistent_tcgen05_matmul": "verified",
    "persistent_tcgen05_matmul_acc_slot_zero": "violation:BP201",
    "empty_group_deadlock": "violation:BP100",
}

INTERPRETER = {
    "ws_matmul": "completed",
    "ws_matmul_one_release_per_stage": "raised",
    "pingpong_attention_skips_last_schedule": "hung",
    "persistent_tcgen05_matmul": "unsupported",
    "persistent_tcgen05_matmul_acc_slot_zero": "unsupported",
    "empty_group_deadlock": "hung",
}


# -- Hopper: warp-specialized matmul with a k-stage TMA ring ---------------------------------

WS_STAGES = 3
WS_K_STEPS = 5


def _ws_matmul(release_arrivals: int):
    """Warpgroup 2 is the producer: it streams (A, B) tiles through a WS_STAGES-deep ring,
    both TMA copies of a step landing on `loaded[slot]` (2 arrivals). Warpgroups 0 and 1 are
    consumers: each multiplies its 64-row half of A with B by wgmma and then releases the
    slot on `released[slot]`, which the producer waits for before refilling it (and drains
    at the end). `release_arrivals` is the count `released` is declared with."""
    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, loaded, released):
        wg = lax.axis_index("wg")

        @pl.when(wg == 2)
        def _producer():
            plgpu.set_max_registers(40, action="decrease")

            @pl.loop(0, WS_K_STEPS)
            def _(k):
                slot = k % WS_STAGES

                @pl.when(k >= WS_STAGES)
                def _():
                    plgpu.barrier_wait(released.at[slot])
                plgpu.copy_gmem_to_smem(a_gmem.at[:, pl.ds(k * TK, TK)], a_smem.at[slot],
                                        loaded.at[slot])
                plgpu.copy_gmem_to_smem(b_gmem.at[pl.ds(k * TK, TK), :], b_smem.at[slot],
                                        loaded.at[slot])

            @pl.loop(WS_K_STEPS - WS_STAGES, WS_K_STEPS)
            def _drain(k):
                plgpu.barrier_wait(released.at[k % WS_STAGES])

        @pl.when(wg < 2)
        def _consumers():
            plgpu.set_max_registers(232, action="increase")

            def with_accumulator(acc):
                @pl.loop(0, WS_K_STEPS)
                def _(k):
                    slot = k % WS_STAGES
                    plgpu.barrier_wait(loaded.at[slot])
                    plgpu.wgmma(acc, a_smem.at[slot, pl.ds(wg * 64, 64)], b_smem.at[slot])
                    plgpu.wgmma_wait(0)
                    plgpu.barrier_arrive(released.at[slot])
                o_gmem[pl.ds(wg * 64, 64), :] = acc[...].astype(o_gmem.dtype)

            pl.run_scoped(with_accumulator, plgpu.ACC((64, TN), jnp.float32))

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((TM, TN), F16), num_threads=3, thread_name="wg",
        scratch_types=[
            plgpu.SMEM((WS_STAGES, TM, TK), F16, transforms=SWIZZLED),
            plgpu.SMEM((WS_STAGES, TK, TN), F16, transforms=SWIZZLED),
            plgpu.Barrier(num_arrivals=2, num_barriers=WS_STAGES),
            plgpu.Barrier(num_arrivals=release_arrivals, num_barriers=WS_STAGES),
        ])
    return kernel(jnp.zeros((TM, WS_K_STEPS * TK), F16), jnp.zeros((WS_K_STEPS * TK, TN), F16))


def ws_matmul():
    """Producer warpgroup + two consumer warpgroups over a 3-stage TMA ring, 5 k-steps."""
    return _ws_matmul(release_arrivals=2)


def ws_matmul_one_release_per_stage():
    """`released` is declared with one arrival, as if there were one consumer, but both
    consumer warpgroups release every slot: the second release completes another phase
    before the producer observed the first (BP101: phase overrun)."""
    return _ws_matmul(release_arrivals=1)


# -- Flash-attention-like ping-pong -------------------------------------------------------

BQ, BKV, HEAD = 64, 64, 64
KV_SLOTS = 2
KV_STEPS = 4


def _pingpong(skip_last_schedule: bool):
    """Warpgroup 2 streams K and V tiles through a 2-slot ring (`k_loaded`/`v_loaded`, released
    by both compute warpgroups on `k_released`/`v_released`, drained at the end). Warpgroups 0
    and 1 each own a Q tile and visit every K/V tile; between QK^T and PV they meet on the
    `schedule` barrier (both arrive, both wait), which keeps their softmax phases in
    lock-step, as JAX's attention kernel does."""
    def body(q_gmem, k_gmem, v_gmem, o_gmem, q_smem, k_smem, v_smem,
             q_loaded, k_loaded, v_loaded, k_released, v_released, schedule):
        wg = lax.axis_index("wg")

        @pl.when(wg < 2)
        def _compute():
            plgpu.copy_gmem_to_smem(q_gmem.at[pl.ds(wg * BQ, BQ)], q_smem.at[wg],
                                    q_loaded.at[wg])
            plgpu.barrier_wait(q_loaded.at[wg])

            def kv_step(i, row_max):
                slot = lax.rem(i, KV_SLOTS)
                plgpu.barrier_wait(k_loaded.at[slot])
                row_max = jnp.maximum(row_max, i.astype(jnp.float32))     # stands for QK^T
                plgpu.barrier_arrive(k_released.at[slot])
                if skip_last_schedule:
                    @pl.when((i < KV_STEPS - 1) | (wg == 0))
                    def _():
                        plgpu.barrier_arrive(schedule)
                        plgpu.barrier_wait(schedule)
                else:
                    plgpu.barrier_arrive(schedule)
                    plgpu.barrier_wait(schedule)
                plgpu.barrier_wait(v_loaded.at[slot])
                plgpu.barrier_arrive(v_released.at[slot])                   # after PV
                return row_max

            row_max = lax.fori_loop(0, KV_STEPS, kv_step, jnp.float32(0))
            o_gmem[pl.ds(wg * BQ, BQ)] = jnp.broadcast_to(row_max, (BQ, HEAD)).astype(F16)

        @pl.when(wg == 2)
        def _memory():
            def fetch(i, carry):
                slot = lax.rem(i, KV_SLOTS)

                @pl.when(i >= KV_SLOTS)
                def _():
                    plgpu.barrier_wait(k_released.at[slot])
                plgpu.copy_gmem_to_smem(k_gmem.at[pl.ds(i * BKV, BKV)], k_smem.at[slot],
                                        k_loaded.at[slot])

                @pl.when(i >= KV_SLOTS)
                def _():
                    plgpu.barrier_wait(v_released.at[slot])
                plgpu.copy_gmem_to_smem(v_gmem.at[pl.ds(i * BKV, BKV)], v_smem.at[slot],
                                        v_loaded.at[slot])
                return carry

            lax.fori_loop(0, KV_STEPS, fetch, None)

            @pl.loop(KV_STEPS - KV_SLOTS, KV_STEPS)
            def _drain(i):
                plgpu.barrier_wait(k_released.at[i % KV_SLOTS])
                plgpu.barrier_wait(v_released.at[i % KV_SLOTS])

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((2 * BQ, HEAD), F16), num_threads=3,
        thread_name="wg",
        scratch_types=dict(
            q_smem=plgpu.SMEM((2, BQ, HEAD), F16),
            k_smem=plgpu.SMEM((KV_SLOTS, BKV, HEAD), F16),
            v_smem=plgpu.SMEM((KV_SLOTS, BKV, HEAD), F16),
            q_loaded=plgpu.Barrier(num_barriers=2),
            k_loaded=plgpu.Barrier(num_barriers=KV_SLOTS),
            v_loaded=plgpu.Barrier(num_barriers=KV_SLOTS),
            k_released=plgpu.Barrier(num_arrivals=2, num_barriers=KV_SLOTS),
            v_released=plgpu.Barrier(num_arrivals=2, num_barriers=KV_SLOTS),
            schedule=plgpu.Barrier(num_arrivals=2),
        ))
    kv = jnp.zeros((KV_STEPS * BKV, HEAD), F16)
    return kernel(jnp.zeros((2 * BQ, HEAD), F16), kv, kv)


def pingpong_attention_skips_last_schedule():
    """Warpgroup 1 leaves out the schedule barrier on the last K/V step (a tail 'optimisation'):
    warpgroup 0 arrives alone, the barrier needs 2 arrivals, and warpgroup 0 waits forever,
    then so does the memory warpgroup draining `v_released` (BP100: deadlock)."""
    return _pingpong(skip_last_schedule=True)


# -- Blackwell: persistent tcgen05 matmul with a double-buffered TMEM accumulator -------------

BW_STAGES = 2
BW_K_STEPS = 2
BW_TILES = 3
ACC_SLOTS = 2


def _persistent_tcgen05(acc_slot_of):
    """One block computes BW_TILES output tiles. Warpgroup 0 splits into warps: warp 0 runs
    the TMA ring (`loaded[slot]`, released by each MMA through `consumed[slot]`), warp 1
    issues the tcgen05 MMAs into accumulator slot `acc_slot_of(t)` of TMEM and commits each
    finished tile to `mma_done[acc]`. Warpgroup 1 is the epilogue: it waits for `mma_done`,
    reads the accumulator and hands it back on `store_done[acc]`, which the MMA warp waits for
    before reusing that accumulator two tiles later (and drains at the end)."""
    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, loaded, consumed, mma_done,
             store_done):
        wg = lax.axis_index("wg")
        steps = BW_TILES * BW_K_STEPS

        @pl.when(wg == 0)
        def _():
            @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
            def _per_warp():
                warp = lax.axis_index("warp")

                @pl.when(warp == 0)
                def _tma():
                    @pl.loop(0, steps)
                    def _(s):
                        slot = s % BW_STAGES
                        k = s % BW_K_STEPS

                        @pl.when(s >= BW_STAGES)
                        def _():
                            plgpu.barrier_wait(consumed.at[slot])
                        plgpu.copy_gmem_to_smem(a_gmem.at[:, pl.ds(k * TK, TK)],
                                                a_smem.at[slot], loaded.at[slot])
                        plgpu.copy_gmem_to_smem(b_gmem.at[pl.ds(k * TK, TK), :],
                                                b_smem.at[slot], loaded.at[slot])

                    @pl.loop(steps - BW_STAGES, steps)
                    def _drain(s):
                        plgpu.barrier_wait(consumed.at[s % BW_STAGES])

                @pl.when(warp == 1)
                def _mma():
                    @pl.loop(0, BW_TILES)
                    def _tile(t):
                        acc = acc_slot_of(t)

                        @pl.when(t >= ACC_SLOTS)
                        def _():
                            plgpu.barrier_wait(store_done.at[acc])

                        @pl.loop(0, BW_K_STEPS)
                        def _(k):
                            slot = (t * BW_K_STEPS + k) % BW_STAGES
                            plgpu.barrier_wait(loaded.at[slot])
                            plgpu.tcgen05_mma(acc_tmem.at[:, pl.ds(acc * TN, TN)],
                                              a_smem.at[slot], b_smem.at[slot],
                                              consumed.at[slot], accumulate=k > 0)
                        plgpu.tcgen05_commit_arrive(mma_done.at[acc])

                    @pl.loop(max(BW_TILES - ACC_SLOTS, 0), BW_TILES)
                    def _drain(t):
                        plgpu.barrier_wait(store_done.at[acc_slot_of(t)])

        @pl.when(wg == 1)
        def _epilogue():
            @pl.loop(0, BW_TILES)
            def _tile(t):
                acc = acc_slot_of(t)
                plgpu.barrier_wait(mma_done.at[acc])
                o_gmem[t] = plgpu.async_load_tmem(acc_tmem.at[:, pl.ds(acc * TN, TN)]).astype(F16)
                plgpu.wait_load_tmem()
                plgpu.barrier_arrive(store_done.at[acc])

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((BW_TILES, TM, TN), F16), num_threads=2,
        thread_name="wg",
        scratch_types=dict(
            a_smem=plgpu.SMEM((BW_STAGES, TM, TK), F16, transforms=SWIZZLED),
            b_smem=plgpu.SMEM((BW_STAGES, TK, TN), F16, transforms=SWIZZLED),
            acc_tmem=plgpu.TMEM((TM, ACC_SLOTS * TN), jnp.float32),
            loaded=plgpu.Barrier(num_arrivals=2, num_barriers=BW_STAGES),
            consumed=plgpu.Barrier(num_barriers=BW_STAGES, orders_tensor_core=True),
            mma_done=plgpu.Barrier(num_barriers=ACC_SLOTS, orders_tensor_core=True),
            store_done=plgpu.Barrier(num_barriers=ACC_SLOTS),
        ))
    return kernel(jnp.zeros((TM, BW_K_STEPS * TK), F16), jnp.zeros((BW_K_STEPS * TK, TN), F16))


def persistent_tcgen05_matmul():
    """3 tiles per block, 2 k-steps each, a 2-stage TMA ring, 2 accumulator slots (t % 2)."""
    return _persistent_tcgen05(lambda t: t % ACC_SLOTS)


def persistent_tcgen05_matmul_acc_slot_zero():
    """The accumulator slot is `t % 1`, always 0, while the MMA warp waits for the epilogue only
    from tile 2 on: tile 1's MMAs overwrite the accumulator the epilogue's TMEM load of tile 0
    may still read (BP201); a longer trace commits tile 1 before tile 0 is observed (BP101)."""
    return _persistent_tcgen05(lambda t: t % 1)


# -- A hand-off guarded by data ---------------------------------------------------------------

def empty_group_deadlock():
    """A grouped (MoE-style) kernel reads its group's row count from memory. The loader
    warpgroup stages and publishes the tile only for a non-empty group (`rows > 0`), but the
    compute warpgroup waits whenever `rows >= 0`, i.e. always: an empty group (rows == 0)
    deadlocks (BP100). barrierproof checks every small value of `rows`; the example passes 0 so
    that the interpreter hangs too."""
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TN,), jnp.float32), num_threads=2,
                  thread_name="wg",
                  scratch_types=[plgpu.SMEM((TN,), jnp.float32), plgpu.Barrier()])
    def kernel(rows_ref, x_ref, o_ref, tile, ready):
        wg = lax.axis_index("wg")
        rows = rows_ref[0]

        @pl.when(jnp.logical_and(wg == 1, rows > 0))
        def _loader():
            tile[...] = x_ref[...] * 2
            plgpu.barrier_arrive(ready)

        @pl.when(jnp.logical_and(wg == 0, rows >= 0))
        def _compute():
            plgpu.barrier_wait(ready)
            o_ref[...] = tile[...] + 1

    return kernel(jnp.array([0], jnp.int32), jnp.zeros(TN, jnp.float32))
