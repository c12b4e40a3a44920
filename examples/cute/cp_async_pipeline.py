"""An Ampere-style load mainloop on `cutlass.pipeline.PipelineCpAsync`: a producer warp fills a
ring of shared-memory stages with cp.async copies and commits each stage with
`cp.async.mbarrier.arrive.noinc` from every thread (an asynchronous arrival once that thread's
copies are done, which the full barrier counts: 32 per stage); a consumer warp waits for each
stage and releases it, every thread arriving on the empty barrier. The producer drains with its
tail.

Each target compiles the kernel on the CPU; the bug variants change one knob of it.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline

STAGES, K_TILES = 2, 5

EXPECT = {
    "cp_async_ring": "verified",
    "cp_async_ring_counts_one_producer": "violation:BP101",
    "cp_async_ring_counts_two_warps": "violation:BP100",
}


@cute.kernel
def cp_async_kernel(producers: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.utils.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * STAGES)
    ring = pipeline.PipelineCpAsync.create(
        barrier_storage=bars, num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, producers),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(K_TILES):
            ring.producer_acquire(put)
            # the cp.async copies of stage put.index would be issued here
            ring.producer_commit(put)
            put.advance()
        ring.producer_tail(put)
    if warp == 1:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        for k in cutlass.range(K_TILES):
            ring.consumer_wait(get)
            ring.consumer_release(get)
            get.advance()


@cute.jit
def cp_async_host(producers: cutlass.Constexpr):
    cp_async_kernel(producers).launch(grid=[1, 1, 1], block=[64, 1, 1])


def cp_async_ring():
    return cute.compile(cp_async_host, 32)


def cp_async_ring_counts_one_producer():
    """The producer group is sized 1, but each of the warp's 32 threads makes its own
    asynchronous arrival: each completes a phase of the full barrier, so the consumer's wait
    can return for the third completion as well as the first (parity aliasing)."""
    return cute.compile(cp_async_host, 1)


def cp_async_ring_counts_two_warps():
    """The producer group is sized for two warps (64 threads) while one warp commits: the
    full barriers never complete and the consumer waits forever."""
    return cute.compile(cp_async_host, 64)
