"""Initialising mbarriers at the PTX level and making the init visible before anyone uses it.

CUTLASS's pipelines (and DeepGEMM, ThunderKittens, nvFuser) initialise their mbarriers in one
elected thread, then `fence_barrier_init()` (fence.mbarrier_init.release.cluster) and a sync
that every user passes: `__syncthreads()` inside a block, `cluster_arrive` + `cluster_wait`
across the blocks of a cluster. Without the sync another thread may arrive on or poll a barrier
it still sees uninitialised (nvFuser's MBarrierTest.Simple hung on H100 for that, NVIDIA/Fuser
#1552); without the fence the TMA unit (async proxy) may complete bytes on it, or a peer block
may arrive on it, before the init reaches them. Each misuse is BP147 init-not-visible.
"""

from barrierproof import protocol


def _ring(k, stages, steps, *, fence: bool, sync: bool):
    """A TMA ring of `stages` slots: warpgroup 0 loads, warpgroup 1 consumes, with explicit
    phases (the pipeline state CUTLASS keeps) on barriers the kernel initialises itself."""
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=stages, explicit_init=True)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages, explicit_init=True)
    with k.when(k.thread == 0):
        with k.loop(stages, name="s") as s:
            k.mbarrier_init(full.at[s])
            k.mbarrier_init(empty.at[s])
        if fence:
            k.fence_mbarrier_init()
    if sync:
        k.syncthreads()
    with k.when(k.thread == 0):                              # producer
        with k.loop(steps, name="i") as i:
            k.wait_parity(empty.at[i % stages], phase=i // stages - 1)
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096)
    with k.otherwise():                                      # consumer
        with k.loop(steps, name="i") as i:
            k.wait_parity(full.at[i % stages], phase=i // stages)
            k.arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def tma_ring_init_fenced_and_synced(k, stages=2, steps=3):
    """CUTLASS PipelineTmaAsync: init in one thread, fence_barrier_init, __syncthreads."""
    _ring(k, stages, steps, fence=True, sync=True)


@protocol(expect="violation:BP147", symbolic=("stages", "steps"))
def tma_ring_init_without_sync(k, stages=2, steps=3):
    """No __syncthreads after the init: the consumer may poll `full` before the init reaches
    it (and the producer's thread sees its own init only)."""
    _ring(k, stages, steps, fence=True, sync=False)


@protocol(expect="violation:BP147", symbolic=("stages", "steps"))
def tma_ring_init_without_fence(k, stages=2, steps=3):
    """The sync publishes the init to the threads, but no fence published it to the async
    proxy: the TMA unit may complete bytes on a barrier it sees uninitialised."""
    _ring(k, stages, steps, fence=False, sync=True)


@protocol(expect="violation:BP147")
def arrive_wait_without_sync_after_init(k):
    """nvFuser's MBarrierTest.Simple before its fix (NVIDIA/Fuser#1552): thread 0 initialises
    the barrier and every thread at once arrives on it and waits for the phase, with no
    __syncthreads between the init and the first arrival."""
    k.threads(2, name="wg")
    bar = k.Barrier(num_arrivals=2, explicit_init=True)
    with k.when(k.thread == 0):
        k.mbarrier_init(bar)
    k.arrive(bar)
    k.wait_parity(bar, phase=0)


@protocol(expect="verified")
def arrive_wait_synced_after_init(k):
    """The fix: __syncthreads between the init and the first arrival."""
    k.threads(2, name="wg")
    bar = k.Barrier(num_arrivals=2, explicit_init=True)
    with k.when(k.thread == 0):
        k.mbarrier_init(bar)
    k.syncthreads()
    k.arrive(bar)
    k.wait_parity(bar, phase=0)


def _multicast(k, *, fence: bool, relaxed: bool = True, init_after_arrive: bool = False):
    """Each block of a 2-block cluster loads half a tile multicast to both, on a barrier each
    block initialises itself; the cluster barrier publishes the inits across blocks (a relaxed
    arrive only once fence_mbarrier_init released them at cluster scope)."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    tile = k.Barrier(num_arrivals=1, explicit_init=True)
    if init_after_arrive:
        k.cluster_arrive()
        k.mbarrier_init(tile)
        k.fence_mbarrier_init()
        k.cluster_wait()
    else:
        k.mbarrier_init(tile)
        if fence:
            k.fence_mbarrier_init()
        else:
            k.fence_proxy_async()     # visible to this block's TMA, not released to the peer
        k.cluster_arrive(relaxed=relaxed)
        k.cluster_wait()
    k.copy_gmem_to_smem(tile, bytes=8192, collective_axes="x")
    k.wait_parity(tile, phase=0)


@protocol(expect="verified")
def multicast_init_fenced_cluster_sync(k):
    """CUTLASS with a cluster: init, fence_barrier_init, cluster_arrive_relaxed +
    cluster_wait."""
    _multicast(k, fence=True)


@protocol(expect="violation:BP147")
def multicast_init_not_released_to_cluster(k):
    """Only fence.proxy.async after the init, then a relaxed cluster arrive: the cluster
    barrier orders the threads, but nothing released the init at cluster scope, so the peer
    may issue its multicast onto a barrier it does not see initialised."""
    _multicast(k, fence=False)


@protocol(expect="verified")
def multicast_init_published_by_release_arrive(k):
    """The same without fence_mbarrier_init, but with cute::cluster_sync(): a release
    cluster_arrive and an acquire cluster_wait publish the init to the peer."""
    _multicast(k, fence=False, relaxed=False)


@protocol(expect="violation:BP147")
def multicast_init_after_cluster_arrive(k):
    """The init moved between cluster_arrive and cluster_wait: the phase the peer waits for
    may complete before the init, so it does not publish it."""
    _multicast(k, fence=True, init_after_arrive=True)
