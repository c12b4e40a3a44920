"""Gluon kernels a new user wrote in the style of Triton's Gluon tutorials (TMA round trips,
a register consumer of a TMA ring, a persistent matmul with a double-buffered TMEM accumulator,
a Hopper wgmma ring, MMAs releasing their stages through `mbarriers=`, two readers of a ring,
predicated expect/load/wait, a counted `while`, a one-partition pipeline whose MMAs free their
stages, a double-buffered store epilogue, two reader partitions of one ring, an MMA operand
written by another partition's registers), each correct and with the bugs people report,
a persistent `while` over cluster launch control responses, an Ampere cp.async ring waited by
commit group, plus kernels with synchronization
the frontend does not read (hand-written PTX, a TMA reduction, a multicast load across two CTAs):
it must be BP190 at its line, never dropped.
Checked by tests/test_unseen_frontends.py against EXPECT (decided before running)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory, clc,
                                                                 tcgen05_commit, tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                             warpgroup_mma, warpgroup_mma_wait)
from triton.language.core import _aggregate as aggregate

from barrierproof.model.gluon import Launch, tensor_desc


# -- 1. one partition: load a tile, change it in registers, store it back, tile after tile ------

@gluon.jit
def roundtrip(in_desc, out_desc, n_tiles, FIRST_PARITY: gl.constexpr,
              DRAIN_STORE: gl.constexpr, EXPECT: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    BN: gl.constexpr = in_desc.block_type.shape[1]
    tile = gl.allocate_shared_memory(in_desc.dtype, [BM, BN], in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    phase = FIRST_PARITY
    for i in range(n_tiles):
        if DRAIN_STORE:
            tma.store_wait(0)            # the previous tile's store has read `tile`
        if EXPECT:
            mbarrier.expect(bar, in_desc.block_type.nbytes)
        tma.async_load(in_desc, [i * BM, 0], bar, tile)
        mbarrier.wait(bar, phase)
        phase ^= 1
        x = tile.load(regs)
        tile.store(x * 2)
        fence_async_shared()
        tma.async_store(out_desc, [i * BM, 0], tile)
    tma.store_wait(0)
    mbarrier.invalidate(bar)


def _roundtrip(**knobs):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=3, FIRST_PARITY=0, DRAIN_STORE=True, EXPECT=True)
    args.update(knobs)
    return Launch(roundtrip, args=args, num_warps=4, target="cuda:100")


roundtrip_ok = _roundtrip()
# the next load lands in `tile` while the TMA store of the last one may still read it
roundtrip_no_store_wait = _roundtrip(DRAIN_STORE=False)
# parity 1 on a fresh barrier returns at once: the registers read a tile still landing
roundtrip_first_wait_parity_one = _roundtrip(FIRST_PARITY=1)
# no arrive.expect_tx: the barrier's one arrival never comes
roundtrip_no_expect = _roundtrip(EXPECT=False)


# -- 2. a TMA ring drained by the default partition's registers --------------------------------

@gluon.jit
def ring_loader(desc, bufs, ready, empty, n_tiles):
    STAGES: gl.constexpr = bufs.shape[0]
    BM: gl.constexpr = desc.block_type.shape[0]
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), desc.block_type.nbytes)
        tma.async_load(desc, [i * BM, 0], ready.index(s), bufs.index(s))


@gluon.jit
def ring_reducer(out_desc, bufs, ready, empty, out_tile, n_tiles, RELEASE_EARLY: gl.constexpr,
                 READY_START: gl.constexpr, num_warps: gl.constexpr):
    STAGES: gl.constexpr = bufs.shape[0]
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    acc = gl.zeros(out_desc.block_type.shape, gl.float32, regs)
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), ((i // STAGES) & 1) ^ READY_START)
        if RELEASE_EARLY:
            mbarrier.arrive(empty.index(s), count=1)
            acc += bufs.index(s).load(regs).to(gl.float32)
        else:
            acc += bufs.index(s).load(regs).to(gl.float32)
            mbarrier.arrive(empty.index(s), count=1)
    out_tile.store(acc.to(out_desc.dtype))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], out_tile)
    tma.store_wait(0)


@gluon.jit
def ring_sum(in_desc, out_desc, n_tiles, STAGES: gl.constexpr, EMPTY_COUNT: gl.constexpr,
             RELEASE_EARLY: gl.constexpr, READY_START: gl.constexpr, num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_type.shape,
                                     in_desc.layout)
    out_tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                         out_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=EMPTY_COUNT)
    gl.warp_specialize([
        (ring_reducer, (out_desc, bufs, ready, empty, out_tile, n_tiles, RELEASE_EARLY,
                        READY_START, num_warps)),
        (ring_loader, (in_desc, bufs, ready, empty, n_tiles)),
    ], [1], [24])


def _ring_sum(**knobs):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=5, STAGES=2, EMPTY_COUNT=1, RELEASE_EARLY=False, READY_START=0)
    args.update(knobs)
    return Launch(ring_sum, args=args, num_warps=4, target="cuda:100")


ring_sum_ok = _ring_sum()
# the slot is handed back before the registers read it: the next load overwrites it
ring_sum_releases_before_read = _ring_sum(RELEASE_EARLY=True)
# one arrival per consumer warp expected, but Gluon's arrive is one per partition
ring_sum_empty_counts_warps = _ring_sum(EMPTY_COUNT=4)
# the consumer starts on the producer's parity: its first wait passes before any load landed
ring_sum_consumer_starts_at_one = _ring_sum(READY_START=1)


# -- 3. persistent warp-specialized matmul, double-buffered TMEM accumulator -------------------

@aggregate
class Slot:
    index: gl.tensor
    phase: gl.tensor
    n: gl.constexpr

    @gluon.jit
    def start(phase, n: gl.constexpr):
        return Slot(gl.to_tensor(0), gl.to_tensor(phase), n)

    @gluon.must_use_result
    @gluon.jit
    def step(self):
        nxt = self.index + 1
        wrap = nxt == self.n
        return Slot(gl.where(wrap, 0, nxt), gl.where(wrap, self.phase ^ 1, self.phase), self.n)


@gluon.jit
def pm_load(a_desc, b_desc, a_bufs, b_bufs, ready, empty, n_tiles, k_tiles,
            RESET_PER_TILE: gl.constexpr):
    BK: gl.constexpr = a_desc.block_type.shape[1]
    slot = Slot.start(1, a_bufs.shape[0])
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        if RESET_PER_TILE:
            slot = Slot.start(1, a_bufs.shape[0])
        for k in range(k_tiles):
            mbarrier.wait(empty.index(slot.index), slot.phase)
            bar = ready.index(slot.index)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [t * 128, k * BK], bar, a_bufs.index(slot.index))
            tma.async_load(b_desc, [0, k * BK], bar, b_bufs.index(slot.index))
            slot = slot.step()


@gluon.jit
def pm_mma(a_bufs, b_bufs, ready, empty, accs, acc_ready, acc_empty, n_tiles, k_tiles,
           ACC_EMPTY_START: gl.constexpr, COMMIT_ACC: gl.constexpr):
    slot = Slot.start(0, a_bufs.shape[0])
    acc_slot = Slot.start(ACC_EMPTY_START, 2)
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        mbarrier.wait(acc_empty.index(acc_slot.index), acc_slot.phase)
        acc = accs.index(acc_slot.index)
        for k in range(k_tiles):
            mbarrier.wait(ready.index(slot.index), slot.phase)
            tcgen05_mma(a_bufs.index(slot.index), b_bufs.index(slot.index).permute((1, 0)), acc,
                        use_acc=k > 0)
            tcgen05_commit(empty.index(slot.index))
            slot = slot.step()
        if COMMIT_ACC:
            tcgen05_commit(acc_ready.index(acc_slot.index))
        acc_slot = acc_slot.step()


@gluon.jit
def pm_epilogue(c_desc, accs, acc_ready, acc_empty, c_smem, n_tiles, RELEASE_EARLY: gl.constexpr,
                num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    regs: gl.constexpr = accs.index(0).get_reg_layout(num_warps=num_warps)
    acc_slot = Slot.start(0, 2)
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        mbarrier.wait(acc_ready.index(acc_slot.index), acc_slot.phase)
        if RELEASE_EARLY:
            mbarrier.arrive(acc_empty.index(acc_slot.index), count=1)
            acc = accs.index(acc_slot.index).load(regs)
        else:
            acc = accs.index(acc_slot.index).load(regs)
            mbarrier.arrive(acc_empty.index(acc_slot.index), count=1)
        acc_slot = acc_slot.step()
        tma.store_wait(0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [t * BM, 0], c_smem)
    tma.store_wait(0)


@gluon.jit
def persistent_mm(a_desc, b_desc, c_desc, n_tiles, k_tiles, STAGES: gl.constexpr,
                  RESET_PER_TILE: gl.constexpr, ACC_EMPTY_START: gl.constexpr,
                  COMMIT_ACC: gl.constexpr, RELEASE_EARLY: gl.constexpr,
                  num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    for s in gl.static_range(2):
        mbarrier.init(acc_ready.index(s), count=1)
        mbarrier.init(acc_empty.index(s), count=1)
    accs = allocate_tensor_memory(gl.float32, [2, BM, BN],
                                  TensorMemoryLayout([BM, BN], col_stride=1))
    gl.warp_specialize([
        (pm_epilogue, (c_desc, accs, acc_ready, acc_empty, c_smem, n_tiles, RELEASE_EARLY,
                       num_warps)),
        (pm_load, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, n_tiles, k_tiles,
                   RESET_PER_TILE)),
        (pm_mma, (a_bufs, b_bufs, ready, empty, accs, acc_ready, acc_empty, n_tiles, k_tiles,
                  ACC_EMPTY_START, COMMIT_ACC)),
    ], [1, 1], [24, 24])


def _persistent(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp16", [128, 64]), n_tiles=3, k_tiles=3, STAGES=2,
                RESET_PER_TILE=False, ACC_EMPTY_START=1, COMMIT_ACC=True, RELEASE_EARLY=False)
    args.update(knobs)
    return Launch(persistent_mm, args=args, num_warps=4, target="cuda:100")


persistent_ok = _persistent()
# the loader restarts its ring every tile (k_tiles = 3 on two stages: the laps go out of step)
persistent_loader_resets_phase = _persistent(RESET_PER_TILE=True)
# the MMA waits for acc_empty's phase 0 on a fresh barrier: nothing ever completes it first
persistent_acc_empty_phase_zero = _persistent(ACC_EMPTY_START=0)
# no tcgen05_commit on acc_ready: the epilogue waits forever
persistent_missing_acc_commit = _persistent(COMMIT_ACC=False)
# the epilogue hands the accumulator back before its TMEM load: the MMA of tile t+2 overwrites
# it (a tensor-memory race)
persistent_acc_released_before_load = _persistent(RELEASE_EARLY=True)


# -- 4. Hopper: a TMA ring feeding async wgmma, one warpgroup --------------------------------

@gluon.jit
def wgmma_ring(a_desc, b_desc, k_tiles, STAGES: gl.constexpr, OUTSTANDING: gl.constexpr,
               num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, mma_layout)
    # prologue: fill STAGES - 1 slots
    for i in gl.static_range(STAGES - 1):
        mbarrier.expect(bars.index(i), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, i * BK], bars.index(i), a_bufs.index(i))
        tma.async_load(b_desc, [i * BK, 0], bars.index(i), b_bufs.index(i))
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(bars.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        # at most OUTSTANDING wgmmas in flight: with 1, the one of k - 1 is done, so its slot
        # (the one refilled next) is free
        acc = warpgroup_mma_wait(num_outstanding=OUTSTANDING, deps=(acc, ))
        nk = k + STAGES - 1
        if nk < k_tiles:
            ns = nk % STAGES
            mbarrier.expect(bars.index(ns), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [0, nk * BK], bars.index(ns), a_bufs.index(ns))
            tma.async_load(b_desc, [nk * BK, 0], bars.index(ns), b_bufs.index(ns))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))


def _wgmma(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [64, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                k_tiles=5, STAGES=3, OUTSTANDING=1)
    args.update(knobs)
    # the prologue loads STAGES - 1 tiles whatever k_tiles is: fewer leave loads unwaited
    # (prove finds k_tiles = 0 without this), so the launch states that many
    prologue = args["STAGES"] - 1
    return Launch(wgmma_ring, args=args, num_warps=4, target="cuda:90",
                  assume=lambda k_tiles: k_tiles >= prologue)


wgmma_ok = _wgmma()
# two wgmmas left in flight: the refill of slot (k + 2) % 3 = (k - 1) % 3 overwrites the
# operands of the wgmma of k - 1, which may still be reading them
wgmma_two_outstanding = _wgmma(OUTSTANDING=2)


# -- 5. synchronization the frontend does not read: must be BP190 at its line -----------------

@gluon.jit
def asm_arrive(in_desc, bar_addr, num_warps: gl.constexpr):
    tile = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=2)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [0, 0], bar, tile)
    regs: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    # the second arrival, in hand-written PTX (the barrier's shared address passed in)
    addr = gl.full([32 * num_warps], bar_addr, gl.int32, regs)
    gl.inline_asm_elementwise("mbarrier.arrive.shared::cta.b64 _, [$1]; mov.b32 $0, $1;",
                              "=r,r", [addr], dtype=gl.int32, is_pure=False, pack=1)
    mbarrier.wait(bar, 0)
    y = tile.load(gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0]))
    tile.store(y + 1)


# the arrival in PTX is BP190 at its line; without it the wait deadlocks, but that trace steps
# past the unread arrival, which may be what completes the wait: no finding, `unknown`
asm_mbarrier_arrive = Launch(asm_arrive, args=dict(in_desc=tensor_desc("fp16", [64, 64]), bar_addr=0), num_warps=4,
                   target="cuda:100")


@gluon.jit
def tma_reduce(in_desc, out_desc, num_warps: gl.constexpr):
    tile = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [0, 0], bar, tile)
    mbarrier.wait(bar, 0)
    tma.async_atomic_add(out_desc, [0, 0], tile)
    tma.store_wait(0)


tma_atomic_add = Launch(tma_reduce, args=dict(in_desc=tensor_desc("fp32", [64, 64]),
                                              out_desc=tensor_desc("fp32", [64, 64])),
                        num_warps=4, target="cuda:100")



# -- 6. MMA completion barriers: each MMA frees its stage, the last one also the accumulator ---

@gluon.jit
def mb_loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles, BOTH_BYTES: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        if BOTH_BYTES:
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        else:
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [0, k * BK], ready.index(s), b_bufs.index(s))


@gluon.jit
def mb_mma(a_bufs, b_bufs, ready, empty, acc, acc_bar, k_tiles, DONE_AT_FIRST: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.shape[0]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        if DONE_AT_FIRST:
            last = k == 0
        else:
            last = k == k_tiles - 1
        tcgen05_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, use_acc=k > 0,
                    mbarriers=[empty.index(s), acc_bar], mbarrier_preds=[True, last])


@gluon.jit
def mb_epilogue(c_desc, acc, acc_bar, c_smem, num_warps: gl.constexpr):
    mbarrier.wait(acc_bar, 0)
    c = acc.load(acc.get_reg_layout(num_warps=num_warps))
    c_smem.store(c.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


@gluon.jit
def mma_barriers(a_desc, b_desc, c_desc, k_tiles, STAGES: gl.constexpr, BOTH_BYTES: gl.constexpr,
                 DONE_AT_FIRST: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    mbarrier.init(acc_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    gl.warp_specialize([
        (mb_epilogue, (c_desc, acc, acc_bar, c_smem, num_warps)),
        (mb_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles, BOTH_BYTES)),
        (mb_mma, (a_bufs, b_bufs, ready, empty, acc, acc_bar, k_tiles, DONE_AT_FIRST)),
    ], [1, 1], [40, 40])


def _mma_barriers(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp16", [128, 64]), k_tiles=4, STAGES=2, BOTH_BYTES=True,
                DONE_AT_FIRST=False)
    args.update(knobs)
    # no K tile: the accumulator barrier is never committed (a kernel that needs one)
    return Launch(mma_barriers, args=args, num_warps=4, target="cuda:100",
                  assume=lambda k_tiles: k_tiles >= 1)


mma_barriers_ok = _mma_barriers()
# the stage's expect counts A's bytes only: it completes while B is still landing
mma_barriers_expect_a_only = _mma_barriers(BOTH_BYTES=False)
# the accumulator barrier is predicated on the first MMA: the epilogue reads TMEM the later
# MMAs still write
mma_barriers_done_at_first = _mma_barriers(DONE_AT_FIRST=True)


# -- 7. two readers of every slot (the loader of section 2), each releasing it on its own ------

@gluon.jit
def pair_reader(bufs, ready, empty, partial, n_tiles, RELEASE: gl.constexpr,
                WARPS: gl.constexpr):
    STAGES: gl.constexpr = bufs.shape[0]
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [WARPS, 1], [1, 0])
    acc = gl.zeros([bufs.shape[1], bufs.shape[2]], gl.float32, regs)
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        acc += bufs.index(s).load(regs).to(gl.float32)
        mbarrier.arrive(empty.index(s), count=RELEASE)
    partial.store(acc)


@gluon.jit
def pair_sum(desc, n_tiles, STAGES: gl.constexpr, SECOND_RELEASES: gl.constexpr,
             num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_type.shape, desc.layout)
    partials = gl.allocate_shared_memory(gl.float32, [2] + desc.block_type.shape,
                                         gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)      # both readers hand the slot back
    gl.warp_specialize([
        (pair_reader, (bufs, ready, empty, partials.index(0), n_tiles, 1, num_warps)),
        (pair_reader, (bufs, ready, empty, partials.index(1), n_tiles, SECOND_RELEASES, 4)),
        (ring_loader, (desc, bufs, ready, empty, n_tiles)),
    ], [4, 1], [192, 24])


def _pair_sum(**knobs):
    args = dict(desc=tensor_desc("fp16", [64, 64]), n_tiles=4, STAGES=2, SECOND_RELEASES=1)
    args.update(knobs)
    return Launch(pair_sum, args=args, num_warps=4, target="cuda:100")


pair_sum_ok = _pair_sum()
# the second reader arrives for both. Expected a race (the slot freed while the first reader
# still reads it); the checker finds the shorter bug first: after the first reader's arrival,
# two more exceed the count while the phase is open (undefined behaviour in PTX, BP121)
pair_sum_second_releases_twice = _pair_sum(SECOND_RELEASES=2)


# -- 8. a two-slot prefetch with predicated expect, load and wait ------------------------------

@gluon.jit
def predicated_prefetch(desc, k_tiles, PRED_EXPECT: gl.constexpr, SKIP_FIRST_WAIT: gl.constexpr,
                        num_warps: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    acc = gl.zeros(desc.block_type.shape, gl.float32, regs)
    mbarrier.expect(bars.index(0), desc.block_type.nbytes)
    tma.async_load(desc, [0, 0], bars.index(0), bufs.index(0))
    for k in range(k_tiles):
        s = k % 2
        ns = (k + 1) % 2
        more = k + 1 < k_tiles
        # the slot refilled here was read (synchronously) in the previous iteration
        if PRED_EXPECT:
            mbarrier.expect(bars.index(ns), desc.block_type.nbytes, pred=more)
        else:
            mbarrier.expect(bars.index(ns), desc.block_type.nbytes)
        tma.async_load(desc, [(k + 1) * BM, 0], bars.index(ns), bufs.index(ns), pred=more)
        if SKIP_FIRST_WAIT:
            mbarrier.wait(bars.index(s), (k // 2) & 1, pred=k > 0)
        else:
            mbarrier.wait(bars.index(s), (k // 2) & 1)
        acc += bufs.index(s).load(regs).to(gl.float32)
    for i in gl.static_range(2):
        mbarrier.invalidate(bars.index(i))
    # the sum leaves through slot 0 (its last read is above): without a use Triton drops the
    # loads, and the races with them
    bufs.index(0).store(acc.to(desc.dtype))
    fence_async_shared()
    tma.async_store(desc, [0, 0], bufs.index(0))
    tma.store_wait(0)


def _predicated(**knobs):
    args = dict(desc=tensor_desc("fp16", [64, 64]), k_tiles=5, PRED_EXPECT=True,
                SKIP_FIRST_WAIT=False)
    args.update(knobs)
    return Launch(predicated_prefetch, args=args, num_warps=4, target="cuda:100")


predicated_ok = _predicated()
# the expect is not predicated with its load: after the last tile a phase expects bytes that
# never land
predicated_expect_without_load = _predicated(PRED_EXPECT=False)
# the wait skips the first tile (a predicate meant for the refill): it reads it while it lands
predicated_first_wait_skipped = _predicated(SKIP_FIRST_WAIT=True)


# -- 9. a counted `while` loop: a tile at a time until the count runs out ----------------------

@gluon.jit
def while_tiles(in_desc, out_desc, n_tiles, FLIP: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    tile = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    t = 0
    phase = 0
    while t < n_tiles:
        tma.store_wait(0)
        mbarrier.expect(bar, in_desc.block_type.nbytes)
        tma.async_load(in_desc, [t * BM, 0], bar, tile)
        mbarrier.wait(bar, phase)
        phase ^= FLIP
        tile.store(tile.load(regs) + 1)
        fence_async_shared()
        tma.async_store(out_desc, [t * BM, 0], tile)
        t += 1
    tma.store_wait(0)


def _while(**knobs):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=3, FLIP=1)
    args.update(knobs)
    return Launch(while_tiles, args=args, num_warps=4, target="cuda:100")


while_ok = _while()
# the phase is never flipped: from the second tile on the wait returns at once
while_phase_never_flips = _while(FLIP=0)


# -- 10. a persistent loop driven by cluster launch control: `while` over cancelled tiles ------

@gluon.jit
def clc_persistent(desc, out_desc, num_warps: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    tile = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    response = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    load_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    clc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(load_bar, count=1)
    mbarrier.init(clc_bar, count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    pid = gl.program_id(0)
    phase = 0
    running = True
    while running:
        mbarrier.expect(clc_bar, 16)
        clc.try_cancel(response, clc_bar)
        mbarrier.expect(load_bar, desc.block_type.nbytes)
        tma.async_load(desc, [pid * BM, 0], load_bar, tile)
        mbarrier.wait(load_bar, phase)
        tile.store(tile.load(regs) * 2)
        fence_async_shared()
        tma.async_store(out_desc, [pid * BM, 0], tile)
        tma.store_wait(0)
        mbarrier.wait(clc_bar, phase)
        result = clc.load_result(response)
        running = result.is_canceled()
        pid = result.program_id(0)
        phase ^= 1


# how many tiles the hardware hands over is its choice: the loop runs `clc_tiles` iterations,
# and each request is issued after the previous response is read and read after its wait
clc_while_canceled = Launch(clc_persistent, args=dict(desc=tensor_desc("fp16", [64, 64]),
                                                      out_desc=tensor_desc("fp16", [64, 64])),
                            num_warps=4, target="cuda:100")


# -- 11. two CTAs of a cluster share B: a multicast TMA load (num_ctas=2) ----------------------

@gluon.jit
def multicast_b(a_desc, b_desc, out_desc):
    a = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout.multicta(2))
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], bar, a)
    tma.async_load(b_desc, [0, 0], bar, b, multicast=True)
    mbarrier.wait(bar, 0)
    tma.async_store(out_desc, [0, 0], b)
    tma.store_wait(0)


def _per_cta(dtype: str, shape: list, bases: list):
    """A descriptor whose tile both CTAs of the pair hold whole (CGA bases [[0, 0]])."""
    layout = gl.NVMMASharedLayout.get_default_for(shape, gl.float16, cga_layout=bases)
    return tensor_desc(dtype, shape, layout)


# a one-element barrier with a per-CTA layout (which CTA holds it is not read): BP190 at its init
# and every use
multicast_two_ctas = Launch(multicast_b, args=dict(a_desc=_per_cta("fp16", [64, 64], [[0, 0]]),
                                                   b_desc=_per_cta("fp16", [64, 64], [[0, 0]]),
                                                   out_desc=_per_cta("fp16", [64, 64], [[0, 0]])),
                            num_warps=4, num_ctas=2, target="cuda:100")


# -- 12. one partition, no warp_specialize: loads run STAGES - 1 ahead, each MMA frees its stage
@gluon.jit
def inline_pipe(a_desc, b_desc, c_desc, k_tiles, STAGES: gl.constexpr, REUSE_XOR: gl.constexpr,
                num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    freed = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(loaded.index(s), count=1)
        mbarrier.init(freed.index(s), count=1)
    mbarrier.init(done, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for k in range(k_tiles + STAGES - 1):
        if k < k_tiles:                       # issue the load of step k
            ls = k % STAGES
            if k >= STAGES:                   # the MMA of step k - STAGES read this stage
                mbarrier.wait(freed.index(ls), ((k // STAGES) & 1) ^ REUSE_XOR)
            mbarrier.expect(loaded.index(ls), nbytes)
            tma.async_load(a_desc, [0, k * BK], loaded.index(ls), a_bufs.index(ls))
            tma.async_load(b_desc, [0, k * BK], loaded.index(ls), b_bufs.index(ls))
        c = k - (STAGES - 1)
        if c >= 0:                            # the MMA of step c
            cs = c % STAGES
            mbarrier.wait(loaded.index(cs), (c // STAGES) & 1)
            tcgen05_mma(a_bufs.index(cs), b_bufs.index(cs).permute((1, 0)), acc, use_acc=c > 0,
                        mbarriers=[freed.index(cs)])
    tcgen05_commit(done)
    mbarrier.wait(done, 0)
    out = acc.load(acc.get_reg_layout(num_warps=num_warps))
    c_smem.store(out.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


def _inline(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp16", [128, 64]), k_tiles=4, STAGES=2, REUSE_XOR=1)
    args.update(knobs)
    return Launch(inline_pipe, args=args, num_warps=4, target="cuda:100")


inline_pipe_ok = _inline()
# the wait for the MMA of step k - STAGES uses the parity of step k: on a barrier one phase
# behind it returns at once, and the load overwrites a stage the MMA still reads
inline_pipe_reuse_parity_off = _inline(REUSE_XOR=0)


# -- 13. a store epilogue cycling two staging buffers, store_wait(BUFS - 1) before each reuse
@gluon.jit
def store_ring(in_desc, out_desc, n_tiles, BUFS: gl.constexpr, FENCE: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    tile = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    outs = gl.allocate_shared_memory(out_desc.dtype, [BUFS] + out_desc.block_type.shape,
                                     out_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    for i in range(n_tiles):
        mbarrier.expect(bar, in_desc.block_type.nbytes)
        tma.async_load(in_desc, [i * BM, 0], bar, tile)
        mbarrier.wait(bar, i & 1)
        x = tile.load(regs)
        o = outs.index(i % 2)                 # two staging slots, always
        tma.store_wait(BUFS - 1)              # the store that last read `o` is done
        o.store(x * 3)
        if FENCE:
            fence_async_shared()
        tma.async_store(out_desc, [i * BM, 0], o)
    tma.store_wait(0)
    mbarrier.invalidate(bar)


def _store_ring(**knobs):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=4, BUFS=2, FENCE=True)
    args.update(knobs)
    return Launch(store_ring, args=args, num_warps=4, target="cuda:100")


store_ring_ok = _store_ring()
# store_wait(2) with two slots: the store that read slot i % 2 two tiles ago may be in flight
store_ring_one_buffer = _store_ring(BUFS=3)
# no fence_async_shared between the stores and the TMA store that reads them: the proxy fence
# is outside the barrier model, so BP190 at the TMA store, never `verified`
store_ring_no_fence = _store_ring(FENCE=False)


# -- 14. one loader (section 2's), two reader partitions; the `free` barrier of a stage counts
#        both readers
@gluon.jit
def tr_reader(out_desc, bufs, ready, free, out_tile, n_tiles, WHO: gl.constexpr,
              FOR_BOTH: gl.constexpr):
    STAGES: gl.constexpr = bufs.shape[0]
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
    acc = gl.zeros(out_desc.block_type.shape, gl.float32, regs)
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        acc += bufs.index(s).load(regs).to(gl.float32)
        if FOR_BOTH:
            if WHO == 0:                     # "releases for both readers"
                mbarrier.arrive(free.index(s), count=2)
        else:
            mbarrier.arrive(free.index(s), count=1)
    out_tile.store(acc.to(out_desc.dtype))
    fence_async_shared()
    tma.async_store(out_desc, [WHO * 64, 0], out_tile)
    tma.store_wait(0)


@gluon.jit
def two_readers(in_desc, out_desc, n_tiles, STAGES: gl.constexpr, FOR_BOTH: gl.constexpr,
                num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_type.shape,
                                     in_desc.layout)
    out0 = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape, out_desc.layout)
    out1 = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape, out_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(free.index(s), count=2)
    gl.warp_specialize([
        (ring_loader, (in_desc, bufs, ready, free, n_tiles)),
        (tr_reader, (out_desc, bufs, ready, free, out0, n_tiles, 0, FOR_BOTH)),
        (tr_reader, (out_desc, bufs, ready, free, out1, n_tiles, 1, FOR_BOTH)),
    ], [4, 4], [24, 24])


def _two_readers(**knobs):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=4, STAGES=2, FOR_BOTH=False)
    args.update(knobs)
    return Launch(two_readers, args=args, num_warps=4, target="cuda:100")


two_readers_ok = _two_readers()
# reader 0 arrives with count=2 "for both": the stage is handed back while reader 1 reads it
two_readers_one_arrives_for_both = _two_readers(FOR_BOTH=True)


# -- 15. a worker partition scales A in registers into shared memory; the default partition
#        feeds it to tcgen05_mma and reads the accumulator back
@gluon.jit
def sc_convert(a_desc, raw, a_smem, loaded, a_ready, FENCE: gl.constexpr):
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
    mbarrier.expect(loaded, a_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], loaded, raw)
    mbarrier.wait(loaded, 0)
    a_smem.store(raw.load(regs) * 2)
    if FENCE:
        fence_async_shared()              # the MMA reads a_smem through the async proxy
    mbarrier.arrive(a_ready, count=1)


@gluon.jit
def sc_mma(b_desc, a_smem, b_smem, acc, a_ready, b_loaded, done, c_desc, c_smem,
           num_warps: gl.constexpr):
    mbarrier.expect(b_loaded, b_desc.block_type.nbytes)
    tma.async_load(b_desc, [0, 0], b_loaded, b_smem)
    mbarrier.wait(b_loaded, 0)
    mbarrier.wait(a_ready, 0)
    tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=False, mbarriers=[done])
    mbarrier.wait(done, 0)
    out = acc.load(acc.get_reg_layout(num_warps=num_warps))
    c_smem.store(out.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


@gluon.jit
def scaled_a(a_desc, b_desc, c_desc, FENCE: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    raw = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    b_loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    a_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(loaded, count=1)
    mbarrier.init(b_loaded, count=1)
    mbarrier.init(a_ready, count=1)
    mbarrier.init(done, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    gl.warp_specialize([
        (sc_mma, (b_desc, a_smem, b_smem, acc, a_ready, b_loaded, done, c_desc, c_smem,
                  num_warps)),
        (sc_convert, (a_desc, raw, a_smem, loaded, a_ready, FENCE)),
    ], [4], [64])


def _scaled_a(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp16", [128, 64]), FENCE=True)
    args.update(knobs)
    return Launch(scaled_a, args=args, num_warps=4, target="cuda:100")


scaled_a_ok = _scaled_a()
# no fence between the worker's stores and the MMA of the default partition (listed first)
scaled_a_no_fence = _scaled_a(FENCE=False)


# -- 16. a buffer allocated with a value (the threads store it) and stored by TMA ------------

@gluon.jit
def alloc_store(in_desc, out_desc, FENCE: gl.constexpr, num_warps: gl.constexpr):
    tile = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [0, 0], bar, tile)
    mbarrier.wait(bar, 0)
    x = tile.load(regs)
    out = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape, out_desc.layout,
                                    x * 2)
    if FENCE:
        fence_async_shared()
    tma.async_store(out_desc, [0, 0], out)
    tma.store_wait(0)
    mbarrier.invalidate(bar)


def _alloc_store(**k):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                FENCE=True)
    args.update(k)
    return Launch(alloc_store, args=args, num_warps=4, target="cuda:100")


alloc_store_ok = _alloc_store()
# the buffer allocated with the threads' values is read by the TMA store with no fence: BP190
alloc_store_no_fence = _alloc_store(FENCE=False)



# -- 17. an Ampere cp.async ring: each step's copies are one commit group, wait_group(STAGES - 2)
# before the read (the last steps commit empty groups: wait_group counts groups, not copies)

@gluon.jit
def cp_ring(a_ptr, b_ptr, n_tiles, STAGES: gl.constexpr, WAIT: gl.constexpr,
            COMMIT: gl.constexpr, PEEK: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    a_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, 32, 64], shared)
    b_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, 32, 64], shared)
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * 64 + cols[None, :]
    acc = gl.zeros([32, 64], gl.float32, layout)
    for s in gl.static_range(STAGES - 1):
        async_copy.async_load(a_bufs.index(s), a_ptr + offs + s * 2048)
        async_copy.async_load(b_bufs.index(s), b_ptr + offs + s * 2048)
        async_copy.commit_group()
    for i in range(n_tiles):
        async_copy.wait_group(WAIT)
        slot = i % STAGES
        acc += a_bufs.index(slot).load(layout).to(gl.float32) * \
            b_bufs.index(slot).load(layout).to(gl.float32)
        nxt = i + STAGES - 1
        if nxt < n_tiles:
            async_copy.async_load(a_bufs.index(nxt % STAGES), a_ptr + offs + nxt * 2048)
            async_copy.async_load(b_bufs.index(nxt % STAGES), b_ptr + offs + nxt * 2048)
        if PEEK:
            acc += a_bufs.index(slot).load(layout).to(gl.float32)   # before the commit
        if COMMIT:
            async_copy.commit_group()
    async_copy.wait_group(0)
    gl.store(a_ptr + offs, acc.to(gl.float16))


def _cp_ring(**k):
    args = dict(a_ptr="*fp16", b_ptr="*fp16", n_tiles=6, STAGES=3, WAIT=1, COMMIT=True,
                PEEK=False)
    args.update(k)
    return Launch(cp_ring, args=args, num_warps=4, target="cuda:80")


cp_ring_ok = _cp_ring()
# wait_group(STAGES - 1) leaves the group of the slot about to be read in flight
cp_ring_waits_one_group_short = _cp_ring(WAIT=2)
# the loop's copies are never committed: no wait_group covers them (BP190 at the copy)
cp_ring_never_commits = _cp_ring(COMMIT=False)
# a read between the copies and their commit: the group's writes cannot move to the commit
cp_ring_reads_before_commit = _cp_ring(PEEK=True)

EXPECT = {
    "roundtrip_ok": "verified",
    "roundtrip_no_store_wait": "violation:BP200",
    "roundtrip_first_wait_parity_one": "violation:BP200",
    "roundtrip_no_expect": "violation:BP100",
    "ring_sum_ok": "verified",
    "ring_sum_releases_before_read": "violation:BP200",
    "ring_sum_empty_counts_warps": "violation:BP100",
    "ring_sum_consumer_starts_at_one": "violation:BP200",
    "persistent_ok": "verified",
    "persistent_loader_resets_phase": "violation:BP100",
    "persistent_acc_empty_phase_zero": "violation:BP100",
    "persistent_missing_acc_commit": "violation:BP100",
    "persistent_acc_released_before_load": "violation:BP201",
    "wgmma_ok": "verified",
    "wgmma_two_outstanding": "violation:BP200",
    "asm_mbarrier_arrive": "unknown",
    "tma_atomic_add": "unknown",
    "mma_barriers_ok": "verified",
    "mma_barriers_expect_a_only": "violation:BP200",
    "mma_barriers_done_at_first": "violation:BP201",
    "pair_sum_ok": "verified",
    "pair_sum_second_releases_twice": "violation:BP121",
    "predicated_ok": "verified",
    "predicated_expect_without_load": "violation:BP130",
    "predicated_first_wait_skipped": "violation:BP200",
    "while_ok": "verified",
    "while_phase_never_flips": "violation:BP200",
    "clc_while_canceled": "verified",
    "multicast_two_ctas": "unknown",
    "inline_pipe_ok": "verified",
    "inline_pipe_reuse_parity_off": "violation:BP200",
    "store_ring_ok": "verified",
    "store_ring_one_buffer": "violation:BP200",
    "store_ring_no_fence": "unknown",
    "two_readers_ok": "verified",
    "two_readers_one_arrives_for_both": "violation:BP200",
    "scaled_a_ok": "verified",
    "scaled_a_no_fence": "unknown",
    "alloc_store_ok": "verified",
    "alloc_store_no_fence": "unknown",
    "cp_ring_ok": "verified",
    "cp_ring_waits_one_group_short": "violation:BP200",
    "cp_ring_never_commits": "unknown",
    "cp_ring_reads_before_commit": "unknown",
}
