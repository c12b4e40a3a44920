"""Fourth set of Mosaic GPU Pallas kernels in the style of JAX's shipped GPU kernels: a Blackwell
matmul on a pair of blocks (`cluster=(2,)`), the leader issuing 2-CTA MMAs
(`tcgen05_mma(..., collective_axis=)`) that read both blocks' halves of each ring slot, the
halves loaded by leader-tracked partitioned copies; correct and with a bug of the kind the
field reports. Checked by
tests/test_unseen_frontends.py against EXPECT (decided from the hardware rules before
running)."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {
    "collective_matmul": "verified",
    "collective_matmul_follower_skips_release": "violation:BP200",
}

F16, F32 = jnp.float16, jnp.float32
TM, TN, TK = 128, 64, 64


def _transforms(minor):
    swizzle = plgpu.find_swizzle(minor * 16)
    return (plgpu.TilingTransform((8, swizzle // 2)), plgpu.SwizzleTransform(swizzle))


# -- 1. Blackwell, two blocks per MMA: each block's TMA warp loads its half of A and B into a
#       2-slot ring; the leader's MMA warp issues the 2-CTA MMA, whose completion frees the slot
#       in both blocks; each block's epilogue warpgroup stores its rows of the accumulator -----

def _collective(k_steps, follower_waits):
    stages = 2

    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, out_smem,
             loaded, consumed, mma_done):
        wg = lax.axis_index("wg")
        block = lax.axis_index("x")
        is_leader = block == 0

        @pl.when(wg == 0)
        def _():
            @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
            def _per_warp():
                warp = lax.axis_index("warp")

                @pl.when(warp == 0)
                def _tma():
                    waits = jnp.logical_or(is_leader, follower_waits)

                    @pl.loop(0, k_steps)
                    def _(ki):
                        slot = lax.rem(ki, stages)

                        @pl.when(jnp.logical_and(ki >= stages, waits))
                        def _():
                            plgpu.barrier_wait(consumed.at[slot])
                        plgpu.copy_gmem_to_smem(
                            a_gmem.at[:, pl.ds(ki * TK, TK)], a_smem.at[slot], loaded.at[slot],
                            leader_tracked=plgpu.CopyPartition.PARTITIONED(0),
                            collective_axes="x")
                        plgpu.copy_gmem_to_smem(
                            b_gmem.at[pl.ds(ki * TK, TK), :], b_smem.at[slot], loaded.at[slot],
                            leader_tracked=plgpu.CopyPartition.PARTITIONED(1),
                            collective_axes="x")

                    @pl.when(waits)
                    def _():
                        for j in range(stages):      # observe the last two releases
                            plgpu.barrier_wait(consumed.at[(k_steps + j) % stages])

                @pl.when(jnp.logical_and(warp == 1, is_leader))
                def _mma():
                    @pl.loop(0, k_steps)
                    def _(ki):
                        slot = lax.rem(ki, stages)
                        plgpu.barrier_wait(loaded.at[slot])
                        plgpu.tcgen05_mma(acc_tmem, a_smem.at[slot], b_smem.at[slot],
                                          consumed.at[slot], accumulate=ki > 0,
                                          collective_axis="x")
                    plgpu.tcgen05_commit_arrive(mma_done, collective_axis="x")

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(mma_done)
            out_smem[...] = plgpu.async_load_tmem(acc_tmem).astype(F16)
            plgpu.wait_load_tmem()
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem.at[pl.ds(block * TM, TM)])
            plgpu.wait_smem_to_gmem(0)

    mm = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((2 * TM, 2 * TN), F16), num_threads=2,
        thread_name="wg", cluster=(2,), cluster_names=("x",),
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        scratch_types=[
            plgpu.SMEM((stages, TM, TK), F16, transforms=_transforms(TK)),
            plgpu.SMEM((stages, TK, TN), F16, transforms=_transforms(TN)),
            plgpu.TMEM((TM, 2 * TN), F32, collective=True),
            plgpu.SMEM((TM, 2 * TN), F16),
            plgpu.Barrier(num_arrivals=2, num_barriers=stages),
            plgpu.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True),
            plgpu.Barrier(num_arrivals=1, orders_tensor_core=True),
        ])
    return mm(jnp.zeros((2 * TM, k_steps * TK), F16), jnp.zeros((k_steps * TK, 2 * TN), F16))


def collective_matmul(k_steps=3):
    return _collective(k_steps, True)


def collective_matmul_follower_skips_release(k_steps=3):
    """Only the leader's TMA warp waits for `consumed` before refilling a slot, as if the MMA
    read the leader's shared memory only: the follower overwrites its half of slot 0 while the
    2-CTA MMA of step 0 may still be reading it."""
    return _collective(k_steps, False)
