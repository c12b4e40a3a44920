"""Blackwell-style pipelines: a TMA warp feeds an MMA warp through a ring; tcgen05 ops arrive on
barriers that order the tensor core; the epilogue waits for the accumulator."""

from barrierproof import minimum, protocol


@protocol(expect="verified", symbolic=("stages", "steps"))
def tma_mma_epilogue(k, stages=2, steps=3):
    """Warp 0 loads, warp 1 issues tcgen05_mma that release each slot when done, then commits to
    `mma_done`; the whole warpgroup waits on it for the epilogue."""
    k.threads(1, name="wg")
    k.warps(4)
    k.assume(stages >= 1, steps >= 0)
    loaded = k.Barrier(num_arrivals=1, num_barriers=stages)
    consumed = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    mma_done = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    with k.warp_region() as w:
        with k.when(w == 0):                          # TMA warp
            with k.loop(steps) as i:
                with k.when(i >= stages):
                    k.barrier_wait(consumed.at[i % stages])
                k.copy_gmem_to_smem(loaded.at[i % stages], bytes=32768)
            tail = minimum(steps, stages)
            with k.loop(tail) as j:
                k.barrier_wait(consumed.at[(steps - tail + j) % stages])
        with k.when(w == 1):                          # MMA warp
            with k.loop(steps) as i:
                k.barrier_wait(loaded.at[i % stages])
                k.tcgen05_mma(barrier=consumed.at[i % stages])
            k.tcgen05_commit_arrive(mma_done)
    k.barrier_wait(mma_done)                          # epilogue


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
