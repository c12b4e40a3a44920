"""A warp-specialized Blackwell GEMM skeleton in the style of the CuTe DSL's persistent dense
GEMM: warps 0-3 are the epilogue, warp 4 issues the MMAs, warp 5 the TMA loads. The A tiles
stream through a `PipelineTmaUmma` ring (the MMA warp releases a stage with a tcgen05.commit);
the accumulator is double-buffered in tensor memory behind a `PipelineUmmaAsync` (the MMA warp
commits a full accumulator, the 128 epilogue threads release it, each thread one arrival). The
blocks walk the output tiles persistently: tile `bidx`, then every `grid`-th tile after it, so
with three tiles on a grid of two the blocks run different programs (a grid axis). The epilogue
warps meet on named barrier 1 after each tile; the TMEM address written by the allocating warp
is read after a 160-thread named barrier reached by the MMA and epilogue warps at one
instruction.

K comes from A's shape at run time (`k_tiles = cute.size(gA, mode=[2])`), as in CUTLASS's
GEMMs, and so does the tile count (a kernel argument): the frontend reads the kernel at a grid
of both and `prove` answers for every tile count and K. On the grid of two blocks, block b
walks ceil((tiles - b) / 2) tiles, as under CUTLASS's static persistent scheduler: each block
is a grid position whose trip counts are floor quotients of the tile count, each proved equal
to its loop's count (model/cute/walks.py).

Each target compiles the kernel on the CPU; the bug variants change one knob of it.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

from _tma import ring_in_smem, staged_tiles

TILE_M, TILE_K = 128, 64
AB_STAGES, ACC_STAGES = 2, 2
EPILOGUE_WARPS = 2                      # a warpgroup in CUTLASS; two keep the exploration small
MMA_WARP, TMA_WARP = EPILOGUE_WARPS, EPILOGUE_WARPS + 1
EPILOGUE_THREADS = 32 * EPILOGUE_WARPS

EXPECT = {
    "persistent": "verified",
    "persistent_one_block": "verified",
    "acc_release_counts_warps": "violation:BP121",
    "acc_stage_never_advanced": "violation:BP101",
    "tmem_wait_from_two_roles": "violation:BP141",
    "ab_tx_counts_half_tile": "violation:BP130",
}


@cute.struct
class SharedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * AB_STAGES]
    acc_bars: cute.struct.MemRange[cutlass.Int64, 2 * ACC_STAGES]
    tmem_address: cutlass.Int32


@cute.kernel
def gemm_kernel(tma_atom: cute.CopyAtom, mA: cute.Tensor, a_smem_layout: cute.ComposedLayout,
                num_tiles: cutlass.Int32, acc_consumers: cutlass.Constexpr, advance_acc: cutlass.Constexpr,
                tmem_wait_per_role: cutlass.Constexpr, tx_divisor: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    bidx, _, _ = cute.arch.block_idx()
    grid_x, _, _ = cute.arch.grid_dim()
    smem = cutlass.utils.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA, stage_bytes = ring_in_smem(smem, a_smem_layout)

    ab_pipeline = pipeline.PipelineTmaUmma.create(
        barrier_storage=storage.ab_bars.data_ptr(), num_stages=AB_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        tx_count=stage_bytes // tx_divisor)
    acc_pipeline = pipeline.PipelineUmmaAsync.create(
        barrier_storage=storage.acc_bars.data_ptr(), num_stages=ACC_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, acc_consumers))

    tmem_ready = pipeline.NamedBarrier(barrier_id=2, num_threads=32 * (EPILOGUE_WARPS + 1))
    tmem = utils.TmemAllocator(storage.tmem_address.ptr, barrier_for_retrieve=tmem_ready,
                               allocator_warp_id=0)
    epilogue_done = pipeline.NamedBarrier(barrier_id=1, num_threads=EPILOGUE_THREADS)

    gA = cute.local_tile(mA, (TILE_M, TILE_K), (0, None))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    tiles = num_tiles                       # the tile count, set at run time
    tAsA, tAgA = cpasync.tma_partition(tma_atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))

    if warp_idx == 0:
        tmem.allocate(256)
    if cutlass.const_expr(not tmem_wait_per_role):
        if warp_idx <= MMA_WARP:               # one bar.sync for all 160 threads
            tmem.wait_for_alloc()

    if warp_idx == TMA_WARP:
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, AB_STAGES)
        for _tile in cutlass.range(bidx, tiles, grid_x):
            for k in cutlass.range(k_tiles):
                ab_pipeline.producer_acquire(ab_state)
                cute.copy(tma_atom, tAgA[(None, k)], tAsA[(None, ab_state.index)],
                          tma_bar_ptr=ab_pipeline.producer_get_barrier(ab_state))
                ab_state.advance()
        ab_pipeline.producer_tail(ab_state)

    if warp_idx == MMA_WARP:
        if cutlass.const_expr(tmem_wait_per_role):
            tmem.wait_for_alloc()               # this role's own bar.sync
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, AB_STAGES)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ACC_STAGES)
        for _tile in cutlass.range(bidx, tiles, grid_x):
            acc_pipeline.producer_acquire(acc_state)
            for k in cutlass.range(k_tiles):
                ab_pipeline.consumer_wait(ab_state)
                # the tcgen05 MMAs on stage ab_state.index would be issued here
                ab_pipeline.consumer_release(ab_state)
                ab_state.advance()
            acc_pipeline.producer_commit(acc_state)
            acc_state.advance()
        acc_pipeline.producer_tail(acc_state)

    if warp_idx < EPILOGUE_WARPS:
        if cutlass.const_expr(tmem_wait_per_role):
            tmem.wait_for_alloc()               # a second bar.sync on the same phase
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ACC_STAGES)
        for _tile in cutlass.range(bidx, tiles, grid_x):
            acc_pipeline.consumer_wait(acc_state)
            # tcgen05.ld of the accumulator stage, then the stores to C
            acc_pipeline.consumer_release(acc_state)
            if cutlass.const_expr(advance_acc):
                acc_state.advance()
            epilogue_done.arrive_and_wait()
        if warp_idx == 0:
            tmem.relinquish_alloc_permit()


@cute.jit
def gemm_host(mA: cute.Tensor, num_tiles: cutlass.Int32, blocks: cutlass.Constexpr, acc_consumers: cutlass.Constexpr,
              advance_acc: cutlass.Constexpr, tmem_wait_per_role: cutlass.Constexpr,
              tx_divisor: cutlass.Constexpr):
    a_smem_layout, tma_atom, tma_tensor = staged_tiles(mA, TILE_M, TILE_K, AB_STAGES)
    gemm_kernel(tma_atom, tma_tensor, a_smem_layout, num_tiles, acc_consumers,
                advance_acc, tmem_wait_per_role, tx_divisor).launch(
        grid=[blocks, 1, 1], block=[32 * (TMA_WARP + 1), 1, 1])


def _compile(num_tiles=3, blocks=2, acc_consumers=EPILOGUE_THREADS,
             advance_acc=True, tmem_wait_per_role=False, tx_divisor=1):
    k = cute.sym_int()                      # K, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k), stride_order=(1, 0))
    # the tile count is a kernel argument, as in CUTLASS; num_tiles is only the compile-time
    # sample value of it
    return cute.compile(gemm_host, mA, cutlass.Int32(num_tiles), blocks, acc_consumers,
                        advance_acc, tmem_wait_per_role, tx_divisor)


def persistent():
    """Tiles on two blocks (three at the default: block 0 computes tiles 0 and 2, block 1
    tile 1); each accumulator stage is committed by the MMA warp and released by the 128 epilogue threads."""
    return _compile()


def persistent_one_block():
    """One block walks all three tiles: the accumulator ring wraps (stage 0 is reused with the
    flipped phase for the third tile)."""
    return _compile(blocks=1)


def acc_release_counts_warps():
    """The accumulator's consumer group is sized in warps (4), but PipelineUmmaAsync's
    consumer_release arrives from every epilogue thread: the empty barrier completes after
    four of the 128 arrivals, and the rest arrive on its next phase."""
    return _compile(acc_consumers=EPILOGUE_WARPS)


def acc_stage_never_advanced():
    """The epilogue never advances its accumulator state: every wait is on stage 0 with the
    first phase's parity, so a wait can return for the third commit of stage 0 or, on another
    schedule, for the first one again (parity aliasing), and its release frees a stage the
    epilogue has not read."""
    return _compile(advance_acc=False, blocks=1)


def tmem_wait_from_two_roles():
    """The MMA warp and the epilogue warps each call tmem.wait_for_alloc() in their own
    branch: two aligned bar.sync instructions complete one phase of barrier 2 (PTX leaves this
    undefined; compute-sanitizer reports it as a divergent barrier)."""
    return _compile(tmem_wait_per_role=True)


def ab_tx_counts_half_tile():
    """The A/B pipeline expects half of the bytes each TMA copy lands: the transaction count
    goes below zero when the copy completes."""
    return _compile(tx_divisor=2)
