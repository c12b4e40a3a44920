"""Third set of CuTe DSL kernels in the style of CUTLASS's CuTe DSL examples: a `PipelineAsync`
ring between a producer warp and two consumer warps that both read every stage, and a
persistent loop over tiles whose producer and consumer pipeline states run on across tiles;
each correct and with a bug of the kind the field reports. Checked by
tests/test_unseen_frontends.py against EXPECT (decided before running)."""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

ROWS, COLS, STAGES = 32, 8, 2

EXPECT = {
    "two_readers": "verified",
    "two_readers_group_counts_one_warp": "violation:BP200",
    "persistent_states_carried": "verified",
    "persistent_states_reset_per_tile": "violation:BP100",
}


# -- 1. one producer warp, two consumer warps reading every stage of a PipelineAsync ring ------

@cute.kernel
def two_readers_kernel(gO: cute.Tensor, steps: cutlass.Constexpr, readers: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * STAGES)
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ROWS, STAGES)),
                              byte_alignment=16)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=bars, num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * readers))
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(steps, unroll_full=True):
            ring.producer_acquire(put)
            sA[(lane, put.index)] = cutlass.Float32(k)
            ring.producer_commit(put)
            put.advance()
        ring.producer_tail(put)
    if warp > 0:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        acc = cutlass.Float32(0.0)
        for k in cutlass.range(steps, unroll_full=True):
            ring.consumer_wait(get)
            acc = acc + sA[(lane, get.index)]
            ring.consumer_release(get)
            get.advance()
        gO[(warp - 1, lane)] = acc


@cute.jit
def two_readers_host(o: cute.Tensor, steps: cutlass.Constexpr, readers: cutlass.Constexpr):
    two_readers_kernel(o, steps, readers).launch(grid=[1, 1, 1], block=[96, 1, 1])


def _two_readers(readers):
    o = make_fake_compact_tensor(cutlass.Float32, (2, 32), stride_order=(1, 0))
    return cute.compile(two_readers_host, o, 4, readers, options="--generate-line-info")


def two_readers():
    return _two_readers(2)


def two_readers_group_counts_one_warp():
    """The consumer group is sized for one warp while two release each stage: the first
    warp's release completes the stage's `empty` phase, and the producer refills it while the
    second warp may still read it."""
    return _two_readers(1)


# -- 2. a persistent loop over tiles: the ring's states are made once, before the tile loop ----

@cute.kernel
def persistent_kernel(gO: cute.Tensor, tiles: cutlass.Constexpr, k_steps: cutlass.Constexpr,
                      reset: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * STAGES)
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ROWS, STAGES)),
                              byte_alignment=16)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=bars, num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for t in cutlass.range(tiles, unroll_full=True):
            if cutlass.const_expr(reset):
                put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            for k in cutlass.range(k_steps, unroll_full=True):
                ring.producer_acquire(put)
                sA[(lane, put.index)] = cutlass.Float32(t + k)
                ring.producer_commit(put)
                put.advance()
        ring.producer_tail(put)
    if warp == 1:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        for t in cutlass.range(tiles, unroll_full=True):
            if cutlass.const_expr(reset):
                get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
            acc = cutlass.Float32(0.0)
            for k in cutlass.range(k_steps, unroll_full=True):
                ring.consumer_wait(get)
                acc = acc + sA[(lane, get.index)]
                ring.consumer_release(get)
                get.advance()
            gO[(t, lane)] = acc


@cute.jit
def persistent_host(o: cute.Tensor, tiles: cutlass.Constexpr, k_steps: cutlass.Constexpr,
                    reset: cutlass.Constexpr):
    persistent_kernel(o, tiles, k_steps, reset).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _persistent(reset):
    o = make_fake_compact_tensor(cutlass.Float32, (2, 32), stride_order=(1, 0))
    return cute.compile(persistent_host, o, 2, 3, reset, options="--generate-line-info")


def persistent_states_carried():
    return _persistent(False)


def persistent_states_reset_per_tile():
    """Both states restart on every tile while the barriers keep their phases: with 3 steps on
    2 stages, stage 1 is used once per tile. In tile 1 the consumer's parity-0 wait on stage 1
    passes on tile 0's completion (it reads the stale stage: the producer is held back on
    `empty` until that release, so no race), and the producer's tail, restarted too, waits for
    a parity `empty` already shows and hangs (BP100)."""
    return _persistent(True)
