"""A 2-CTA Gluon kernel (num_ctas=2): both CTAs of the cluster stream the same k-tiles through a
STAGES-deep shared-memory ring, each loading half of every tile and multicasting it to both
(`tma.async_load(..., multicast=True)` into a tile every CTA holds whole), so each CTA's `ready`
barrier expects the whole tile. A slot is refilled by both CTAs' copies, so its `empty` barrier
counts the consumers of both CTAs: each CTA releases a slot on both CTAs' barriers
(`mbarrier.arrive(..., from_cta=0)`).

The field bugs: releasing the last tiles onto the peer's barrier when nobody waits for them any
more (the peer may have exited: the remote arrival lands in a finished CTA's shared memory), and
an expect of one CTA's share of the tile only (the read races with the peer's share).

`ws_ring` is the same ring warp-specialized: a loader partition runs ahead of the consumer, so
only the `empty` barrier keeps the peer's copy out of a slot this CTA still reads; counting
this CTA's consumer only (`ws_empty_counts_own_cta`) lets the peer refill it too early.

    barrierproof check examples/gluon/multicta_ring.py
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import cluster, mbarrier, tma

from barrierproof.model.gluon import Launch, tensor_desc


@gluon.jit
def allocate_ring(desc, STAGES: gl.constexpr, EMPTY_COUNT: gl.constexpr):
    """The ring's slots and, one per CTA, its `ready` and `empty` barriers."""
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_type.shape, desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    empty = mbarrier.allocate_mbarrier(batch=STAGES)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=EMPTY_COUNT)
    return bufs, ready, empty


@gluon.jit
def multicast_ring(desc, out_desc, K, STAGES: gl.constexpr, SHARE: gl.constexpr,
                   RELEASE_ALL: gl.constexpr, CLUSTER_SYNC: gl.constexpr):
    BLOCK_K: gl.constexpr = desc.block_type.shape[1]
    bufs, ready, empty = allocate_ring(desc, STAGES, 2)     # one consumer per CTA
    k_tiles = gl.cdiv(K, BLOCK_K)
    for k in range(k_tiles):
        slot = k % STAGES
        # both CTAs released the tile this slot held STAGES tiles ago
        mbarrier.wait(empty.index(slot), ((k // STAGES) - 1) & 1, pred=k >= STAGES)
        mbarrier.expect(ready.index(slot), desc.block_type.nbytes // SHARE)
        tma.async_load(desc, [0, k * BLOCK_K], ready.index(slot), bufs.index(slot),
                       multicast=True)
        mbarrier.wait(ready.index(slot), (k // STAGES) & 1)
        tma.async_store(out_desc, [0, k * BLOCK_K], bufs.index(slot))
        tma.store_wait(0)
        # release the slot on both CTAs' barriers, while someone still waits for it
        release = RELEASE_ALL or k + STAGES < k_tiles
        mbarrier.arrive(empty.index(slot), pred=release, from_cta=0)
    if CLUSTER_SYNC:          # no CTA exits while its peer may still signal it
        cluster.barrier()


@gluon.jit
def ws_loader(desc, bufs, ready, empty, k_tiles):
    STAGES: gl.constexpr = bufs.type.shape[0]
    BLOCK_K: gl.constexpr = desc.block_type.shape[1]
    for k in range(k_tiles):
        slot = k % STAGES
        mbarrier.wait(empty.index(slot), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(slot), desc.block_type.nbytes)
        tma.async_load(desc, [0, k * BLOCK_K], ready.index(slot), bufs.index(slot),
                       multicast=True)


@gluon.jit
def ws_consumer(out_desc, bufs, ready, empty, k_tiles, BOTH_CTAS: gl.constexpr):
    STAGES: gl.constexpr = bufs.type.shape[0]
    BLOCK_K: gl.constexpr = out_desc.block_type.shape[1]
    for k in range(k_tiles):
        slot = k % STAGES
        mbarrier.wait(ready.index(slot), (k // STAGES) & 1)
        tma.async_store(out_desc, [0, k * BLOCK_K], bufs.index(slot))
        tma.store_wait(0)
        release = k + STAGES < k_tiles      # the loaders wait for these only
        if BOTH_CTAS:
            mbarrier.arrive(empty.index(slot), pred=release, from_cta=0)
        else:
            mbarrier.arrive(empty.index(slot), pred=release)


@gluon.jit
def ws_multicast_ring(desc, out_desc, K, STAGES: gl.constexpr, BOTH_CTAS: gl.constexpr):
    BLOCK_K: gl.constexpr = desc.block_type.shape[1]
    bufs, ready, empty = allocate_ring(desc, STAGES, 2 if BOTH_CTAS else 1)
    k_tiles = gl.cdiv(K, BLOCK_K)
    gl.warp_specialize([
        (ws_consumer, (out_desc, bufs, ready, empty, k_tiles, BOTH_CTAS)),
        (ws_loader, (desc, bufs, ready, empty, k_tiles)),
    ], [1], [24])


def _whole_tile(shape: list):
    """A descriptor whose tile both CTAs hold whole (CTA layout bases [[0, 0]])."""
    layout = gl.NVMMASharedLayout.get_default_for(shape, gl.float16, cga_layout=[[0, 0]])
    return tensor_desc("fp16", shape, layout)


def _launch(**knobs):
    args = dict(desc=_whole_tile([64, 64]), out_desc=_whole_tile([64, 64]), K=320, STAGES=2,
                SHARE=1, RELEASE_ALL=False, CLUSTER_SYNC=False)
    args.update(knobs)
    return Launch(multicast_ring, args=args, num_warps=4, num_ctas=2, target="cuda:100")


def _ws_launch(**knobs):
    args = dict(desc=_whole_tile([64, 64]), out_desc=_whole_tile([64, 64]), K=320, STAGES=2,
                BOTH_CTAS=True)
    args.update(knobs)
    return Launch(ws_multicast_ring, args=args, num_warps=4, num_ctas=2, target="cuda:100")


ring = _launch()
ring_cluster_sync = _launch(RELEASE_ALL=True, CLUSTER_SYNC=True)
trailing_remote_release = _launch(RELEASE_ALL=True)
expect_one_share = _launch(SHARE=2)
ws_ring = _ws_launch()
ws_empty_counts_own_cta = _ws_launch(BOTH_CTAS=False)

EXPECT = {
    "ring": "verified",
    "ring_cluster_sync": "verified",
    "trailing_remote_release": "violation:BP146",
    "expect_one_share": "violation:BP200",
    "ws_ring": "verified",
    "ws_empty_counts_own_cta": "violation:BP200",
}
