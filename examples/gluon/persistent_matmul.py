"""A persistent, warp-specialized Blackwell matmul in Gluon with a double-buffered TMEM
accumulator: each program walks the output tiles `pid, pid + num_programs, ...`; the load
partition streams A/B k-tiles through a STAGES-deep shared-memory ring, the MMA partition
accumulates each output tile in one of two TMEM buffers, and the epilogue (default partition)
drains a finished accumulator while the MMA partition fills the other.

Slots and phases are carried counters, kept across tiles (a `Counter` aggregate that wraps the
slot and flips the phase), as warp-specialized persistent kernels write them. The knobs give two
reported bugs: the MMA partition restarting its ring counter at every tile (the load partition
does not, so after the first tile they disagree on slot and phase), the MMA partition starting
its accumulator counter at phase 0 (it waits for an epilogue release that never comes for a
fresh buffer), and the epilogue releasing the accumulator before it has loaded it from tensor
memory (the next tile's MMA overwrites it meanwhile).

    barrierproof check examples/gluon/persistent_matmul.py
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.language.core import _aggregate as aggregate

from barrierproof.model.gluon import Launch, tensor_desc


@aggregate
class Counter:
    """A ring position: the slot and the phase of its barriers."""

    index: gl.tensor
    phase: gl.tensor
    num_barriers: gl.constexpr

    @gluon.jit
    def create(phase, num_barriers: gl.constexpr):
        return Counter(gl.to_tensor(0), gl.to_tensor(phase), num_barriers)

    @gluon.jit
    def next(self):
        incr = self.index + 1
        wrapped = incr == self.num_barriers
        return Counter(gl.where(wrapped, 0, incr), gl.where(wrapped, self.phase ^ 1, self.phase),
                       self.num_barriers)


@gluon.jit
def num_tiles_of(c_desc):
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    return gl.cdiv(c_desc.shape[0], BLOCK_M) * gl.cdiv(c_desc.shape[1], BLOCK_N)


@gluon.jit
def load_partition(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready_bars, empty_bars):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    state = Counter.create(1, ready_bars.shape[0])
    for tile in range(gl.program_id(0), num_tiles_of(c_desc), gl.num_programs(0)):
        for k in range(0, a_desc.shape[1], BLOCK_K):
            mbarrier.wait(empty_bars.index(state.index), state.phase)
            ready = ready_bars.index(state.index)
            mbarrier.expect(ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [0, k], ready, a_bufs.index(state.index))
            tma.async_load(b_desc, [0, k], ready, b_bufs.index(state.index))
            state = state.next()


@gluon.jit
def mma_partition(a_desc, c_desc, a_bufs, b_bufs, ready_bars, empty_bars, acc_bufs,
                  acc_ready_bars, acc_empty_bars, RESET_PER_TILE: gl.constexpr,
                  ACC_START_PHASE: gl.constexpr):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    state = Counter.create(0, ready_bars.shape[0])
    acc_state = Counter.create(ACC_START_PHASE, acc_bufs.shape[0])
    for tile in range(gl.program_id(0), num_tiles_of(c_desc), gl.num_programs(0)):
        if RESET_PER_TILE:
            state = Counter.create(0, ready_bars.shape[0])
        mbarrier.wait(acc_empty_bars.index(acc_state.index), acc_state.phase)
        acc = acc_bufs.index(acc_state.index)
        use_acc = False
        for k in range(0, a_desc.shape[1], BLOCK_K):
            mbarrier.wait(ready_bars.index(state.index), state.phase)
            tcgen05_mma(a_bufs.index(state.index), b_bufs.index(state.index).permute((1, 0)), acc,
                        use_acc=use_acc, mbarriers=[empty_bars.index(state.index)])
            state = state.next()
            use_acc = True
        tcgen05_commit(acc_ready_bars.index(acc_state.index))
        acc_state = acc_state.next()


@gluon.jit
def epilogue_partition(c_desc, acc_bufs, acc_ready_bars, acc_empty_bars, c_smem,
                       EARLY_RELEASE: gl.constexpr, num_warps: gl.constexpr):
    acc_state = Counter.create(0, acc_bufs.shape[0])
    for tile in range(gl.program_id(0), num_tiles_of(c_desc), gl.num_programs(0)):
        mbarrier.wait(acc_ready_bars.index(acc_state.index), acc_state.phase)
        acc_buf = acc_bufs.index(acc_state.index)
        if EARLY_RELEASE:
            mbarrier.arrive(acc_empty_bars.index(acc_state.index), count=1)
        acc = acc_buf.load(acc_buf.get_reg_layout(num_warps=num_warps))
        if not EARLY_RELEASE:
            mbarrier.arrive(acc_empty_bars.index(acc_state.index), count=1)
        acc_state = acc_state.next()
        tma.store_wait(0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


@gluon.jit
def persistent_matmul(a_desc, b_desc, c_desc, STAGES: gl.constexpr, RESET_PER_TILE: gl.constexpr,
                      ACC_START_PHASE: gl.constexpr, EARLY_RELEASE: gl.constexpr,
                      num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=1)
    acc_bufs = allocate_tensor_memory(gl.float32, [2, BLOCK_M, BLOCK_N],
                                      TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    acc_ready_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_empty_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(acc_ready_bars.index(i), count=1)
        mbarrier.init(acc_empty_bars.index(i), count=1)
    gl.warp_specialize([
        (epilogue_partition, (c_desc, acc_bufs, acc_ready_bars, acc_empty_bars, c_smem,
                              EARLY_RELEASE, num_warps)),
        (load_partition, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready_bars, empty_bars)),
        (mma_partition, (a_desc, c_desc, a_bufs, b_bufs, ready_bars, empty_bars, acc_bufs,
                         acc_ready_bars, acc_empty_bars, RESET_PER_TILE, ACC_START_PHASE)),
    ], [1, 1], [24, 24])


def _launch(**knobs):
    # three output tiles of 128x128, each four k-tiles deep, through a three-slot ring
    args = dict(a_desc=tensor_desc("fp16", [128, 64], shape=(384, 256)),
                b_desc=tensor_desc("fp16", [128, 64], shape=(128, 256)),
                c_desc=tensor_desc("fp16", [128, 128], shape=(384, 128)),
                STAGES=3, RESET_PER_TILE=False, ACC_START_PHASE=1, EARLY_RELEASE=False)
    args.update(knobs)
    return Launch(persistent_matmul, args=args, num_warps=4, target="cuda:100")


persistent = _launch()
ring_reset_per_tile = _launch(RESET_PER_TILE=True)
accumulator_phase_0 = _launch(ACC_START_PHASE=0)
accumulator_released_before_load = _launch(EARLY_RELEASE=True)

EXPECT = {
    "persistent": "verified",
    "ring_reset_per_tile": "violation:BP200",
    "accumulator_phase_0": "violation:BP100",
    "accumulator_released_before_load": "violation:BP201",
}
