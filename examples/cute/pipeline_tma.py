"""A Hopper-style warp-specialized mainloop on `cutlass.pipeline.PipelineTmaAsync`: one TMA
producer warp streams K tiles of A into a ring of shared-memory stages; a warpgroup of four
consumer warps waits for each stage and releases it. The consumer's arrivals are per warp
(PipelineTmaAsync signals from lane 0 of each consumer warp), so the empty barriers expect one
arrival per consumer warp. The Blackwell form (`PipelineTmaUmma`) has one MMA warp as the
consumer, which releases a stage with a tcgen05.commit from an elected lane: one arrival.

Each target compiles the kernel on the CPU; the bug variants change one knob of it.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

from _tma import ring_in_smem, staged_tiles

TILE_M, TILE_K = 64, 64
CONSUMER_WARPS = 4                      # the producer is the warp after the consumers

EXPECT = {
    "mainloop": "verified",
    "mainloop_one_stage": "verified",
    "mainloop_peeking": "verified",
    "consumer_count_in_threads": "violation:BP100",
    "release_wrong_slot": "violation:BP101",
    "tx_count_doubled": "violation:BP130",
    "consumer_starts_in_producer_phase": "violation:BP101",
    "mainloop_umma": "verified",
    "mainloop_umma_two_releases_expected": "violation:BP100",
}


@cute.struct
class SharedStorage:
    pipeline_bars: cute.struct.MemRange[cutlass.Int64, 2 * 4]


@cute.kernel
def mainloop_kernel(tma_atom: cute.CopyAtom, mA: cute.Tensor, a_smem_layout: cute.ComposedLayout,
                    stages: cutlass.Constexpr,
                    consumer_arrivals: cutlass.Constexpr, tx_scale: cutlass.Constexpr,
                    release_offset: cutlass.Constexpr,
                    consumer_phase_of_producer: cutlass.Constexpr, peek: cutlass.Constexpr,
                    consumer_warps: cutlass.Constexpr, umma: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA, stage_bytes = ring_in_smem(smem, a_smem_layout)
    tma_bytes = stage_bytes * tx_scale

    pipeline_kind = pipeline.PipelineTmaAsync
    if cutlass.const_expr(umma):
        pipeline_kind = pipeline.PipelineTmaUmma
    mainloop_pipeline = pipeline_kind.create(
        barrier_storage=storage.pipeline_bars.data_ptr(),
        num_stages=stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumer_arrivals),
        tx_count=tma_bytes,
    )
    gA = cute.local_tile(mA, (TILE_M, TILE_K), (0, None))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    tAsA, tAgA = cpasync.tma_partition(tma_atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))

    if warp_idx == consumer_warps:
        producer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        for k in cutlass.range(k_tiles):
            mainloop_pipeline.producer_acquire(producer_state)
            cute.copy(tma_atom, tAgA[(None, k)], tAsA[(None, producer_state.index)],
                      tma_bar_ptr=mainloop_pipeline.producer_get_barrier(producer_state))
            mainloop_pipeline.producer_commit(producer_state)
            producer_state.advance()
        mainloop_pipeline.producer_tail(producer_state)

    if warp_idx < consumer_warps:
        user = pipeline.PipelineUserType.Consumer
        if cutlass.const_expr(consumer_phase_of_producer):
            user = pipeline.PipelineUserType.Producer
        consumer_state = pipeline.make_pipeline_state(user, stages)
        full_status = cutlass.Boolean(1)
        if cutlass.const_expr(peek):
            # look at the first stage without blocking, as CUTLASS's mainloops do
            if consumer_state.count < k_tiles:
                full_status = mainloop_pipeline.consumer_try_wait(consumer_state)
        for k in cutlass.range(k_tiles):
            if cutlass.const_expr(peek):
                # blocks only when the peek found the stage not landed yet
                mainloop_pipeline.consumer_wait(consumer_state, full_status)
            else:
                mainloop_pipeline.consumer_wait(consumer_state)
            release_state = consumer_state.clone()
            if cutlass.const_expr(release_offset):
                release_state.advance()
            mainloop_pipeline.consumer_release(release_state)
            consumer_state.advance()
            if cutlass.const_expr(peek):
                # peek at the next stage while one is left: none after the last K tile
                full_status = cutlass.Boolean(1)
                if consumer_state.count < k_tiles:
                    full_status = mainloop_pipeline.consumer_try_wait(consumer_state)


@cute.jit
def mainloop_host(mA: cute.Tensor, stages: cutlass.Constexpr,
                  consumer_arrivals: cutlass.Constexpr, tx_scale: cutlass.Constexpr,
                  release_offset: cutlass.Constexpr,
                  consumer_phase_of_producer: cutlass.Constexpr, peek: cutlass.Constexpr,
                  consumer_warps: cutlass.Constexpr, umma: cutlass.Constexpr):
    a_smem_layout, tma_atom, tma_tensor = staged_tiles(mA, TILE_M, TILE_K, stages)
    mainloop_kernel(tma_atom, tma_tensor, a_smem_layout, stages, consumer_arrivals,
                    tx_scale, release_offset, consumer_phase_of_producer, peek,
                    consumer_warps, umma).launch(grid=[1, 1, 1],
                                                 block=[32 * (consumer_warps + 1), 1, 1])


def _compile(stages=2, consumer_arrivals=CONSUMER_WARPS, tx_scale=1,
             release_offset=0, consumer_phase_of_producer=False, peek=False,
             consumer_warps=CONSUMER_WARPS, umma=False):
    k = cute.sym_int()                      # K, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k), stride_order=(1, 0))
    return cute.compile(mainloop_host, mA, stages, consumer_arrivals, tx_scale,
                        release_offset, consumer_phase_of_producer, peek, consumer_warps,
                        umma, options="--generate-line-info")


def mainloop():
    """Two stages, four K tiles: every stage is refilled once, and the producer's tail waits
    for the last releases."""
    return _compile()


def mainloop_one_stage():
    """One stage: the producer waits for every release before the next load."""
    return _compile(stages=1)


def mainloop_peeking():
    """The consumers peek at each stage with consumer_try_wait before they need it (the first
    before the loop, the next after each release, none after the last K tile) and pass the
    answer to consumer_wait, which blocks only when the peek failed, as CUTLASS's mainloops do.
    The peek branches on K, so the frontend reads each comparison with K as a guard proved
    for every K (model/cute/guards.py), the last iteration peeled (no peek)."""
    return _compile(peek=True)


def consumer_count_in_threads():
    """The consumer group is sized in threads (128), but PipelineTmaAsync arrives once per
    consumer warp: the empty barriers never complete and the producer hangs."""
    return _compile(consumer_arrivals=32 * CONSUMER_WARPS)


def release_wrong_slot():
    """The consumers release the stage after the one they consumed: that stage's empty barrier
    completes a phase before the producer has waited for the one before it (its wait then
    aliases: parity cannot tell the two apart)."""
    return _compile(release_offset=1)


def tx_count_doubled():
    """expect_tx counts twice the bytes the TMA copy lands: the full barrier never completes."""
    return _compile(tx_scale=2)


def consumer_starts_in_producer_phase():
    """The consumer state starts with the producer's phase (1): its first wait passes on the
    fresh barrier before any copy landed, so its release completes an empty phase early."""
    return _compile(consumer_phase_of_producer=True)


def mainloop_umma():
    """Blackwell: PipelineTmaUmma, one MMA warp releasing each stage with a tcgen05.commit
    (one arrival, when the tensor core is done with the stage)."""
    return _compile(consumer_warps=1, consumer_arrivals=1, umma=True)


def mainloop_umma_two_releases_expected():
    """The UMMA consumer group is sized 2, but one elected lane commits once per stage: the
    empty barriers never complete and the producer hangs."""
    return _compile(consumer_warps=1, consumer_arrivals=2, umma=True)
