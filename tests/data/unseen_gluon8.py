"""Eighth set of Gluon kernels in the style of Triton's Gluon tutorials: an attention-forward-like
kernel whose softmax partition and MMA partition hand S and P through tensor memory on `s_ready`
/ `p_ready` / `o_ready` barriers; a Hopper warp-specialized matmul whose consumer partition
releases a ring slot once `warpgroup_mma_wait(0)` has retired the wgmma reading it; one
`mbarrier.expect` per stage covering two TMA loads of different block shapes; an MMA whose
completion arrives on two barriers, invalidated at the end; two `tcgen05_commit`s per phase on a
barrier counted 2; a ring unrolled by `gl.static_range`; and a tiles x k loop nest on one
barrier whose wait phase is carried across tiles. Each correct and with a bug of the kind the
field reports. Checked by tests/test_unseen_frontends.py against EXPECT (decided from the
hardware rules before running).

Also a `tcgen05_commit` issued by the epilogue partition for the MMA partition's MMA (it tracks
only its issuer's tcgen05 ops), a loader skipping its first lap's `empty` waits by predicate
(`mbarrier.wait(..., pred=...)`) with one arrival of count 2, two MMAs filling the column halves
of one TMEM accumulator (`.slice`), a staging buffer handed between partitions each storing it
out by TMA, and P aliased onto S (`.reinterpret` of tensor memory; the tensor pipe running the
MMA partition's ops in order is what keeps S of the next block off P).

First run (`barrierproof check --expect`, 28 launches of 14 kernels, since merged to 13): 21 as
expected; 4 input errors of the kernels themselves (static_ring reassigned a constexpr inside
`gl.static_range`, attn_alias gave P a column stride of 2, which tcgen05_mma refuses), fixed in
the kernels; 3 a violation with another code than decided (two_shapes_bytes_short,
commit_pair_count_one, pred_wait_skips_three: EXPECT corrected, each explained at its entry).
No false verdict of the frontend: no fix was needed. After: 28 of 28, and the two kernels
outside the model (added after, section 8) BP190 at their lines."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                             warpgroup_mma, warpgroup_mma_wait)

from barrierproof.model.gluon import Launch, tensor_desc

EXPECT = {
    "attn_sp_ok": "verified",
    # p_ready arrives before P is written to tensor memory: the P @ V MMA may read P while the
    # softmax partition still stores it
    "attn_sp_ready_early": "violation:BP201",
    "attn_alias_ok": "verified",
    "attn_alias_ready_early": "violation:BP201",
    "ws_wgmma_ok": "verified",
    # the slot is released before warpgroup_mma_wait(0): the loader's TMA may refill it while
    # the wgmma still reads it
    "ws_wgmma_releases_early": "violation:BP200",
    "two_shapes_ok": "verified",
    # the bytes of B twice (16 KiB) where A (16 KiB) and B (8 KiB) land. Decided BP200 (the
    # phase completing once A has landed, B still in flight); corrected after: with B landing
    # first the tx-count goes 8 KiB -> -8 KiB when A lands (a copy completes its bytes at once in
    # the model, SEMANTICS.md section 1) and never returns to zero, the shorter counterexample
    "two_shapes_bytes_short": "violation:BP130",
    "inval_ok": "verified",
    # `free` is invalidated after the wait on `done` only: its arrival, a second one of the same
    # MMA completion, may still be in flight
    "inval_in_flight": "violation:BP105",
    "commit_pair_ok": "verified",
    # counted 1 with two commits per tile: each tile completes two phases. Decided BP201 (the
    # second accumulator read while its MMA runs); corrected after: an MMA given no barrier is
    # synchronous (Triton waits for it), so both commits can land before the wait, whose
    # parity then names a phase two behind: parity aliasing (mma_pair, its MMAs asynchronous,
    # has the race)
    "commit_pair_count_one": "violation:BP101",
    "mma_pair_ok": "verified",
    # counted 1: the first MMA's completion completes the phase, and the epilogue reads the
    # second accumulator while its MMA may still write it
    "mma_pair_count_one": "violation:BP201",
    "commit_last_ok": "verified",
    # the commit is predicated on the first step: the epilogue reads the accumulator while the
    # later MMAs may still write it
    "commit_last_at_first": "violation:BP201",
    "tmem_halves_ok": "verified",
    # the whole accumulator is read once the left half's MMA is done: the right half's MMA
    # may still write its columns
    "tmem_halves_reads_all": "violation:BP201",
    "store_handoff_ok": "verified",
    # `filled` arrives before tma.store_wait(0): the worker rewrites the staging buffer while
    # the default partition's TMA store may still read it
    "store_handoff_early": "violation:BP200",
    "pred_wait_ok": "verified",
    # the first wait is skipped for three steps instead of two. Decided BP200 (slot 0 refilled
    # at k = 2 while the consumer may read its first tile); corrected after: the refill's expect
    # can arrive on ready[0] before the first tile has landed, a second arrival in a phase
    # counted 1 (undefined), which comes first
    "pred_wait_skips_three": "violation:BP121",
    "commit_by_issuer_ok": "verified",
    # tcgen05_commit tracks the tcgen05 ops of the thread that issues it: the epilogue has
    # issued none, so acc_bar may complete while the MMA partition's MMA still writes acc
    "commit_by_epilogue": "violation:BP201",
    "static_ring_ok": "verified",
    # parity k & 1 on a two-slot ring: the wait for slot 1 at k = 1 asks for parity 1 on a
    # barrier whose phase 0 is open, which returns at once, before the load lands
    "static_ring_parity": "violation:BP200",
    # outside the model (BP190 at the line, tests/test_unseen_frontends.py UNREAD): a barrier
    # invalidated and initialised again for a second round, and a warp_specialize region
    # entered once per tile of a loop
    "reinit_rounds": "unknown",
    "region_per_tile": "unknown",
    "nest_phase_ok": "verified",
    # the phase restarts at 0 for every tile: with three k steps per tile the barrier has
    # completed three phases when tile 1 begins, its wait for parity 0 returns at once
    "nest_phase_reset": "violation:BP200",
}


# -- 1. attention-like: softmax and MMA partitions hand S and P through tensor memory ----------

@gluon.jit
def sp_mma(q_smem, k_smem, v_smem, s_tmem, p_tmem, o_tmem, s_ready, p_ready, o_ready, n_blocks):
    for i in range(n_blocks):
        # S(i) overwrites S(i - 1): the softmax read it before arriving p_ready(i - 1)
        tcgen05_mma(q_smem, k_smem.permute((1, 0)), s_tmem, use_acc=False, mbarriers=[s_ready])
        mbarrier.wait(p_ready, i & 1)
        tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=i > 0, mbarriers=[o_ready])


@gluon.jit
def sp_softmax(out_ptr, s_tmem, p_tmem, o_tmem, s_ready, p_ready, o_ready, n_blocks,
               EARLY: gl.constexpr, num_warps: gl.constexpr):
    s_regs: gl.constexpr = s_tmem.get_reg_layout(num_warps=num_warps)
    for i in range(n_blocks):
        mbarrier.wait(s_ready, i & 1)
        s = s_tmem.load(s_regs)
        p = gl.exp2(s).to(gl.float16)
        if i > 0:
            mbarrier.wait(o_ready, (i - 1) & 1)      # P @ V of i - 1 has read the old P
        if EARLY:
            mbarrier.arrive(p_ready, count=1)
        p_tmem.store(p)
        if not EARLY:
            mbarrier.arrive(p_ready, count=1)
    mbarrier.wait(o_ready, (n_blocks - 1) & 1)
    o_regs: gl.constexpr = o_tmem.get_reg_layout(num_warps=num_warps)
    o = o_tmem.load(o_regs)
    BM: gl.constexpr = o_tmem.shape[0]
    BD: gl.constexpr = o_tmem.shape[1]
    rows = gl.arange(0, BM, gl.SliceLayout(1, o_regs))
    cols = gl.arange(0, BD, gl.SliceLayout(0, o_regs))
    gl.store(out_ptr + rows[:, None] * BD + cols[None, :], o)


@gluon.jit
def attn_sp(q_desc, k_desc, v_desc, out_ptr, n_blocks, EARLY: gl.constexpr, ALIAS: gl.constexpr,
            num_warps: gl.constexpr):
    BM: gl.constexpr = q_desc.block_type.shape[0]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    BD: gl.constexpr = v_desc.block_type.shape[1]
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, v_desc.block_type.shape, v_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    s_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    p_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    o_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(loaded, count=1)
    mbarrier.init(s_ready, count=1)
    mbarrier.init(p_ready, count=1)
    mbarrier.init(o_ready, count=1)
    s_tmem = allocate_tensor_memory(gl.float32, [BM, BN],
                                    TensorMemoryLayout([BM, BN], col_stride=1))
    if ALIAS:
        # P overwrites S in place, as the tutorial's attention does
        p_tmem = s_tmem.reinterpret(gl.float16, [BM, BN],
                                    TensorMemoryLayout([BM, BN], col_stride=1))
    else:
        p_tmem = allocate_tensor_memory(gl.float16, [BM, BN],
                                        TensorMemoryLayout([BM, BN], col_stride=1))
    o_tmem = allocate_tensor_memory(gl.float32, [BM, BD],
                                    TensorMemoryLayout([BM, BD], col_stride=1))
    # one K and V block stand for every block: the handoff, not the data, is under test
    mbarrier.expect(loaded, q_desc.block_type.nbytes + k_desc.block_type.nbytes
                    + v_desc.block_type.nbytes)
    tma.async_load(q_desc, [0, 0], loaded, q_smem)
    tma.async_load(k_desc, [0, 0], loaded, k_smem)
    tma.async_load(v_desc, [0, 0], loaded, v_smem)
    mbarrier.wait(loaded, 0)
    gl.warp_specialize([
        (sp_softmax, (out_ptr, s_tmem, p_tmem, o_tmem, s_ready, p_ready, o_ready, n_blocks,
                      EARLY, num_warps)),
        (sp_mma, (q_smem, k_smem, v_smem, s_tmem, p_tmem, o_tmem, s_ready, p_ready, o_ready,
                  n_blocks)),
    ], [1], [48])


def _attn(early: bool, alias: bool = False) -> Launch:
    return Launch(attn_sp, args=dict(q_desc=tensor_desc("fp16", [128, 64]),
                                     k_desc=tensor_desc("fp16", [64, 64]),
                                     v_desc=tensor_desc("fp16", [64, 64]), out_ptr="*fp32",
                                     n_blocks=3, EARLY=early, ALIAS=alias),
                  num_warps=4, target="cuda:100")


attn_sp_ok = _attn(False)
attn_sp_ready_early = _attn(True)
# S(i + 1) overwrites P(i) while P @ V of i reads it? No: both MMAs are issued by the one MMA
# thread, and the tensor pipe runs them in order
attn_alias_ok = _attn(False, alias=True)
attn_alias_ready_early = _attn(True, alias=True)


# -- 2. Hopper warp-specialized matmul: a loader worker, a wgmma consumer releasing slots -------

@gluon.jit
def hw_load(a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles):
    STAGES: gl.constexpr = a_bufs.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [k * BK, 0], ready.index(s), b_bufs.index(s))


@gluon.jit
def hw_consume(c_ptr, a_bufs, b_bufs, ready, empty, k_tiles, EARLY: gl.constexpr,
               num_warps: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.shape[0]
    BM: gl.constexpr = a_bufs.shape[1]
    BN: gl.constexpr = b_bufs.shape[2]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, mma)
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        if EARLY:
            mbarrier.arrive(empty.index(s), count=1)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        if not EARLY:
            mbarrier.arrive(empty.index(s), count=1)
    rows = gl.arange(0, BM, gl.SliceLayout(1, mma))
    cols = gl.arange(0, BN, gl.SliceLayout(0, mma))
    gl.store(c_ptr + rows[:, None] * BN + cols[None, :], acc)


@gluon.jit
def ws_wgmma(a_desc, b_desc, c_ptr, k_tiles, EARLY: gl.constexpr, num_warps: gl.constexpr):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (hw_consume, (c_ptr, a_bufs, b_bufs, ready, empty, k_tiles, EARLY, num_warps)),
        (hw_load, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles)),
    ], [1], [48])


def _ws_wgmma(early: bool) -> Launch:
    return Launch(ws_wgmma, args=dict(a_desc=tensor_desc("fp16", [64, 64]),
                                      b_desc=tensor_desc("fp16", [64, 64]), c_ptr="*fp32",
                                      k_tiles=3, EARLY=early),
                  num_warps=4, target="cuda:90")


ws_wgmma_ok = _ws_wgmma(False)
ws_wgmma_releases_early = _ws_wgmma(True)


# -- 3. one expect per stage for a 128x64 A tile and a 64x64 B tile ----------------------------

@gluon.jit
def two_shapes(a_desc, b_desc, c_desc, k_tiles, B_TWICE: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    tma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(mma_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    for k in range(k_tiles):
        if B_TWICE:
            mbarrier.expect(tma_bar, 2 * b_desc.block_type.nbytes)
        else:
            mbarrier.expect(tma_bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], tma_bar, a_smem)
        tma.async_load(b_desc, [0, k * BK], tma_bar, b_smem)
        mbarrier.wait(tma_bar, k & 1)
        tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=k > 0, mbarriers=[mma_bar])
        mbarrier.wait(mma_bar, k & 1)
    vals = acc.load(acc.get_reg_layout(num_warps=num_warps))
    c_smem.store(vals.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


def _two_shapes(b_twice: bool) -> Launch:
    return Launch(two_shapes, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                        b_desc=tensor_desc("fp16", [64, 64]),
                                        c_desc=tensor_desc("fp16", [128, 64]), k_tiles=2,
                                        B_TWICE=b_twice),
                  num_warps=4, target="cuda:100")


two_shapes_ok = _two_shapes(False)
two_shapes_bytes_short = _two_shapes(True)


# -- 4. barriers invalidated at the end, after (or not after) their last arrival --------------

@gluon.jit
def inval(a_desc, b_desc, c_desc, WAIT_FREE: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    tma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(done, count=1)
    mbarrier.init(free, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    mbarrier.expect(tma_bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], tma_bar, a_smem)
    tma.async_load(b_desc, [0, 0], tma_bar, b_smem)
    mbarrier.wait(tma_bar, 0)
    tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=False, mbarriers=[done, free])
    mbarrier.wait(done, 0)
    vals = acc.load(acc.get_reg_layout(num_warps=num_warps))
    c_smem.store(vals.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)
    if WAIT_FREE:
        mbarrier.wait(free, 0)
    mbarrier.invalidate(tma_bar)
    mbarrier.invalidate(done)
    mbarrier.invalidate(free)


def _inval(wait_free: bool) -> Launch:
    return Launch(inval, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                   b_desc=tensor_desc("fp16", [64, 64]),
                                   c_desc=tensor_desc("fp16", [128, 64]), WAIT_FREE=wait_free),
                  num_warps=4, target="cuda:100")


inval_ok = _inval(True)
inval_in_flight = _inval(False)


# -- 5. two accumulators, a commit after each MMA, one barrier counted by both commits ---------

@gluon.jit
def commit_pair(a_desc, b_desc, out_ptr, n_tiles, COUNT: gl.constexpr, ASYNC: gl.constexpr,
                num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    tma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    both = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(both, count=COUNT)
    accs = allocate_tensor_memory(gl.float32, [2, BM, BN],
                                  TensorMemoryLayout([BM, BN], col_stride=1))
    mbarrier.expect(tma_bar, a_desc.block_type.nbytes + 2 * b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], tma_bar, a_smem)
    tma.async_load(b_desc, [0, 0], tma_bar, b_smem.index(0))
    tma.async_load(b_desc, [BN, 0], tma_bar, b_smem.index(1))
    mbarrier.wait(tma_bar, 0)
    regs: gl.constexpr = accs.index(0).get_reg_layout(num_warps=num_warps)
    rows = gl.arange(0, BM, gl.SliceLayout(1, regs))
    cols = gl.arange(0, BN, gl.SliceLayout(0, regs))
    total = gl.zeros([BM, BN], gl.float32, regs)
    for t in range(n_tiles):
        for j in gl.static_range(2):
            if ASYNC:       # each MMA signals `both` itself on completion
                tcgen05_mma(a_smem, b_smem.index(j).permute((1, 0)), accs.index(j),
                            use_acc=False, mbarriers=[both])
            else:           # synchronous (no barrier given), then committed
                tcgen05_mma(a_smem, b_smem.index(j).permute((1, 0)), accs.index(j),
                            use_acc=False)
                tcgen05_commit(both)
        mbarrier.wait(both, t & 1)
        total += accs.index(0).load(regs) + accs.index(1).load(regs)
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :], total)


def _commit_pair(count: int, asynchronous: bool = False) -> Launch:
    return Launch(commit_pair, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                         b_desc=tensor_desc("fp16", [64, 64]), out_ptr="*fp32",
                                         n_tiles=2, COUNT=count, ASYNC=asynchronous),
                  num_warps=4, target="cuda:100")


commit_pair_ok = _commit_pair(2)
commit_pair_count_one = _commit_pair(1)
mma_pair_ok = _commit_pair(2, asynchronous=True)
mma_pair_count_one = _commit_pair(1, asynchronous=True)


# -- 5c. MMAs release their stages; one predicated tcgen05_commit signals the epilogue --------

@gluon.jit
def commit_last(a_desc, b_desc, out_ptr, k_tiles, AT: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
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
        mbarrier.wait(empty.index(s), ((k // 2) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [0, k * BK], ready.index(s), b_bufs.index(s))
        mbarrier.wait(ready.index(s), (k // 2) & 1)
        tcgen05_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, use_acc=k > 0,
                    mbarriers=[empty.index(s)])
        # covers every tcgen05 op issued so far
        tcgen05_commit(acc_bar, pred=k == AT)
    mbarrier.wait(acc_bar, 0)
    regs: gl.constexpr = acc.get_reg_layout(num_warps=num_warps)
    rows = gl.arange(0, BM, gl.SliceLayout(1, regs))
    cols = gl.arange(0, BN, gl.SliceLayout(0, regs))
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :], acc.load(regs))


def _commit_last(at: int) -> Launch:
    return Launch(commit_last, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                         b_desc=tensor_desc("fp16", [64, 64]), out_ptr="*fp32",
                                         k_tiles=3, AT=at),
                  num_warps=4, target="cuda:100")


commit_last_ok = _commit_last(2)
commit_last_at_first = _commit_last(0)


# -- 5d. two MMAs fill the two column halves of one TMEM accumulator (`.slice`) -----------------

@gluon.jit
def tmem_halves(a_desc, b_desc, out_ptr, WHOLE: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    HN: gl.constexpr = b_desc.block_type.shape[0]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    tma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    halves = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(tma_bar, count=1)
    for j in gl.static_range(2):
        mbarrier.init(halves.index(j), count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, 2 * HN],
                                 TensorMemoryLayout([BM, 2 * HN], col_stride=1))
    mbarrier.expect(tma_bar, a_desc.block_type.nbytes + 2 * b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], tma_bar, a_smem)
    for j in gl.static_range(2):
        tma.async_load(b_desc, [j * HN, 0], tma_bar, b_smem.index(j))
    mbarrier.wait(tma_bar, 0)
    for j in gl.static_range(2):
        tcgen05_mma(a_smem, b_smem.index(j).permute((1, 0)), acc.slice(j * HN, HN),
                    use_acc=False, mbarriers=[halves.index(j)])
    mbarrier.wait(halves.index(0), 0)
    left = acc.slice(0, HN)
    regs: gl.constexpr = left.get_reg_layout(num_warps=num_warps)
    rows = gl.arange(0, BM, gl.SliceLayout(1, regs))
    cols = gl.arange(0, HN, gl.SliceLayout(0, regs))
    if WHOLE:
        wide: gl.constexpr = acc.get_reg_layout(num_warps=num_warps)
        w_rows = gl.arange(0, BM, gl.SliceLayout(1, wide))
        w_cols = gl.arange(0, 2 * HN, gl.SliceLayout(0, wide))
        gl.store(out_ptr + w_rows[:, None] * 2 * HN + w_cols[None, :], acc.load(wide))
    else:
        gl.store(out_ptr + rows[:, None] * 2 * HN + cols[None, :], left.load(regs))
    mbarrier.wait(halves.index(1), 0)
    gl.store(out_ptr + HN + rows[:, None] * 2 * HN + cols[None, :], acc.slice(HN, HN).load(regs))


def _tmem_halves(whole: bool) -> Launch:
    return Launch(tmem_halves, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                         b_desc=tensor_desc("fp16", [32, 64]), out_ptr="*fp32",
                                         WHOLE=whole),
                  num_warps=4, target="cuda:100")


tmem_halves_ok = _tmem_halves(False)
tmem_halves_reads_all = _tmem_halves(True)


# -- 5e. a staging buffer handed between partitions, each storing it out by TMA ---------------

@gluon.jit
def sh_worker(out_desc, staging, filled, free, n_rounds):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0])
    BM: gl.constexpr = staging.shape[0]
    for i in range(n_rounds):
        mbarrier.wait(filled, i & 1)
        staging.store(staging.load(layout) * 2)    # post-processed in place
        fence_async_shared()
        tma.async_store(out_desc, [i * BM, 0], staging)
        tma.store_wait(0)
        mbarrier.arrive(free, count=1)


@gluon.jit
def sh_default(out_desc, staging, filled, free, n_rounds, EARLY: gl.constexpr,
               num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    BM: gl.constexpr = staging.shape[0]
    for i in range(n_rounds):
        mbarrier.wait(free, (i & 1) ^ 1)
        staging.store(gl.full(staging.shape, 1.0, staging.dtype, layout))
        fence_async_shared()
        tma.async_store(out_desc, [i * BM, 0], staging)
        if EARLY:
            mbarrier.arrive(filled, count=1)
        tma.store_wait(0)                           # the store has read the staging buffer
        if not EARLY:
            mbarrier.arrive(filled, count=1)
    mbarrier.wait(free, (n_rounds - 1) & 1)


@gluon.jit
def store_handoff(out_desc, out2_desc, n_rounds, EARLY: gl.constexpr, num_warps: gl.constexpr):
    staging = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                        out_desc.layout)
    filled = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(filled, count=1)
    mbarrier.init(free, count=1)
    gl.warp_specialize([
        (sh_default, (out_desc, staging, filled, free, n_rounds, EARLY, num_warps)),
        (sh_worker, (out2_desc, staging, filled, free, n_rounds)),
    ], [1], [48])


def _store_handoff(early: bool) -> Launch:
    return Launch(store_handoff, args=dict(out_desc=tensor_desc("fp16", [32, 64]),
                                           out2_desc=tensor_desc("fp16", [32, 64]), n_rounds=2,
                                           EARLY=early),
                  num_warps=4, target="cuda:100")


store_handoff_ok = _store_handoff(False)
store_handoff_early = _store_handoff(True)


# -- 5f. a loader skipping the first lap's `empty` waits by predicate; one arrival of count 2 --

@gluon.jit
def pw_load(desc, bufs, ready, empty, n_tiles, SKIP: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    for k in range(n_tiles):
        s = k % 2
        # the slot's previous tile (k - 2) was released: lap (k // 2) - 1 of its empty barrier
        mbarrier.wait(empty.index(s), ((k // 2) - 1) & 1, pred=k >= SKIP)
        mbarrier.expect(ready.index(s), desc.block_type.nbytes)
        tma.async_load(desc, [k * BM, 0], ready.index(s), bufs.index(s))


@gluon.jit
def pw_use(out_ptr, bufs, ready, empty, n_tiles, num_warps: gl.constexpr):
    BM: gl.constexpr = bufs.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    for k in range(n_tiles):
        s = k % 2
        mbarrier.wait(ready.index(s), (k // 2) & 1)
        gl.store(out_ptr + k * BM + rows, gl.max(bufs.index(s).load(layout), 1))
        mbarrier.arrive(empty.index(s), count=2)     # the slot's whole count at once


@gluon.jit
def pred_wait(desc, out_ptr, n_tiles, SKIP: gl.constexpr, num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)
    gl.warp_specialize([
        (pw_use, (out_ptr, bufs, ready, empty, n_tiles, num_warps)),
        (pw_load, (desc, bufs, ready, empty, n_tiles, SKIP)),
    ], [1], [48])


def _pred_wait(skip: int) -> Launch:
    return Launch(pred_wait, args=dict(desc=tensor_desc("fp16", [32, 64]), out_ptr="*fp16",
                                       n_tiles=4, SKIP=skip),
                  num_warps=4, target="cuda:100")


pred_wait_ok = _pred_wait(2)
pred_wait_skips_three = _pred_wait(3)


# -- 5g. the commit signalling the epilogue issued by the partition that issued the MMA ------

@gluon.jit
def fc_mma(a_smem, b_smem, acc, issued, acc_bar, MINE: gl.constexpr):
    # asynchronous (a barrier given), its own arrival predicated off
    tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=False, mbarriers=[issued],
                mbarrier_preds=[False])
    if MINE:
        tcgen05_commit(acc_bar)
    mbarrier.arrive(issued, count=1)


@gluon.jit
def fc_epilogue(out_ptr, acc, issued, acc_bar, MINE: gl.constexpr, num_warps: gl.constexpr):
    mbarrier.wait(issued, 0)
    if not MINE:
        tcgen05_commit(acc_bar)
    mbarrier.wait(acc_bar, 0)
    regs: gl.constexpr = acc.get_reg_layout(num_warps=num_warps)
    BM: gl.constexpr = acc.shape[0]
    BN: gl.constexpr = acc.shape[1]
    rows = gl.arange(0, BM, gl.SliceLayout(1, regs))
    cols = gl.arange(0, BN, gl.SliceLayout(0, regs))
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :], acc.load(regs))


@gluon.jit
def foreign_commit(a_desc, b_desc, out_ptr, MINE: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    tma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    issued = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    acc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(issued, count=1)
    mbarrier.init(acc_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    mbarrier.expect(tma_bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], tma_bar, a_smem)
    tma.async_load(b_desc, [0, 0], tma_bar, b_smem)
    mbarrier.wait(tma_bar, 0)
    gl.warp_specialize([
        (fc_epilogue, (out_ptr, acc, issued, acc_bar, MINE, num_warps)),
        (fc_mma, (a_smem, b_smem, acc, issued, acc_bar, MINE)),
    ], [1], [48])


def _foreign_commit(mine: bool) -> Launch:
    return Launch(foreign_commit, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                            b_desc=tensor_desc("fp16", [64, 64]),
                                            out_ptr="*fp32", MINE=mine),
                  num_warps=4, target="cuda:100")


commit_by_issuer_ok = _foreign_commit(True)
commit_by_epilogue = _foreign_commit(False)


# -- 6. a two-slot ring unrolled by gl.static_range: slot and phase are compile-time -----------

@gluon.jit
def static_ring(desc, out_ptr, K_TILES: gl.constexpr, RING_PARITY: gl.constexpr,
                num_warps: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    for i in gl.static_range(2):
        mbarrier.expect(bars.index(i), desc.block_type.nbytes)
        tma.async_load(desc, [i * BM, 0], bars.index(i), bufs.index(i))
    for k in gl.static_range(K_TILES):
        s = k % 2
        if RING_PARITY:
            mbarrier.wait(bars.index(s), (k // 2) & 1)
        else:
            mbarrier.wait(bars.index(s), k & 1)
        gl.store(out_ptr + k * BM + rows, gl.sum(bufs.index(s).load(layout), 1))
        gl.barrier()                        # every warp has read slot s before its refill
        if k + 2 < K_TILES:
            mbarrier.expect(bars.index(s), desc.block_type.nbytes)
            tma.async_load(desc, [(k + 2) * BM, 0], bars.index(s), bufs.index(s))


def _static_ring(ring: bool) -> Launch:
    return Launch(static_ring, args=dict(desc=tensor_desc("fp16", [32, 64]), out_ptr="*fp16",
                                         K_TILES=4, RING_PARITY=ring),
                  num_warps=4, target="cuda:100")


static_ring_ok = _static_ring(True)
static_ring_parity = _static_ring(False)


# -- 7. tiles x k on one barrier: the phase carried across tiles or restarted per tile ---------

@gluon.jit
def nest_phase(desc, out_ptr, n_tiles, k_tiles, RESET: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    BK: gl.constexpr = desc.block_type.shape[1]
    x_smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    phase = 0
    for t in range(n_tiles):
        if RESET:
            phase = 0
        total = gl.zeros([BM], gl.float32, gl.SliceLayout(1, layout))
        for k in range(k_tiles):
            mbarrier.expect(bar, desc.block_type.nbytes)
            tma.async_load(desc, [t * BM, k * BK], bar, x_smem)
            mbarrier.wait(bar, phase)
            phase ^= 1
            total += gl.sum(x_smem.load(layout).to(gl.float32), 1)
            gl.barrier()                    # every warp has read x_smem before its refill
        gl.store(out_ptr + t * BM + rows, total)


def _nest(reset: bool) -> Launch:
    return Launch(nest_phase, args=dict(desc=tensor_desc("fp16", [32, 64]), out_ptr="*fp32",
                                        n_tiles=2, k_tiles=3, RESET=reset),
                  num_warps=4, target="cuda:100")


nest_phase_ok = _nest(False)
nest_phase_reset = _nest(True)


# -- 8. outside the model: a barrier re-initialised per round, a region per loop iteration ----

@gluon.jit
def reinit(desc, out_ptr, num_warps: gl.constexpr):
    BM: gl.constexpr = desc.block_type.shape[0]
    x_smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    for r in gl.static_range(2):
        mbarrier.init(bar, count=1)             # phase 0 again every round
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [r * BM, 0], bar, x_smem)
        mbarrier.wait(bar, 0)
        gl.store(out_ptr + r * BM + rows, gl.max(x_smem.load(layout), 1))
        mbarrier.invalidate(bar)


reinit_rounds = Launch(reinit, args=dict(desc=tensor_desc("fp16", [32, 64]), out_ptr="*fp16"),
                       num_warps=4, target="cuda:100")


@gluon.jit
def region_loop(desc, out_ptr, n_tiles, num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)
    for t in range(n_tiles):                  # one region per tile
        gl.warp_specialize([
            (pw_use, (out_ptr, bufs, ready, empty, 2, num_warps)),
            (pw_load, (desc, bufs, ready, empty, 2, 2)),
        ], [1], [48])


region_per_tile = Launch(region_loop, args=dict(desc=tensor_desc("fp16", [32, 64]),
                                                out_ptr="*fp16", n_tiles=2),
                         num_warps=4, target="cuda:100")
