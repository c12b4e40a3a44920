"""Blackwell-style pipelines: a TMA warp feeds an MMA warp through a ring; tcgen05 ops arrive on
barriers that order the tensor core; the epilogue waits for the accumulator."""

from _pipelines import tma_mma_epilogue as pipeline
from barrierproof import protocol


@protocol(expect="verified", symbolic=("stages", "steps"))
def tma_mma_epilogue(k, stages=2, steps=3):
    """Warp 0 loads, warp 1 issues tcgen05_mma that release each slot when done, then commits to
    `mma_done`; the whole warpgroup waits on it for the epilogue."""
    k.assume(stages >= 1, steps >= 0)
    pipeline(k, stages, steps)


@protocol(expect="violation:BP110")
def commit_without_tensor_core_order(k):
    """tcgen05_commit_arrive on a Barrier declared without orders_tensor_core=True."""
    k.threads(1, name="wg")
    mma_done = k.Barrier(num_arrivals=1)
    k.tcgen05_mma()
    k.tcgen05_commit_arrive(mma_done)
    k.barrier_wait(mma_done)


@protocol(expect="violation:BP111")
def commit_to_cluster_barrier(k):
    """tcgen05_commit_arrive on a ClusterBarrier: JAX's interpreter rejects it with
    "Unsupported barrier type"."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    mma_done = k.ClusterBarrier(collective_axes="x", num_arrivals=1, orders_tensor_core=True)
    k.tcgen05_mma()
    k.tcgen05_commit_arrive(mma_done)
    k.barrier_wait(mma_done)


@protocol(expect="violation:BP105")
def exit_with_mma_in_flight(k, steps=2):
    """The epilogue never waits for the last MMA: the kernel can exit while it still runs."""
    k.threads(1, name="wg")
    loaded = k.Barrier(num_arrivals=1)
    consumed = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    with k.loop(steps) as i:
        with k.when(i > 0):
            k.barrier_wait(consumed)
        k.copy_gmem_to_smem(loaded, bytes=8192)
        k.barrier_wait(loaded)
        k.tcgen05_mma(barrier=consumed)
