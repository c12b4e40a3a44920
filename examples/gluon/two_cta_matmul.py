"""A 2-CTA Blackwell matmul in Gluon (num_ctas=2, `TensorMemoryLayout(..., two_ctas=True)`): the
pair of CTAs computes one 256-row tile, each CTA holding half of A (CTA layout [[1, 0]]), half
of B ([[0, 1]]) and half of the accumulator in its tensor memory. The leader CTA issues each
2-CTA MMA, which reads both CTAs' shared-memory operands; its completion arrives on the
`mma_bars` of both CTAs. The k-tiles stream through a STAGES-deep ring, loaded STAGES - 1 ahead.

The load barriers are pair barriers (`mbarrier.allocate_mbarrier(two_ctas=True)`): each CTA
expects its own bytes (`nbytes_per_cta`) and its TMA loads complete on the leader's barrier, so
the leader issues the MMA only once both halves have landed.

The field bugs: per-CTA load barriers (`two_ctas` left out): the leader waits for its own half
only and its MMA reads the follower's half while that is still being written; and an expect of
the whole pair's bytes per CTA (`block_type.nbytes` for `nbytes_per_cta`): the leader's barrier
waits for twice the bytes that ever arrive.

    barrierproof check examples/gluon/two_cta_matmul.py
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from barrierproof.model.gluon import Launch, tensor_desc


@gluon.jit
def load_k_tile(a_desc, b_desc, a_buf, b_buf, bar, k, pred, PAIR_BYTES: gl.constexpr):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    if PAIR_BYTES:
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    else:
        nbytes: gl.constexpr = a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
    mbarrier.expect(bar, nbytes, pred=pred)
    tma.async_load(a_desc, [0, k * BLOCK_K], bar, a_buf, pred=pred)
    tma.async_load(b_desc, [k * BLOCK_K, 0], bar, b_buf, pred=pred)


@gluon.jit
def two_cta_matmul(a_desc, b_desc, K, STAGES: gl.constexpr, PAIR_BARRIERS: gl.constexpr,
                   PAIR_BYTES: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    # the leader waits on the load barriers before it issues the pair's MMA
    load_bars = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=PAIR_BARRIERS)
    mma_bars = mbarrier.allocate_mbarrier(batch=STAGES)     # the MMA arrives in both CTAs
    for i in gl.static_range(STAGES):
        mbarrier.init(load_bars.index(i), count=1)
        mbarrier.init(mma_bars.index(i), count=1)
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(BLOCK_M // 2, BLOCK_N), col_stride=1,
                                                  cga_layout=[[1, 0]], two_ctas=True)
    acc = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N], acc_layout)
    k_tiles = gl.cdiv(K, BLOCK_K)

    for i in gl.static_range(STAGES - 1):
        load_k_tile(a_desc, b_desc, a_bufs.index(i), b_bufs.index(i), load_bars.index(i), i,
                    i < k_tiles, PAIR_BYTES)
    for k in range(k_tiles):
        slot = k % STAGES
        mbarrier.wait(load_bars.index(slot), (k // STAGES) & 1)
        tcgen05_mma(a_bufs.index(slot), b_bufs.index(slot), acc, use_acc=k > 0,
                    mbarriers=[mma_bars.index(slot)])
        ahead = k + STAGES - 1
        ahead_slot = ahead % STAGES
        # every CTA waits for the MMA that last read its half of the slot (k - 1)
        mbarrier.wait(mma_bars.index(ahead_slot), ((k - 1) // STAGES) & 1, pred=k > 0)
        load_k_tile(a_desc, b_desc, a_bufs.index(ahead_slot), b_bufs.index(ahead_slot),
                    load_bars.index(ahead_slot), ahead, ahead < k_tiles, PAIR_BYTES)
    last = k_tiles - 1
    mbarrier.wait(mma_bars.index(last % STAGES), (last // STAGES) & 1, pred=k_tiles > 0)


def _split(shape: list, basis: list):
    """A descriptor whose tile the two CTAs split along the dimension of `basis`."""
    layout = gl.NVMMASharedLayout.get_default_for(shape, gl.float16, cga_layout=[basis])
    return tensor_desc("fp16", shape, layout)


def _launch(**knobs):
    args = dict(a_desc=_split([256, 64], [1, 0]), b_desc=_split([64, 128], [0, 1]), K=320,
                STAGES=2, PAIR_BARRIERS=True, PAIR_BYTES=False)
    args.update(knobs)
    return Launch(two_cta_matmul, args=args, num_warps=4, num_ctas=2, target="cuda:100")


pair_matmul = _launch()
pair_matmul_three_stages = _launch(STAGES=3)
load_barriers_per_cta = _launch(PAIR_BARRIERS=False)
expect_pair_bytes = _launch(PAIR_BYTES=True)

EXPECT = {
    "pair_matmul": "verified",
    "pair_matmul_three_stages": "verified",
    "load_barriers_per_cta": "violation:BP200",
    "expect_pair_bytes": "violation:BP130",
}
