"""`PipelineAsync` between two warps whose lanes write and read the stages element by element,
over a number of steps given at run time (`steps: cutlass.Int32`): a relay on two stages whose
consumer skips its release after the last step ("nothing comes after it") -- harmless unless
the producer's tail waits for that release -- and a consumer taking the stages two at a time
on a ring of four (`pairs` pairs: its waits on `(2*p) % 4` and `(2*p + 1) % 4`).
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {
    "relay": "verified",
    # the producer's tail waits for the skipped release of the last stage
    "relay_last_release_skipped": "violation:BP100",
    # without the tail no wait needs that release: an mbarrier need not be drained at exit
    "relay_last_release_skipped_without_tail": "verified",
    "relay_release_before_read": "violation:BP200",
    "pairs": "verified",
    "pairs_released_before_second_read": "violation:BP200",
    # one more step than the consumer takes: the tail waits for a release that never comes
    "pairs_producer_one_extra": "violation:BP100",
}

RELAY_STAGES = 2
PAIR_STAGES = 4


@cute.kernel
def relay_kernel(out: cute.Tensor, steps: cutlass.Int32, skip_last: cutlass.Constexpr,
                 tail: cutlass.Constexpr, early: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * RELAY_STAGES)
    buf = smem.allocate_tensor(cutlass.Float32, cute.make_layout((32, RELAY_STAGES)), byte_alignment=16)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=bars, num_stages=RELAY_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, RELAY_STAGES)
        for i in cutlass.range(steps):
            ring.producer_acquire(put)
            buf[lane, put.index] = cutlass.Float32(i)
            ring.producer_commit(put)
            put.advance()
        if cutlass.const_expr(tail):
            ring.producer_tail(put)
    if warp == 1:
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, RELAY_STAGES)
        acc = cutlass.Float32(0)
        for i in cutlass.range(steps):
            ring.consumer_wait(get)
            if cutlass.const_expr(early):
                ring.consumer_release(get)
                acc += buf[lane, get.index]
            else:
                acc += buf[lane, get.index]
                if cutlass.const_expr(skip_last):
                    if i < steps - 1:          # "nothing comes after the last one"
                        ring.consumer_release(get)
                else:
                    ring.consumer_release(get)
            get.advance()
        out[lane] = acc


@cute.jit
def relay_host(out: cute.Tensor, steps: cutlass.Int32, skip_last: cutlass.Constexpr,
               tail: cutlass.Constexpr, early: cutlass.Constexpr):
    relay_kernel(out, steps, skip_last, tail, early).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _compile_relay(skip_last=False, tail=True, early=False):
    out = make_fake_compact_tensor(cutlass.Float32, (32,))
    return cute.compile(relay_host, out, cutlass.Int32(4), skip_last, tail, early)


def relay():
    return _compile_relay()


def relay_last_release_skipped():
    return _compile_relay(skip_last=True)


def relay_last_release_skipped_without_tail():
    return _compile_relay(skip_last=True, tail=False)


def relay_release_before_read():
    return _compile_relay(early=True)


@cute.kernel
def pairs_kernel(out: cute.Tensor, pairs: cutlass.Int32, early: cutlass.Constexpr,
                 extra: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * PAIR_STAGES)
    buf = smem.allocate_tensor(cutlass.Float32, cute.make_layout((32, PAIR_STAGES)), byte_alignment=16)
    ring = pipeline.PipelineAsync.create(
        barrier_storage=bars, num_stages=PAIR_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    if warp == 0:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, PAIR_STAGES)
        for i in cutlass.range(2 * pairs + extra):
            ring.producer_acquire(put)
            buf[lane, put.index] = cutlass.Float32(i)
            ring.producer_commit(put)
            put.advance()
        ring.producer_tail(put)
    if warp == 1:
        first = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, PAIR_STAGES)
        acc = cutlass.Float32(0)
        for p in cutlass.range(pairs):
            second = first.clone()
            second.advance()
            ring.consumer_wait(first)
            ring.consumer_wait(second)
            acc += buf[lane, first.index]
            if cutlass.const_expr(early):
                ring.consumer_release(first)
                ring.consumer_release(second)
                acc += buf[lane, second.index]
            else:
                acc += buf[lane, second.index]
                ring.consumer_release(first)
                ring.consumer_release(second)
            first.advance()
            first.advance()
        out[lane] = acc


@cute.jit
def pairs_host(out: cute.Tensor, pairs: cutlass.Int32, early: cutlass.Constexpr,
               extra: cutlass.Constexpr):
    pairs_kernel(out, pairs, early, extra).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _compile_pairs(early=False, extra=0):
    out = make_fake_compact_tensor(cutlass.Float32, (32,))
    return cute.compile(pairs_host, out, cutlass.Int32(3), early, extra)


def pairs():
    return _compile_pairs()


def pairs_released_before_second_read():
    return _compile_pairs(early=True)


def pairs_producer_one_extra():
    return _compile_pairs(extra=1)
