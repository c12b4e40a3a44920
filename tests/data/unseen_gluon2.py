"""More Gluon kernels in the style of Triton's Gluon tutorials, each correct and with a bug of
the kind the field reports: a one-partition prefetch chain (the last prefetch left unguarded
runs past the kernel's end), two TMA loads on one barrier with the expected bytes of the wrong
tile, an Ampere cp.async copy completed through `async_copy.mbarrier_arrive` (outside the
model: BP190 at its line), and a warp-specialized ring whose `empty` barriers are pre-arrived
right after their inits (each init and arrival in turn, per slot). Checked by tests/test_unseen_frontends.py against EXPECT (decided
before running)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma)

from barrierproof.model.gluon import Launch, tensor_desc


# -- 1. a prefetch chain: tile i + 1 is requested before tile i is read ------------------------

@gluon.jit
def prefetch_chain(in_desc, out_desc, n_tiles, GUARD: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(in_desc.dtype, [2] + in_desc.block_type.shape,
                                     in_desc.layout)
    out_tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                         out_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(2):
        mbarrier.init(bars.index(s), count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    acc = gl.zeros(out_desc.block_type.shape, gl.float32, regs)
    mbarrier.expect(bars.index(0), in_desc.block_type.nbytes)
    tma.async_load(in_desc, [0, 0], bars.index(0), bufs.index(0))
    for i in range(n_tiles):
        nxt = i + 1
        if GUARD:
            if nxt < n_tiles:
                mbarrier.expect(bars.index(nxt % 2), in_desc.block_type.nbytes)
                tma.async_load(in_desc, [nxt * BM, 0], bars.index(nxt % 2), bufs.index(nxt % 2))
        else:
            mbarrier.expect(bars.index(nxt % 2), in_desc.block_type.nbytes)
            tma.async_load(in_desc, [nxt * BM, 0], bars.index(nxt % 2), bufs.index(nxt % 2))
        mbarrier.wait(bars.index(i % 2), (i // 2) & 1)
        acc += bufs.index(i % 2).load(regs).to(gl.float32)
    out_tile.store(acc.to(out_desc.dtype))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], out_tile)
    tma.store_wait(0)


def _prefetch(**k):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=4, GUARD=True)
    args.update(k)
    return Launch(prefetch_chain, args=args, num_warps=4, target="cuda:90")


prefetch_chain_ok = _prefetch()
# the last iteration requests tile n_tiles, which no one waits for: the kernel exits while the
# copy still lands (BP105; its bytes also leave the barrier's tx-count open, ranked after)
prefetch_chain_unguarded = _prefetch(GUARD=False)


# -- 2. A and B tiles of different shapes on one barrier: expect both tiles' bytes -------------

@gluon.jit
def ab_tiles(a_desc, b_desc, out_desc, k_tiles, B_BYTES_OF_A: gl.constexpr,
             num_warps: gl.constexpr):
    BK: gl.constexpr = a_desc.block_type.shape[1]
    a_s = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    out_tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                         out_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    acc = gl.zeros(out_desc.block_type.shape, gl.float32, regs)
    for k in range(k_tiles):
        if B_BYTES_OF_A:
            mbarrier.expect(bar, 2 * a_desc.block_type.nbytes)
        else:
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], bar, a_s)
        tma.async_load(b_desc, [k * BK, 0], bar, b_s)
        mbarrier.wait(bar, k & 1)
        acc += a_s.load(regs).to(gl.float32) + b_s.load(regs).to(gl.float32)
        gl.barrier()                 # every warp has read a_s and b_s before the next loads
    out_tile.store(acc.to(out_desc.dtype))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], out_tile)
    tma.store_wait(0)


def _ab(**k):
    args = dict(a_desc=tensor_desc("fp16", [64, 64]), b_desc=tensor_desc("fp8e4nv", [64, 64]),
                out_desc=tensor_desc("fp16", [64, 64]), k_tiles=3, B_BYTES_OF_A=False)
    args.update(k)
    return Launch(ab_tiles, args=args, num_warps=4, target="cuda:90")


ab_tiles_ok = _ab()
# B is fp8: twice A's bytes are never delivered, the tx-count never returns to zero (BP130)
ab_tiles_expects_a_twice = _ab(B_BYTES_OF_A=True)


# -- 3. cp.async copies completed through an mbarrier (`async_copy.mbarrier_arrive`): one
#       asynchronous arrival per thread (.noinc, the count counts them); the default increment
#       is not ordered across the warps by the frontend (BP190)

@gluon.jit
def cp_arrive(a_ptr, NOINC: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf = gl.allocate_shared_memory(gl.float16, [32, 64], shared)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * 64 + cols[None, :]
    if NOINC:
        mbarrier.init(bar, count=num_warps * 32)
    else:
        mbarrier.init(bar, count=1)
    async_copy.async_load(buf, a_ptr + offs)
    async_copy.mbarrier_arrive(bar, increment_count=not NOINC)
    if not NOINC:
        mbarrier.arrive(bar, count=1)
    mbarrier.wait(bar, 0)
    x = buf.load(layout)
    gl.store(a_ptr + offs, x * 2)


cp_arrive_noinc = Launch(cp_arrive, args=dict(a_ptr="*fp16", NOINC=True), num_warps=4,
                         target="cuda:80")
cp_arrive_inc = Launch(cp_arrive, args=dict(a_ptr="*fp16", NOINC=False), num_warps=4,
                       target="cuda:80")

# -- 4. a loader partition and a register consumer: the `empty` barriers are pre-arrived once
#       after init, so the loader waits on them from phase 0 like the consumer on `ready` ------

@gluon.jit
def pre_loader(desc, bufs, ready, empty, n_tiles):
    STAGES: gl.constexpr = bufs.shape[0]
    BM: gl.constexpr = desc.block_type.shape[0]
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(empty.index(s), (i // STAGES) & 1)
        mbarrier.expect(ready.index(s), desc.block_type.nbytes)
        tma.async_load(desc, [i * BM, 0], ready.index(s), bufs.index(s))


@gluon.jit
def pre_consumer(out_desc, bufs, ready, empty, out_tile, n_tiles, num_warps: gl.constexpr):
    STAGES: gl.constexpr = bufs.shape[0]
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    acc = gl.zeros(out_desc.block_type.shape, gl.float32, regs)
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        acc += bufs.index(s).load(regs).to(gl.float32)
        mbarrier.arrive(empty.index(s), count=1)
    out_tile.store(acc.to(out_desc.dtype))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], out_tile)
    tma.store_wait(0)


@gluon.jit
def pre_arrived(in_desc, out_desc, n_tiles, STAGES: gl.constexpr, PRE_ARRIVE: gl.constexpr,
                num_warps: gl.constexpr):
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_type.shape,
                                     in_desc.layout)
    out_tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                         out_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
        if PRE_ARRIVE:
            mbarrier.arrive(empty.index(s), count=1)     # every slot starts free
    gl.warp_specialize([
        (pre_consumer, (out_desc, bufs, ready, empty, out_tile, n_tiles, num_warps)),
        (pre_loader, (in_desc, bufs, ready, empty, n_tiles)),
    ], [1], [24])


def _pre(**k):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=5, STAGES=2, PRE_ARRIVE=True)
    args.update(k)
    return Launch(pre_arrived, args=args, num_warps=4, target="cuda:100")


pre_arrived_ok = _pre()
# without the pre-arrival the loader's first wait (phase 0 of a fresh `empty`) never returns:
# no consumer releases a slot it was never given
pre_arrived_missing = _pre(PRE_ARRIVE=False)

EXPECT = {
    "prefetch_chain_ok": "verified",
    "prefetch_chain_unguarded": "violation:BP105",
    "ab_tiles_ok": "verified",
    "ab_tiles_expects_a_twice": "violation:BP130",
    "cp_arrive_noinc": "verified",
    "cp_arrive_inc": "unknown",
    "pre_arrived_ok": "verified",
    "pre_arrived_missing": "violation:BP100",
}
