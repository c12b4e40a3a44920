"""Fourth set of Gluon kernels in the style of Triton's Gluon tutorials: rows written back by
`tma.async_scatter` from one staging buffer, round after round; a Blackwell matmul epilogue
subtiled over the TMEM accumulator, each column slice stored through one of two staging buffers
(`tma.store_wait(1)` before a buffer is written again); and an accumulate matmul (D = A @ B + C)
whose C tile enters tensor memory by `tcgen05_copy`, its staging buffer released by a
`tcgen05_commit` and refilled for the next tile, or released by the completion of the MMA
issued after the copy (the tensor pipe runs its ops in order, so a commit after the MMA covers
the copy too). Each correct and with a bug of the kind the
field reports. Checked by tests/test_unseen_frontends.py against EXPECT (decided from the
hardware rules before running)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_copy,
                                                                 tcgen05_mma)
from triton.experimental.gluon.language.nvidia.blackwell import tma as bw_tma
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from barrierproof.model.gluon import Launch, tensor_desc

EXPECT = {
    "scatter_rounds_ok": "verified",
    "scatter_rounds_no_store_wait": "violation:BP200",
    "subtiled_epilogue_ok": "verified",
    "subtiled_epilogue_two_pending": "violation:BP200",
    "copy_accumulate_ok": "verified",
    "copy_accumulate_refills_early": "violation:BP200",
    "copy_ordered_by_mma_ok": "verified",
    "copy_ordered_by_mma_refills_early": "violation:BP200",
}


# -- 1. scatter: each round writes its rows into one staging buffer and scatters them by index --

@gluon.jit
def scatter_rounds(out_desc, src_ptr, idx_ptr, ROUNDS: gl.constexpr, ROWS: gl.constexpr,
                   WAIT: gl.constexpr, num_warps: gl.constexpr):
    COLS: gl.constexpr = out_desc.block_type.shape[1]
    buf = gl.allocate_shared_memory(out_desc.dtype, [ROWS, COLS], out_desc.layout)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    idx_layout: gl.constexpr = gl.SliceLayout(
        0, gl.BlockedLayout([1, 4], [32, 1], [1, num_warps], [1, 0]))
    rows = gl.arange(0, ROWS, gl.SliceLayout(1, regs))[:, None]
    cols = gl.arange(0, COLS, gl.SliceLayout(0, regs))[None, :]
    for r in gl.static_range(ROUNDS):
        vals = gl.load(src_ptr + (r * ROWS + rows) * COLS + cols)
        x_offsets = gl.load(idx_ptr + r * ROWS + gl.arange(0, ROWS, layout=idx_layout))
        if WAIT:
            tma.store_wait(0)                # the previous round's scatter has read `buf`
        buf.store(vals)
        fence_async_shared()
        bw_tma.async_scatter(out_desc, x_offsets, 0, buf)
    tma.store_wait(0)


def _scatter(**k):
    args = dict(out_desc=tensor_desc("fp16", [1, 64]), src_ptr="*fp16", idx_ptr="*i32",
                ROUNDS=2, ROWS=32, WAIT=True)
    args.update(k)
    return Launch(scatter_rounds, args=args, num_warps=4, target="cuda:100")


scatter_rounds_ok = _scatter()
# round 1 writes `buf` while round 0's scatter may still be reading it
scatter_rounds_no_store_wait = _scatter(WAIT=False)


# -- 2. subtiled epilogue: one MMA tile, its accumulator stored slice by slice through two
#       staging buffers, at most one TMA store in flight when a buffer is written again ---------

@gluon.jit
def subtiled_epilogue(a_desc, b_desc, c_desc, SPLIT: gl.constexpr, PENDING: gl.constexpr,
                      num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    SUB: gl.constexpr = c_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape,
                                       c_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(loaded, count=1)
    mbarrier.init(mma_done, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))

    mbarrier.expect(loaded, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], loaded, a_smem)
    tma.async_load(b_desc, [0, 0], loaded, b_smem)
    mbarrier.wait(loaded, 0)
    tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=False, mbarriers=[mma_done])
    mbarrier.wait(mma_done, 0)

    for j in gl.static_range(SPLIT):
        part = acc.slice(j * SUB, SUB)
        vals = part.load(part.get_reg_layout(num_warps=num_warps))
        c_smem = c_bufs.index(j % 2)
        tma.store_wait(PENDING)              # the store that last read c_smem (j - 2) is done
        c_smem.store(vals.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [0, j * SUB], c_smem)
    tma.store_wait(0)


def _subtiled(**k):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp16", [128, 16]), SPLIT=4, PENDING=1)
    args.update(k)
    return Launch(subtiled_epilogue, args=args, num_warps=4, target="cuda:100")


subtiled_epilogue_ok = _subtiled()
# store_wait(2) lets both earlier stores stay in flight: slice j overwrites the buffer the
# store of slice j - 2 may still be reading
subtiled_epilogue_two_pending = _subtiled(PENDING=2)


# -- 3. D = A @ B + C over tiles: C is loaded by TMA, copied into the accumulator by
#       `tcgen05_copy`, and its staging buffer is refilled with the next tile's C once the
#       commit after the copy says the copy has read it --------------------------------------

@gluon.jit
def copy_accumulate(a_desc, b_desc, c_desc, out_ptr, TILES: gl.constexpr, EARLY: gl.constexpr,
                    num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    c_buf = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ab_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    c_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    c_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(ab_ready, count=1)
    mbarrier.init(c_ready, count=1)
    mbarrier.init(c_empty, count=1)
    mbarrier.init(mma_done, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    offs = (gl.arange(0, BM, gl.SliceLayout(1, regs))[:, None] * BN
            + gl.arange(0, BN, gl.SliceLayout(0, regs))[None, :])

    mbarrier.expect(ab_ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], ab_ready, a_smem)
    tma.async_load(b_desc, [0, 0], ab_ready, b_smem)
    mbarrier.expect(c_ready, c_desc.block_type.nbytes)
    tma.async_load(c_desc, [0, 0], c_ready, c_buf)
    mbarrier.wait(ab_ready, 0)
    for t in gl.static_range(TILES):
        mbarrier.wait(c_ready, t & 1)
        tcgen05_copy(c_buf, acc)
        tcgen05_commit(c_empty)              # c_buf is free once the copy has read it
        if not EARLY:
            mbarrier.wait(c_empty, t & 1)
        if t + 1 < TILES:                    # prefetch the next tile's C
            mbarrier.expect(c_ready, c_desc.block_type.nbytes)
            tma.async_load(c_desc, [(t + 1) * BM, 0], c_ready, c_buf)
        if EARLY:
            mbarrier.wait(c_empty, t & 1)
        tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=True, mbarriers=[mma_done])
        mbarrier.wait(mma_done, t & 1)
        d = acc.load(acc.get_reg_layout(num_warps=num_warps))
        gl.store(out_ptr + t * BM * BN + offs, gl.convert_layout(d, regs))


def _copy_acc(**k):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp32", [128, 64]), out_ptr="*fp32", TILES=2, EARLY=False)
    args.update(k)
    return Launch(copy_accumulate, args=args, num_warps=4, target="cuda:100")


copy_accumulate_ok = _copy_acc()
# the next tile's C is loaded into c_buf before the commit of the copy reading it is waited on
copy_accumulate_refills_early = _copy_acc(EARLY=True)


# -- 4. the same without a barrier of its own for the copy: the MMA's completion barrier also
#       says the earlier copy is done (tcgen05 ops run in order on the tensor pipe) -----------

@gluon.jit
def copy_ordered_by_mma(a_desc, b_desc, c_desc, out_ptr, TILES: gl.constexpr,
                        EARLY: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    c_buf = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ab_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    c_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(ab_ready, count=1)
    mbarrier.init(c_ready, count=1)
    mbarrier.init(mma_done, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    offs = (gl.arange(0, BM, gl.SliceLayout(1, regs))[:, None] * BN
            + gl.arange(0, BN, gl.SliceLayout(0, regs))[None, :])

    mbarrier.expect(ab_ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], ab_ready, a_smem)
    tma.async_load(b_desc, [0, 0], ab_ready, b_smem)
    mbarrier.expect(c_ready, c_desc.block_type.nbytes)
    tma.async_load(c_desc, [0, 0], c_ready, c_buf)
    mbarrier.wait(ab_ready, 0)
    for t in gl.static_range(TILES):
        mbarrier.wait(c_ready, t & 1)
        tcgen05_copy(c_buf, acc)
        tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=True, mbarriers=[mma_done])
        if not EARLY:
            mbarrier.wait(mma_done, t & 1)   # the MMA, and so the copy before it, is done
        if t + 1 < TILES:
            mbarrier.expect(c_ready, c_desc.block_type.nbytes)
            tma.async_load(c_desc, [(t + 1) * BM, 0], c_ready, c_buf)
        if EARLY:
            mbarrier.wait(mma_done, t & 1)
        d = acc.load(acc.get_reg_layout(num_warps=num_warps))
        gl.store(out_ptr + t * BM * BN + offs, gl.convert_layout(d, regs))


def _copy_mma(**k):
    args = dict(a_desc=tensor_desc("fp16", [128, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                c_desc=tensor_desc("fp32", [128, 64]), out_ptr="*fp32", TILES=2, EARLY=False)
    args.update(k)
    return Launch(copy_ordered_by_mma, args=args, num_warps=4, target="cuda:100")


copy_ordered_by_mma_ok = _copy_mma()
# the next C is loaded into c_buf before the MMA's barrier is waited on: the copy queued before
# that MMA may not have read c_buf yet
copy_ordered_by_mma_refills_early = _copy_mma(EARLY=True)
