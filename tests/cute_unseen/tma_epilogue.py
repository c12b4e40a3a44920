"""Unseen by the frontend's authors' examples: a Hopper-style GEMM mainloop with two operand
tiles per stage (A and B, one `PipelineTmaAsync` transaction of both), three stages, a
consumer warpgroup that keeps one stage in flight and releases it one step behind, and a
warp-specialized epilogue warp handed the tile over a named barrier (the consumers
`arrive`, the epilogue warp `arrive_and_wait`, 160 threads in all).
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

BM, BN, BK = 64, 64, 64
MMA_WARPS = 4
EPILOGUE_WARP = MMA_WARPS              # warp 4 stores, warp 5 loads
LOAD_WARP = MMA_WARPS + 1
EPILOGUE_BARRIER_ID = 3

EXPECT = {
    "gemm_epilogue": "verified",
    "gemm_epilogue_tx_of_a_only": "violation:BP105",
    "gemm_epilogue_barrier_counts_consumers_only": "violation:BP144",
    "gemm_epilogue_release_not_drained": "violation:BP100",
}


@cute.struct
class Storage:
    ab_full_empty: cute.struct.MemRange[cutlass.Int64, 2 * 3]


def _smem_layout(rows, cols, stages):
    return cute.make_composed_layout(
        cute.make_swizzle(3, 4, 3), 0,
        cute.make_ordered_layout((rows, cols, stages), order=(1, 0, 2)))


@cute.kernel
def gemm_kernel(tma_a: cute.CopyAtom, tma_b: cute.CopyAtom, mA: cute.Tensor, mB: cute.Tensor,
                a_layout: cute.ComposedLayout, b_layout: cute.ComposedLayout,
                stages: cutlass.Constexpr, tx_both: cutlass.Constexpr,
                epilogue_threads: cutlass.Constexpr, drain: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(Storage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=128,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=128,
                              swizzle=b_layout.inner)
    a_bytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(a_layout, (None, None, 0)))
    b_bytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(b_layout, (None, None, 0)))
    stage_tx = a_bytes + b_bytes
    if cutlass.const_expr(not tx_both):
        stage_tx = a_bytes
    ab = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.ab_full_empty.data_ptr(),
        num_stages=stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, MMA_WARPS),
        tx_count=stage_tx,
    )
    epilogue_ready = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER_ID,
                                           num_threads=epilogue_threads)
    gA = cute.local_tile(mA, (BM, BK), (0, None))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    gB = cute.local_tile(mB, (BN, BK), (0, None))
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))

    if warp == LOAD_WARP:
        write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        for k in cutlass.range(k_tiles):
            ab.producer_acquire(write)
            full = ab.producer_get_barrier(write)
            cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, write.index)], tma_bar_ptr=full)
            cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, write.index)], tma_bar_ptr=full)
            write.advance()
        ab.producer_tail(write)

    if warp < MMA_WARPS:
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        ab.consumer_wait(read)
        read.advance()
        for k in cutlass.range(1, k_tiles):
            ab.consumer_wait(read)
            read.advance()
            ab.consumer_release(release)       # the stage before: its WGMMA has retired
            release.advance()
        if cutlass.const_expr(drain):
            ab.consumer_release(release)
        epilogue_ready.arrive()

    if warp == EPILOGUE_WARP:
        epilogue_ready.arrive_and_wait()


@cute.jit
def gemm_host(mA: cute.Tensor, mB: cute.Tensor, stages: cutlass.Constexpr,
              tx_both: cutlass.Constexpr,
              epilogue_threads: cutlass.Constexpr, drain: cutlass.Constexpr):
    a_layout = _smem_layout(BM, BK, stages)
    b_layout = _smem_layout(BN, BK, stages)
    tma_a, ta = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                            cute.slice_(a_layout, (None, None, 0)), (BM, BK))
    tma_b, tb = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mB,
                                            cute.slice_(b_layout, (None, None, 0)), (BN, BK))
    gemm_kernel(tma_a, tma_b, ta, tb, a_layout, b_layout, stages, tx_both,
                epilogue_threads, drain).launch(grid=[1, 1, 1], block=[32 * 6, 1, 1])


def _compile(stages=3, tx_both=True, epilogue_threads=32 * (MMA_WARPS + 1),
             drain=True):
    k = cute.sym_int()                      # K, shared by A and B, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (BM, k), stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (BN, k), stride_order=(1, 0))
    return cute.compile(gemm_host, mA, mB, stages, tx_both, epilogue_threads, drain)


def gemm_epilogue():
    return _compile()


def gemm_epilogue_tx_of_a_only():
    """expect_tx counts only A's bytes while A and B land on the full barrier: A alone
    completes the phase, B lands in the next one, and the last B is still in flight when
    the kernel exits (the consumers read sB before it landed)."""
    return _compile(tx_both=False)


def gemm_epilogue_barrier_counts_consumers_only():
    """The epilogue's named barrier is sized for the 128 consumer threads, but the epilogue
    warp takes part too: the consumers' 128 arrivals complete a phase without it, and the
    epilogue warp then waits for 128 arrivals that never come."""
    return _compile(epilogue_threads=32 * MMA_WARPS)


def gemm_epilogue_release_not_drained():
    """The consumers never release the last stage: the producer's tail waits for it forever."""
    return _compile(drain=False)
