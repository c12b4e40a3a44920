"""A Hopper mainloop whose warpgroup MMAs read each stage straight from shared memory.

A producer warp loads A and B tiles with TMA into a ring of swizzled stages
(`PipelineTmaAsync`, one transaction of both); a consumer warpgroup issues the WGMMAs of a
stage (`cute.gemm` on the shared-memory descriptors of `make_fragment_A/B`, one per K block),
commits them as one group and keeps one group in flight: `warpgroup.wait_group(1)` retires the
previous stage's WGMMAs, and only then is that stage released to the producer. A WGMMA reads
its operands until the wait that retires it, so releasing a stage whose WGMMAs may still run
lets the producer's next TMA copy overwrite operands being read.

The bug variants: the stage just issued is released (not the one before it), and the last
group is not waited for before the kernel exits.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor

TILE_M, TILE_N, TILE_K = 64, 64, 64
STAGES = 2
CONSUMER_WARPS = 4                       # one warpgroup; the producer is the warp after it

EXPECT = {
    "wgmma_ring": "verified",
    "wgmma_ring_releases_the_stage_in_flight": "violation:BP200",
    "wgmma_ring_exits_with_wgmmas_in_flight": "violation:BP105",
}


@cute.struct
class SharedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]


@cute.kernel
def wgmma_ring_kernel(tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor,
                      tma_b: cute.CopyAtom, mB: cute.Tensor, a_layout: cute.ComposedLayout,
                      b_layout: cute.ComposedLayout, release_behind: cutlass.Constexpr,
                      drain: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=1024,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=1024,
                              swizzle=b_layout.inner)
    stage_tx = cute.size_in_bytes(cutlass.Float16, cute.slice_(a_layout, (None, None, 0))) + \
        cute.size_in_bytes(cutlass.Float16, cute.slice_(b_layout, (None, None, 0)))
    ab = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.ab_bars.data_ptr(),
        num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_WARPS),
        tx_count=stage_tx,
    )
    gA = cute.local_tile(mA, (TILE_M, TILE_K), (0, None))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    gB = cute.local_tile(mB, (TILE_N, TILE_K), (0, None))
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))

    if warp_idx == CONSUMER_WARPS:
        write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(k_tiles):
            ab.producer_acquire(write)
            full = ab.producer_get_barrier(write)
            cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, write.index)], tma_bar_ptr=full)
            cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, write.index)], tma_bar_ptr=full)
            ab.producer_commit(write)
            write.advance()
        ab.producer_tail(write)

    if warp_idx < CONSUMER_WARPS:
        thr_mma = tiled_mma.get_slice(tidx)
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
        acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((TILE_M, TILE_N)),
                                    cutlass.Float32)
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        release = read.clone()
        for k in cutlass.range(k_tiles):
            ab.consumer_wait(read)
            warpgroup.fence()
            for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
                cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, read.index)],
                          tCrB[(None, None, kb, read.index)], acc)
            warpgroup.commit_group()
            if cutlass.const_expr(release_behind):
                warpgroup.wait_group(1)          # the previous stage's group has retired
                if k > 0:
                    ab.consumer_release(release)
                    release.advance()
            else:
                ab.consumer_release(read)        # still being read by this stage's WGMMAs
                release.advance()
            read.advance()
        if cutlass.const_expr(drain):
            warpgroup.wait_group(0)
        if cutlass.const_expr(release_behind):
            ab.consumer_release(release)


@cute.jit
def wgmma_ring_host(mA: cute.Tensor, mB: cute.Tensor, release_behind: cutlass.Constexpr,
                    drain: cutlass.Constexpr):
    tiled_mma = sm90_utils.make_trivial_tiled_mma(
        cutlass.Float16, cutlass.Float16, cute.nvgpu.OperandMajorMode.K,
        cute.nvgpu.OperandMajorMode.K, cutlass.Float32, (1, 1, 1), (TILE_M, TILE_N))
    tile = (TILE_M, TILE_N, TILE_K)
    a_layout = sm90_utils.make_smem_layout_a(utils.LayoutEnum.ROW_MAJOR, tile, cutlass.Float16,
                                             STAGES)
    b_layout = sm90_utils.make_smem_layout_b(utils.LayoutEnum.ROW_MAJOR, tile, cutlass.Float16,
                                             STAGES)
    tma_a, ta = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                            cute.slice_(a_layout, (None, None, 0)),
                                            (TILE_M, TILE_K))
    tma_b, tb = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mB,
                                            cute.slice_(b_layout, (None, None, 0)),
                                            (TILE_N, TILE_K))
    wgmma_ring_kernel(tiled_mma, tma_a, ta, tma_b, tb, a_layout, b_layout, release_behind,
                      drain).launch(
        grid=[1, 1, 1], block=[32 * (CONSUMER_WARPS + 1), 1, 1])


def _compile(release_behind=True, drain=True):
    k = cute.sym_int()                      # K, shared by A and B, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k),
                                  stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (TILE_N, k),
                                  stride_order=(1, 0))
    return cute.compile(wgmma_ring_host, mA, mB, release_behind, drain,
                        options="--generate-line-info --gpu-arch sm_90a")


def wgmma_ring():
    """One WGMMA group in flight: a stage is released once the wait_group(1) after the next
    stage's commit has retired the group that read it; the last group is drained at the end."""
    return _compile()


def wgmma_ring_releases_the_stage_in_flight():
    """The stage is released right after its WGMMAs are committed, with no wait: the producer's
    next copy into it may land while they still read it."""
    return _compile(release_behind=False)


def wgmma_ring_exits_with_wgmmas_in_flight():
    """The last wait_group(0) is missing: the warpgroup exits with its last WGMMAs still
    reading the ring."""
    return _compile(drain=False)
