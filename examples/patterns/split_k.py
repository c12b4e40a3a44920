"""Split-K reduction inside a cluster through distributed shared memory (the DSMEM reduction of
CUTLASS's sm90 "stream-K/split-K within a cluster" and of Pallas collective matmuls): blocks
1..splits-1 compute partial tiles and write them into block 0's shared memory, then arrive
remotely on block 0's `partial_full` (count splits-1); block 0 accumulates and releases each
contributor's buffer by a remote arrive on that block's `partial_empty`. Contributors drain the
final release so no block exits while a peer may still touch its barriers. A final
`cluster_sync` ClusterBarrier (every block arrives, every block waits) ends the kernel.
"""

from barrierproof import protocol


def split_k(k, splits, tiles, *, reducer_releases_last=True,
            sync_skipped_by=None):
    k.cluster(x=splits)
    k.threads(1, name="wg")
    partial_full = k.Barrier(num_arrivals=splits - 1)
    partial_empty = k.Barrier(num_arrivals=1)
    cluster_sync = k.ClusterBarrier(collective_axes="x", num_arrivals=1)
    b = k.block("x")
    with k.when(b == 0):                                          # reducer
        with k.loop(tiles) as t:
            k.barrier_wait(partial_full)
            # accumulate the partials
            with k.loop(splits - 1) as p:
                if reducer_releases_last:
                    k.arrive(partial_empty.on(p + 1))
                else:
                    with k.when(t < tiles - 1):
                        k.arrive(partial_empty.on(p + 1))
    with k.otherwise():                                           # contributors
        with k.loop(tiles) as t:
            with k.when(t > 0):
                k.barrier_wait(partial_empty)
            # write the partial tile into block 0's smem, fence
            k.arrive(partial_full.on(0))
        with k.when(tiles > 0):
            k.barrier_wait(partial_empty)                         # drain the last release
    if sync_skipped_by is None:
        k.barrier_arrive(cluster_sync)
        k.barrier_wait(cluster_sync)
    else:
        with k.when(b != sync_skipped_by):
            k.barrier_arrive(cluster_sync)
            k.barrier_wait(cluster_sync)


@protocol(expect="verified", symbolic=("tiles",))
def split_k_dsmem(k, splits=3, tiles=2):
    """Three-way split-K, two output tiles: correct."""
    split_k(k, splits, tiles)



@protocol(expect="violation:BP100")
def split_k_reducer_skips_last_release(k, splits=2, tiles=2):
    """The reducer returns early after the last tile without releasing the contributors'
    buffers: their drain waits forever."""
    split_k(k, splits, tiles, reducer_releases_last=False)


@protocol(expect="violation:BP146")
def split_k_cluster_sync_skipped_by_a_block(k, splits=2, tiles=1):
    """Block 1 returns before the final cluster-wide barrier (an early-exit path): block 0's
    arrival reaches into the shared memory of a block that has exited (BP146), and block 0
    waits for an arrival that never comes (BP100)."""
    split_k(k, splits, tiles, sync_skipped_by=1)
