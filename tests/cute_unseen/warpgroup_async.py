"""`PipelineAsync` between two warpgroups: a producer warpgroup (128 threads) writes a stage
with ordinary stores and commits it, a consumer warpgroup (128 threads) reads and releases it;
three stages, five steps (the ring wraps once), threads counted
in both groups (a warpgroup's warps are four agents, not one).
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

WG = 128

EXPECT = {
    "warpgroups": "verified",
    "warpgroups_consumer_counted_in_warps": "violation:BP121",
    "warpgroups_phase_not_toggled": "violation:BP101",
    "warpgroups_producer_skips_acquire": "violation:BP101",
}


@cute.kernel
def wg_kernel(stages: cutlass.Constexpr, steps: cutlass.Constexpr,
              consumer_size: cutlass.Constexpr, toggle: cutlass.Constexpr,
              acquire: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    group = tidx // WG
    smem = cutlass.memory.SmemAllocator()
    ring_bars = smem.allocate_array(cutlass.Int64, 2 * stages)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=ring_bars,
        num_stages=stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, WG),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumer_size),
    )
    if group == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        for i in cutlass.range(steps):
            if cutlass.const_expr(acquire):
                ring.producer_acquire(put)
            ring.producer_commit(put)
            put.advance()
        ring.producer_tail(put)
    else:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        for i in cutlass.range(steps):
            if cutlass.const_expr(not toggle):     # a hand-made state: the phase never flips
                get = pipeline.PipelineState(stages, i, i % stages, cutlass.Int32(0))
            ring.consumer_wait(get)
            ring.consumer_release(get)
            get.advance()


@cute.jit
def wg_host(a: cute.Tensor, stages: cutlass.Constexpr, steps: cutlass.Constexpr,
            consumer_size: cutlass.Constexpr, toggle: cutlass.Constexpr,
            acquire: cutlass.Constexpr):
    wg_kernel(stages, steps, consumer_size, toggle, acquire).launch(
        grid=[1, 1, 1], block=[2 * WG, 1, 1])


def _compile(stages=3, steps=5, consumer_size=WG, toggle=True, acquire=True):
    a = make_fake_compact_tensor(cutlass.Float32, (16,))
    return cute.compile(wg_host, a, stages, steps, consumer_size, toggle, acquire)


def warpgroups():
    return _compile()


def warpgroups_consumer_counted_in_warps():
    """The consumer group is sized 4 (its warps) but every one of its 128 threads arrives."""
    return _compile(consumer_size=4)


def warpgroups_phase_not_toggled():
    """The consumer rebuilds its state each step with phase 0: on the second lap its wait
    passes on the completion it saw on the first, and it releases a stage the producer has
    not refilled."""
    return _compile(toggle=False)


def warpgroups_producer_skips_acquire():
    """The producer commits without acquiring the stage: it laps the ring and arrives on a
    full barrier whose phase the consumers have not consumed yet: when it completes two
    phases of a stage before the consumers look, their wait for the first (parity 0) sees
    parity 0 again and blocks forever."""
    return _compile(acquire=False)
