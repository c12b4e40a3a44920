"""Gluon kernels in the style of Triton's Gluon tutorials that the examples do not contain, each
with its launches and their expected verdicts (the correct kernel and the bugs it is prone to).

They follow the tutorials' patterns: ring index/phase from the loop index or from carried
counters (`gl.where` wraps, `phase ^= 1`, a `Counter` aggregate advanced under a predicate), a
tile scheduler aggregate with `min`, `range(0, K, BLOCK_K)` loops, stages released by
`tcgen05_commit` or by `tcgen05_mma(mbarriers=...)`, a store partition releasing the buffer of
`outstanding` iterations ago, two consumers of one ring, a Hopper producer/consumer pair, and
the MMA-completion parity arithmetic `(n >> 1) & 1` of a two-barrier MMA wrapper.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 TensorMemoryScalesLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma,
                                                                 tcgen05_copy,
                                                                 tcgen05_mma_scaled)
from triton.experimental.gluon.language.nvidia.blackwell import clc
from triton.experimental.gluon.language.nvidia.blackwell import tma as blackwell_tma
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                             warpgroup_mma, warpgroup_mma_wait)
from triton.language.core import _aggregate as aggregate

from barrierproof.model.gluon import Launch, tensor_desc


# -- 1. a warp-specialized elementwise pipeline: load, compute and store partitions ------------

@gluon.jit
def add_loader(a_desc, b_desc, a_bufs, b_bufs, load_empty, load_ready, n_blocks,
               SHIFT_SLOT: gl.constexpr):
    depth: gl.constexpr = a_bufs.type.shape[0]
    BLOCK: gl.constexpr = a_desc.block_type.shape[1]
    for i in range(n_blocks):
        slot = i % depth
        mbarrier.wait(load_empty.index(slot), (i // depth & 1) ^ 1)
        ready = load_ready.index(slot)
        mbarrier.expect(ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        dst = (i + SHIFT_SLOT) % depth
        tma.async_load(a_desc, [0, i * BLOCK], ready, a_bufs.index(dst))
        tma.async_load(b_desc, [0, i * BLOCK], ready, b_bufs.index(dst))


@gluon.jit
def add_storer(c_desc, c_bufs, c_empty, c_ready, n_blocks, RELEASE_LAG: gl.constexpr):
    depth: gl.constexpr = c_bufs.type.shape[0]
    in_flight: gl.constexpr = depth - 1
    BLOCK: gl.constexpr = c_desc.block_type.shape[1]
    for i in range(n_blocks):
        slot = i % depth
        mbarrier.wait(c_ready.index(slot), i // depth & 1)
        tma.async_store(c_desc, [0, i * BLOCK], c_bufs.index(slot))
        tma.store_wait(in_flight)
        # the buffer of `RELEASE_LAG` stores ago has been read by its store
        done = i - RELEASE_LAG
        mbarrier.arrive(c_empty.index(done % depth), count=1, pred=done >= 0)
    tma.store_wait(0)


@gluon.jit
def add_compute(a_bufs, b_bufs, c_bufs, load_empty, load_ready, c_empty, c_ready, n_blocks,
                layout: gl.constexpr):
    depth: gl.constexpr = a_bufs.type.shape[0]
    c_depth: gl.constexpr = c_bufs.type.shape[0]
    for i in range(n_blocks):
        slot = i % depth
        mbarrier.wait(load_ready.index(slot), i // depth & 1)
        a = a_bufs.index(slot).load(layout)
        b = b_bufs.index(slot).load(layout)
        fence_async_shared()
        mbarrier.arrive(load_empty.index(slot), count=1)
        c_slot = i % c_depth
        mbarrier.wait(c_empty.index(c_slot), (i // c_depth & 1) ^ 1)
        c_bufs.index(c_slot).store(a + b)
        fence_async_shared()
        mbarrier.arrive(c_ready.index(c_slot), count=1)


@gluon.jit
def ws_add(a_desc, b_desc, c_desc, n, LOAD_DEPTH: gl.constexpr, STORE_DEPTH: gl.constexpr,
           SHIFT_SLOT: gl.constexpr, RELEASE_LAG: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [LOAD_DEPTH] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [LOAD_DEPTH] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [STORE_DEPTH] + c_desc.block_type.shape,
                                       c_desc.layout)
    load_empty = gl.allocate_shared_memory(gl.int64, [LOAD_DEPTH, 1], mbarrier.MBarrierLayout())
    load_ready = gl.allocate_shared_memory(gl.int64, [LOAD_DEPTH, 1], mbarrier.MBarrierLayout())
    c_empty = gl.allocate_shared_memory(gl.int64, [STORE_DEPTH, 1], mbarrier.MBarrierLayout())
    c_ready = gl.allocate_shared_memory(gl.int64, [STORE_DEPTH, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(LOAD_DEPTH):
        mbarrier.init(load_empty.index(i), count=1)
        mbarrier.init(load_ready.index(i), count=1)
    for i in gl.static_range(STORE_DEPTH):
        mbarrier.init(c_empty.index(i), count=1)
        mbarrier.init(c_ready.index(i), count=1)
    BLOCK: gl.constexpr = a_desc.block_type.shape[1]
    n_blocks = gl.cdiv(n, BLOCK)
    gl.warp_specialize([
        (add_compute, (a_bufs, b_bufs, c_bufs, load_empty, load_ready, c_empty, c_ready,
                       n_blocks, layout)),
        (add_loader, (a_desc, b_desc, a_bufs, b_bufs, load_empty, load_ready, n_blocks,
                      SHIFT_SLOT)),
        (add_storer, (c_desc, c_bufs, c_empty, c_ready, n_blocks, RELEASE_LAG)),
    ], [1, 1], [24, 24])


def _ws_add(**knobs):
    args = dict(a_desc=tensor_desc("fp32", [32, 64]), b_desc=tensor_desc("fp32", [32, 64]),
                c_desc=tensor_desc("fp32", [32, 64]), n=320, LOAD_DEPTH=2, STORE_DEPTH=2,
                SHIFT_SLOT=0, RELEASE_LAG=1)
    args.update(knobs)
    return Launch(ws_add, args=args, num_warps=4, target="cuda:100")


add = _ws_add()
add_three_store_buffers = _ws_add(STORE_DEPTH=3, RELEASE_LAG=2)
# one buffer each way: the store partition waits for its store to finish before each release
add_single_buffers = _ws_add(LOAD_DEPTH=1, STORE_DEPTH=1, RELEASE_LAG=0)
# the store partition releases the buffer its own store is still reading
add_release_in_flight_store = _ws_add(RELEASE_LAG=0)
# the loader fills the slot after the one whose barrier it arms
add_slot_off_by_one = _ws_add(SHIFT_SLOT=1)


# -- 2. a persistent warp-specialized matmul: commit releases the stages ----------------------

@aggregate
class Counter:
    index: gl.tensor
    phase: gl.tensor
    num_barriers: gl.constexpr

    @gluon.jit
    def create(phase, num_barriers: gl.constexpr):
        return Counter(gl.to_tensor(0), gl.to_tensor(phase), num_barriers)

    @gluon.must_use_result
    @gluon.jit
    def next(self, pred=True):
        bumped = self.index + gl.where(pred, 1, 0)
        wrap = bumped == self.num_barriers
        return Counter(gl.where(wrap, 0, bumped), gl.where(wrap, self.phase ^ 1, self.phase),
                       self.num_barriers)


@aggregate
class Tiles:
    """Each program takes a contiguous run of the output tiles."""

    start: gl.tensor
    end: gl.tensor

    @gluon.constexpr_function
    def __init__(self, start, end):
        self.start = start
        self.end = end

    @gluon.jit
    def of(M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
        total = gl.cdiv(M, BLOCK_M) * gl.cdiv(N, BLOCK_N)
        per_program = gl.cdiv(total, gl.num_programs(0))
        start = gl.program_id(0) * per_program
        return Tiles(start, min(start + per_program, total))

    @gluon.jit
    def count(self):
        return self.end - self.start


@gluon.jit
def mm_loader(a_desc, b_desc, c_desc, a_bufs, b_bufs, empty, ready, EMPTY_START: gl.constexpr):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    tiles = Tiles.of(c_desc.shape[0], c_desc.shape[1], c_desc.block_type.shape[0],
                     c_desc.block_type.shape[1])
    at = Counter.create(EMPTY_START, empty.shape[0])
    for t in range(tiles.count()):
        for k in range(0, a_desc.shape[1], BLOCK_K):
            bar = ready.index(at.index)
            mbarrier.wait(empty.index(at.index), at.phase)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [0, k], bar, a_bufs.index(at.index))
            tma.async_load(b_desc, [k, 0], bar, b_bufs.index(at.index))
            at = at.next()


@gluon.jit
def mm_mma(a_desc, c_desc, a_bufs, b_bufs, empty, ready, accs, acc_empty, acc_ready):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    tiles = Tiles.of(c_desc.shape[0], c_desc.shape[1], c_desc.block_type.shape[0],
                     c_desc.block_type.shape[1])
    at = Counter.create(0, empty.shape[0])
    acc_at = Counter.create(1, acc_empty.shape[0])
    for t in range(tiles.count()):
        mbarrier.wait(acc_empty.index(acc_at.index), acc_at.phase)
        acc = accs.index(acc_at.index)
        use_acc = False
        for k in range(0, a_desc.shape[1], BLOCK_K):
            mbarrier.wait(ready.index(at.index), at.phase)
            tcgen05_mma(a_bufs.index(at.index), b_bufs.index(at.index), acc, use_acc=use_acc)
            tcgen05_commit(empty.index(at.index))
            at = at.next()
            use_acc = True
        tcgen05_commit(acc_ready.index(acc_at.index))
        acc_at = acc_at.next()


@gluon.jit
def mm_epilogue(c_desc, accs, acc_empty, acc_ready, c_smem, RELEASE_ACC: gl.constexpr,
                num_warps: gl.constexpr):
    tiles = Tiles.of(c_desc.shape[0], c_desc.shape[1], c_desc.block_type.shape[0],
                     c_desc.block_type.shape[1])
    acc_at = Counter.create(0, acc_empty.shape[0])
    for t in range(tiles.count()):
        mbarrier.wait(acc_ready.index(acc_at.index), acc_at.phase)
        acc_buf = accs.index(acc_at.index)
        acc = acc_buf.load(acc_buf.get_reg_layout(num_warps=num_warps))
        mbarrier.arrive(acc_empty.index(acc_at.index), count=1, pred=RELEASE_ACC)
        acc_at = acc_at.next()
        tma.store_wait(pendings=0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def persistent_commit(a_desc, b_desc, c_desc, STAGES: gl.constexpr, EMPTY_START: gl.constexpr,
                      RELEASE_ACC: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(empty.index(i), count=1)
        mbarrier.init(ready.index(i), count=1)
    accs = allocate_tensor_memory(gl.float32, [2, BLOCK_M, BLOCK_N],
                                  TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    acc_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(acc_empty.index(i), count=1)
        mbarrier.init(acc_ready.index(i), count=1)
    gl.warp_specialize([
        (mm_epilogue, (c_desc, accs, acc_empty, acc_ready, c_smem, RELEASE_ACC, num_warps)),
        (mm_loader, (a_desc, b_desc, c_desc, a_bufs, b_bufs, empty, ready, EMPTY_START)),
        (mm_mma, (a_desc, c_desc, a_bufs, b_bufs, empty, ready, accs, acc_empty, acc_ready)),
    ], [1, 1], [24, 24])


def _persistent(**knobs):
    # six 128x128 output tiles over two programs, each two k-tiles deep, a two-slot ring
    args = dict(a_desc=tensor_desc("fp16", [128, 64], shape=(384, 128)),
                b_desc=tensor_desc("fp16", [64, 128], shape=(128, 256)),
                c_desc=tensor_desc("fp16", [128, 128], shape=(384, 256)),
                STAGES=2, EMPTY_START=1, RELEASE_ACC=True)
    args.update(knobs)
    return Launch(persistent_commit, args=args, num_warps=4, target="cuda:100", grid=(2,))


persistent = _persistent()
# the loader's first wait on a fresh `empty` asks for the phase that has not completed
persistent_empty_phase_0 = _persistent(EMPTY_START=0)
# the epilogue never gives the accumulator back: the third tile waits forever
persistent_no_acc_release = _persistent(RELEASE_ACC=False)


# -- 3. one partition, an MMA wrapper with two completion barriers ---------------------------

@gluon.jit
def wait_mmas(bars, issued, outstanding: gl.constexpr, PARITY_FLIP: gl.constexpr):
    """Wait until at most `outstanding` of the `issued` MMAs are in flight."""
    past = issued - 1 - outstanding
    mbarrier.wait(bars.index(past & 1), ((past >> 1) & 1) ^ PARITY_FLIP)


@gluon.jit
def two_barrier_mma(a_desc, b_desc, K, PARITY_FLIP: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape,
                                       b_desc.layout)
    load_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mma_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(load_bars.index(i), count=1)
        mbarrier.init(mma_bars.index(i), count=1)
    acc = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N],
                                 TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    issued = 0
    use_acc = False
    for k in range(0, K, BLOCK_K):
        slot = issued % 2
        # the slot was last read by MMA issued - 2: at most one MMA may still be in flight
        wait_mmas(mma_bars, issued, 1, PARITY_FLIP)
        bar = load_bars.index(slot)
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k], bar, a_bufs.index(slot))
        tma.async_load(b_desc, [k, 0], bar, b_bufs.index(slot))
        mbarrier.wait(bar, issued // 2 & 1)
        tcgen05_mma(a_bufs.index(slot), b_bufs.index(slot), acc, use_acc=use_acc)
        # the operands name the CTAs the commit goes to: this CTA alone, in a one-CTA launch
        tcgen05_commit(mma_bars.index(slot), descs=[a_bufs.index(slot), b_bufs.index(slot)])
        issued += 1
        use_acc = True
    wait_mmas(mma_bars, issued, 0, PARITY_FLIP)
    out = acc.load(acc.get_reg_layout(num_warps=num_warps))


def _two_barrier(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 128]),
                K=384, PARITY_FLIP=0)
    args.update(knobs)
    return Launch(two_barrier_mma, args=args, num_warps=4, target="cuda:100")


mma_wrapper = _two_barrier()
# the parity of the completion wait is flipped: it passes before the MMA is done
mma_wrapper_wrong_parity = _two_barrier(PARITY_FLIP=1)


# -- 4. two consumers of one ring: the slot is free when both have read it --------------------

@gluon.jit
def shared_loader(a_desc, a_bufs, empty, ready, n_tiles):
    depth: gl.constexpr = a_bufs.type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    phase = 1
    slot = 0
    for k in range(n_tiles):
        mbarrier.wait(empty.index(slot), phase)
        mbarrier.expect(ready.index(slot), a_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BLOCK_K], ready.index(slot),
                                        a_bufs.index(slot))
        slot += 1
        if slot == depth:
            slot = 0
            phase ^= 1


@gluon.jit
def half_mma(a_bufs, b_half, acc, empty, ready, done, n_tiles, RELEASES: gl.constexpr):
    depth: gl.constexpr = a_bufs.type.shape[0]
    phase = 0
    slot = 0
    for k in range(n_tiles):
        mbarrier.wait(ready.index(slot), phase)
        if RELEASES:
            tcgen05_mma(a_bufs.index(slot), b_half, acc, use_acc=k > 0,
                        mbarriers=[empty.index(slot)])
        else:
            tcgen05_mma(a_bufs.index(slot), b_half, acc, use_acc=k > 0)
        slot += 1
        if slot == depth:
            slot = 0
            phase ^= 1
    tcgen05_commit(done)


@gluon.jit
def wait_both(done):
    mbarrier.wait(done, 0)


@gluon.jit
def two_consumers(a_desc, n, EMPTY_COUNT: gl.constexpr, SECOND_RELEASES: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [3] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_K, 64], gl.float16)
    b_halves = gl.allocate_shared_memory(gl.float16, [2, BLOCK_K, 64], b_layout)
    empty = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(3):
        mbarrier.init(empty.index(i), count=EMPTY_COUNT)
        mbarrier.init(ready.index(i), count=1)
    done = mbarrier.allocate_mbarrier()
    mbarrier.init(done, count=2)     # both consumers' last MMAs
    accs = allocate_tensor_memory(gl.float32, [2, BLOCK_M, 64],
                                  TensorMemoryLayout([BLOCK_M, 64], col_stride=1))
    n_tiles = gl.cdiv(n, BLOCK_K)
    gl.warp_specialize([
        (wait_both, (done,)),
        (shared_loader, (a_desc, a_bufs, empty, ready, n_tiles)),
        (half_mma, (a_bufs, b_halves.index(0), accs.index(0), empty, ready, done, n_tiles,
                    True)),
        (half_mma, (a_bufs, b_halves.index(1), accs.index(1), empty, ready, done, n_tiles,
                    SECOND_RELEASES)),
    ], [1, 1, 1], [24, 24, 24])


def _two_consumers(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), n=320, EMPTY_COUNT=2,
                SECOND_RELEASES=True)
    args.update(knobs)
    return Launch(two_consumers, args=args, num_warps=4, target="cuda:100")


consumers = _two_consumers()
# a slot counts as free after the first consumer's release: the second may still read it
consumers_empty_count_1 = _two_consumers(EMPTY_COUNT=1)
# the second consumer never releases: the loader's fourth wait never returns
consumers_missing_release = _two_consumers(SECOND_RELEASES=False)


# -- 5. Hopper: a producer partition and a wgmma consumer releasing the previous slot ---------

@gluon.jit
def hopper_producer(a_desc, b_desc, a_bufs, b_bufs, empty, ready, k_tiles,
                    EXTRA_BYTES: gl.constexpr):
    depth: gl.constexpr = a_bufs.type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    for k in range(k_tiles):
        s = k % depth
        mbarrier.wait(empty.index(s), ((k // depth) & 1) ^ 1)
        mbarrier.expect(ready.index(s),
                        a_desc.block_type.nbytes + b_desc.block_type.nbytes + EXTRA_BYTES)
        tma.async_load(a_desc, [0, k * BLOCK_K], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [k * BLOCK_K, 0], ready.index(s), b_bufs.index(s))


@gluon.jit
def hopper_consumer(a_bufs, b_bufs, empty, ready, k_tiles, IN_FLIGHT: gl.constexpr,
                    RELEASE_LAG: gl.constexpr, num_warps: gl.constexpr):
    depth: gl.constexpr = a_bufs.type.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, 64, 16])
    acc = gl.zeros((64, 64), gl.float32, layout)
    for k in range(k_tiles):
        s = k % depth
        mbarrier.wait(ready.index(s), (k // depth) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        # with IN_FLIGHT wgmmas left in flight, the ones before them are done with their slots
        acc = warpgroup_mma_wait(num_outstanding=IN_FLIGHT, deps=[acc])
        done = k - RELEASE_LAG
        mbarrier.arrive(empty.index(done % depth), count=1, pred=done >= 0)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])


@gluon.jit
def hopper_ws(a_desc, b_desc, K, STAGES: gl.constexpr, IN_FLIGHT: gl.constexpr,
              RELEASE_LAG: gl.constexpr, EXTRA_BYTES: gl.constexpr, num_warps: gl.constexpr):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(empty.index(i), count=1)
        mbarrier.init(ready.index(i), count=1)
    k_tiles = gl.cdiv(K, a_desc.block_type.shape[1])
    gl.warp_specialize([
        (hopper_consumer, (a_bufs, b_bufs, empty, ready, k_tiles, IN_FLIGHT, RELEASE_LAG,
                           num_warps)),
        (hopper_producer, (a_desc, b_desc, a_bufs, b_bufs, empty, ready, k_tiles, EXTRA_BYTES)),
    ], [1], [24])


def _hopper(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [64, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                K=320, STAGES=3, IN_FLIGHT=1, RELEASE_LAG=1, EXTRA_BYTES=0)
    args.update(knobs)
    return Launch(hopper_ws, args=args, num_warps=4, target="cuda:90")


hopper = _hopper()
hopper_wait_all = _hopper(IN_FLIGHT=0, RELEASE_LAG=0)
# one wgmma left in flight, yet its own slot is released: the next load overwrites it
hopper_release_in_flight = _hopper(RELEASE_LAG=0)
# the expect counts 16 bytes more than the two loads bring: `ready` never completes
hopper_expect_too_many_bytes = _hopper(EXTRA_BYTES=16)


# -- 6. ping-pong: two softmax partitions take turns through a turnstile ----------------------

@aggregate
class Turn:
    """A ring position; a ring of one barrier flips its phase at every step."""

    index: gl.tensor
    phase: gl.tensor
    num_barriers: gl.constexpr

    @gluon.must_use_result
    @gluon.jit
    def step(self):
        if self.num_barriers == 1:
            return Turn(gl.to_tensor(0), self.phase ^ 1, self.num_barriers)
        bumped = self.index + 1
        wrap = bumped == self.num_barriers
        return Turn(gl.where(wrap, 0, bumped), gl.where(wrap, self.phase ^ 1, self.phase),
                    self.num_barriers)


@aggregate
class Pipe:
    """Buffers with a full and a free barrier each; `prime` hands every buffer to the producer
    at the start, so both sides count phases from 0."""

    full: gl.shared_memory_descriptor
    free: gl.shared_memory_descriptor
    depth: gl.constexpr

    @gluon.constexpr_function
    def __init__(self, full, free, depth):
        self.full = full
        self.free = free
        self.depth = gl.constexpr(depth)

    @gluon.jit
    def make(depth: gl.constexpr, consumers: gl.constexpr):
        full = mbarrier.allocate_mbarrier(batch=depth)
        free = mbarrier.allocate_mbarrier(batch=depth)
        for i in gl.static_range(depth):
            mbarrier.init(full.index(i), count=1)
            mbarrier.init(free.index(i), count=consumers)
        return Pipe(full, free, depth)

    @gluon.jit
    def prime(self, consumers: gl.constexpr):
        for i in gl.static_range(self.depth):
            mbarrier.arrive(self.free.index(i), count=consumers)

    @gluon.jit
    def start(self):
        return Turn(gl.to_tensor(0), gl.to_tensor(0), self.depth)

    @gluon.jit
    def produce(self, turn):
        mbarrier.wait(self.free.index(turn.index), turn.phase)
        return self.full.index(turn.index), turn.index, turn.step()

    @gluon.jit
    def consume(self, turn):
        mbarrier.wait(self.full.index(turn.index), turn.phase)
        return self.free.index(turn.index), turn.index, turn.step()


@gluon.jit
def pp_load(k_desc, k_bufs, kv, n_kv, TAIL: gl.constexpr):
    turn = kv.start()
    for j in range(n_kv):
        bar, slot, turn = kv.produce(turn)
        mbarrier.expect(bar, k_desc.block_type.nbytes)
        tma.async_load(k_desc, [j * k_desc.block_type.shape[0], 0], bar, k_bufs.index(slot))
    if TAIL:
        # the producer's tail: the last releases of K arrive before the kernel exits
        for i in gl.static_range(kv.depth):
            bar, slot, turn = kv.produce(turn)


@gluon.jit
def pp_mma(q_bufs, k_bufs, s_tmem, kv, s0, s1, n_kv):
    kv_turn = kv.start()
    s0_turn = s0.start()
    s1_turn = s1.start()
    for j in range(n_kv):
        kv_free, slot, kv_turn = kv.consume(kv_turn)
        k_t = k_bufs.index(slot).permute((1, 0))
        s0_full, _, s0_turn = s0.produce(s0_turn)
        tcgen05_mma(q_bufs.index(0), k_t, s_tmem.index(0), use_acc=False,
                    mbarriers=[s0_full, kv_free])
        s1_full, _, s1_turn = s1.produce(s1_turn)
        tcgen05_mma(q_bufs.index(1), k_t, s_tmem.index(1), use_acc=False,
                    mbarriers=[s1_full, kv_free])


@gluon.jit
def pp_softmax(s_tmem, s, turnstile, n_kv, FIRST: gl.constexpr, EARLY_FREE: gl.constexpr,
               num_warps: gl.constexpr):
    s_turn = s.start()
    gate = turnstile.start()
    for j in range(n_kv):
        s_free, _, s_turn = s.consume(s_turn)
        if EARLY_FREE:
            mbarrier.arrive(s_free, count=1)
        # the two partitions alternate: the first enters on `free`, the second on `full`
        if FIRST:
            go, _, gate = turnstile.produce(gate)
        else:
            go, _, gate = turnstile.consume(gate)
        scores = s_tmem.load(s_tmem.get_reg_layout(num_warps=num_warps))
        s_tmem.store(gl.exp2(scores))         # P takes the place of S
        mbarrier.arrive(go, count=1)
        if not EARLY_FREE:
            mbarrier.arrive(s_free, count=1)


@gluon.jit
def pingpong(q_desc, k_desc, N_CTX, KV_DEPTH: gl.constexpr, PRIME_TURNSTILE: gl.constexpr,
             EARLY_FREE: gl.constexpr, TAIL: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    q_bufs = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [KV_DEPTH] + k_desc.block_type.shape,
                                       k_desc.layout)
    s_tmem = allocate_tensor_memory(gl.float32, [2, BLOCK_M, BLOCK_N],
                                    TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    kv = Pipe.make(KV_DEPTH, 2)          # both MMAs of a step read the K tile
    s0 = Pipe.make(1, 1)
    s1 = Pipe.make(1, 1)
    turnstile = Pipe.make(1, 1)
    kv.prime(2)
    s0.prime(1)
    s1.prime(1)
    if PRIME_TURNSTILE:
        turnstile.prime(1)
    n_kv = gl.cdiv(N_CTX, BLOCK_N)
    gl.warp_specialize([
        (pp_softmax, (s_tmem.index(0), s0, turnstile, n_kv, True, EARLY_FREE, num_warps)),
        (pp_softmax, (s_tmem.index(1), s1, turnstile, n_kv, False, EARLY_FREE, num_warps)),
        (pp_mma, (q_bufs, k_bufs, s_tmem, kv, s0, s1, n_kv)),
        (pp_load, (k_desc, k_bufs, kv, n_kv, TAIL)),
    ], [4, 1, 1], [192, 24, 24])


def _pingpong(**knobs):
    args = dict(q_desc=tensor_desc("fp16", [128, 64]), k_desc=tensor_desc("fp16", [128, 64]),
                N_CTX=512, KV_DEPTH=2, PRIME_TURNSTILE=True, EARLY_FREE=False, TAIL=True)
    args.update(knobs)
    return Launch(pingpong, args=args, num_warps=4, target="cuda:100")


pingpong_softmax = _pingpong()
# nobody hands the turnstile to the first partition: neither ever enters
pingpong_turnstile_not_primed = _pingpong(PRIME_TURNSTILE=False)
# S is handed back to the MMA before it is loaded: the next QK^T overwrites it meanwhile
pingpong_free_before_load = _pingpong(EARLY_FREE=True)
# no producer tail: the MMA's last release of K is still queued when every partition has exited
pingpong_no_producer_tail = _pingpong(TAIL=False)


# -- 7. S borrowed for P and its row statistics: partitions on column slices of one tile ------

@gluon.jit
def borrow_softmax(s_tmem, s_ready, p_ready, stats_ready, STAT_COL: gl.constexpr,
                   num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = s_tmem.shape[0]
    BLOCK_N: gl.constexpr = s_tmem.shape[1]
    mbarrier.wait(s_ready, 0)
    s = s_tmem.load(s_tmem.get_reg_layout(num_warps=num_warps))
    # P in fp16 takes the first half of S's columns
    p_layout: gl.constexpr = TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1)
    p_tmem = s_tmem.reinterpret(gl.float16, [BLOCK_M, 2 * BLOCK_N], p_layout).slice(0, BLOCK_N)
    p_tmem.store(gl.convert_layout(s.to(gl.float16), p_tmem.get_reg_layout(num_warps=num_warps)))
    mbarrier.arrive(p_ready, count=1)
    # the row maximum goes to a column of S past P, while the MMA reads P
    m_tmem = s_tmem.slice(STAT_COL, 1)
    m = gl.max(s, axis=1).expand_dims(1)
    m_tmem.store(gl.convert_layout(m, m_tmem.get_reg_layout(num_warps=num_warps)))
    mbarrier.arrive(stats_ready, count=1)


@gluon.jit
def borrow_mma(s_tmem, v_smem, o_tmem, p_ready, o_done):
    BLOCK_M: gl.constexpr = s_tmem.shape[0]
    BLOCK_N: gl.constexpr = s_tmem.shape[1]
    mbarrier.wait(p_ready, 0)
    p_layout: gl.constexpr = TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1)
    p_tmem = s_tmem.reinterpret(gl.float16, [BLOCK_M, 2 * BLOCK_N], p_layout).slice(0, BLOCK_N)
    tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False, mbarriers=[o_done])


@gluon.jit
def borrow_correction(s_tmem, stats_ready, stats_read, STAT_COL: gl.constexpr,
                      num_warps: gl.constexpr):
    mbarrier.wait(stats_ready, 0)
    m_tmem = s_tmem.slice(STAT_COL, 1)
    m = m_tmem.load(m_tmem.get_reg_layout(num_warps=num_warps))
    mbarrier.arrive(stats_read, count=1)


@gluon.jit
def borrowed_s(STAT_COL: gl.constexpr, num_warps: gl.constexpr):
    s_tmem = allocate_tensor_memory(gl.float32, [128, 128],
                                    TensorMemoryLayout([128, 128], col_stride=1))
    o_tmem = allocate_tensor_memory(gl.float32, [128, 64],
                                    TensorMemoryLayout([128, 64], col_stride=1))
    v_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 64], gl.float16)
    v_smem = gl.allocate_shared_memory(gl.float16, [128, 64], v_layout)
    bars = gl.allocate_shared_memory(gl.int64, [5, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(5):
        mbarrier.init(bars.index(i), count=1)
    s_ready = bars.index(0)
    mbarrier.arrive(s_ready, count=1)        # S stands computed
    gl.warp_specialize([
        (borrow_softmax, (s_tmem, s_ready, bars.index(1), bars.index(2), STAT_COL, num_warps)),
        (borrow_mma, (s_tmem, v_smem, o_tmem, bars.index(1), bars.index(3))),
        (borrow_correction, (s_tmem, bars.index(2), bars.index(4), STAT_COL, 4)),
    ], [1, 4], [24, 128])
    mbarrier.wait(bars.index(3), 0)
    mbarrier.wait(bars.index(4), 0)


borrowed = Launch(borrowed_s, args=dict(STAT_COL=65), num_warps=4, target="cuda:100")
# the statistics column falls inside P: it is written while the MMA reads P
borrowed_stats_over_p = Launch(borrowed_s, args=dict(STAT_COL=3), num_warps=4,
                               target="cuda:100")


# -- 8. block-scaled MMA: scale factors written to tensor memory per stage ---------------------

@gluon.jit
def scaled_mma(a_desc, b_desc, K, WAIT_FOR_MMA: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape,
                                       b_desc.layout)
    scales_layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scales = allocate_tensor_memory(gl.uint8, [BLOCK_M, BLOCK_K // 32], scales_layout)
    b_scales = allocate_tensor_memory(gl.uint8, [BLOCK_N, BLOCK_K // 32], scales_layout)
    load_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mma_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(load_bars.index(i), count=1)
        mbarrier.init(mma_bars.index(i), count=1)
    acc = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N],
                                 TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    ones = gl.full([BLOCK_M, BLOCK_K // 32], 127, gl.uint8,
                   a_scales.get_reg_layout(num_warps=num_warps))
    k_tiles = gl.cdiv(K, BLOCK_K)
    for k in range(k_tiles):
        s = k % 2
        if WAIT_FOR_MMA:        # the previous MMA read the scales (and, before it, this stage)
            mbarrier.wait(mma_bars.index((k - 1) % 2), ((k - 1) // 2) & 1, pred=k >= 1)
        bar = load_bars.index(s)
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BLOCK_K], bar, a_bufs.index(s))
        tma.async_load(b_desc, [0, k * BLOCK_K], bar, b_bufs.index(s))
        a_scales.store(ones)
        b_scales.store(ones)
        mbarrier.wait(bar, (k // 2) & 1)
        tcgen05_mma_scaled(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc,
                           a_scales, b_scales, "e4m3", "e4m3", use_acc=k > 0,
                           mbarriers=[mma_bars.index(s)])
    last = k_tiles - 1
    mbarrier.wait(mma_bars.index(last % 2), (last // 2) & 1, pred=k_tiles > 0)
    if not WAIT_FOR_MMA:
        mbarrier.wait(mma_bars.index((last - 1) % 2), ((last - 1) // 2) & 1, pred=k_tiles > 1)


def _scaled(**knobs):
    args = dict(a_desc=tensor_desc("fp8e4nv", [128, 128]), b_desc=tensor_desc("fp8e4nv", [128, 128]),
                K=512, WAIT_FOR_MMA=True)
    args.update(knobs)
    return Launch(scaled_mma, args=args, num_warps=4, target="cuda:100")


block_scaled = _scaled()
# the scales are rewritten while the previous MMA may still read them
block_scaled_no_wait = _scaled(WAIT_FOR_MMA=False)


# -- 9. a ring advanced under a predicate: every `every`-th tile is empty and is skipped -------

@gluon.jit
def ragged_loader(desc, bufs, empty, ready, n_tiles, every):
    at = Counter.create(1, empty.shape[0])
    for k in range(n_tiles):
        has_data = k % every != every - 1
        mbarrier.wait(empty.index(at.index), at.phase, pred=has_data)
        mbarrier.expect(ready.index(at.index), desc.block_type.nbytes, pred=has_data)
        tma.async_load(desc, [0, k * desc.block_type.shape[1]], ready.index(at.index),
                       bufs.index(at.index), pred=has_data)
        at = at.next(pred=has_data)


@gluon.jit
def ragged_consumer(bufs, empty, ready, n_tiles, every, ALWAYS_ADVANCE: gl.constexpr,
                    num_warps: gl.constexpr):
    at = Counter.create(0, empty.shape[0])
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
    for k in range(n_tiles):
        has_data = k % every != every - 1
        mbarrier.wait(ready.index(at.index), at.phase, pred=has_data)
        x = bufs.index(at.index).load(layout)
        mbarrier.arrive(empty.index(at.index), count=1, pred=has_data)
        at = at.next(pred=has_data or ALWAYS_ADVANCE)


@gluon.jit
def ragged(desc, n, every, ALWAYS_ADVANCE: gl.constexpr, num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(empty.index(i), count=1)
        mbarrier.init(ready.index(i), count=1)
    BLOCK: gl.constexpr = desc.block_type.shape[1]
    n_tiles = gl.cdiv(n, BLOCK)
    gl.warp_specialize([
        (ragged_consumer, (bufs, empty, ready, n_tiles, every, ALWAYS_ADVANCE, num_warps)),
        (ragged_loader, (desc, bufs, empty, ready, n_tiles, every)),
    ], [1], [24])


def _ragged(**knobs):
    args = dict(desc=tensor_desc("fp32", [32, 64]), n=512, every=3, ALWAYS_ADVANCE=False)
    args.update(knobs)
    return Launch(ragged, args=args, num_warps=4, target="cuda:100")


ragged_tiles = _ragged()
# the consumer advances past the tiles without data too: its ring position runs ahead of the
# producer's, so a wait passes on a fill of the lap before on one schedule and on another waits
# for a fill that never comes (BP101: the deadlock is the alias's)
ragged_consumer_always_advances = _ragged(ALWAYS_ADVANCE=True)

# -- 10. Hopper, one warpgroup: a TMA prefetch ring feeding async wgmma, refilled behind it -----

@gluon.jit
def prefetch_wgmma(a_desc, b_desc, K, STAGES: gl.constexpr, BOTH_BYTES: gl.constexpr,
                   LOOKAHEAD: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    if BOTH_BYTES:
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    else:
        nbytes: gl.constexpr = a_desc.block_type.nbytes
    k_tiles = gl.cdiv(K, BLOCK_K)
    # the prologue loads the first LOOKAHEAD tiles (every stage but one)
    for i in gl.static_range(LOOKAHEAD):
        mbarrier.expect(bars.index(i), nbytes, pred=i < k_tiles)
        tma.async_load(a_desc, [0, i * BLOCK_K], bars.index(i), a_bufs.index(i), pred=i < k_tiles)
        tma.async_load(b_desc, [i * BLOCK_K, 0], bars.index(i), b_bufs.index(i), pred=i < k_tiles)
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, 64, 16])
    acc = gl.zeros((64, 64), gl.float32, layout)
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(bars.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
        # the wgmma of step k - 1 is done: its stage takes tile k - 1 + STAGES
        nxt = k + LOOKAHEAD
        r = nxt % STAGES
        go = nxt < k_tiles
        mbarrier.expect(bars.index(r), nbytes, pred=go)
        tma.async_load(a_desc, [0, nxt * BLOCK_K], bars.index(r), a_bufs.index(r), pred=go)
        tma.async_load(b_desc, [nxt * BLOCK_K, 0], bars.index(r), b_bufs.index(r), pred=go)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])


def _prefetch(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [64, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                K=384, STAGES=3, BOTH_BYTES=True, LOOKAHEAD=2)
    args.update(knobs)
    return Launch(prefetch_wgmma, args=args, num_warps=4, target="cuda:90")


prefetch = _prefetch()
prefetch_two_stages = _prefetch(STAGES=2, LOOKAHEAD=1)
# the expect counts A's bytes only: the stage reads as landed while B is still arriving
prefetch_expect_one_of_two_loads = _prefetch(BOTH_BYTES=False)
# one tile further ahead: the stage of the wgmma left in flight is refilled under it
prefetch_refill_in_flight = _prefetch(LOOKAHEAD=3)


# -- 11. persistent, one partition: a carried load ring, tcgen05 commit, double-buffered stores --

@aggregate
class Phases:
    """The slot and phase of a ring, kept by the caller across tiles."""

    index: gl.tensor
    phase: gl.tensor
    depth: gl.constexpr

    @gluon.jit
    def zero(depth: gl.constexpr):
        return Phases(gl.to_tensor(0), gl.to_tensor(0), depth)

    @gluon.must_use_result
    @gluon.jit
    def bump(self):
        if self.depth == 1:
            return Phases(self.index, self.phase ^ 1, self.depth)
        up = self.index + 1
        wrap = up == self.depth
        return Phases(gl.where(wrap, 0, up), gl.where(wrap, self.phase ^ 1, self.phase),
                      self.depth)


@gluon.jit
def persistent_one_partition(a_desc, b_desc, c_desc, STAGES: gl.constexpr,
                             RESET_PER_TILE: gl.constexpr, STORES_LEFT: gl.constexpr,
                             num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    load_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_bars.index(i), count=1)
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(mma_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N],
                                 TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    num_tiles = gl.cdiv(c_desc.shape[0], BLOCK_M) * gl.cdiv(c_desc.shape[1], BLOCK_N)
    loads = Phases.zero(STAGES)
    mma = Phases.zero(1)
    n_out = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        if RESET_PER_TILE:
            loads = Phases.zero(STAGES)
        for k in range(0, a_desc.shape[1], BLOCK_K):
            bar = load_bars.index(loads.index)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [0, k], bar, a_bufs.index(loads.index))
            tma.async_load(b_desc, [0, k], bar, b_bufs.index(loads.index))
            mbarrier.wait(bar, loads.phase)
            tcgen05_mma(a_bufs.index(loads.index), b_bufs.index(loads.index).permute((1, 0)), acc,
                        use_acc=k > 0)
            tcgen05_commit(mma_bar)
            mbarrier.wait(mma_bar, mma.phase)
            mma = mma.bump()
            loads = loads.bump()
        out = acc.load(acc.get_reg_layout(num_warps=num_warps))
        c = c_bufs.index(n_out % 2)
        # the store issued from this buffer two tiles ago has read it
        tma.store_wait(STORES_LEFT)
        c.store(out.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [0, 0], c)
        n_out += 1
    tma.store_wait(0)


def _one_partition(**knobs):
    args = dict(a_desc=tensor_desc("fp16", [128, 64], shape=(256, 192)),
                b_desc=tensor_desc("fp16", [128, 64], shape=(128, 192)),
                c_desc=tensor_desc("fp16", [128, 128], shape=(256, 256)),
                STAGES=2, RESET_PER_TILE=False, STORES_LEFT=1)
    args.update(knobs)
    return Launch(persistent_one_partition, args=args, num_warps=4, target="cuda:100")


one_partition = _one_partition()
# the load ring restarts at slot 0, phase 0 on every tile: on the second tile slot 1's wait
# for phase 0 sees the first tile's completion, and the MMA reads the slot still being loaded
one_partition_phase_reset_per_tile = _one_partition(RESET_PER_TILE=True)
# two stores left in flight over two buffers: the buffer is rewritten while its store reads it
one_partition_store_in_flight = _one_partition(STORES_LEFT=2)


# -- 12. rows gathered by TMA (tile::gather4) into a double-buffered ring feeding tcgen05 -------

@gluon.jit
def gather_mma(x_desc, w_desc, n_blocks, ROW_BYTES_ONLY: gl.constexpr, num_warps: gl.constexpr):
    ROWS: gl.constexpr = 128
    COLS: gl.constexpr = x_desc.block_type.shape[1]
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [2, ROWS, COLS], x_desc.layout)
    w_smem = gl.allocate_shared_memory(w_desc.dtype, w_desc.block_type.shape, w_desc.layout)
    load_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mma_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    w_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(load_bars.index(i), count=1)
        mbarrier.init(mma_bars.index(i), count=1)
    mbarrier.init(w_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [ROWS, w_desc.block_type.shape[0]],
                                 TensorMemoryLayout([ROWS, w_desc.block_type.shape[0]],
                                                    col_stride=1))
    mbarrier.expect(w_bar, w_desc.block_type.nbytes)
    tma.async_load(w_desc, [0, 0], w_bar, w_smem)
    if ROW_BYTES_ONLY:      # the descriptor's block is one row: a gather brings ROWS of them
        nbytes: gl.constexpr = x_desc.block_type.nbytes
    else:
        nbytes: gl.constexpr = ROWS * x_desc.block_type.nbytes
    idx_layout: gl.constexpr = gl.SliceLayout(0, gl.BlockedLayout([1, 4], [32, 1],
                                                                  [1, num_warps], [1, 0]))
    mbarrier.wait(w_bar, 0)
    for i in range(n_blocks):
        s = i % 2
        # the MMA that read this buffer two blocks ago is done
        mbarrier.wait(mma_bars.index(s), ((i // 2) & 1) ^ 1, pred=i >= 2)
        rows = gl.arange(0, ROWS, idx_layout) + i * ROWS
        mbarrier.expect(load_bars.index(s), nbytes)
        blackwell_tma.async_gather(x_desc, rows, 0, load_bars.index(s), x_bufs.index(s))
        mbarrier.wait(load_bars.index(s), (i // 2) & 1)
        tcgen05_mma(x_bufs.index(s), w_smem.permute((1, 0)), acc, use_acc=i > 0,
                    mbarriers=[mma_bars.index(s)])
    last = n_blocks - 1
    mbarrier.wait(mma_bars.index(last % 2), (last // 2) & 1, pred=n_blocks > 0)
    out = acc.load(acc.get_reg_layout(num_warps=num_warps))


def _gather(**knobs):
    args = dict(x_desc=tensor_desc("fp16", [1, 64]), w_desc=tensor_desc("fp16", [64, 64]),
                n_blocks=5, ROW_BYTES_ONLY=False)
    args.update(knobs)
    return Launch(gather_mma, args=args, num_warps=4, target="cuda:100")


gathered = _gather()
# the expect counts one row (the descriptor's block) of the 128 the gather brings: the bytes
# overshoot the expected count and the phase never completes
gathered_expect_one_row = _gather(ROW_BYTES_ONLY=True)


# -- 13. D = A @ B + C: C copied into the accumulator by tcgen05_copy, in order with the MMAs ---

@gluon.jit
def acc_loader(a_desc, b_desc, c_desc, a_bufs, b_bufs, load_empty, load_ready, c_buf, c_empty,
               c_ready, n_tiles):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    c_phase = 1
    at = Counter.create(1, load_empty.shape[0])
    for t in range(n_tiles):
        mbarrier.wait(c_empty, c_phase)
        mbarrier.expect(c_ready, c_desc.block_type.nbytes)
        tma.async_load(c_desc, [t * c_desc.block_type.shape[0], 0], c_ready, c_buf)
        c_phase ^= 1
        for k in range(0, a_desc.shape[1], BLOCK_K):
            bar = load_ready.index(at.index)
            mbarrier.wait(load_empty.index(at.index), at.phase)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [0, k], bar, a_bufs.index(at.index))
            tma.async_load(b_desc, [k, 0], bar, b_bufs.index(at.index))
            at = at.next()


@gluon.jit
def acc_mma(a_desc, a_bufs, b_bufs, load_empty, load_ready, c_buf, c_empty, c_ready, accs,
            acc_empty, acc_ready, n_tiles, RELEASE_C_AT_ISSUE: gl.constexpr):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    c_phase = 0
    at = Counter.create(0, load_empty.shape[0])
    acc_at = Counter.create(1, acc_empty.shape[0])
    for t in range(n_tiles):
        mbarrier.wait(c_ready, c_phase)
        mbarrier.wait(acc_empty.index(acc_at.index), acc_at.phase)
        acc = accs.index(acc_at.index)
        tcgen05_copy(c_buf, acc)
        if RELEASE_C_AT_ISSUE:          # the copy is asynchronous: it may still read c_buf
            mbarrier.arrive(c_empty, count=1)
        else:
            tcgen05_commit(c_empty)
        c_phase ^= 1
        for k in range(0, a_desc.shape[1], BLOCK_K):
            mbarrier.wait(load_ready.index(at.index), at.phase)
            # in order after the copy on the tensor pipe: accumulates onto C
            tcgen05_mma(a_bufs.index(at.index), b_bufs.index(at.index), acc, use_acc=True,
                        mbarriers=[load_empty.index(at.index)])
            at = at.next()
        tcgen05_commit(acc_ready.index(acc_at.index))
        acc_at = acc_at.next()


@gluon.jit
def acc_epilogue(accs, acc_empty, acc_ready, n_tiles, num_warps: gl.constexpr):
    acc_at = Counter.create(0, acc_empty.shape[0])
    for t in range(n_tiles):
        mbarrier.wait(acc_ready.index(acc_at.index), acc_at.phase)
        acc = accs.index(acc_at.index)
        d = acc.load(acc.get_reg_layout(num_warps=num_warps))
        mbarrier.arrive(acc_empty.index(acc_at.index), count=1)
        acc_at = acc_at.next()


@gluon.jit
def matmul_plus_c(a_desc, b_desc, c_desc, n_tiles, STAGES: gl.constexpr,
                  RELEASE_C_AT_ISSUE: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    load_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    load_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_empty.index(i), count=1)
        mbarrier.init(load_ready.index(i), count=1)
    c_buf = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    c_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(c_empty, count=1)
    mbarrier.init(c_ready, count=1)
    accs = allocate_tensor_memory(gl.float32, [2, BLOCK_M, BLOCK_N],
                                  TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
    acc_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(acc_empty.index(i), count=1)
        mbarrier.init(acc_ready.index(i), count=1)
    gl.warp_specialize([
        (acc_epilogue, (accs, acc_empty, acc_ready, n_tiles, num_warps)),
        (acc_loader, (a_desc, b_desc, c_desc, a_bufs, b_bufs, load_empty, load_ready, c_buf,
                      c_empty, c_ready, n_tiles)),
        (acc_mma, (a_desc, a_bufs, b_bufs, load_empty, load_ready, c_buf, c_empty, c_ready, accs,
                   acc_empty, acc_ready, n_tiles, RELEASE_C_AT_ISSUE)),
    ], [1, 1], [24, 24])


def _plus_c(**knobs):
    c_layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    args = dict(a_desc=tensor_desc("fp16", [128, 64], shape=(128, 192)),
                b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp32", [128, 64], layout=c_layout),
                n_tiles=3, STAGES=4, RELEASE_C_AT_ISSUE=False)
    args.update(knobs)
    return Launch(matmul_plus_c, args=args, num_warps=4, target="cuda:100")


plus_c = _plus_c()
# c_buf handed back when the copy is issued, not when it is done: the next C load overwrites it
plus_c_released_at_issue = _plus_c(RELEASE_C_AT_ISSUE=True)


# -- 14. cluster launch control: each tile's worker asks for the next one with clc.try_cancel --

@gluon.jit
def clc_worker(desc, out, n_tiles, EXPECT_RESPONSE: gl.constexpr, READ_EARLY: gl.constexpr,
               num_warps: gl.constexpr):
    BLOCK: gl.constexpr = desc.block_type.shape[0]
    tile = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    response = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    load_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    clc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(load_bar, count=1)
    mbarrier.init(clc_bar, count=1)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
    pid = gl.program_id(0)
    for t in range(n_tiles):
        # ask for the next tile while this one loads: the response lands 16 bytes on clc_bar
        if EXPECT_RESPONSE:
            mbarrier.expect(clc_bar, 16)
        clc.try_cancel(response, clc_bar)
        mbarrier.expect(load_bar, desc.block_type.nbytes)
        tma.async_load(desc, [pid * BLOCK, 0], load_bar, tile)
        mbarrier.wait(load_bar, t & 1)
        x = tile.load(layout)
        if not READ_EARLY:
            mbarrier.wait(clc_bar, t & 1)
        r = clc.load_result(response)
        if READ_EARLY:
            mbarrier.wait(clc_bar, t & 1)
        gl.store(out + t, gl.where(r.is_canceled(), r.program_id(0), -1))
        pid = r.program_id(0)


def _clc(**knobs):
    args = dict(desc=tensor_desc("fp32", [32, 64]), out="*i32", n_tiles=3,
                EXPECT_RESPONSE=True, READ_EARLY=False)
    args.update(knobs)
    return Launch(clc_worker, args=args, num_warps=4, target="cuda:100")


clc_next_tile = _clc()
# the response is read before its barrier completes: the request may still be writing it
clc_response_read_early = _clc(READ_EARLY=True)
# no `mbarrier.expect(clc_bar, 16)`: the request completes bytes but never arrives, so the
# barrier's phase never completes
clc_response_not_expected = _clc(EXPECT_RESPONSE=False)


EXPECT = {
    "add": "verified",
    "add_three_store_buffers": "verified",
    "add_single_buffers": "verified",
    "add_release_in_flight_store": "violation:BP200",
    "add_slot_off_by_one": "violation:BP200",
    "persistent": "verified",
    "persistent_empty_phase_0": "violation:BP100",
    "persistent_no_acc_release": "violation:BP100",
    "mma_wrapper": "verified",
    "mma_wrapper_wrong_parity": "violation:BP100",
    "consumers": "verified",
    "consumers_empty_count_1": "violation:BP200",
    "consumers_missing_release": "violation:BP100",
    "hopper": "verified",
    "hopper_wait_all": "verified",
    "hopper_release_in_flight": "violation:BP200",
    "hopper_expect_too_many_bytes": "violation:BP130",
    "pingpong_softmax": "verified",
    "pingpong_turnstile_not_primed": "violation:BP100",
    "pingpong_free_before_load": "violation:BP201",
    "pingpong_no_producer_tail": "violation:BP104",
    "borrowed": "verified",
    "borrowed_stats_over_p": "violation:BP201",
    "block_scaled": "verified",
    "block_scaled_no_wait": "violation:BP201",
    "ragged_tiles": "verified",
    "ragged_consumer_always_advances": "violation:BP101",
    "prefetch": "verified",
    "prefetch_two_stages": "verified",
    "prefetch_expect_one_of_two_loads": "violation:BP200",
    "prefetch_refill_in_flight": "violation:BP200",
    "one_partition": "verified",
    "one_partition_phase_reset_per_tile": "violation:BP200",
    "one_partition_store_in_flight": "violation:BP200",
    "gathered": "verified",
    "gathered_expect_one_row": "violation:BP130",
    "plus_c": "verified",
    "plus_c_released_at_issue": "violation:BP200",
    "clc_next_tile": "verified",
    "clc_response_read_early": "violation:BP200",
    "clc_response_not_expected": "violation:BP100",
}
