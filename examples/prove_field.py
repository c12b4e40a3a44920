"""Protocols of the field that `prove` had never seen: the patterns a new user brings (CUTLASS
sm90/sm100 pipelines, FlashAttention-3's named-barrier schedules, persistent and cluster
kernels), each correct one beside a buggy twin with the bug the field reports for it.

Each is written from the public pattern, not from a strategy of the prover: the verdicts are the
explorer's (`barrierproof check`), and tests/test_prove_field.py holds `prove` to them.
"""

from barrierproof import protocol

TILE = 16384


# -- A ring of `slots` stages, the pieces several protocols below share.

def _fill(k, full, empty, slots, steps, **copy):
    """The producer: from its second use on, a slot is acquired (its release awaited) before
    the TMA copy that fills it."""
    with k.loop(steps) as i:
        with k.when(i >= slots):
            k.barrier_wait(empty.at[i % slots])
        k.copy_gmem_to_smem(full.at[i % slots], bytes=TILE, **copy)


def _drain(k, empty, slots, steps):
    """producer_tail: the releases of the last uses of every slot, before exit."""
    with k.loop(slots) as j:
        with k.when(steps - slots + j >= 0):
            k.barrier_wait(empty.at[(steps - slots + j) % slots])


def _consume(k, full, empty, slots, steps):
    with k.loop(steps) as i:
        k.barrier_wait(full.at[i % slots])
        k.barrier_arrive(empty.at[i % slots])


# -- sm100 2-CTA UMMA (cta_group::2): both blocks' TMA producers fill the leader's `full[s]`; the
#    leader's MMA warp releases slot s in both blocks with one multicast commit
#    (umma_arrive_multicast_2x1SM); every thread ends with a cluster-wide sync so that no block
#    retires while its peer still arrives into its shared memory.

def _umma_2cta(k, stages, steps, *, halves=2):
    k.cluster(x=2)
    k.threads(2, name="wg")                    # wg0: TMA producer, wg1: MMA issuer
    full = k.Barrier(num_arrivals=halves, num_barriers=stages)   # the leader's: both halves
    empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    acc_full = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    b = k.block("x")
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.on(0, index=i % stages), bytes=TILE)
        _drain(k, empty, stages, steps)
    with k.otherwise():
        with k.when(b == 0):                                        # the leader's MMA warp
            with k.loop(steps) as i:
                k.barrier_wait(full.at[i % stages])
                k.tcgen05_mma()
                k.tcgen05_commit_arrive(empty.at[i % stages], collective_axis="x")
            k.tcgen05_commit_arrive(acc_full)
            k.barrier_wait(acc_full)
    k.cluster_sync()


@protocol(expect="verified", symbolic=("steps",))
def umma_2cta_synchronized_exit(k, stages=2, steps=3):
    """Correct: the peer's last copy lands on the leader's barrier before the cluster sync."""
    k.assume(steps >= 1)
    _umma_2cta(k, stages, steps)


@protocol(expect="violation:BP121", symbolic=("steps",))
def umma_2cta_full_counts_one_half(k, stages=2, steps=3):
    """The leader's `full` counts one arrival (its own half): the phase completes on the first
    half, and the peer's half arrives into a phase already full."""
    k.assume(steps >= 1)
    _umma_2cta(k, stages, steps, halves=1)


# -- An elected lane per warp hands off: the barrier counts one arrival per consumer warp
#    (CUTLASS ClusterBarrier arrive under elect_one_sync()), not one per thread.

def _elected_per_warp(k, steps, count):
    k.threads(1, name="wg")
    k.warps(4)                                                       # warp 0 loads, 1..3 consume
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=count, num_barriers=2)
    with k.warp_region() as w:
        with k.when(w == 0):
            _fill(k, full, empty, 2, steps)
            _drain(k, empty, 2, steps)
        with k.otherwise():
            _consume(k, full, empty, 2, steps)          # each arrive: the warp's elected lane


@protocol(expect="verified", symbolic=("steps",))
def elected_lane_handoff_per_warp(k, steps=3):
    """Correct: `empty` counts the three consumer warps, each arriving once per use."""
    k.assume(steps >= 0)
    _elected_per_warp(k, steps, count=3)


@protocol(expect="violation:BP100", symbolic=("steps",))
def elected_lane_counted_per_thread(k, steps=3):
    """`empty` counts 96 threads, but only one elected lane per warp arrives: the producer
    waits for the first release forever."""
    k.assume(steps >= 0)
    _elected_per_warp(k, steps, count=96)


# -- Ping-pong on mbarriers (CUTLASS sm90 pingpong's math warpgroup order): warpgroup 1 takes
#    the first turn without waiting; warpgroup 2 hands the turn back after every tile but its
#    last, so no completion is left unobserved at exit.

def _pingpong_predicated(k, steps, *, guard_handback=True):
    k.threads(3, name="wg")                      # wg0: TMA producer, wg1 / wg2: math
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    turn = k.Barrier(num_arrivals=1, num_barriers=2)               # turn[c]: wg c+1 may go
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            for c in (0, 1):
                with k.when(i > 0):
                    k.barrier_wait(empty.at[c])
                k.copy_gmem_to_smem(full.at[c], bytes=TILE)
        with k.when(steps > 0):
            for c in (0, 1):
                k.barrier_wait(empty.at[c])
    for c in (0, 1):
        with k.when(k.thread == c + 1):
            with k.loop(steps) as i:
                k.barrier_wait(full.at[c])
                if c == 0:
                    with k.when(i > 0):                             # the first turn is free
                        k.barrier_wait(turn.at[0])
                else:
                    k.barrier_wait(turn.at[1])
                # the GEMMs of this tile
                if c == 0 or not guard_handback:
                    k.barrier_arrive(turn.at[1 - c])
                else:
                    with k.when(i < steps - 1):
                        k.barrier_arrive(turn.at[0])
                k.barrier_arrive(empty.at[c])


@protocol(expect="verified", symbolic=("steps",))
def pingpong_predicated_wait(k, steps=3):
    """Correct: wg1's first wait is predicated away and wg2's last hand-back with it."""
    k.assume(steps >= 0)
    _pingpong_predicated(k, steps)


@protocol(expect="violation:BP103", symbolic=("steps",))
def pingpong_last_handback_unobserved(k, steps=3):
    """wg2 hands the turn back after its last tile too: wg1 never observes that completion."""
    k.assume(steps >= 0)
    _pingpong_predicated(k, steps, guard_handback=False)


# -- A multicast ring in a 2-block cluster whose `empty` is a ClusterBarrier: each consumer's
#    release reaches both blocks, so every slot counts the consumers of the whole cluster.

def _multicast_consumers(k, consumers, steps, *, tail=True):
    k.cluster(x=2)
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.ClusterBarrier(collective_axes="x", num_arrivals=consumers, num_barriers=2)
    with k.when(k.thread == consumers):
        _fill(k, full, empty, 2, steps, collective_axes="x")
        if tail:
            _drain(k, empty, 2, steps)
    with k.otherwise():
        _consume(k, full, empty, 2, steps)


@protocol(expect="verified", symbolic=("consumers", "steps"))
def multicast_ring_cluster_consumers(k, consumers=2, steps=3):
    """Correct: a slot is refilled only once the consumers of both blocks released it."""
    k.assume(consumers >= 1, consumers <= 4, steps >= 0)
    _multicast_consumers(k, consumers, steps)


@protocol(expect="violation:BP146", symbolic=("consumers", "steps"))
def multicast_ring_without_producer_tail(k, consumers=1, steps=3):
    """No producer_tail: a block can retire while its peer's consumers still release into its
    `empty` barriers."""
    k.assume(consumers >= 1, consumers <= 4, steps >= 0)
    _multicast_consumers(k, consumers, steps, tail=False)


# -- A single-stage async-dot pipeline (Triton's warp-specialized dot with one buffer): the
#    consumer retires its WGMMA (wgmma_wait(0)) before releasing the only slot.

def _single_stage_dot(k, steps, *, keep_in_flight=0):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1)
    a = k.SMEM()
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i > 0):
                k.barrier_wait(empty)
            k.copy_gmem_to_smem(full, bytes=TILE, dst=a)
        with k.when(steps > 0):
            k.barrier_wait(empty)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(full)
            k.wgmma(a=a)
            k.wgmma_wait(keep_in_flight)
            k.barrier_arrive(empty)
        k.wgmma_wait(0)


@protocol(expect="verified", symbolic=("steps",))
def single_stage_async_dot(k, steps=3):
    """Correct: the slot is released only after the WGMMA reading it has retired."""
    k.assume(steps >= 0)
    _single_stage_dot(k, steps)


@protocol(expect="violation:BP200", symbolic=("steps",))
def single_stage_dot_released_in_flight(k, steps=2):
    """wgmma_wait(1) with one stage: the slot is released while the WGMMA still reads it, and
    the next TMA copy overwrites it."""
    k.assume(steps >= 0)
    _single_stage_dot(k, steps, keep_in_flight=1)


# -- A UMMA pipeline without producer_tail: the MMA warp releases only the slots the producer
#    will refill, and its final commit to `acc_full` (which tracks every earlier MMA) is what
#    the epilogue waits for, so nothing is left unobserved or in flight at exit.

def _umma_no_tail(k, stages, steps, *, release_all=False):
    k.threads(1, name="wg")
    k.warps(4)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    acc_full = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    with k.warp_region() as w:
        with k.when(w == 0):                                        # TMA warp
            _fill(k, full, empty, stages, steps)
        with k.when(w == 1):                                        # MMA warp
            with k.loop(steps) as i:
                k.barrier_wait(full.at[i % stages])
                k.tcgen05_mma()
                if release_all:
                    k.tcgen05_commit_arrive(empty.at[i % stages])
                else:
                    with k.when(i + stages < steps):
                        k.tcgen05_commit_arrive(empty.at[i % stages])
            k.tcgen05_commit_arrive(acc_full)
        with k.when(w == 2):                                        # epilogue warp
            k.barrier_wait(acc_full)


@protocol(expect="verified", symbolic=("stages", "steps"))
def umma_pipeline_without_producer_tail(k, stages=2, steps=3):
    """Correct: every release is one the producer waits for."""
    k.assume(stages >= 1, steps >= 1)
    _umma_no_tail(k, stages, steps)


@protocol(expect="violation:BP103", symbolic=("stages", "steps"))
def umma_pipeline_tail_releases_unobserved(k, stages=2, steps=3):
    """Every slot released, but no producer_tail: the last releases complete phases the
    producer never observes."""
    k.assume(stages >= 1, steps >= 1)
    _umma_no_tail(k, stages, steps, release_all=True)


# -- FlashAttention-3 with three math warpgroups: a round-robin token on named barriers
#    (warp_scheduler_barrier_sync on the warpgroup's own id, 256 threads: itself plus the
#    previous warpgroup's warp_scheduler_barrier_arrive; the last warpgroup hands the first
#    turn over in mma_init).

def _round_robin(k, steps, *, count=256):
    k.threads(3, name="wg")
    turn = [k.named_barrier(2 + c, count) for c in range(3)]
    for c in range(3):
        with k.when(k.thread == c):
            if c == 2:
                turn[0].arrive()                                    # mma_init
            with k.loop(steps):
                turn[c].sync()                                      # my turn on the tensor cores
                # the GEMMs of this block
                turn[(c + 1) % 3].arrive()                          # the next warpgroup's turn


@protocol(expect="verified", symbolic=("steps",))
def fa3_round_robin_tokens(k, steps=2):
    """Correct: the token goes round wg0 -> wg1 -> wg2 -> wg0; the last arrive leaves an open
    phase of a named barrier, which is legal at exit."""
    k.assume(steps >= 0)
    _round_robin(k, steps)


@protocol(expect="violation:BP100", symbolic=("steps",))
def fa3_round_robin_counts_three_warpgroups(k, steps=2):
    """The named barriers count 384 threads (every math warpgroup) but a turn has two."""
    k.assume(steps >= 0)
    _round_robin(k, steps, count=384)


# -- arrive_drop on early exit (CUTLASS's consumer that leaves a persistent loop early): the
#    leaving consumer drops itself from `empty`'s count, so the producer's later acquires need
#    only the consumers that stay.

def _early_exit(k, steps, *, drop=True):
    k.threads(3, name="wg")                       # wg0: producer, wg1: stays, wg2: leaves early
    full = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i > 0):
                k.wait_parity(done, (i - 1) % 2)
            k.arrive(full)
        with k.when(steps > 0):
            k.wait_parity(done, (steps - 1) % 2)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            k.wait_parity(full, i % 2)
            k.arrive(done)
    with k.when(k.thread == 2):                   # no work left for it: it returns at once
        if drop:
            k.arrive_drop(done)
        else:
            k.arrive(done)


@protocol(expect="verified", symbolic=("steps",))
def arrive_drop_early_exit(k, steps=3):
    """Correct: wg2 leaves at once and drops out of `done`; wg0 and wg1 go on alone."""
    k.assume(steps >= 1)
    _early_exit(k, steps)


@protocol(expect="violation:BP100", symbolic=("steps",))
def early_exit_arrives_without_drop(k, steps=3):
    """wg2 leaves with a plain arrive: `done` still counts it in every later phase, and the
    producer's second acquire waits forever."""
    k.assume(steps >= 1)
    _early_exit(k, steps, drop=False)


# -- Named barriers inside nested tile x k-step loops (a warp-specialized mainloop whose
#    stages are handed over by bar.sync / bar.arrive, with an epilogue sync per tile).

def _nested_named(k, tiles, ksteps, *, consumer_ksteps=None):
    k.threads(2, name="wg")
    loaded = k.named_barrier(1, 256)
    freed = k.named_barrier(2, 256)
    epilogue = k.named_barrier(3, 256)
    with k.loop(tiles):
        with k.when(k.thread == 0):                                 # producer
            with k.loop(ksteps):
                loaded.arrive()
                freed.sync()
        with k.otherwise():                                         # consumer
            with k.loop(ksteps if consumer_ksteps is None else consumer_ksteps):
                loaded.sync()
                freed.arrive()
        epilogue.sync()                                             # both, once per tile


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def named_barriers_nested_tile_k(k, tiles=2, ksteps=2):
    """Correct: each k-step hands the buffer over and back, each tile ends in a joint sync."""
    k.assume(tiles >= 0, ksteps >= 0)
    _nested_named(k, tiles, ksteps)


@protocol(expect="violation:BP100", symbolic=("tiles", "ksteps"))
def nested_named_consumer_one_k_step_short(k, tiles=2, ksteps=2):
    """The consumer's k-loop runs one step fewer than the producer's (roles disagree on the
    trip count): the producer's last `freed` sync waits for an arrive that never comes."""
    k.assume(tiles >= 0, ksteps >= 1)
    _nested_named(k, tiles, ksteps, consumer_ksteps=ksteps - 1)


# -- A persistent kernel: every block runs ceil(tiles / blocks) tiles of a static schedule
#    (CUTLASS's StaticPersistentTileScheduler with the tail predicated inside), each tile a
#    TMA ring over its k-steps that the producer drains before the next tile.

def _persistent_ceil(k, tiles, blocks, ksteps, *, consumer_floor=False):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    mine = (tiles + blocks - 1) // blocks
    theirs = tiles // blocks if consumer_floor else mine
    with k.when(k.thread == 0):
        with k.loop(mine):
            _fill(k, full, empty, 2, ksteps)
            _drain(k, empty, 2, ksteps)
    with k.otherwise():
        with k.loop(theirs):
            _consume(k, full, empty, 2, ksteps)


@protocol(expect="verified", symbolic=("tiles",))
def persistent_ceil_tiles(k, tiles=5, blocks=2, ksteps=2):
    """Correct for every tile count."""
    k.assume(tiles >= 0, blocks >= 1, ksteps >= 2)
    _persistent_ceil(k, tiles, blocks, ksteps)


@protocol(expect="violation:BP100", symbolic=("tiles",))
def persistent_consumer_counts_floor_tiles(k, tiles=3, blocks=2, ksteps=2):
    """The consumer counts floor(tiles / blocks) tiles, the producer ceil: when the blocks do
    not divide the tiles, the producer waits for releases of a tile nobody consumes."""
    k.assume(tiles >= 0, blocks >= 1, ksteps >= 2)
    _persistent_ceil(k, tiles, blocks, ksteps, consumer_floor=True)


# -- Split-K inside a cluster through distributed shared memory, ended by the hardware cluster
#    barrier (cute::cluster_sync: barrier.cluster.arrive + wait in every thread).

def _split_k_cluster_sync(k, tiles, *, skip_sync=False):
    k.cluster(x=2)
    k.threads(1, name="wg")
    partial_full = k.Barrier(num_arrivals=1)
    partial_empty = k.Barrier(num_arrivals=1)
    b = k.block("x")
    with k.when(b == 0):                                            # reducer
        with k.loop(tiles):
            k.barrier_wait(partial_full)
            k.arrive(partial_empty.on(1))
    with k.otherwise():                                             # contributor
        with k.loop(tiles) as t:
            with k.when(t > 0):
                k.barrier_wait(partial_empty)
            k.arrive(partial_full.on(0))
        with k.when(tiles > 0):
            k.barrier_wait(partial_empty)
    if skip_sync:
        with k.when(b == 0):
            k.cluster_sync()
    else:
        k.cluster_sync()


@protocol(expect="verified", symbolic=("tiles",))
def split_k_cluster_synchronized(k, tiles=2):
    """Correct: the partial of every tile is consumed and released before the cluster sync."""
    k.assume(tiles >= 0)
    _split_k_cluster_sync(k, tiles)


@protocol(expect="violation:BP100", symbolic=("tiles",))
def split_k_cluster_sync_in_the_reducer_only(k, tiles=1):
    """Only the reducer runs the cluster sync: it waits for a contributor that has exited."""
    k.assume(tiles >= 0)
    _split_k_cluster_sync(k, tiles, skip_sync=True)


# -- An mbarrier hand-off followed by one __syncthreads() per iteration: the sync is the
#    release (the producer cannot refill the slot before the consumer passed the sync).

def _handoff_sync(k, steps, *, sync=True):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    with k.loop(steps):
        with k.when(k.thread == 0):
            k.copy_gmem_to_smem(full, bytes=TILE)
        with k.otherwise():
            k.barrier_wait(full)
        if sync:
            k.syncthreads()


@protocol(expect="verified", symbolic=("steps",))
def mbarrier_handoff_then_syncthreads(k, steps=3):
    """Correct: every iteration's fill is observed before the block-wide sync."""
    k.assume(steps >= 0)
    _handoff_sync(k, steps)


@protocol(expect="violation:BP121", symbolic=("steps",))
def mbarrier_handoff_without_syncthreads(k, steps=3):
    """Without the sync the producer issues its next copy before the consumer observed the
    previous one: a second arrival in a phase still open."""
    k.assume(steps >= 0)
    _handoff_sync(k, steps, sync=False)
