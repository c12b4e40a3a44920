"""Sixth set of CuTe DSL kernels in the style of CUTLASS's Blackwell persistent dense GEMM
(examples/python/CuTeDSL/blackwell): the accumulator has two stages in tensor memory behind a
`PipelineUmmaAsync`, and the epilogue warp copies a stage out of TMEM in two subtiles of half the
columns each (a tcgen05.ld tiled copy on a subtile of the stage, as the example's epilogue does
with its `epi_tile`), releasing the stage (acc_empty) once both are read. Three tiles on one
block, so stage 0 is written again by the MMAs of the third tile. Correct and with bugs of the
kind the field reports. Checked by tests/test_unseen_frontends.py against EXPECT (decided from
the hardware rules before running).

The bugs: releasing the stage after the first subtile (unrolled, or in the kept loop under a
runtime `if`: the MMAs of tile 2 may overwrite the second half of stage 0 while the epilogue
still reads it), and an epilogue that always reads
stage 0 while it waits for and releases the stage of its tile (tile 1 is in stage 1: reading
stage 0 then races the MMAs of tile 2): both tensor-memory races, BP201. The epilogue is written
twice: indexing the subtile and stage modes of the partitioned accumulator, and in the order of
CUTLASS's epilogue (stage sliced before the wait, subtile modes grouped)."""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.cute.runtime import make_fake_compact_tensor

TILE_M, TILE_N, TILE_K = 128, 128, 64
AB_STAGES, ACC_STAGES = 2, 2
EPILOGUE_WARP, MMA_WARP, TMA_WARP = 0, 1, 2
TMEM_COLUMNS = TILE_N * ACC_STAGES

SUBTILES = 2
SUB_N = TILE_N // SUBTILES

EXPECT = {
    "subtile_epilogue": "verified",
    "subtile_epilogue_released_after_first": "violation:BP201",
    "subtile_epilogue_loop": "verified",
    "subtile_epilogue_loop_released_in_loop": "violation:BP201",
    "subtile_epilogue_reads_stage_zero": "violation:BP201",
    "grouped_subtiles": "verified",
    "grouped_subtiles_released_after_first": "violation:BP201",
}


@cute.struct
class SharedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * AB_STAGES]
    acc_bars: cute.struct.MemRange[cutlass.Int64, 2 * ACC_STAGES]
    tmem_address: cutlass.Int32


@cute.kernel
def gemm_kernel(tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor,
                tma_b: cute.CopyAtom, mB: cute.Tensor, a_layout: cute.ComposedLayout,
                b_layout: cute.ComposedLayout, num_tiles: cutlass.Int32,
                release_after: cutlass.Constexpr, loop: cutlass.Constexpr,
                stage_zero: cutlass.Constexpr, grouped: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=1024,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=1024,
                              swizzle=b_layout.inner)
    stage_tx = cute.size_in_bytes(cutlass.Float16, cute.slice_(a_layout, (None, None, None, 0))) \
        + cute.size_in_bytes(cutlass.Float16, cute.slice_(b_layout, (None, None, None, 0)))
    ab = pipeline.PipelineTmaUmma.create(
        barrier_storage=storage.ab_bars.data_ptr(), num_stages=AB_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        tx_count=stage_tx)
    acc_ring = pipeline.PipelineUmmaAsync.create(
        barrier_storage=storage.acc_bars.data_ptr(), num_stages=ACC_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    tmem_ready = pipeline.NamedBarrier(barrier_id=2, num_threads=64)
    tmem = cutlass.memory.TmemAllocator(storage.tmem_address.ptr, barrier_for_retrieve=tmem_ready,
                               allocator_warp_id=EPILOGUE_WARP)

    thr_mma = tiled_mma.get_slice(0)
    gA = cute.local_tile(mA, (TILE_M, TILE_N, TILE_K), (0, 0, None), proj=(1, None, 1))
    k_tiles = cute.size(gA, mode=[2])
    gB = cute.local_tile(mB, (TILE_M, TILE_N, TILE_K), (0, 0, None), proj=(None, 1, 1))
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 3),
                                       cute.group_modes(thr_mma.partition_A(gA), 0, 3))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 3),
                                       cute.group_modes(thr_mma.partition_B(gB), 0, 3))
    # the accumulator's layout with a trailing stage mode; its address comes from TMEM's allocation
    acc_shape = tiled_mma.partition_shape_C((TILE_M, TILE_N))
    acc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, ACC_STAGES))

    if warp_idx == EPILOGUE_WARP:
        tmem.allocate(TMEM_COLUMNS)
    if warp_idx <= MMA_WARP:
        tmem.wait_for_alloc()

    if warp_idx == TMA_WARP:
        write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, AB_STAGES)
        for _tile in cutlass.range(num_tiles):
            for k in cutlass.range(k_tiles):
                ab.producer_acquire(write)
                full = ab.producer_get_barrier(write)
                cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, write.index)], tma_bar_ptr=full)
                cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, write.index)], tma_bar_ptr=full)
                write.advance()
        ab.producer_tail(write)

    if warp_idx == MMA_WARP:
        acc = cute.make_tensor(tmem.retrieve_ptr(cutlass.Float32), acc_fake.layout)
        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, AB_STAGES)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ACC_STAGES)
        for _tile in cutlass.range(num_tiles):
            acc_ring.producer_acquire(acc_state)
            stage_acc = acc[(None, None, None, acc_state.index)]
            for k in cutlass.range(k_tiles):
                ab.consumer_wait(read)
                for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
                    cute.gemm(tiled_mma, stage_acc, tCrA[(None, None, kb, read.index)],
                              tCrB[(None, None, kb, read.index)], stage_acc)
                ab.consumer_release(read)
                read.advance()
            acc_ring.producer_commit(acc_state)
            acc_state.advance()
        acc_ring.producer_tail(acc_state)

    if warp_idx == EPILOGUE_WARP:
        acc = cute.make_tensor(tmem.retrieve_ptr(cutlass.Float32), acc_fake.layout)
        # the stage in subtiles of SUB_N columns: (TILE_M, SUB_N, 1, SUBTILES, stage)
        acc_tiles = cute.flat_divide(acc[((None, None), 0, 0, None)], (TILE_M, SUB_N))
        load = cute.make_copy_atom(tcgen05.Ld32x32bOp(tcgen05.Repetition.x64), cutlass.Float32)
        tmem_copy = tcgen05.make_tmem_copy(load, acc_tiles[(None, None, 0, 0, 0)])
        tTR_tAcc = tmem_copy.get_slice(tidx).partition_S(acc_tiles)
        tTR_rAcc = cute.make_rmem_tensor(tTR_tAcc[(None, None, None, 0, 0, 0)].shape,
                                         cutlass.Float32)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ACC_STAGES)
        for _tile in cutlass.range(num_tiles):
            if cutlass.const_expr(grouped):
                # CUTLASS's own order: slice the stage, wait, group the subtile modes
                t_stage = tTR_tAcc[(None, None, None, None, None, acc_state.index)]
                acc_ring.consumer_wait(acc_state)
                t_sub = cute.group_modes(t_stage, 3, cute.rank(t_stage))
                for sub in cutlass.range_constexpr(SUBTILES):
                    cute.copy(tmem_copy, t_sub[(None, None, None, sub)], tTR_rAcc)
                    cute.arch.fence_view_async_tmem_load()
                    if cutlass.const_expr(release_after == 1 and sub == 0):
                        acc_ring.consumer_release(acc_state)
                if cutlass.const_expr(release_after != 1):
                    acc_ring.consumer_release(acc_state)
            else:
                acc_ring.consumer_wait(acc_state)
                stage = 0 if cutlass.const_expr(stage_zero) else acc_state.index
                if cutlass.const_expr(loop):
                    for sub in cutlass.range(SUBTILES):
                        cute.copy(tmem_copy, tTR_tAcc[(None, None, None, 0, sub, stage)], tTR_rAcc)
                        if cutlass.const_expr(release_after == 1):
                            if sub == 0:            # a branch the compiler keeps, in the loop
                                acc_ring.consumer_release(acc_state)
                else:
                    for sub in cutlass.range_constexpr(SUBTILES):
                        cute.copy(tmem_copy, tTR_tAcc[(None, None, None, 0, sub, stage)], tTR_rAcc)
                        if cutlass.const_expr(sub + 1 == release_after):
                            acc_ring.consumer_release(acc_state)
                if cutlass.const_expr(loop and release_after != 1):
                    acc_ring.consumer_release(acc_state)
            acc_state.advance()
        tmem.relinquish_alloc_permit()


@cute.jit
def gemm_host(mA: cute.Tensor, mB: cute.Tensor, num_tiles: cutlass.Int32,
              release_after: cutlass.Constexpr, loop: cutlass.Constexpr,
              stage_zero: cutlass.Constexpr, grouped: cutlass.Constexpr):
    tiled_mma = sm100_utils.make_trivial_tiled_mma(
        cutlass.Float16, cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K,
        cutlass.Float32, tcgen05.CtaGroup.ONE, (TILE_M, TILE_N))
    tile = (TILE_M, TILE_N, TILE_K)
    a_layout = sm100_utils.make_smem_layout_a(tiled_mma, tile, cutlass.Float16, AB_STAGES)
    b_layout = sm100_utils.make_smem_layout_b(tiled_mma, tile, cutlass.Float16, AB_STAGES)
    op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
    tma_a, ta = cute.nvgpu.make_tiled_tma_atom_A(
        op, mA, cute.slice_(a_layout, (None, None, None, 0)), tile, tiled_mma)
    tma_b, tb = cute.nvgpu.make_tiled_tma_atom_B(
        op, mB, cute.slice_(b_layout, (None, None, None, 0)), tile, tiled_mma)
    gemm_kernel(tiled_mma, tma_a, ta, tma_b, tb, a_layout, b_layout, num_tiles, release_after,
                loop, stage_zero, grouped).launch(grid=[1, 1, 1], block=[32 * (TMA_WARP + 1), 1, 1])


def _compile(release_after=SUBTILES, loop=False, stage_zero=False, grouped=False):
    k = 2 * TILE_K                          # two K steps per tile
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k), stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (TILE_N, k), stride_order=(1, 0))
    return cute.compile(gemm_host, mA, mB, cutlass.Int32(3), release_after, loop, stage_zero,
                        grouped,
                        options="--generate-line-info")


def subtile_epilogue():
    """Both subtiles of the stage are copied out of TMEM before it is released."""
    return _compile()


def subtile_epilogue_released_after_first():
    """consumer_release after the first subtile: the MMA warp may acquire the stage and
    overwrite its second half while the epilogue still reads it."""
    return _compile(release_after=1)


def subtile_epilogue_loop():
    """The subtiles copied in a loop the compiler keeps (cutlass.range), released after it."""
    return _compile(loop=True)


def subtile_epilogue_loop_released_in_loop():
    """The loop of subtile_epilogue_loop releasing the stage inside, after subtile 0 (a runtime
    `if sub == 0`): the second subtile's read races the MMAs that reacquired the stage."""
    return _compile(release_after=1, loop=True)


def subtile_epilogue_reads_stage_zero():
    """The epilogue reads stage 0 for every tile while waiting for and releasing its tile's
    stage: tile 1's read of stage 0 races the MMAs of tile 2, which acquired stage 0 once
    tile 0 released it."""
    return _compile(stage_zero=True)



def grouped_subtiles():
    """As the CUTLASS epilogue orders it: the stage sliced before consumer_wait, its subtile
    modes grouped into one (group_modes), each subtile copied and fenced
    (fence_view_async_tmem_load), the stage released after the last."""
    return _compile(grouped=True)


def grouped_subtiles_released_after_first():
    """The same, releasing after the first subtile's copy and fence."""
    return _compile(release_after=1, grouped=True)
