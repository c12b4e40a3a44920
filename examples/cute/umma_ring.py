"""A Blackwell mainloop whose tcgen05 MMAs read each stage straight from shared memory.

A producer warp loads A and B tiles with TMA into a ring of swizzled stages
(`PipelineTmaUmma`); an MMA warp waits for a stage, issues its tcgen05 MMAs (`cute.gemm` on the
shared-memory descriptors of `make_fragment_A/B`, one per K block) and releases the stage with
`consumer_release`, a `tcgen05.commit`: the empty barrier's arrival comes once every MMA the
warp issued before it has completed, so the producer refills a stage only after the MMAs that
read it are done.

The bug variant releases the stage before issuing its MMAs: the commit then covers only the
earlier stages' MMAs, and the producer's next copy into the stage may land while this stage's
MMAs still read it.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.cute.runtime import make_fake_compact_tensor

TILE_M, TILE_N, TILE_K = 128, 64, 64
STAGES = 2
MMA_WARP, LOAD_WARP = 0, 1

EXPECT = {
    "umma_ring": "verified",
    "umma_ring_released_before_the_mma": "violation:BP200",
}


@cute.struct
class SharedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]


@cute.kernel
def umma_ring_kernel(tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor,
                     tma_b: cute.CopyAtom, mB: cute.Tensor, a_layout: cute.ComposedLayout,
                     b_layout: cute.ComposedLayout, release_first: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=1024,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=1024,
                              swizzle=b_layout.inner)
    stage_tx = cute.size_in_bytes(cutlass.Float16, cute.slice_(a_layout, (None, None, None, 0))) \
        + cute.size_in_bytes(cutlass.Float16, cute.slice_(b_layout, (None, None, None, 0)))
    ab = pipeline.PipelineTmaUmma.create(
        barrier_storage=storage.ab_bars.data_ptr(),
        num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        tx_count=stage_tx,
    )
    thr_mma = tiled_mma.get_slice(0)
    gA = cute.local_tile(mA, (TILE_M, TILE_N, TILE_K), (0, 0, None), proj=(1, None, 1))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    gB = cute.local_tile(mB, (TILE_M, TILE_N, TILE_K), (0, 0, None), proj=(None, 1, 1))
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 3),
                                       cute.group_modes(thr_mma.partition_A(gA), 0, 3))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 3),
                                       cute.group_modes(thr_mma.partition_B(gB), 0, 3))

    if warp_idx == LOAD_WARP:
        write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(k_tiles):
            ab.producer_acquire(write)
            full = ab.producer_get_barrier(write)
            cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, write.index)], tma_bar_ptr=full)
            cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, write.index)], tma_bar_ptr=full)
            write.advance()
        ab.producer_tail(write)

    if warp_idx == MMA_WARP:
        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc = tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((TILE_M, TILE_N)))
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        for k in cutlass.range(k_tiles):
            ab.consumer_wait(read)
            if cutlass.const_expr(release_first):
                ab.consumer_release(read)        # commits the earlier stages' MMAs only
            for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
                cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, read.index)],
                          tCrB[(None, None, kb, read.index)], acc)
            if cutlass.const_expr(not release_first):
                ab.consumer_release(read)        # arrives when these MMAs are done
            read.advance()


@cute.jit
def umma_ring_host(mA: cute.Tensor, mB: cute.Tensor, release_first: cutlass.Constexpr):
    tiled_mma = sm100_utils.make_trivial_tiled_mma(
        cutlass.Float16, tcgen05.OperandMajorMode.K, tcgen05.OperandMajorMode.K,
        cutlass.Float32, tcgen05.CtaGroup.ONE, (TILE_M, TILE_N))
    tile = (TILE_M, TILE_N, TILE_K)
    a_layout = sm100_utils.make_smem_layout_a(tiled_mma, tile, cutlass.Float16, STAGES)
    b_layout = sm100_utils.make_smem_layout_b(tiled_mma, tile, cutlass.Float16, STAGES)
    op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
    tma_a, ta = cute.nvgpu.make_tiled_tma_atom_A(
        op, mA, cute.slice_(a_layout, (None, None, None, 0)), tile, tiled_mma)
    tma_b, tb = cute.nvgpu.make_tiled_tma_atom_B(
        op, mB, cute.slice_(b_layout, (None, None, None, 0)), tile, tiled_mma)
    umma_ring_kernel(tiled_mma, tma_a, ta, tma_b, tb, a_layout, b_layout,
                     release_first).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _compile(release_first=False):
    k = cute.sym_int()                      # K, shared by A and B, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k),
                                  stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (TILE_N, k),
                                  stride_order=(1, 0))
    return cute.compile(umma_ring_host, mA, mB, release_first,
                        options="--generate-line-info")


def umma_ring():
    """Each stage is released by a tcgen05.commit after its MMAs: the producer refills it once
    they have completed."""
    return _compile()


def umma_ring_released_before_the_mma():
    """consumer_release before the stage's MMAs: its commit does not cover them, so the next
    copy into the stage may land while they read it."""
    return _compile(release_first=True)
