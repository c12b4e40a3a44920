"""More CuTe DSL kernels in the style of CUTLASS's CuTe DSL examples: a producer warp that
stores a stage of shared memory with SIMT stores and hands it to a consumer warp through a
`PipelineAsync` ring, and two warps exchanging halves of a tile through a `NamedBarrier`;
each correct and with a bug of the kind the field reports. Checked by
tests/test_unseen_frontends.py against EXPECT (decided before running)."""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

ROWS, COLS, STAGES = 32, 8, 2

EXPECT = {
    "simt_ring": "verified",
    "simt_ring_releases_before_reading": "violation:BP200",
    "simt_ring_writes_before_acquire": "violation:BP200",
    "halves_exchanged": "verified",
    "halves_barrier_counts_one_warp": "violation:BP200",
}


# -- 1. a SIMT producer warp and a consumer warp share a two-stage ring (PipelineAsync) -----------

@cute.kernel
def simt_ring_kernel(gO: cute.Tensor, steps: cutlass.Constexpr, release_first: cutlass.Constexpr,
                     write_first: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * STAGES)
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ROWS, COLS, STAGES)),
                              byte_alignment=16)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=bars, num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(steps, unroll_full=True):
            if cutlass.const_expr(write_first):
                sA[(lane, 0, put.index)] = cutlass.Float32(k)
            ring.producer_acquire(put)
            if cutlass.const_expr(not write_first):
                sA[(lane, 0, put.index)] = cutlass.Float32(k)
            ring.producer_commit(put)
            put.advance()
        ring.producer_tail(put)
    if warp == 1:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        acc = cutlass.Float32(0.0)
        for k in cutlass.range(steps, unroll_full=True):
            ring.consumer_wait(get)
            if cutlass.const_expr(release_first):
                ring.consumer_release(get)
            acc = acc + sA[(lane, 0, get.index)]
            if cutlass.const_expr(not release_first):
                ring.consumer_release(get)
            get.advance()
        gO[lane] = acc


@cute.jit
def simt_ring_host(o: cute.Tensor, steps: cutlass.Constexpr, release_first: cutlass.Constexpr,
                   write_first: cutlass.Constexpr):
    simt_ring_kernel(o, steps, release_first, write_first).launch(grid=[1, 1, 1],
                                                                  block=[64, 1, 1])


def _simt_ring(steps=4, release_first=False, write_first=False):
    o = make_fake_compact_tensor(cutlass.Float32, (ROWS,))
    return cute.compile(simt_ring_host, o, steps, release_first, write_first,
                        options="--generate-line-info")


def simt_ring():
    return _simt_ring()


def simt_ring_releases_before_reading():
    """The consumer releases the stage, then reads it: the producer's next store into the
    stage may come first."""
    return _simt_ring(release_first=True)


def simt_ring_writes_before_acquire():
    """The producer stores into the stage before acquiring it: from the third step on, the
    consumer may still be reading what the stage held two steps before."""
    return _simt_ring(write_first=True)


# -- 2. two warps store their halves of a tile, meet at a named barrier, read the other half ----

@cute.kernel
def halves_kernel(gO: cute.Tensor, threads: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    sT = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, 32)), byte_alignment=16)
    meet = pipeline.NamedBarrier(barrier_id=1, num_threads=threads)
    sT[(warp, lane)] = cutlass.Float32(1.0)
    meet.arrive_and_wait()
    gO[(warp, lane)] = sT[(1 - warp, lane)]


@cute.jit
def halves_host(o: cute.Tensor, threads: cutlass.Constexpr):
    halves_kernel(o, threads).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _halves(threads):
    o = make_fake_compact_tensor(cutlass.Float32, (2, 32), stride_order=(1, 0))
    return cute.compile(halves_host, o, threads, options="--generate-line-info")


def halves_exchanged():
    return _halves(64)


def halves_barrier_counts_one_warp():
    """The named barrier counts 32 threads: each warp completes a phase of it alone and reads
    the other warp's half before that warp may have stored it."""
    return _halves(32)
