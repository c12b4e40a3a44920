"""`cutlass.pipeline.PipelineAsync` between thread groups: a producer warp fills each stage
with ordinary stores and commits it (every producer thread arrives on `full`); two consumer
warps wait and release it (every consumer thread arrives on `empty`). The groups are counted
in threads: 32 producer arrivals and 64 consumer arrivals per phase.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

CONSUMER_WARPS = 2

EXPECT = {
    "async_pipeline": "verified",
    "async_pipeline_consumers_counted_in_warps": "violation:BP121",
    "async_pipeline_without_producer_tail": "verified",
}


@cute.kernel
def async_pipeline_kernel(stages: cutlass.Constexpr, steps: cutlass.Constexpr,
                          consumer_arrivals: cutlass.Constexpr, tail: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * stages)
    handoff = pipeline.PipelineAsync.create(
        barrier_storage=bars,
        num_stages=stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumer_arrivals),
    )
    if warp_idx == CONSUMER_WARPS:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        for _ in cutlass.range(steps):
            handoff.producer_acquire(state)
            handoff.producer_commit(state)
            state.advance()
        if cutlass.const_expr(tail):
            handoff.producer_tail(state)
    if warp_idx < CONSUMER_WARPS:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        for _ in cutlass.range(steps):
            handoff.consumer_wait(state)
            handoff.consumer_release(state)
            state.advance()


@cute.jit
def async_pipeline_host(a: cute.Tensor, stages: cutlass.Constexpr, steps: cutlass.Constexpr,
                        consumer_arrivals: cutlass.Constexpr, tail: cutlass.Constexpr):
    async_pipeline_kernel(stages, steps, consumer_arrivals, tail).launch(
        grid=[1, 1, 1], block=[32 * (CONSUMER_WARPS + 1), 1, 1])


def _compile(stages=2, steps=3, consumer_arrivals=32 * CONSUMER_WARPS, tail=True):
    a = make_fake_compact_tensor(cutlass.Float32, (32,))
    return cute.compile(async_pipeline_host, a, stages, steps, consumer_arrivals, tail,
                        options="--generate-line-info")


def async_pipeline():
    """Two stages, three steps, the producer's tail waits for the last releases."""
    return _compile()


def async_pipeline_consumers_counted_in_warps():
    """The consumer group is sized in warps (2), but PipelineAsync arrives from every
    consumer thread: the empty barrier gets 64 arrivals on a count of 2."""
    return _compile(consumer_arrivals=CONSUMER_WARPS)


def async_pipeline_without_producer_tail():
    """The producer exits without producer_tail. In one block that is harmless: the
    consumers' last releases complete phases of `empty` that no wait needs (an mbarrier need
    not be drained before exit). The tail matters in a cluster, where a release may arrive
    on an exited peer block; clusters of several blocks are BP190 in this frontend."""
    return _compile(tail=False)
