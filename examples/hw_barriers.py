"""Named barriers, __syncthreads and the cluster barrier: the hardware barriers beside mbarriers.

Thread counts are hardware threads: a Pallas thread (warpgroup) is 128 of them, a warp of a
`k.warp_region()` 32. Each bug is modelled on a public report; its fix is verified.
"""

from barrierproof import protocol

TILE = 16384


# -- FlashAttention-3 style ping-pong: two math warpgroups take turns, ordered by named barriers
#    (CUTLASS NamedBarrier sync/arrive), fed by a TMA producer through mbarriers.

def _pingpong(k, steps, start_arrive=True, count_of_wg2=256):
    k.threads(3, name="wg")      # wg0: TMA producer; wg1, wg2: math warpgroups
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    turn = [k.named_barrier(1, 256), k.named_barrier(2, count_of_wg2)]
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            for c in (0, 1):
                with k.when(i > 0):
                    k.barrier_wait(empty.at[c])
                k.copy_gmem_to_smem(full.at[c], bytes=TILE)
        for c in (0, 1):
            k.barrier_wait(empty.at[c])         # producer tail
    for c in (0, 1):
        with k.when(k.thread == c + 1):
            mine, other = turn[c], turn[1 - c]
            if c == 1 and start_arrive:
                other.arrive()                  # mma_init: the first warpgroup goes first
            with k.loop(steps):
                k.barrier_wait(full.at[c])
                mine.sync()                     # warp_scheduler_barrier_sync
                other.arrive()                  # warp_scheduler_barrier_arrive after the GEMM
                k.barrier_arrive(empty.at[c])


@protocol(expect="verified", symbolic=("steps",))
def fa3_pingpong(k, steps=2):
    """Each math warpgroup syncs on its own named barrier (256 threads: itself plus the other
    warpgroup's arrive) before its GEMM and arrives on the other's after it."""
    k.assume(steps >= 1)        # the producer tail waits for at least one release
    _pingpong(k, steps)


@protocol(expect="violation:BP100")
def fa3_pingpong_without_first_turn(k, steps=2):
    """The second warpgroup does not hand the first turn over at start: each math warpgroup
    waits on its named barrier for the other's arrive."""
    _pingpong(k, steps, start_arrive=False)


@protocol(expect="violation:BP142")
def fa3_pingpong_counts_disagree(k, steps=2):
    """One id, two counts: wg1 arrives on barrier 1 as a 256-thread barrier, wg2 syncs on it as
    a 128-thread one while the phase wg1 opened is still waiting."""
    k.threads(3, name="wg")
    a, a_short = k.named_barrier(1, 256), k.named_barrier(1, 128)
    with k.when(k.thread == 1):
        with k.loop(steps):
            a.arrive()
    with k.when(k.thread == 2):
        with k.loop(steps):
            a_short.sync()


# -- vllm#26026: a named-barrier arrive() where arrive_and_wait() was needed (CUTLASS SM100 MLA
#    hangs under load): the arriving side runs ahead and arrives twice in one phase.

def _run_ahead(k, steps, waits):
    k.threads(2, name="wg")
    loaded = k.named_barrier(1, 256)       # wg0 -> wg1: the buffer holds the next tile
    freed = k.named_barrier(2, 256)        # wg1 -> wg0: the buffer may be overwritten
    with k.when(k.thread == 0):
        with k.loop(steps):
            loaded.arrive()
            if waits:
                freed.sync()
            else:
                freed.arrive()
    with k.otherwise():
        with k.loop(steps):
            loaded.sync()
            freed.arrive()


@protocol(expect="violation:BP144")
def named_barrier_arrive_instead_of_sync(k, steps=2):
    """wg0 only arrives on `freed`: it laps wg1, its two arrivals on `loaded` complete a phase
    alone, and it exits while wg1 waits on `loaded` for 128 threads that never come."""
    _run_ahead(k, steps, waits=False)


@protocol(expect="verified", symbolic=("steps",))
def named_barrier_arrive_and_wait(k, steps=2):
    """The fix: wg0 syncs (arrive_and_wait) on `freed`, so it cannot run ahead."""
    k.assume(steps >= 0)
    _run_ahead(k, steps, waits=True)


# -- facebookexperimental/triton#1040: jump threading duplicates a bar.sync into both sides of a
#    branch that splits a warp; each copy sees part of the warp and never completes.

def _warp_handoff(k, split):
    k.threads(1, name="wg")
    k.warps(4)
    ready = k.named_barrier(14, 64)        # warp 2 hands data to warp 3
    with k.warp_region():
        with k.when(k.warp == 2):
            ready.arrive()
        with k.when(k.warp == 3):
            if split:
                with k.when(k.lane < 16):
                    ready.sync()
                with k.otherwise():
                    ready.sync()
            else:
                ready.sync()


@protocol(expect="violation:BP141")
def bar_sync_split_by_jump_threading(k):
    """Warp 3's bar.sync is duplicated into a branch on the lane: half a warp at each copy."""
    _warp_handoff(k, split=True)


@protocol(expect="verified")
def bar_sync_after_the_branch(k):
    """The fix: one bar.sync where the warp has reconverged."""
    _warp_handoff(k, split=False)


# -- mlc-ai/TIRx-kernels#21: an aligned bar.sync completed by warpgroups reaching it from
#    different role branches (compute-sanitizer: divergent barrier).

def _split_roles(k, aligned):
    k.threads(2, name="wg")
    roles = k.named_barrier(5, 256)
    with k.when(k.thread == 0):
        roles.sync(aligned=aligned)        # producer role
    with k.otherwise():
        roles.sync(aligned=aligned)        # consumer role


@protocol(expect="violation:BP141")
def aligned_sync_from_two_roles(k):
    """Two role branches each have their own `bar.sync 5, 256`: one phase, two instructions."""
    _split_roles(k, aligned=True)


@protocol(expect="verified")
def unaligned_sync_from_two_roles(k):
    """The fix: the unaligned `barrier.sync 5, 256`, which any instruction may complete."""
    _split_roles(k, aligned=False)


# -- __syncthreads.

@protocol(expect="violation:BP141")
def divergent_syncthreads(k):
    """Only wg0 runs the __syncthreads inside the branch; wg1 meets it at the next one."""
    k.threads(2, name="wg")
    with k.when(k.thread == 0):
        k.syncthreads()
    k.syncthreads()


@protocol(expect="violation:BP144")
def syncthreads_after_early_return(k):
    """wg1 returns early; wg0's __syncthreads waits for every thread of the block."""
    k.threads(2, name="wg")
    with k.when(k.thread == 0):
        k.syncthreads()


@protocol(expect="verified", symbolic=("steps",))
def syncthreads_uniform(k, steps=2):
    k.assume(steps >= 0)
    k.threads(2, name="wg")
    with k.loop(steps):
        k.syncthreads()


@protocol(expect="violation:BP140")
def named_barrier_count_not_whole_warps(k):
    """100 threads is not a whole number of warps."""
    k.threads(2, name="wg")
    k.named_barrier(3, 100).sync()


@protocol(expect="violation:BP143")
def named_barrier_id_out_of_range(k):
    """A block has 16 named barriers: id 16 does not exist."""
    k.threads(2, name="wg")
    k.named_barrier(16, 256).sync()


# -- Cluster barrier: keep every block alive while its peer still reaches into its shared memory.

def _teardown(k, synced):
    k.cluster(x=2)
    k.threads(1, name="wg")
    tile = k.Barrier(num_arrivals=1)       # block 0 -> block 1: a tile is ready
    done = k.Barrier(num_arrivals=1)       # block 1 -> block 0: its buffer may be reused
    with k.when(k.block("x") == 0):
        k.arrive(tile.on(1))
    with k.otherwise():
        k.barrier_wait(tile)
        k.arrive(done.on(0))               # reaches into block 0's shared memory
    if synced:
        k.cluster_arrive()
        k.cluster_wait()


@protocol(expect="violation:BP146")
def cluster_teardown_without_cluster_sync(k):
    """Block 0 exits right after its hand-off; block 1's release then arrives in the shared
    memory of a block that no longer exists."""
    _teardown(k, synced=False)


@protocol(expect="verified")
def cluster_teardown_with_cluster_sync(k):
    """The fix: every thread ends with cluster_arrive + cluster_wait."""
    _teardown(k, synced=True)


@protocol(expect="violation:BP100")
def cluster_barrier_in_one_warp_only(k):
    """Warp-specialized code where only warp 0 of each block reaches the cluster barrier
    (triton-lang/triton#9456): it waits for every thread of the cluster."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.warps(4)
    with k.warp_region():
        with k.when(k.warp == 0):
            k.cluster_arrive()
            k.cluster_wait()


@protocol(expect="violation:BP145")
def cluster_wait_without_arrive(k):
    """barrier.cluster.wait with no barrier.cluster.arrive before it."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.cluster_wait()
