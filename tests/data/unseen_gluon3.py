"""Third set of Gluon kernels in the style of Triton's Gluon tutorials: a warp-specialized Hopper
matmul whose default partition keeps one async wgmma in flight and releases the stage of the
previous step after `warpgroup_mma_wait(1)`; a Blackwell row gather (`tma.async_gather`) whose
expected bytes are those of the gathered rows; and a persistent loop over tiles written as a
`while` with the ring's stage and phase carried across tiles. Each correct and with a bug of
the kind the field reports. Checked by tests/test_unseen_frontends.py against EXPECT (decided
before running)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import tma as bw_tma
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                             warpgroup_mma, warpgroup_mma_wait)

from barrierproof.model.gluon import Launch, tensor_desc


# -- 1. Hopper, warp-specialized: a loader partition fills the ring, the default partition runs
#       async wgmma and frees a stage once the wgmma reading it has retired -------------------

@gluon.jit
def ws_loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles):
    STAGES: gl.constexpr = a_bufs.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [k * BK, 0], ready.index(s), b_bufs.index(s))


@gluon.jit
def ws_mma(a_bufs, b_bufs, ready, empty, k_tiles, EARLY: gl.constexpr, num_warps: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.shape[0]
    BM: gl.constexpr = a_bufs.shape[1]
    BN: gl.constexpr = b_bufs.shape[2]
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0],
                                                         warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, mma_layout)
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        if EARLY:
            mbarrier.arrive(empty.index(s), count=1)         # the wgmma still reads stage s
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        else:
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if k > 0:                                        # the wgmma of k - 1 has retired
                mbarrier.arrive(empty.index((k - 1) % STAGES), count=1)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    if not EARLY:
        if k_tiles > 0:
            mbarrier.arrive(empty.index((k_tiles - 1) % STAGES), count=1)


@gluon.jit
def ws_wgmma(a_desc, b_desc, k_tiles, STAGES: gl.constexpr, EARLY: gl.constexpr,
             num_warps: gl.constexpr):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    gl.warp_specialize([
        (ws_mma, (a_bufs, b_bufs, ready, empty, k_tiles, EARLY, num_warps)),
        (ws_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, k_tiles)),
    ], [1], [24])


def _ws(**k):
    args = dict(a_desc=tensor_desc("fp16", [64, 64]), b_desc=tensor_desc("fp16", [64, 64]),
                k_tiles=4, STAGES=2, EARLY=False)
    args.update(k)
    return Launch(ws_wgmma, args=args, num_warps=4, target="cuda:90")


ws_wgmma_ok = _ws()
# stage s is released right after its wgmma is issued: the loader refills it while the wgmma,
# one of which is kept in flight, still reads it
ws_wgmma_releases_in_flight = _ws(EARLY=True)


# -- 2. Blackwell: gather rows of a table by index (`async_gather`), sum them ----------------

@gluon.jit
def gather_rows(table_desc, idx_ptr, out_ptr, ROWS: gl.constexpr, ONE_ROW_BYTES: gl.constexpr,
                num_warps: gl.constexpr):
    COLS: gl.constexpr = table_desc.block_type.shape[1]
    buf = gl.allocate_shared_memory(table_desc.dtype, [ROWS, COLS], table_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    idx_layout: gl.constexpr = gl.SliceLayout(
        0, gl.BlockedLayout([1, 4], [32, 1], [1, num_warps], [1, 0]))
    x_offsets = gl.load(idx_ptr + gl.arange(0, ROWS, layout=idx_layout))
    if ONE_ROW_BYTES:
        mbarrier.expect(bar, table_desc.block_type.nbytes)            # one row's bytes
    else:
        mbarrier.expect(bar, ROWS * table_desc.block_type.nbytes)
    bw_tma.async_gather(table_desc, x_offsets, 0, bar, buf)
    mbarrier.wait(bar, 0)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    rows = buf.load(regs).to(gl.float32)
    total = gl.sum(rows, axis=0)
    gl.store(out_ptr + gl.arange(0, COLS, layout=gl.SliceLayout(0, regs)), total)


def _gather(**k):
    args = dict(table_desc=tensor_desc("fp16", [1, 64]), idx_ptr="*i32", out_ptr="*fp32",
                ROWS=32, ONE_ROW_BYTES=False)
    args.update(k)
    return Launch(gather_rows, args=args, num_warps=4, target="cuda:100")


gather_ok = _gather()
# the barrier expects one row while 32 land: the transaction count goes below zero (BP130)
gather_expects_one_row = _gather(ONE_ROW_BYTES=True)


# -- 3. a persistent `while` over tiles: the ring's counter runs on across tiles -------------

@gluon.jit
def tiles_while(in_desc, out_desc, n_tiles, k_tiles, STAGES: gl.constexpr,
                RESET: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_type.shape,
                                     in_desc.layout)
    out_tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                         out_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    tile = gl.program_id(0)
    step = 0
    while tile < n_tiles:
        if RESET:
            step = 0
        acc = gl.zeros(out_desc.block_type.shape, gl.float32, regs)
        for k in range(k_tiles):
            s = step % STAGES
            mbarrier.expect(bars.index(s), in_desc.block_type.nbytes)
            tma.async_load(in_desc, [tile * BM, k * BM], bars.index(s), bufs.index(s))
            mbarrier.wait(bars.index(s), (step // STAGES) & 1)
            acc += bufs.index(s).load(regs).to(gl.float32)
            gl.barrier()                     # every warp has read stage s before its refill
            step += 1
        tma.store_wait(0)                    # the previous tile's store has read out_tile
        out_tile.store(acc.to(out_desc.dtype))
        fence_async_shared()
        tma.async_store(out_desc, [tile * BM, 0], out_tile)
        tile += gl.num_programs(0)
    tma.store_wait(0)


def _tiles(**k):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                n_tiles=3, k_tiles=3, STAGES=2, RESET=False)
    args.update(k)
    return Launch(tiles_while, args=args, num_warps=4, target="cuda:90", grid=(1,))


tiles_while_ok = _tiles()
# the step counter restarts at 0 on every tile while the barriers keep their phases: with
# 3 k-steps on 2 stages, stage 0 has completed 2 phases at the end of tile 0 and tile 1's
# first wait (parity 0) passes at once, before its copy lands
tiles_while_resets_step = _tiles(RESET=True)

EXPECT = {
    "ws_wgmma_ok": "verified",
    "ws_wgmma_releases_in_flight": "violation:BP200",
    "gather_ok": "verified",
    "gather_expects_one_row": "violation:BP130",
    "tiles_while_ok": "verified",
    "tiles_while_resets_step": "violation:BP200",
}
