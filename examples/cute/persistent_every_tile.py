"""A persistent Blackwell GEMM skeleton whose number of output tiles is set at run time, in the
style of the CuTe DSL's persistent dense GEMMs: the host builds the tile scheduler's parameters
from C's shape (M is a runtime extent, so the tile count is a kernel argument), and each role
walks the tiles with `StaticPersistentTileScheduler` (`while work.is_valid_tile: ...;
advance_to_next_work()`). Warp 2 issues the TMA loads of each tile's K steps into a
`PipelineTmaUmma` ring, warp 1 the MMAs (it acquires an accumulator stage of a
`PipelineUmmaAsync` per tile and commits it), warp 0 is the epilogue (it waits for each
accumulator and releases it, every thread arriving). The phases of both rings run on across
tiles.

The frontend reads the scheduler's loop as a loop over the parameter `tiles` (the kernel read at
several tile counts and joined; the K loop inside rolls with ring slots `(2*t + k) % 2`), so
`check` explores 4 tiles and `prove` answers for every number of tiles:

    barrierproof prove examples/cute/persistent_every_tile.py::persistent_tiles
    ... proved (proved for all tiles with (tiles >= 1): ...)

One block walks every tile here; a grid of B blocks gives block b the tiles b, b + B, ...: the
same program for another tile count, and the blocks share no barrier (no cluster). With K also
set at run time (`persistent_tiles_and_k`) the ring slots of the K loop are `(t * k_tiles + k)
% stages`, a product of the two runtime values: the frontend reads the kernel at a grid of both
(model/cute/counts.py) and joins the runs into nested loops over the parameters `tiles` and
`k_tiles`; `prove` flattens the K steps of all tiles into one loop over `tiles * k_tiles`
positions (checker/symbolic/nested.py) and proves the per-tile accumulator ring apart
(pertile.py), for every tile count and K:

    barrierproof prove examples/cute/persistent_every_tile.py::persistent_tiles_and_k
    ... proved (proved for all tiles, k_tiles with (tiles >= 1) and (k_tiles >= 1): ...)

Its twin `persistent_tiles_and_k_ab_state_per_tile` makes the MMA warp's K-ring state anew for
each tile while the TMA warp's runs on across tiles: from the second tile on, the consumer waits
on the slot and parity of the first tile's K steps.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

from _tma import ring_in_smem, staged_tiles

TILE_M, TILE_N, TILE_K = 128, 128, 64
AB_STAGES, ACC_STAGES = 2, 2
EPILOGUE_WARP, MMA_WARP, TMA_WARP = 0, 1, 2

EXPECT = {
    "persistent_tiles": "verified",
    "persistent_tiles_acc_never_advanced": "violation:BP101",
    "persistent_tiles_tx_doubled": "violation:BP130",
    "persistent_tiles_acc_counted_in_warps": "violation:BP121",
    "persistent_tiles_and_k": "verified",
    "persistent_tiles_and_k_ab_state_per_tile": "violation:BP101",
}


@cute.struct
class SharedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * AB_STAGES]
    acc_bars: cute.struct.MemRange[cutlass.Int64, 2 * ACC_STAGES]


@cute.kernel
def gemm_kernel(tma_atom: cute.CopyAtom, mA: cute.Tensor, a_smem_layout: cute.ComposedLayout,
                schedule: utils.PersistentTileSchedulerParams, tx_scale: cutlass.Constexpr,
                advance_acc: cutlass.Constexpr, acc_consumers: cutlass.Constexpr,
                ab_state_per_tile: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.utils.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA, stage_bytes = ring_in_smem(smem, a_smem_layout)
    ab_pipeline = pipeline.PipelineTmaUmma.create(
        barrier_storage=storage.ab_bars.data_ptr(), num_stages=AB_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        tx_count=stage_bytes * tx_scale)
    acc_pipeline = pipeline.PipelineUmmaAsync.create(
        barrier_storage=storage.acc_bars.data_ptr(), num_stages=ACC_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, acc_consumers))
    gA = cute.local_tile(mA, (TILE_M, TILE_K), (0, None))
    k_tiles = cute.size(gA, mode=[2])
    tAsA, tAgA = cpasync.tma_partition(tma_atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    scheduler = utils.StaticPersistentTileScheduler.create(schedule, cute.arch.block_idx(),
                                                           cute.arch.grid_dim())

    if warp_idx == TMA_WARP:
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, AB_STAGES)
        work = scheduler.initial_work_tile_info()
        while work.is_valid_tile:
            for k in cutlass.range(k_tiles):
                ab_pipeline.producer_acquire(ab_state)
                cute.copy(tma_atom, tAgA[(None, k)], tAsA[(None, ab_state.index)],
                          tma_bar_ptr=ab_pipeline.producer_get_barrier(ab_state))
                ab_state.advance()
            scheduler.advance_to_next_work()
            work = scheduler.get_current_work()
        ab_pipeline.producer_tail(ab_state)

    if warp_idx == MMA_WARP:
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, AB_STAGES)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ACC_STAGES)
        work = scheduler.initial_work_tile_info()
        while work.is_valid_tile:
            if cutlass.const_expr(ab_state_per_tile):
                ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer,
                                                        AB_STAGES)
            acc_pipeline.producer_acquire(acc_state)
            for k in cutlass.range(k_tiles):
                ab_pipeline.consumer_wait(ab_state)
                # the tcgen05 MMAs on stage ab_state.index would be issued here
                ab_pipeline.consumer_release(ab_state)
                ab_state.advance()
            acc_pipeline.producer_commit(acc_state)
            acc_state.advance()
            scheduler.advance_to_next_work()
            work = scheduler.get_current_work()
        acc_pipeline.producer_tail(acc_state)

    if warp_idx == EPILOGUE_WARP:
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ACC_STAGES)
        work = scheduler.initial_work_tile_info()
        while work.is_valid_tile:
            acc_pipeline.consumer_wait(acc_state)
            # tcgen05.ld of the accumulator stage, then the stores to C
            acc_pipeline.consumer_release(acc_state)
            if cutlass.const_expr(advance_acc):
                acc_state.advance()
            scheduler.advance_to_next_work()
            work = scheduler.get_current_work()


@cute.jit
def gemm_host(mA: cute.Tensor, mC: cute.Tensor, tx_scale: cutlass.Constexpr,
              advance_acc: cutlass.Constexpr, acc_consumers: cutlass.Constexpr,
              ab_state_per_tile: cutlass.Constexpr):
    a_smem_layout, tma_atom, tma_tensor = staged_tiles(mA, TILE_M, TILE_K, AB_STAGES)
    tiles_mn = cute.ceil_div(mC.shape, (TILE_M, TILE_N))
    schedule = utils.PersistentTileSchedulerParams((tiles_mn[0], tiles_mn[1], 1), (1, 1, 1))
    gemm_kernel(tma_atom, tma_tensor, a_smem_layout, schedule, tx_scale, advance_acc,
                acc_consumers, ab_state_per_tile).launch(grid=[1, 1, 1],
                                                         block=[32 * (TMA_WARP + 1), 1, 1])


def _compile(tx_scale=1, advance_acc=True, acc_consumers=32, runtime_k=False,
             ab_state_per_tile=False):
    k = cute.sym_int() if runtime_k else TILE_K * 2
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k), stride_order=(1, 0))
    mC = make_fake_compact_tensor(cutlass.Float16, (cute.sym_int(), TILE_N), stride_order=(1, 0))
    return cute.compile(gemm_host, mA, mC, tx_scale, advance_acc, acc_consumers,
                        ab_state_per_tile)


def persistent_tiles():
    """M set at run time (one row of tiles along N), two K steps per tile: every tile count."""
    return _compile()


def persistent_tiles_acc_never_advanced():
    """The epilogue never advances its accumulator state: every wait is on stage 0 with the
    first phase's parity, so a wait can return for the third commit of stage 0 or for the
    first one again (parity aliasing)."""
    return _compile(advance_acc=False)


def persistent_tiles_tx_doubled():
    """expect_tx asks for two tiles per stage; one lands."""
    return _compile(tx_scale=2)


def persistent_tiles_acc_counted_in_warps():
    """The accumulator's consumer group is sized in warps (1), but PipelineUmmaAsync's
    consumer_release arrives from every epilogue thread: 31 arrivals too many per release."""
    return _compile(acc_consumers=1)


def persistent_tiles_and_k():
    """K set at run time as well: two runtime trip counts, the tile loop around the K loop."""
    return _compile(runtime_k=True)


def persistent_tiles_and_k_ab_state_per_tile():
    """The MMA warp starts its K ring at stage 0, phase 0 on every tile; the TMA warp does not.
    With one K step a tile, the second tile's wait on stage 0 with the first phase's parity
    can return on the first tile's load (parity aliasing)."""
    return _compile(runtime_k=True, ab_state_per_tile=True)
