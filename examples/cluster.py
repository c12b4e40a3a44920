"""Cluster protocols: blocks of a cluster synchronize through ClusterBarrier fan-out."""

from barrierproof import protocol


@protocol(expect="verified", symbolic=("steps",))
def cluster_exchange(k, steps=2):
    """Two blocks exchange a tile every step: each arrival reaches both blocks' instances, and
    each block waits on its own instance for both arrivals."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    exchanged = k.ClusterBarrier(collective_axes="x", num_arrivals=1)
    with k.loop(steps):
        k.barrier_arrive(exchanged)
        k.barrier_wait(exchanged)


@protocol(expect="violation:BP100")
def cluster_barrier_skipped_by_a_block(k):
    """Only block 0 arrives on the cluster barrier: both blocks wait for a second arrival."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    exchanged = k.ClusterBarrier(collective_axes="x", num_arrivals=1)
    with k.when(k.block("x") == 0):
        k.barrier_arrive(exchanged)
    k.barrier_wait(exchanged)


@protocol(expect="violation:BP112")
def remote_wait(k):
    """A block waits on its peer's barrier instance: waits are local only."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    ready = k.Barrier(num_arrivals=1)
    k.arrive(ready.on(1 - k.block("x")))
    k.barrier_wait(ready.on(1 - k.block("x")))


@protocol(expect="verified")
def multicast_tma(k):
    """Each block of a 2-block cluster loads half of a tile multicast to both: every block's
    barrier gets its full byte count only when both halves land."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    tile = k.Barrier(num_arrivals=1)
    k.copy_gmem_to_smem(tile, bytes=8192, collective_axes="x")
    k.barrier_wait(tile)
