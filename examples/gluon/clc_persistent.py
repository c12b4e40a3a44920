"""A persistent, warp-specialized Blackwell kernel whose tiles are handed out by cluster launch
control (CLC): each CTA runs its own tile, then asks the hardware scheduler (`clc.try_cancel`)
to cancel a CTA not yet launched and takes over its tile, until a request fails. How many tiles
a CTA runs is the scheduler's choice: barrierproof reads the loop as `clc_tiles` iterations
(3 at launch; `prove` covers every value >= 1), the same in every partition, since all of them
read the one response the request writes.

The load partition issues the requests: before reusing the response buffer it waits on
`clc_empty` for the epilogue to have read the previous response, expects the response's 16
bytes on `clc_bar`, and issues the request while it loads the tile; both partitions wait on
`clc_bar` before reading the response. The knobs give the bugs people report: the epilogue
reading the response before its barrier completes (the request's write is still landing), the
epilogue waiting on the CLC barrier with a phase it never flips (from the second tile on the wait
returns at once), and the load partition skipping the last tile's load (it checks the response
before loading, so it stops one tile early and the epilogue waits for a tile that never comes).

    barrierproof check examples/gluon/clc_persistent.py
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import clc
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from barrierproof.model.gluon import Launch, tensor_desc


@gluon.jit
def load_partition(in_desc, tile, ready, empty, response, clc_bar, clc_empty,
                   LOAD_LAST: gl.constexpr):
    BM: gl.constexpr = in_desc.block_type.shape[0]
    pid = gl.program_id(0)
    phase = 0
    has_work = True
    while has_work:
        # the epilogue has read the previous response: the buffer may be written again
        mbarrier.wait(clc_empty, phase ^ 1)
        mbarrier.expect(clc_bar, 16)
        clc.try_cancel(response, clc_bar)
        mbarrier.wait(empty, phase ^ 1)
        if LOAD_LAST:
            mbarrier.expect(ready, in_desc.block_type.nbytes)
            tma.async_load(in_desc, [pid * BM, 0], ready, tile)
        mbarrier.wait(clc_bar, phase)
        result = clc.load_result(response)
        has_work = result.is_canceled()
        if not LOAD_LAST:
            if has_work:        # the tile is loaded only when another one follows it
                mbarrier.expect(ready, in_desc.block_type.nbytes)
                tma.async_load(in_desc, [pid * BM, 0], ready, tile)
        pid = result.program_id(0)
        phase ^= 1


@gluon.jit
def epilogue_partition(out_desc, tile, ready, empty, response, clc_bar, clc_empty, out_tile,
                       WAIT_RESPONSE: gl.constexpr, FLIP_CLC: gl.constexpr,
                       num_warps: gl.constexpr):
    BM: gl.constexpr = out_desc.block_type.shape[0]
    regs: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    pid = gl.program_id(0)
    phase = 0
    clc_phase = 0
    has_work = True
    while has_work:
        mbarrier.wait(ready, phase)
        x = tile.load(regs)
        mbarrier.arrive(empty, count=1)
        tma.store_wait(0)               # the previous tile's store has read `out_tile`
        out_tile.store(x * 2)
        fence_async_shared()
        tma.async_store(out_desc, [pid * BM, 0], out_tile)
        if WAIT_RESPONSE:
            mbarrier.wait(clc_bar, clc_phase)
        result = clc.load_result(response)
        mbarrier.arrive(clc_empty, count=1)
        has_work = result.is_canceled()
        pid = result.program_id(0)
        phase ^= 1
        if FLIP_CLC:
            clc_phase ^= 1
    tma.store_wait(0)


@gluon.jit
def clc_persistent(in_desc, out_desc, LOAD_LAST: gl.constexpr, WAIT_RESPONSE: gl.constexpr,
                   FLIP_CLC: gl.constexpr, num_warps: gl.constexpr):
    tile = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    out_tile = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_type.shape,
                                         out_desc.layout)
    # the 16-byte response of a cancellation request
    response = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    clc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    clc_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(ready, count=1)
    mbarrier.init(empty, count=1)
    mbarrier.init(clc_bar, count=1)
    mbarrier.init(clc_empty, count=1)
    gl.warp_specialize([
        (epilogue_partition, (out_desc, tile, ready, empty, response, clc_bar, clc_empty,
                              out_tile, WAIT_RESPONSE, FLIP_CLC, num_warps)),
        (load_partition, (in_desc, tile, ready, empty, response, clc_bar, clc_empty,
                          LOAD_LAST)),
    ], [1], [24])


def _launch(**knobs):
    args = dict(in_desc=tensor_desc("fp16", [64, 64]), out_desc=tensor_desc("fp16", [64, 64]),
                LOAD_LAST=True, WAIT_RESPONSE=True, FLIP_CLC=True)
    args.update(knobs)
    return Launch(clc_persistent, args=args, num_warps=4, target="cuda:100")


clc_ok = _launch()
# the epilogue reads the response while the request's write may still be landing
clc_response_read_early = _launch(WAIT_RESPONSE=False)
# the CLC barrier's phase is not flipped per tile: the second wait returns at once
clc_phase_not_flipped = _launch(FLIP_CLC=False)
# the load partition loads a tile only when another follows: the last tile never comes
clc_loader_stops_one_tile_early = _launch(LOAD_LAST=False)


EXPECT = {
    "clc_ok": "verified",
    "clc_response_read_early": "violation:BP200",
    "clc_phase_not_flipped": "violation:BP200",
    "clc_loader_stops_one_tile_early": "violation:BP100",
}
