"""A warp-specialized Blackwell matmul in Gluon: a TMA load partition fills a STAGES-deep ring
of A/B tiles, an MMA partition consumes them with tcgen05 and releases each slot by the MMA's
completion, and the default partition waits for the accumulator and runs the epilogue.

The ring's two barrier arrays: `ready[s]` completes when both tiles of slot s have landed
(one arrive.expect_tx for the bytes of both loads), `empty[s]` when the MMA that read slot s is
done. Fresh barriers count as having completed the phase before the first, so the loader's
first pass waits on `empty` with parity 1 and passes at once.

The knobs after `STAGES` turn the correct kernel into the bugs people report: the loader
waiting for the wrong phase of `empty`, an expect covering only one of the two loads (the MMA
reads a tile still in flight), the MMA
partition never releasing its slot, and `ready` initialised for two arrivals that never come.

    barrierproof check examples/gluon/ws_matmul.py
    barrierproof prove examples/gluon/ws_matmul.py::ring   # proved for every K
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from barrierproof.model.gluon import Launch, tensor_desc


@gluon.jit
def load_partition(a_desc, b_desc, a_bufs, b_bufs, ready_bars, empty_bars, k_tiles,
                   EMPTY_PHASE: gl.constexpr, EXPECT_BOTH: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    for k in range(k_tiles):
        slot = k % STAGES
        phase = (k // STAGES) & 1
        mbarrier.wait(empty_bars.index(slot), phase ^ EMPTY_PHASE)
        ready = ready_bars.index(slot)
        if EXPECT_BOTH:
            mbarrier.expect(ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        else:
            mbarrier.expect(ready, a_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BLOCK_K], ready, a_bufs.index(slot))
        tma.async_load(b_desc, [0, k * BLOCK_K], ready, b_bufs.index(slot))


@gluon.jit
def mma_partition(a_bufs, b_bufs, ready_bars, empty_bars, acc_bar, acc_tmem, k_tiles,
                  RELEASE: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    for k in range(k_tiles):
        slot = k % STAGES
        mbarrier.wait(ready_bars.index(slot), (k // STAGES) & 1)
        b_t = b_bufs.index(slot).permute((1, 0))
        if RELEASE:
            tcgen05_mma(a_bufs.index(slot), b_t, acc_tmem, use_acc=k > 0,
                        mbarriers=[empty_bars.index(slot)])
        else:
            tcgen05_mma(a_bufs.index(slot), b_t, acc_tmem, use_acc=k > 0)
    tcgen05_commit(acc_bar)


@gluon.jit
def epilogue_partition(c_desc, acc_tmem, acc_bar, c_smem, num_warps: gl.constexpr):
    mbarrier.wait(acc_bar, 0)
    acc = acc_tmem.load(acc_tmem.get_reg_layout(num_warps=num_warps))
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


@gluon.jit
def matmul_ws(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, EMPTY_PHASE: gl.constexpr,
              EXPECT_BOTH: gl.constexpr, RELEASE: gl.constexpr, READY_COUNT: gl.constexpr,
              num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready_bars.index(i), count=READY_COUNT)
        mbarrier.init(empty_bars.index(i), count=1)
    mbarrier.init(acc_bar, count=1)
    acc_tmem = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N],
                                      TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    k_tiles = gl.cdiv(K, BLOCK_K)
    gl.warp_specialize([
        (epilogue_partition, (c_desc, acc_tmem, acc_bar, c_smem, num_warps)),
        (load_partition, (a_desc, b_desc, a_bufs, b_bufs, ready_bars, empty_bars, k_tiles,
                          EMPTY_PHASE, EXPECT_BOTH)),
        (mma_partition, (a_bufs, b_bufs, ready_bars, empty_bars, acc_bar, acc_tmem, k_tiles,
                         RELEASE)),
    ], [1, 1], [24, 24])
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready_bars.index(i))
        mbarrier.invalidate(empty_bars.index(i))
    mbarrier.invalidate(acc_bar)


def _launch(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [128, 64]),
                c_desc=tensor_desc("fp16", [128, 128]), K=512, STAGES=3, EMPTY_PHASE=1,
                EXPECT_BOTH=True, RELEASE=True, READY_COUNT=1)
    args.update(knobs)
    return Launch(matmul_ws, args=args, num_warps=4, target="cuda:100")


ring = _launch()
# K = 512 is eight k-tiles through a three-slot ring: every slot is reused
ring_two_stages = _launch(STAGES=2, K=320)
wrong_empty_phase = _launch(EMPTY_PHASE=0)
expect_one_of_two_loads = _launch(EXPECT_BOTH=False)
slot_never_released = _launch(RELEASE=False)
ready_counts_two_arrivals = _launch(READY_COUNT=2)

EXPECT = {
    "ring": "verified",
    "ring_two_stages": "verified",
    "wrong_empty_phase": "violation:BP100",
    # the phase completes when the first tile lands: the MMA reads a slot still being written
    "expect_one_of_two_loads": "violation:BP200",
    "slot_never_released": "violation:BP100",
    "ready_counts_two_arrivals": "violation:BP100",
}
