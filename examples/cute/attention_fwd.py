"""An attention forward pass in the style of FlashAttention-4 on the CuTe DSL, one warp per role
(FA4 gives softmax and correction a warpgroup each): a load warp streams K and V tiles into a
`PipelineTmaUmma` ring; the MMA warp computes S = Q K^T into tensor memory and hands it to the
softmax warp through a one-stage `PipelineUmmaAsync`, then waits for P on a `PipelineAsync` the
softmax warp fills and computes O += P V. Each new row maximum is passed to the correction warp
on named barrier 3 (softmax arrives, correction syncs), and the correction warp hands back on
named barrier 4 once O is rescaled, so the softmax warp cannot run a tile ahead.

Each target compiles the kernel on the CPU; the bug variants change one knob of it.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

from _tma import ring_in_smem, staged_tiles

TILE_N, HEAD_DIM = 64, 64
KV_STAGES = 2
SOFTMAX_WARP, CORRECTION_WARP, MMA_WARP, LOAD_WARP = 0, 1, 2, 3
MAX_READY, O_RESCALED = 3, 4                 # named barrier ids: softmax <-> correction

EXPECT = {
    "attention": "verified",
    "softmax_runs_ahead": "violation:BP144",
    "p_released_by_one_lane": "violation:BP100",
}


@cute.struct
class SharedStorage:
    kv_bars: cute.struct.MemRange[cutlass.Int64, 2 * KV_STAGES]
    s_bars: cute.struct.MemRange[cutlass.Int64, 2]
    p_bars: cute.struct.MemRange[cutlass.Int64, 2]


@cute.kernel
def attention_kernel(tma_atom: cute.CopyAtom, mKV: cute.Tensor, kv_layout: cute.ComposedLayout,
                     kv_blocks: cutlass.Constexpr, hand_back: cutlass.Constexpr,
                     p_release_elected: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.utils.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sKV, tile_bytes = ring_in_smem(smem, kv_layout)

    kv = pipeline.PipelineTmaUmma.create(
        barrier_storage=storage.kv_bars.data_ptr(), num_stages=KV_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1), tx_count=tile_bytes)
    s_ready = pipeline.PipelineUmmaAsync.create(
        barrier_storage=storage.s_bars.data_ptr(), num_stages=1,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    p_ready = pipeline.PipelineAsync.create(
        barrier_storage=storage.p_bars.data_ptr(), num_stages=1,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    max_ready = pipeline.NamedBarrier(barrier_id=MAX_READY, num_threads=64)
    o_rescaled = pipeline.NamedBarrier(barrier_id=O_RESCALED, num_threads=64)

    gKV = cute.local_tile(mKV, (TILE_N, HEAD_DIM), (None, 0))
    tsKV, tgKV = cute.nvgpu.cpasync.tma_partition(
        tma_atom, 0, cute.make_layout(1), cute.group_modes(sKV, 0, 2),
        cute.group_modes(gKV, 0, 2))

    if warp_idx == LOAD_WARP:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, KV_STAGES)
        for j in cutlass.range(2 * kv_blocks):         # K_j then V_j
            kv.producer_acquire(state)
            cute.copy(tma_atom, tgKV[(None, j)], tsKV[(None, state.index)],
                      tma_bar_ptr=kv.producer_get_barrier(state))
            state.advance()
        kv.producer_tail(state)

    if warp_idx == MMA_WARP:
        kv_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, KV_STAGES)
        s_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
        p_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        for _j in cutlass.range(kv_blocks):
            kv.consumer_wait(kv_state)                 # K_j landed
            s_ready.producer_acquire(s_state)          # softmax is done with the last S
            # S = Q K_j^T (tcgen05.mma into tensor memory)
            s_ready.producer_commit(s_state)
            s_state.advance()
            kv.consumer_release(kv_state)
            kv_state.advance()
            kv.consumer_wait(kv_state)                 # V_j landed
            p_ready.consumer_wait(p_state)
            # O += P V_j
            if cutlass.const_expr(p_release_elected):
                with cute.arch.elect_one():
                    p_ready.consumer_release(p_state)
            else:
                p_ready.consumer_release(p_state)
            p_state.advance()
            kv.consumer_release(kv_state)
            kv_state.advance()
        s_ready.producer_tail(s_state)

    if warp_idx == SOFTMAX_WARP:
        s_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        p_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
        for _j in cutlass.range(kv_blocks):
            s_ready.consumer_wait(s_state)
            # row maximum and exponentials of S (tcgen05.ld)
            s_ready.consumer_release(s_state)
            s_state.advance()
            max_ready.arrive()                         # the correction warp may rescale O
            if cutlass.const_expr(hand_back):
                o_rescaled.arrive_and_wait()
            p_ready.producer_acquire(p_state)
            # P into tensor memory (tcgen05.st)
            p_ready.producer_commit(p_state)
            p_state.advance()
        p_ready.producer_tail(p_state)

    if warp_idx == CORRECTION_WARP:
        for _j in cutlass.range(kv_blocks):
            max_ready.arrive_and_wait()
            # O *= exp(old max - new max)
            if cutlass.const_expr(hand_back):
                o_rescaled.arrive()


@cute.jit
def attention_host(mKV: cute.Tensor, kv_blocks: cutlass.Constexpr, hand_back: cutlass.Constexpr,
                   p_release_elected: cutlass.Constexpr):
    kv_layout, tma_atom, tma_tensor = staged_tiles(mKV, TILE_N, HEAD_DIM, KV_STAGES)
    attention_kernel(tma_atom, tma_tensor, kv_layout, kv_blocks, hand_back,
                     p_release_elected).launch(grid=[1, 1, 1], block=[32 * 4, 1, 1])


def _compile(kv_blocks=2, hand_back=True, p_release_elected=False):
    mKV = make_fake_compact_tensor(cutlass.Float16, (2 * kv_blocks * TILE_N, HEAD_DIM),
                                   stride_order=(1, 0))
    return cute.compile(attention_host, mKV, kv_blocks, hand_back, p_release_elected)


def attention():
    """Two K/V blocks: S, P and the correction hand-off each turn over twice."""
    return _compile()


def softmax_runs_ahead():
    """The correction warp never hands back on barrier 4: the softmax warp's arrive on
    barrier 3 does not wait, so it runs a tile ahead and exits while the correction warp's
    last phase of barrier 3 still counts it."""
    return _compile(hand_back=False)


def p_released_by_one_lane():
    """The MMA warp releases P from an elected lane, but PipelineAsync's consumer group counts
    its 32 threads: P's empty barrier never completes and the softmax warp waits forever."""
    return _compile(p_release_elected=True)
