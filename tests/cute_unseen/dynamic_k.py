"""K from the problem shape, as CUTLASS's GEMMs take it: the A tensor's K extent is set at run
time (a fake tensor with a symbolic extent), the mainloop runs `k_tiles = cute.size(gA,
mode=[2])` steps of a two-stage `PipelineAsync` between a producer and a consumer warp, and
the producer drains with its tail. Both of the pipeline's barrier groups count 32 threads, so
they lie in one array of four (full barriers first).
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {
    "dynamic_k": "verified",
    "dynamic_k_consumer_skips_release": "violation:BP100",
    "dynamic_k_producer_group_of_one": "violation:BP121",
}


@cute.kernel
def dynamic_k_kernel(mA: cute.Tensor, release: cutlass.Constexpr,
                     producers: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 4)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=bars, num_stages=2,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, producers),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    gA = cute.local_tile(mA, (64, 64), (0, None))
    k_tiles = cute.size(gA, mode=[2])
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 2)
        for k in cutlass.range(k_tiles):
            ring.producer_acquire(put)
            ring.producer_commit(put)
            put.advance()
        ring.producer_tail(put)
    if warp == 1:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 2)
        for k in cutlass.range(k_tiles):
            ring.consumer_wait(get)
            if cutlass.const_expr(release):
                ring.consumer_release(get)
            get.advance()


@cute.jit
def dynamic_k_host(mA: cute.Tensor, release: cutlass.Constexpr, producers: cutlass.Constexpr):
    dynamic_k_kernel(mA, release, producers).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _compile(release=True, producers=32):
    mA = make_fake_compact_tensor(cutlass.Float16, (64, cute.sym_int()), stride_order=(1, 0))
    return cute.compile(dynamic_k_host, mA, release, producers)


def dynamic_k():
    return _compile()


def dynamic_k_consumer_skips_release():
    """The consumer never releases a stage: the producer's third acquire waits forever."""
    return _compile(release=False)


def dynamic_k_producer_group_of_one():
    """The producer group is sized 1, but every thread of the producer warp commits."""
    return _compile(producers=1)
