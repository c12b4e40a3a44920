"""A persistent Blackwell GEMM written as CuTe DSL pipelines, the twin of the task-scheduling
(TS) kernel of bench/ts_gemm.py: the same warps (epilogue 0, MMA 1, TMA 2), the same rings (a
two-stage `PipelineTmaUmma` for A/B, a two-stage `PipelineUmmaAsync` accumulator that every
epilogue thread releases) and the same bugs. bench/nvidia_checker.py checks each pair with
NVIDIA's exhaustive checker (the TS form, at a fixed tile count) and with barrierproof (this
form, from its MLIR: `check` at the same tile count and K, `prove` for every tile count and K).

The tile count and K are set at run time (C's M extent, A's K extent), so the frontend reads
the scheduler's loop and the K loop as loops over the parameters `tiles` and `k_tiles`
(`persistent_gemm_two_k_steps` fixes K at two steps).

`tutorial_gemm` is the same pipeline at the shape of the task-scheduling tutorial's GEMM: one
output tile per CTA (C is one tile), four epilogue warps, the TMA warp 4, the MMA warp 5, two
idle warps, three A/B stages; only K is a parameter.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.cute.runtime import make_fake_compact_tensor

TILE_M, TILE_N, TILE_K = 128, 128, 64
AB_STAGES, ACC_STAGES = 2, 2
EPILOGUE_WARP, MMA_WARP, TMA_WARP = 0, 1, 2
# The single-tile GEMM of the task-scheduling tutorial's shape: 4 epilogue warps (0-3), the TMA
# warp 4, the MMA warp 5, two idle warps (the framework pads to whole warp groups), 3 A/B stages.
TUTORIAL = dict(epilogue_warps=4, mma_warp=5, tma_warp=4, ab_stages=3, warps=8)
PERSISTENT = dict(epilogue_warps=1, mma_warp=MMA_WARP, tma_warp=TMA_WARP, ab_stages=AB_STAGES,
                  warps=TMA_WARP + 1)

EXPECT = {
    "persistent_gemm": "verified",
    "persistent_gemm_two_k_steps": "verified",
    "persistent_gemm_released_before_the_mma": "violation:BP200",
    "persistent_gemm_acc_counted_in_warps": "violation:BP121",
    "persistent_gemm_acc_never_released": "violation:BP100",
    "tutorial_gemm": "verified",
    "tutorial_gemm_acc_never_released": "violation:BP100",
}


@cute.struct
class SharedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * TUTORIAL["ab_stages"]]
    acc_bars: cute.struct.MemRange[cutlass.Int64, 2 * ACC_STAGES]


@cute.kernel
def gemm_kernel(tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor,
                tma_b: cute.CopyAtom, mB: cute.Tensor, a_layout: cute.ComposedLayout,
                b_layout: cute.ComposedLayout, schedule: utils.PersistentTileSchedulerParams,
                release_first: cutlass.Constexpr, acc_consumers: cutlass.Constexpr,
                release_acc: cutlass.Constexpr, epilogue_warps: cutlass.Constexpr,
                mma_warp: cutlass.Constexpr, tma_warp: cutlass.Constexpr,
                ab_stages: cutlass.Constexpr):
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
        barrier_storage=storage.ab_bars.data_ptr(), num_stages=ab_stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        tx_count=stage_tx)
    acc_ring = pipeline.PipelineUmmaAsync.create(
        barrier_storage=storage.acc_bars.data_ptr(), num_stages=ACC_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, acc_consumers))
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
    scheduler = utils.StaticPersistentTileScheduler.create(schedule, cute.arch.block_idx(),
                                                           cute.arch.grid_dim())

    if warp_idx == tma_warp:
        write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ab_stages)
        work = scheduler.initial_work_tile_info()
        while work.is_valid_tile:
            for k in cutlass.range(k_tiles):
                ab.producer_acquire(write)
                full = ab.producer_get_barrier(write)
                cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, write.index)], tma_bar_ptr=full)
                cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, write.index)], tma_bar_ptr=full)
                write.advance()
            scheduler.advance_to_next_work()
            work = scheduler.get_current_work()
        ab.producer_tail(write)

    if warp_idx == mma_warp:
        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc = tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((TILE_M, TILE_N)))
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ab_stages)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ACC_STAGES)
        work = scheduler.initial_work_tile_info()
        while work.is_valid_tile:
            acc_ring.producer_acquire(acc_state)
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
            acc_ring.producer_commit(acc_state)
            acc_state.advance()
            scheduler.advance_to_next_work()
            work = scheduler.get_current_work()
        acc_ring.producer_tail(acc_state)

    if warp_idx < epilogue_warps:
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ACC_STAGES)
        work = scheduler.initial_work_tile_info()
        while work.is_valid_tile:
            acc_ring.consumer_wait(acc_state)
            # tcgen05.ld of the accumulator stage, then the stores to C
            if cutlass.const_expr(release_acc):
                acc_ring.consumer_release(acc_state)
            acc_state.advance()
            scheduler.advance_to_next_work()
            work = scheduler.get_current_work()


@cute.jit
def gemm_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor,
              release_first: cutlass.Constexpr, acc_consumers: cutlass.Constexpr,
              release_acc: cutlass.Constexpr, shape: cutlass.Constexpr):
    tiled_mma = sm100_utils.make_trivial_tiled_mma(
        cutlass.Float16, cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K,
        cutlass.Float32, tcgen05.CtaGroup.ONE, (TILE_M, TILE_N))
    tile = (TILE_M, TILE_N, TILE_K)
    a_layout = sm100_utils.make_smem_layout_a(tiled_mma, tile, cutlass.Float16,
                                              shape["ab_stages"])
    b_layout = sm100_utils.make_smem_layout_b(tiled_mma, tile, cutlass.Float16,
                                              shape["ab_stages"])
    op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
    tma_a, ta = cute.nvgpu.make_tiled_tma_atom_A(
        op, mA, cute.slice_(a_layout, (None, None, None, 0)), tile, tiled_mma)
    tma_b, tb = cute.nvgpu.make_tiled_tma_atom_B(
        op, mB, cute.slice_(b_layout, (None, None, None, 0)), tile, tiled_mma)
    tiles_mn = cute.ceil_div(mC.shape, (TILE_M, TILE_N))
    schedule = utils.PersistentTileSchedulerParams((tiles_mn[0], tiles_mn[1], 1), (1, 1, 1))
    gemm_kernel(tiled_mma, tma_a, ta, tma_b, tb, a_layout, b_layout, schedule, release_first,
                acc_consumers, release_acc, shape["epilogue_warps"], shape["mma_warp"],
                shape["tma_warp"], shape["ab_stages"]).launch(
                    grid=[1, 1, 1], block=[32 * shape["warps"], 1, 1])


def _compile(release_first=False, acc_consumers=32, release_acc=True, runtime_k=True,
             shape=PERSISTENT):
    k = cute.sym_int() if runtime_k else 2 * TILE_K     # K, shared by A and B
    m = TILE_M if shape is TUTORIAL else cute.sym_int()  # the tutorial: one tile per CTA
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k), stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (TILE_N, k), stride_order=(1, 0))
    mC = make_fake_compact_tensor(cutlass.Float16, (m, TILE_N), stride_order=(1, 0))
    return cute.compile(gemm_host, mA, mB, mC, release_first, acc_consumers, release_acc,
                        shape, options="--generate-line-info")


def persistent_gemm():
    """Every tile count and K: the MMA warp's tcgen05 commits release each A/B stage after its
    MMAs, the epilogue's 32 threads release each accumulator stage."""
    return _compile()


def persistent_gemm_two_k_steps():
    """K fixed at two steps, the tile count at run time: `prove` covers every tile count,
    races included (with K at run time too, the races of the nested loops are left to the
    explorer)."""
    return _compile(runtime_k=False)


def persistent_gemm_released_before_the_mma():
    """consumer_release before the stage's MMAs: its commit does not cover them, so the next
    copy into the stage may land while they read it."""
    return _compile(release_first=True)


def persistent_gemm_acc_counted_in_warps():
    """The accumulator's consumer group is sized in warps (1), but consumer_release arrives from
    every epilogue thread: 31 arrivals too many per release."""
    return _compile(acc_consumers=1)


def persistent_gemm_acc_never_released():
    """The epilogue waits for each accumulator stage and never releases it: the MMA warp's
    acquire of the third tile waits forever (two stages)."""
    return _compile(release_acc=False)


def tutorial_gemm():
    """The task-scheduling tutorial's GEMM shape: one output tile per CTA, K at run time, four
    epilogue warps whose 128 threads release the accumulator."""
    return _compile(acc_consumers=32 * TUTORIAL["epilogue_warps"], shape=TUTORIAL)


def tutorial_gemm_acc_never_released():
    """The epilogue waits for the accumulator and never releases it: the MMA warp's
    producer_tail waits for that release forever."""
    return _compile(acc_consumers=32 * TUTORIAL["epilogue_warps"], release_acc=False,
                    shape=TUTORIAL)
