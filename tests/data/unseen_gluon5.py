"""Fifth set of Gluon kernels in the style of Triton's Gluon tutorials: a warp-specialized 2-CTA
Blackwell matmul (a loader partition filling a ring whose `ready` barriers are pair barriers, an
MMA partition in which the leader issues the pair's MMA, an epilogue reading each CTA's half of
the accumulator); the multi-CTA tutorial's TMA-into-MMA loop in 2-CTA mode with the MMA's
completion multicast (`tcgen05_mma(..., multicast=True)`, its barrier counted by
`tcgen05_mma_barrier_count`); a Hopper cluster of two CTAs sharing B by a multicast TMA load into
a wgmma ring, each CTA releasing a slot on both CTAs' `empty` barriers; and a plain `tl`
attention forward whose key loop asks for Triton's automatic warp specialization
(`tl.range(..., warp_specialize=True)`). Each correct and, where the kernel writes its own
barriers, with a bug of the kind the field reports. Checked by tests/test_unseen_frontends.py
against EXPECT (decided from the hardware rules before running)."""

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma,
                                                                 tcgen05_mma_barrier_count)
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma,
                                                             warpgroup_mma_wait)

from barrierproof.model.gluon import Launch, tensor_desc

EXPECT = {
    "pair_ws_ok": "verified",
    "pair_ws_expects_a_only": "violation:BP200",
    "pair_multicast_ok": "verified",
    # the follower never waits on the leader's pair barrier: without the MMA wait it runs into
    # the next iteration and its expect arrives again while the leader's phase is still open
    # (an arrival past the count: undefined), before any operand is overwritten
    "pair_multicast_reloads_before_mma": "violation:BP121",
    "cluster_wgmma_ok": "verified",
    "cluster_wgmma_releases_own_cta": "violation:BP200",
    "tl_attention_ws_two_stages": "verified",
    "tl_attention_ws_three_stages": "verified",
}


def _split(shape: list, bases: list, dtype=gl.float16, name: str = "fp16"):
    layout = gl.NVMMASharedLayout.get_default_for(shape, dtype, cga_layout=bases)
    return tensor_desc(name, shape, layout)


# -- 1. warp-specialized 2-CTA matmul: loader, MMA issuer, epilogue -----------------------------

@gluon.jit
def pair_loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles, B_BYTES: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.nbytes_per_cta + B_BYTES)
        tma.async_load(a_desc, [0, k * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [k * BK, 0], ready.index(s), b_bufs.index(s))


@gluon.jit
def pair_mma(a_bufs, b_bufs, ready, empty, acc, acc_ready, k_tiles):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        tcgen05_mma(a_bufs.index(s), b_bufs.index(s), acc, use_acc=k > 0,
                    mbarriers=[empty.index(s)])
    tcgen05_commit(acc_ready)


@gluon.jit
def pair_epilogue(acc, acc_ready, c_desc, c_smem, num_warps: gl.constexpr):
    mbarrier.wait(acc_ready, 0)
    c_smem.store(acc.load().to(c_desc.dtype))


@gluon.jit
def pair_ws_matmul(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, B_BYTES: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)
    empty = mbarrier.allocate_mbarrier(batch=STAGES)
    acc_ready = mbarrier.allocate_mbarrier()
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    mbarrier.init(acc_ready, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout(
        block=(BM // 2, BN), col_stride=1, cga_layout=[[1, 0]], two_ctas=True))
    k_tiles = gl.cdiv(K, BK)
    gl.warp_specialize([
        (pair_epilogue, (acc, acc_ready, c_desc, c_smem, gl.num_warps())),
        (pair_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles, B_BYTES)),
        (pair_mma, (a_bufs, b_bufs, ready, empty, acc, acc_ready, k_tiles)),
    ], [1, 1], [24, 24])


def _pair_ws(b_bytes: int) -> Launch:
    return Launch(pair_ws_matmul, args=dict(
        a_desc=_split([256, 64], [[1, 0]]), b_desc=_split([64, 128], [[0, 1]]),
        c_desc=_split([256, 128], [[1, 0]]), K=256, STAGES=2, B_BYTES=b_bytes),
        num_warps=4, num_ctas=2, target="cuda:100")


# each CTA's B half is 64 x 64 fp16; leaving it out of the expect lets the leader's MMA read the
# B halves while they are still landing
pair_ws_ok = _pair_ws(64 * 64 * 2)
pair_ws_expects_a_only = _pair_ws(0)


# -- 2. the TMA-into-MMA loop in 2-CTA mode, the MMA's completion multicast ----------------------

@gluon.jit
def pair_multicast(a_desc, b_desc, K, WAIT_MMA: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout(
        block=(BM // 2, BN), col_stride=1, cga_layout=[[1, 0]], two_ctas=True))
    tma_bar = mbarrier.allocate_mbarrier(two_ctas=True)
    mma_bar = mbarrier.allocate_mbarrier()
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(mma_bar, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=True,
                                                           two_ctas=True))
    phase = 0
    for k in range(gl.cdiv(K, BK)):
        mbarrier.expect(tma_bar, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
        tma.async_load(a_desc, [0, k * BK], tma_bar, a_smem)
        tma.async_load(b_desc, [k * BK, 0], tma_bar, b_smem)
        mbarrier.wait(tma_bar, phase)
        tcgen05_mma(a_smem, b_smem, acc, use_acc=k != 0, multicast=True, mbarriers=[mma_bar])
        if WAIT_MMA:
            mbarrier.wait(mma_bar, phase)
        phase ^= 1


def _pair_multicast(wait: bool) -> Launch:
    return Launch(pair_multicast, args=dict(a_desc=_split([256, 64], [[1, 0]]),
                                            b_desc=_split([64, 128], [[0, 1]]), K=192,
                                            WAIT_MMA=wait),
                  num_warps=4, num_ctas=2, target="cuda:100")


pair_multicast_ok = _pair_multicast(True)
# the next iteration's loads overwrite the operands the pair's MMA may still be reading
pair_multicast_reloads_before_mma = _pair_multicast(False)


# -- 3. Hopper cluster of two: B multicast to both CTAs, a wgmma ring ---------------------------

@gluon.jit
def cluster_wgmma(a_desc, b_desc, K, STAGES: gl.constexpr, BOTH: gl.constexpr,
                  num_warps: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    empty = mbarrier.allocate_mbarrier(batch=STAGES)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2 if BOTH else 1)    # a consumer per CTA
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, 16],
        cga_layout=[[0, 0]])
    acc = gl.zeros((BM, BN), gl.float32, acc_layout)
    k_tiles = gl.cdiv(K, BK)
    for i in gl.static_range(STAGES - 1):
        cluster_load(a_desc, b_desc, a_bufs.index(i), b_bufs.index(i), ready.index(i), i,
                     i < k_tiles)
    for k in range(k_tiles):
        # prefetch tile k + STAGES - 1 into the slot tile k - 1 used: B's slot is refilled by
        # both CTAs' multicast shares, so both CTAs must have released it
        nxt = k + STAGES - 1
        ns = nxt % STAGES
        mbarrier.wait(empty.index(ns), ((nxt // STAGES) - 1) & 1,
                      pred=(nxt >= STAGES) & (nxt < k_tiles))
        cluster_load(a_desc, b_desc, a_bufs.index(ns), b_bufs.index(ns), ready.index(ns), nxt,
                     nxt < k_tiles)
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        release = k + STAGES < k_tiles        # the prefetch of tile k + STAGES waits for it
        if BOTH:
            mbarrier.arrive(empty.index(s), pred=release, from_cta=0)
        else:
            mbarrier.arrive(empty.index(s), pred=release)


@gluon.jit
def cluster_load(a_desc, b_desc, a_buf, b_buf, bar, k, pred):
    BK: gl.constexpr = a_desc.block_type.shape[1]
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma.async_load(a_desc, [0, k * BK], bar, a_buf, pred=pred)
    tma.async_load(b_desc, [k * BK, 0], bar, b_buf, pred=pred, multicast=True)


def _cluster_wgmma(both: bool) -> Launch:
    return Launch(cluster_wgmma, args=dict(a_desc=_split([64, 64], [[0, 0]]),
                                           b_desc=_split([64, 64], [[0, 0]]), K=256, STAGES=2,
                                           BOTH=both),
                  num_warps=4, num_ctas=2, target="cuda:90")


cluster_wgmma_ok = _cluster_wgmma(True)
# each CTA counts its own release only: the peer, one tile ahead, multicasts its share of the
# next B into this CTA's slot while this CTA's wgmma may still read it
cluster_wgmma_releases_own_cta = _cluster_wgmma(False)


# -- 4. a plain tl attention forward, its key loop warp-specialized by Triton --------------------

@triton.jit
def attention_tl(q_desc, k_desc, v_desc, o_desc, N_CTX, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr):
    q = q_desc.load([0, 0])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)
    for start_n in tl.range(0, N_CTX, BLOCK_N, warp_specialize=True):
        k = k_desc.load([start_n, 0])
        qk = tl.dot(q, k.T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([start_n, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    o_desc.store([0, 0], (acc / l_i[:, None]).to(tl.float16))


def _attention_tl(stages: int) -> Launch:
    return Launch(attention_tl, args=dict(q_desc=tensor_desc("fp16", [128, 64]),
                                          k_desc=tensor_desc("fp16", [64, 64]),
                                          v_desc=tensor_desc("fp16", [64, 64]),
                                          o_desc=tensor_desc("fp16", [128, 64]), N_CTX=512,
                                          BLOCK_M=128, BLOCK_N=64, HEAD_D=64),
                  num_warps=4, num_stages=stages, target="cuda:100")


tl_attention_ws_two_stages = _attention_tl(2)
tl_attention_ws_three_stages = _attention_tl(3)
