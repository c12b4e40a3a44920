"""Seventh set of Gluon kernels in the style of Triton's Gluon tutorials: a warp-specialized
kernel whose two worker partitions have different warp counts and report to one `done` barrier
counted by its arriving partitions; an MMA loop that signals the epilogue only from its last
MMA (`tcgen05_mma(..., mbarrier_preds=[...])`) and a worker that does the same with a
predicated `mbarrier.arrive(pred=...)`; a TMA ring whose wait phase is a loop-carried variable
flipped when the ring wraps; cluster launch control loops with the response read before its
wait and with a phase that never flips; a persistent warp-specialized Blackwell matmul with a
double-buffered TMEM accumulator and an epilogue cycling two output buffers under
`tma.store_wait(1)`; a Hopper wgmma whose A operand comes from registers; two partitions
filling the row halves of one tile (`.slice`); an epilogue whose staging buffers are the A ring
seen again (`.reinterpret` to four half-stage buffers); a tile loaded as two row halves on two
barriers; and two `warp_specialize` regions one after the other on one ring. Each correct and
with a bug of the kind the field reports. Checked by tests/test_unseen_frontends.py against
EXPECT (decided from the hardware rules before running; two codes corrected after, each
explained at its entry, and reuse_ring_fills_early rewritten: its MMAs, given no barrier, were
synchronous, so the first version had no bug).

Before the frontend's fixes (`barrierproof check --expect`, on the 24 kernels other than
clc_loop_ok, added after): 18 of 24 as expected; 4 wrong (halves_ok and split_load_ok a BP200 between
disjoint row halves, a `.slice` being read as the whole tile; both reuse_ring kernels an input
error, the index of the reinterpreted view applied to the ring's own slots, which would name the
wrong stage for an index in range), 2 BP190 (two_regions_*: a second warp_specialize was not
read); split_load_reads_all_early was right by accident (the two half loads "overlapping").
After: 25 of 25."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory, clc,
                                                                 tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                             warpgroup_mma, warpgroup_mma_wait)

from barrierproof.model.gluon import Launch, tensor_desc

EXPECT = {
    "parties_ok": "verified",
    # `done` counts one arrival where two partitions arrive: every tile completes two phases,
    # so the default partition's parity wait can return for either (the refill racing the
    # slower worker's read follows; the aliasing is found first, in fewer steps)
    "parties_count_short": "violation:BP101",
    "last_mma_signals_ok": "verified",
    # the predicate names an iteration the loop never reaches: the epilogue waits forever
    "last_mma_signals_never": "violation:BP100",
    "last_arrive_ok": "verified",
    # arrives on the last two iterations: the first completes `done` while the worker still
    # writes the tile the default partition then reads
    "last_arrive_twice": "violation:BP200",
    "wrap_phase_ok": "verified",
    # the phase flips every iteration: with two slots the wait for slot 1 at k = 1 asks for
    # parity 1 on a barrier whose phase 0 is open, which the hardware reports as done at once
    "wrap_phase_every_iteration": "violation:BP200",
    "clc_loop_ok": "verified",
    "clc_reads_before_wait": "violation:BP200",
    # the phase stays 0: the second wait returns at once (phase 0 completed) and the response
    # is read while the second request may still write it
    "clc_phase_stuck": "violation:BP200",
    "epilogue_ring_ok": "verified",
    # store_wait(1) after the staging buffer is written, not before: the TMA store of two tiles
    # ago may still read it
    "epilogue_ring_waits_late": "violation:BP200",
    "wgmma_reg_a_ok": "verified",
    "wgmma_reg_a_releases_early": "violation:BP200",
    "halves_ok": "verified",
    "halves_overlap": "violation:BP200",
    "reuse_ring_ok": "verified",
    "reuse_ring_fills_early": "violation:BP200",
    "split_load_ok": "verified",
    "split_load_reads_all_early": "violation:BP200",
    "two_regions_ok": "verified",
    # counting from 0 again, the consumer's wait for slot 1 (parity 0, one phase completed)
    # returns at once and reads the first region's stale tile, no load in flight there yet; it
    # then frees the slot, the loader refills it, and that load is never waited: the kernel
    # exits with it in flight
    "two_regions_restart": "violation:BP105",
    "half_loaders_ok": "verified",
    # `ready` counts one loader: both loaders' expects arrive while the first phase still waits
    # for its bytes, an arrival past the count (undefined) before any read
    "half_loaders_count_one": "violation:BP121",
}


def _regs(num_warps: int):
    return gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])


# -- 1. two workers of different sizes read the tile the default partition loads ----------------

@gluon.jit
def pt_worker(tile, ready, done, out_ptr, n_tiles, NW: gl.constexpr):
    BM: gl.constexpr = tile.shape[0]
    BN: gl.constexpr = tile.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [NW, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    offs = rows[:, None] * BN + cols[None, :]
    for i in range(n_tiles):
        mbarrier.wait(ready, i & 1)
        x = tile.load(layout)
        gl.store(out_ptr + i * BM * BN + offs, x)
        mbarrier.arrive(done, count=1)


@gluon.jit
def pt_default(desc, tile, loaded, ready, done, n_tiles):
    BM: gl.constexpr = desc.block_type.shape[0]
    for i in range(n_tiles):
        if i > 0:
            mbarrier.wait(done, (i - 1) & 1)          # both workers are done with the tile
        mbarrier.expect(loaded, desc.block_type.nbytes)
        tma.async_load(desc, [i * BM, 0], loaded, tile)
        mbarrier.wait(loaded, i & 1)
        mbarrier.arrive(ready, count=1)
    mbarrier.wait(done, (n_tiles - 1) & 1)


@gluon.jit
def parties(desc, out_a, out_b, n_tiles, DONE_COUNT: gl.constexpr):
    tile = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(loaded, count=1)
    mbarrier.init(ready, count=1)
    mbarrier.init(done, count=DONE_COUNT)
    gl.warp_specialize([
        (pt_default, (desc, tile, loaded, ready, done, n_tiles)),
        (pt_worker, (tile, ready, done, out_a, n_tiles, 1)),
        (pt_worker, (tile, ready, done, out_b, n_tiles, 2)),
    ], [1, 2], [48, 48])


def _parties(count: int) -> Launch:
    return Launch(parties, args=dict(desc=tensor_desc("fp16", [32, 32]), out_a="*fp16",
                                     out_b="*fp16", n_tiles=3, DONE_COUNT=count),
                  num_warps=4, target="cuda:100")


parties_ok = _parties(2)
parties_count_short = _parties(1)


# -- 2. an MMA loop whose last MMA alone signals the epilogue (mbarrier_preds) ------------------

@gluon.jit
def last_mma(a_desc, b_desc, c_desc, k_tiles, LAST: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    mbarrier.init(acc_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    for k in range(k_tiles):
        s = k % 2
        # the MMA of k - 2 released slot s
        mbarrier.wait(empty.index(s), ((k // 2) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [0, k * BK], ready.index(s), b_bufs.index(s))
        mbarrier.wait(ready.index(s), (k // 2) & 1)
        tcgen05_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, use_acc=k > 0,
                    mbarriers=[empty.index(s), acc_bar],
                    mbarrier_preds=[True, k == k_tiles - LAST])
    mbarrier.wait(acc_bar, 0)
    vals = acc.load(acc.get_reg_layout(num_warps=num_warps))
    c_smem.store(vals.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


def _last_mma(last: int) -> Launch:
    return Launch(last_mma, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                      b_desc=tensor_desc("fp16", [64, 64]),
                                      c_desc=tensor_desc("fp16", [128, 64]), k_tiles=3,
                                      LAST=last),
                  num_warps=4, target="cuda:100")


last_mma_signals_ok = _last_mma(1)
last_mma_signals_never = _last_mma(0)


# -- 3. a worker builds a tile over k steps and signals `done` from its last step (pred=) -------

@gluon.jit
def la_worker(tile, done, k_steps, FROM_END: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0])
    for k in range(k_steps):
        tile.store(tile.load(layout) + 1)
        mbarrier.arrive(done, count=1, pred=k >= k_steps - FROM_END)


@gluon.jit
def la_default(out_desc, tile, done):
    mbarrier.wait(done, 0)
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], tile)
    tma.store_wait(0)


@gluon.jit
def last_arrive(out_desc, k_steps, FROM_END: gl.constexpr):
    tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape, out_desc.layout)
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(done, count=1)
    gl.warp_specialize([
        (la_default, (out_desc, tile, done)),
        (la_worker, (tile, done, k_steps, FROM_END)),
    ], [1], [48])


def _last_arrive(from_end: int) -> Launch:
    return Launch(last_arrive, args=dict(out_desc=tensor_desc("fp16", [32, 32]), k_steps=3,
                                         FROM_END=from_end),
                  num_warps=4, target="cuda:100")


last_arrive_ok = _last_arrive(1)
last_arrive_twice = _last_arrive(2)


# -- 4. a two-slot TMA ring whose wait parity is carried and flipped when the ring wraps --------

@gluon.jit
def wrap_phase(in_desc, out_ptr, n_tiles, EVERY: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    BN: gl.constexpr = in_desc.block_type.shape[1]
    bufs = gl.allocate_shared_memory(in_desc.dtype, [2] + in_desc.block_type.shape, in_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    total = gl.zeros([BM, BN], gl.float32, layout)
    mbarrier.expect(bars.index(0), in_desc.block_type.nbytes)
    tma.async_load(in_desc, [0, 0], bars.index(0), bufs.index(0))
    phase = 0
    for k in range(n_tiles):
        s = k % 2
        if k + 1 < n_tiles:                         # prefetch into the other slot
            mbarrier.expect(bars.index(1 - s), in_desc.block_type.nbytes)
            tma.async_load(in_desc, [(k + 1) * BM, 0], bars.index(1 - s), bufs.index(1 - s))
        mbarrier.wait(bars.index(s), phase)
        total += bufs.index(s).load(layout).to(gl.float32)
        # every thread's read of slot s is done before the next prefetch overwrites it
        gl.barrier()
        if EVERY:
            phase ^= 1
        else:
            phase = gl.where(s == 1, phase ^ 1, phase)
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :], total)


def _wrap(every: bool) -> Launch:
    return Launch(wrap_phase, args=dict(in_desc=tensor_desc("fp16", [32, 32]), out_ptr="*fp32",
                                        n_tiles=4, EVERY=every),
                  num_warps=4, target="cuda:100")


wrap_phase_ok = _wrap(False)
wrap_phase_every_iteration = _wrap(True)


# -- 5. cluster launch control: the response read before its wait, a phase that never flips ----

@gluon.jit
def clc_loop(desc, out_ptr, WAIT: gl.constexpr, FLIP: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    x_smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    answer = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):                # bars[0]: the tile, bars[1]: the answer
        mbarrier.init(bars.index(i), count=1)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    tile_id = gl.program_id(0)
    n = 0
    clc_phase = 0
    more = True
    while more:
        # ask for the next tile first, so the request overlaps this tile's work
        mbarrier.expect(bars.index(1), 16)
        clc.try_cancel(answer, bars.index(1))
        mbarrier.expect(bars.index(0), desc.block_type.nbytes)
        tma.async_load(desc, [tile_id * BM, 0], bars.index(0), x_smem)
        mbarrier.wait(bars.index(0), n & 1)
        n += 1
        gl.store(out_ptr + tile_id * BM + rows, gl.sum(x_smem.load(layout), 1))
        gl.barrier()                            # every warp has read x_smem before its refill
        if WAIT:
            mbarrier.wait(bars.index(1), clc_phase)
        got = clc.load_result(answer)
        more = got.is_canceled()
        tile_id = got.program_id(0)
        if FLIP:
            clc_phase ^= 1


def _clc(wait: bool, flip: bool) -> Launch:
    return Launch(clc_loop, args=dict(desc=tensor_desc("fp16", [64, 64]), out_ptr="*fp16",
                                      WAIT=wait, FLIP=flip),
                  num_warps=4, target="cuda:100")


clc_loop_ok = _clc(True, True)
clc_reads_before_wait = _clc(False, True)
clc_phase_stuck = _clc(True, False)


# -- 6. persistent warp-specialized matmul: double-buffered TMEM accumulator, an epilogue
#       cycling two output buffers with at most one TMA store in flight when one is rewritten ---

@gluon.jit
def er_load(a_desc, b_desc, a_bufs, b_bufs, ready, empty, n_tiles, k_tiles):
    STAGES: gl.constexpr = a_bufs.shape[0]
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        for k in range(k_tiles):
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [t * BM, k * BK], ready.index(s), a_bufs.index(s))
            tma.async_load(b_desc, [0, k * BK], ready.index(s), b_bufs.index(s))
            it += 1


@gluon.jit
def er_mma(a_bufs, b_bufs, ready, empty, accs, acc_ready, acc_empty, n_tiles, k_tiles):
    STAGES: gl.constexpr = a_bufs.shape[0]
    it = 0
    j = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        a = j % 2
        mbarrier.wait(acc_empty.index(a), ((j // 2) & 1) ^ 1)
        for k in range(k_tiles):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            tcgen05_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), accs.index(a),
                        use_acc=k > 0, mbarriers=[empty.index(s), acc_ready.index(a)],
                        mbarrier_preds=[True, k == k_tiles - 1])
            it += 1
        j += 1


@gluon.jit
def er_epilogue(c_desc, accs, acc_ready, acc_empty, c_bufs, n_tiles, LATE: gl.constexpr,
                num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    regs: gl.constexpr = accs.index(0).get_reg_layout(num_warps=num_warps)
    j = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        a = j % 2
        mbarrier.wait(acc_ready.index(a), (j // 2) & 1)
        vals = accs.index(a).load(regs)
        mbarrier.arrive(acc_empty.index(a), count=1)
        c_smem = c_bufs.index(j % 2)
        if LATE:
            c_smem.store(vals.to(c_desc.dtype))
            tma.store_wait(1)
        else:
            tma.store_wait(1)            # the store that read c_smem two tiles ago is done
            c_smem.store(vals.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [t * BM, 0], c_smem)
        j += 1
    tma.store_wait(0)


@gluon.jit
def epilogue_ring(a_desc, b_desc, c_desc, n_tiles, k_tiles, LATE: gl.constexpr,
                  num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(2):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
        mbarrier.init(acc_ready.index(s), count=1)
        mbarrier.init(acc_empty.index(s), count=1)
    accs = allocate_tensor_memory(gl.float32, [2, BM, BN],
                                  TensorMemoryLayout([BM, BN], col_stride=1))
    gl.warp_specialize([
        (er_epilogue, (c_desc, accs, acc_ready, acc_empty, c_bufs, n_tiles, LATE, num_warps)),
        (er_load, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, n_tiles, k_tiles)),
        (er_mma, (a_bufs, b_bufs, ready, empty, accs, acc_ready, acc_empty, n_tiles, k_tiles)),
    ], [1, 1], [24, 24])


def _epilogue_ring(late: bool) -> Launch:
    return Launch(epilogue_ring, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                           b_desc=tensor_desc("fp16", [64, 64]),
                                           c_desc=tensor_desc("fp16", [128, 64]), n_tiles=3,
                                           k_tiles=2, LATE=late),
                  num_warps=4, target="cuda:100")


epilogue_ring_ok = _epilogue_ring(False)
epilogue_ring_waits_late = _epilogue_ring(True)


# -- 7. Hopper: A in registers (scaled after its TMA load), B from a two-slot ring, async wgmma
#       with one in flight; a slot is refilled once the wgmma reading it has retired -------------

@gluon.jit
def wgmma_reg_a(a_desc, b_desc, k_tiles, EARLY: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    acc = gl.zeros((BM, BN), gl.float32, mma)
    mbarrier.expect(bars.index(0), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], bars.index(0), a_bufs.index(0))
    tma.async_load(b_desc, [0, 0], bars.index(0), b_bufs.index(0))
    for k in range(k_tiles):
        s = k % 2
        mbarrier.wait(bars.index(s), (k // 2) & 1)
        a = a_bufs.index(s).load(a_op) * 2
        acc = warpgroup_mma(a, b_bufs.index(s), acc, is_async=True)
        if not EARLY:
            # the wgmma of k - 1 (reading B of slot 1 - s) has retired
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
        # every warp has read its part of A in slot 1 - s (one step ago) before the refill
        gl.barrier()
        if k + 1 < k_tiles:
            n = 1 - s
            mbarrier.expect(bars.index(n), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [0, (k + 1) * BK], bars.index(n), a_bufs.index(n))
            tma.async_load(b_desc, [(k + 1) * BK, 0], bars.index(n), b_bufs.index(n))
        if EARLY:
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))


def _wgmma_reg_a(early: bool) -> Launch:
    return Launch(wgmma_reg_a, args=dict(a_desc=tensor_desc("fp16", [64, 64]),
                                         b_desc=tensor_desc("fp16", [64, 64]), k_tiles=3,
                                         EARLY=early),
                  num_warps=4, target="cuda:90")


wgmma_reg_a_ok = _wgmma_reg_a(False)
# the refill of slot 1 - s is issued before waiting: the wgmma of k - 1 may still read its B
wgmma_reg_a_releases_early = _wgmma_reg_a(True)


# -- 8. two partitions fill the two row halves of one tile (`.slice` along the rows) ------------

@gluon.jit
def hv_worker(tile, done, START: gl.constexpr):
    HALF: gl.constexpr = tile.shape[0] // 2
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0])
    part = tile.slice(START, HALF)
    part.store(gl.full(part.shape, 1.0, part.dtype, layout))
    mbarrier.arrive(done, count=1)


@gluon.jit
def hv_default(out_desc, tile, done, num_warps: gl.constexpr):
    HALF: gl.constexpr = tile.shape[0] // 2
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    part = tile.slice(0, HALF)
    part.store(gl.full(part.shape, 2.0, part.dtype, layout))
    mbarrier.arrive(done, count=1)
    mbarrier.wait(done, 0)
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], tile)
    tma.store_wait(0)


@gluon.jit
def halves(out_desc, START: gl.constexpr, num_warps: gl.constexpr):
    tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape, out_desc.layout)
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(done, count=2)
    gl.warp_specialize([
        (hv_default, (out_desc, tile, done, num_warps)),
        (hv_worker, (tile, done, START)),
    ], [1], [48])


def _halves(start: int) -> Launch:
    return Launch(halves, args=dict(out_desc=tensor_desc("fp16", [64, 64]), START=start),
                  num_warps=4, target="cuda:100")


# the worker's rows 32..63 and the default partition's rows 0..31 do not overlap
halves_ok = _halves(32)
# the worker writes rows 0..31 too: the same rows as the default partition, unordered
halves_overlap = _halves(0)


# -- 9. the epilogue's staging buffers are the A ring seen again (`reinterpret`): four half-tile
#       buffers over the two stages, the last written only once the MMA reading it is done ----

@gluon.jit
def reuse_ring(a_desc, b_desc, c_desc, WAIT_FIRST: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    mbarrier.init(mma_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    for i in gl.static_range(2):
        mbarrier.expect(bars.index(i), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, i * BK], bars.index(i), a_bufs.index(i))
        tma.async_load(b_desc, [0, i * BK], bars.index(i), b_bufs.index(i))
    for i in gl.static_range(2):
        mbarrier.wait(bars.index(i), 0)
        # asynchronous (a barrier given): only the last one signals, both are done by then
        tcgen05_mma(a_bufs.index(i), b_bufs.index(i).permute((1, 0)), acc, use_acc=i > 0,
                    mbarriers=[mma_bar], mbarrier_preds=[i == 1])
    # [2, BM, BK] fp16 seen as [4, BM // 2, BK]: buffer 3 is the second half of stage 1
    c_bufs = a_bufs.reinterpret(c_desc.dtype, [4, BM // 2, BK], c_desc.layout)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    if WAIT_FIRST:
        mbarrier.wait(mma_bar, 0)
    c_bufs.index(3).store(gl.full([BM // 2, BK], 0.0, c_desc.dtype, regs))
    mbarrier.wait(mma_bar, 0)
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_bufs.index(3))
    tma.store_wait(0)


def _reuse(wait_first: bool) -> Launch:
    return Launch(reuse_ring, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                        b_desc=tensor_desc("fp16", [64, 64]),
                                        c_desc=tensor_desc("fp16", [64, 64]),
                                        WAIT_FIRST=wait_first),
                  num_warps=4, target="cuda:100")


reuse_ring_ok = _reuse(True)
# the zero fill of buffer 3 (stage 1's second half) runs while the second MMA may read stage 1
reuse_ring_fills_early = _reuse(False)


# -- 10. one tile loaded as two row halves on two barriers; the top half is used first ---------

@gluon.jit
def split_load(top_desc, out_desc, out_ptr, WHOLE: gl.constexpr, num_warps: gl.constexpr):
    HALF: gl.constexpr = top_desc.block_type.shape[0]
    tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape, out_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.expect(bars.index(i), top_desc.block_type.nbytes)
        tma.async_load(top_desc, [i * HALF, 0], bars.index(i), tile.slice(i * HALF, HALF))
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows: gl.constexpr = gl.SliceLayout(1, layout)
    mbarrier.wait(bars.index(0), 0)
    # the values leave through memory (a value never used would not be loaded at all)
    if WHOLE:
        # the bottom half may not have landed yet
        gl.store(out_ptr + gl.arange(0, 2 * HALF, rows), gl.max(tile.load(layout), 1))
    else:
        gl.store(out_ptr + gl.arange(0, HALF, rows), gl.max(tile.slice(0, HALF).load(layout), 1))
    mbarrier.wait(bars.index(1), 0)
    gl.store(out_ptr + HALF + gl.arange(0, HALF, rows),
             gl.max(tile.slice(HALF, HALF).load(layout), 1))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], tile)
    tma.store_wait(0)


def _split_load(whole: bool) -> Launch:
    return Launch(split_load, args=dict(top_desc=tensor_desc("fp16", [32, 64]),
                                        out_desc=tensor_desc("fp16", [64, 64]), out_ptr="*fp16",
                                        WHOLE=whole),
                  num_warps=4, target="cuda:100")


split_load_ok = _split_load(False)
split_load_reads_all_early = _split_load(True)


# -- 11. two warp-specialized regions one after the other on one ring and its barriers: the
#        second continues the phases where the first left them ------------------------------

@gluon.jit
def tr_load(desc, bufs, ready, empty, BASE: gl.constexpr, TILES: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    for j in range(TILES):
        k = BASE + j
        s = k % 2
        mbarrier.wait(empty.index(s), ((k // 2) & 1) ^ 1)
        mbarrier.expect(ready.index(s), desc.block_type.nbytes)
        tma.async_load(desc, [k * BM, 0], ready.index(s), bufs.index(s))


@gluon.jit
def tr_use(out_ptr, bufs, ready, empty, BASE: gl.constexpr, TILES: gl.constexpr,
           num_warps: gl.constexpr):
    BM: gl.constexpr = bufs.shape[1]
    BN: gl.constexpr = bufs.shape[2]
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    for j in range(TILES):
        k = BASE + j
        s = k % 2
        mbarrier.wait(ready.index(s), (k // 2) & 1)
        x = bufs.index(s).load(layout)
        mbarrier.arrive(empty.index(s), count=1)
        gl.store(out_ptr + k * BM * BN + rows[:, None] * BN + cols[None, :], x)


@gluon.jit
def two_regions(desc, out_ptr, TILES: gl.constexpr, SECOND_BASE: gl.constexpr,
                num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (tr_use, (out_ptr, bufs, ready, empty, 0, TILES, num_warps)),
        (tr_load, (desc, bufs, ready, empty, 0, TILES)),
    ], [1], [48])
    gl.warp_specialize([
        (tr_use, (out_ptr, bufs, ready, empty, SECOND_BASE, TILES, num_warps)),
        (tr_load, (desc, bufs, ready, empty, SECOND_BASE, TILES)),
    ], [1], [48])


def _two_regions(base: int) -> Launch:
    return Launch(two_regions, args=dict(desc=tensor_desc("fp16", [32, 32]), out_ptr="*fp16",
                                         TILES=3, SECOND_BASE=base),
                  num_warps=4, target="cuda:100")


two_regions_ok = _two_regions(3)
# the second region counts from 0 again: slot 0 has completed two phases, slot 1 one (EXPECT)
two_regions_restart = _two_regions(0)


# -- 12. two loader partitions each fill one row half of every ring slot (symbolic slot index) -

@gluon.jit
def hl_loader(desc, bufs, ready, empty, n_tiles, HALF_AT: gl.constexpr):
    HALF: gl.constexpr = desc.block_type.shape[0]
    for k in range(n_tiles):
        s = k % 2
        mbarrier.wait(empty.index(s), ((k // 2) & 1) ^ 1)
        mbarrier.expect(ready.index(s), desc.block_type.nbytes)
        tma.async_load(desc, [k * 2 * HALF + HALF_AT, 0], ready.index(s),
                       bufs.index(s).slice(HALF_AT, HALF))


@gluon.jit
def hl_consumer(out_ptr, bufs, ready, empty, n_tiles, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, bufs.shape[1], gl.SliceLayout(1, layout))
    for k in range(n_tiles):
        s = k % 2
        mbarrier.wait(ready.index(s), (k // 2) & 1)
        gl.store(out_ptr + k * bufs.shape[1] + rows, gl.max(bufs.index(s).load(layout), 1))
        mbarrier.arrive(empty.index(s), count=1)


@gluon.jit
def half_loaders(desc, out_ptr, n_tiles, READY_COUNT: gl.constexpr, num_warps: gl.constexpr):
    HALF: gl.constexpr = desc.block_type.shape[0]
    BN: gl.constexpr = desc.block_type.shape[1]
    bufs = gl.allocate_shared_memory(desc.dtype, [2, 2 * HALF, BN], desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=READY_COUNT)     # one expect from each loader
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (hl_consumer, (out_ptr, bufs, ready, empty, n_tiles, num_warps)),
        (hl_loader, (desc, bufs, ready, empty, n_tiles, 0)),
        (hl_loader, (desc, bufs, ready, empty, n_tiles, HALF)),
    ], [1, 1], [48, 48])


def _half_loaders(count: int) -> Launch:
    return Launch(half_loaders, args=dict(desc=tensor_desc("fp16", [32, 64]), out_ptr="*fp16",
                                          n_tiles=4, READY_COUNT=count),
                  num_warps=4, target="cuda:100")


half_loaders_ok = _half_loaders(2)
# `ready` counts one loader where two arrive with their expects (EXPECT)
half_loaders_count_one = _half_loaders(1)
