"""A TMA ring read by SIMT consumers, then an epilogue staged in shared memory and stored by TMA.

A producer warp streams K tiles of A into a ring of swizzled shared-memory stages with
`PipelineTmaAsync`; two consumer warps wait for each stage, each thread copies its own row of
the stage into registers (`cute.autovec_copy`), and the warp releases the stage. After the
mainloop every consumer thread writes its row of an output tile `sC` in shared memory, the
consumers make the writes visible to the async proxy, meet on a named barrier, and one elected
thread stores the tile to global memory with a TMA store, then waits for the bulk group to
finish reading `sC` before the kernel exits.

The bug variants: the consumers release a stage before they read it (the producer may refill
it under them), the producer refills a stage without waiting for its release, and the epilogue
exits with its TMA store still reading `sC`.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

from _tma import ring_in_smem, staged_tiles

TILE_M, TILE_K = 64, 64
CONSUMER_WARPS = 2                      # one row of the tile per consumer thread
PRODUCER_WARP = CONSUMER_WARPS
EPILOGUE_BARRIER = 1

EXPECT = {
    "ring_reads": "verified",
    "ring_reads_released_before_read": "violation:BP200",
    "ring_reads_refill_without_acquire": "violation:BP200",
    "ring_reads_store_not_drained": "violation:BP105",
}


@cute.struct
class SharedStorage:
    ring_bars: cute.struct.MemRange[cutlass.Int64, 2 * 4]


@cute.kernel
def ring_reads_kernel(tma_a: cute.CopyAtom, mA: cute.Tensor, a_layout: cute.ComposedLayout,
                      tma_c: cute.CopyAtom, mC: cute.Tensor, c_layout: cute.Layout,
                      stages: cutlass.Constexpr, release_first: cutlass.Constexpr,
                      acquire: cutlass.Constexpr, drain: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA, stage_bytes = ring_in_smem(smem, a_layout)
    sC = smem.allocate_tensor(cutlass.Float16, c_layout, byte_alignment=128)
    ring = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.ring_bars.data_ptr(),
        num_stages=stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_WARPS),
        tx_count=stage_bytes,
    )
    epilogue = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER,
                                     num_threads=32 * CONSUMER_WARPS)
    gA = cute.local_tile(mA, (TILE_M, TILE_K), (0, None))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))

    if warp_idx == PRODUCER_WARP:
        write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        for k in cutlass.range(k_tiles):
            if cutlass.const_expr(acquire):
                ring.producer_acquire(write)
            else:
                # waits for its own last copy into the stage to land (the full barrier)
                # instead of the consumers' release (the empty barrier), then re-arms it
                cute.arch.mbarrier_wait(ring.producer_get_barrier(write), write.phase)
                with cute.arch.elect_one():
                    cute.arch.mbarrier_arrive_and_expect_tx(
                        ring.producer_get_barrier(write), stage_bytes)
            cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, write.index)],
                      tma_bar_ptr=ring.producer_get_barrier(write))
            write.advance()
        if cutlass.const_expr(acquire):
            ring.producer_tail(write)

    if warp_idx < CONSUMER_WARPS:
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        row = cute.make_fragment_like(sA[(tidx, None, 0)])
        for k in cutlass.range(k_tiles):
            ring.consumer_wait(read)
            if cutlass.const_expr(release_first):
                ring.consumer_release(read)
            cute.autovec_copy(sA[(tidx, None, read.index)], row)
            if cutlass.const_expr(not release_first):
                ring.consumer_release(read)
            read.advance()
        # the epilogue: each thread's row of the output tile, then one TMA store of it
        cute.autovec_copy(row, sC[(tidx, None)])
        cute.arch.fence_proxy("async.shared", space="cta")
        epilogue.arrive_and_wait()
        if warp_idx == 0:
            gC = cute.local_tile(mC, (TILE_M, TILE_K), (0, 0))
            tCsC, tCgC = cpasync.tma_partition(tma_c, 0, cute.make_layout(1),
                                               cute.group_modes(sC, 0, 2),
                                               cute.group_modes(gC, 0, 2))
            with cute.arch.elect_one():
                cute.copy(tma_c, tCsC, tCgC)
                cute.arch.cp_async_bulk_commit_group()
                if cutlass.const_expr(drain):
                    cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.jit
def ring_reads_host(mA: cute.Tensor, mC: cute.Tensor, stages: cutlass.Constexpr,
                    release_first: cutlass.Constexpr,
                    acquire: cutlass.Constexpr, drain: cutlass.Constexpr):
    a_layout, tma_a, tma_tensor = staged_tiles(mA, TILE_M, TILE_K, stages)
    c_layout = cute.make_ordered_layout((TILE_M, TILE_K), order=(1, 0))
    tma_c, tma_c_tensor = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), mC,
                                                      c_layout, (TILE_M, TILE_K))
    ring_reads_kernel(tma_a, tma_tensor, a_layout, tma_c, tma_c_tensor, c_layout, stages,
                      release_first, acquire, drain).launch(
        grid=[1, 1, 1], block=[32 * (CONSUMER_WARPS + 1), 1, 1])


def _compile(stages=2, release_first=False, acquire=True, drain=True):
    k = cute.sym_int()                      # A's K, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k),
                                  stride_order=(1, 0))
    mC = make_fake_compact_tensor(cutlass.Float16, (TILE_M, TILE_K), stride_order=(1, 0))
    return cute.compile(ring_reads_host, mA, mC, stages, release_first, acquire,
                        drain, options="--generate-line-info")


def ring_reads():
    """Each consumer thread copies its row of a stage into registers between consumer_wait and
    consumer_release; the epilogue's TMA store is waited for (bulk wait_group 0) before exit."""
    return _compile()


def ring_reads_released_before_read():
    """The consumers release the stage, then read it: the producer's next TMA copy into that
    stage may land while they are still reading it."""
    return _compile(release_first=True)


def ring_reads_refill_without_acquire():
    """The producer waits for its previous copy into a stage to land, not for the consumers to
    release it (no producer_acquire): it refills the stage while they may still be reading it."""
    return _compile(acquire=False)


def ring_reads_store_not_drained():
    """The elected thread commits the epilogue's TMA store and exits without
    cp_async_bulk_wait_group: the store may still be reading `sC` when the block's shared
    memory is released."""
    return _compile(drain=False)
