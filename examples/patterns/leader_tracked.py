"""Leader-tracked cluster barriers (`plgpu.ClusterBarrier(leader_tracked=True)`): every block's
arrival goes to one instance, the leader's (block 0 along the collective axis), which expects
them all; the other blocks' instances never complete. Mosaic GPU uses it for 2-CTA tcgen05
kernels where only the leader issues the MMA and must know both blocks' operands are ready."""

from barrierproof import protocol


@protocol(expect="verified", symbolic=("steps",))
def leader_collects_both_blocks(k, steps=2):
    """Both blocks signal the leader every step; only the leader waits, then releases the peer
    with a remote arrive on the peer's own barrier."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    ready = k.ClusterBarrier(collective_axes="x", leader_tracked=True)
    released = k.Barrier(num_arrivals=1)
    with k.loop(steps):
        k.barrier_arrive(ready)
        with k.when(k.block("x") == 0):
            k.barrier_wait(ready)
            k.arrive(released.on(1))
        with k.otherwise():
            k.barrier_wait(released)


@protocol(expect="violation:BP100")
def every_block_waits_on_a_leader_tracked_barrier(k):
    """The peer block waits on its own instance, which no arrival ever reaches: a leader-tracked
    barrier completes only in the leader."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    ready = k.ClusterBarrier(collective_axes="x", leader_tracked=True)
    k.barrier_arrive(ready)
    k.barrier_wait(ready)


@protocol(expect="violation:BP100")
def leader_tracked_counts_every_block(k):
    """Only the leader arrives: its instance expects one arrival per block of the axis (the
    same count as a plain ClusterBarrier), so it never completes."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    ready = k.ClusterBarrier(collective_axes="x", leader_tracked=True)
    with k.when(k.block("x") == 0):
        k.barrier_arrive(ready)
        k.barrier_wait(ready)
