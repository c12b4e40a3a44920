"""A single-partition Blackwell matmul in Gluon, software pipelined: STAGES - 1 k-tiles are in
flight ahead of the MMA, each MMA releases its slot through its completion barrier
(`tcgen05_mma(..., mbarriers=[mma_bars[s]])`), and the load of tile k + STAGES - 1 first waits
for the MMA that last read that slot (k - 1). The last wait drains the final MMA.

Without that wait (`wait_for_mma=False`), the TMA load overwrites a slot the previous MMA may
still be reading: a shared-memory race.

    barrierproof check examples/gluon/tcgen05_pipeline.py
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from barrierproof.model.gluon import Launch, tensor_desc


@gluon.jit
def issue_loads(a_desc, b_desc, a_bufs, b_bufs, bar, k, pred):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma.async_load(a_desc, [0, k * BLOCK_K], bar, a_bufs, pred=pred)
    tma.async_load(b_desc, [0, k * BLOCK_K], bar, b_bufs, pred=pred)


@gluon.jit
def pipelined_matmul(a_desc, b_desc, K, STAGES: gl.constexpr, WAIT_FOR_MMA: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    load_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mma_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_bars.index(i), count=1)
        mbarrier.init(mma_bars.index(i), count=1)
    acc = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N],
                                 TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    k_tiles = gl.cdiv(K, BLOCK_K)

    for i in gl.static_range(STAGES - 1):
        issue_loads(a_desc, b_desc, a_bufs.index(i), b_bufs.index(i), load_bars.index(i), i,
                    i < k_tiles)
    for k in range(k_tiles):
        slot = k % STAGES
        mbarrier.wait(load_bars.index(slot), (k // STAGES) & 1)
        tcgen05_mma(a_bufs.index(slot), b_bufs.index(slot).permute((1, 0)), acc, use_acc=k > 0,
                    mbarriers=[mma_bars.index(slot)])
        ahead = k + STAGES - 1
        ahead_slot = ahead % STAGES
        if WAIT_FOR_MMA:       # the slot was last read by MMA k - 1
            mbarrier.wait(mma_bars.index(ahead_slot), ((k - 1) // STAGES) & 1, pred=k > 0)
        issue_loads(a_desc, b_desc, a_bufs.index(ahead_slot), b_bufs.index(ahead_slot),
                    load_bars.index(ahead_slot), ahead, ahead < k_tiles)
    last = k_tiles - 1
    mbarrier.wait(mma_bars.index(last % STAGES), (last // STAGES) & 1, pred=k_tiles > 0)


def _launch(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [128, 64]),
                K=512, STAGES=3, WAIT_FOR_MMA=True)
    args.update(knobs)
    return Launch(pipelined_matmul, args=args, num_warps=4, target="cuda:100")


pipelined = _launch()
pipelined_single_tile = _launch(K=64)
reload_before_mma_done = _launch(WAIT_FOR_MMA=False)

EXPECT = {
    "pipelined": "verified",
    "pipelined_single_tile": "verified",
    "reload_before_mma_done": "violation:BP200",
}
