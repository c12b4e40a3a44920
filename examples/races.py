"""Shared-memory and tensor-memory races (BP200 / BP201): protocols whose barriers never hang
but may fail to order the accesses they guard, each beside its fix.

Buffers are declared with `k.SMEM(slots=...)` / `k.TMEM(...)`; threads touch them with
`k.read` / `k.write`, TMA copies write their `dst=` until they land, MMAs read their operands
and write their accumulator until they complete, TMA stores / WGMMAs / tcgen05.st stay live
until the thread's covering wait.
"""

from barrierproof import protocol


# ---------------------------------------------------------------------------------------------
# k-stage TMA ring
# ---------------------------------------------------------------------------------------------

def _ring(k, stages, steps, release_before_read=False):
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= stages)            # the drain waits for `stages` releases
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    tiles = k.SMEM(slots=stages)
    with k.when(k.thread == 1):                       # TMA producer
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096, dst=tiles.at[i % stages])
        with k.loop(stages) as j:                     # observe the last releases
            k.barrier_wait(empty.at[(steps - stages + j) % stages])
    with k.otherwise():                               # consumer
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            if release_before_read:
                k.barrier_arrive(empty.at[i % stages])
                k.read(tiles.at[i % stages])
            else:
                k.read(tiles.at[i % stages])
                k.barrier_arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def ring_slot_reuse(k, stages=2, steps=4):
    """Each slot is refilled only after its consumer released it: race-free."""
    _ring(k, stages, steps)


@protocol(expect="violation:BP200", symbolic=("stages", "steps"))
def ring_release_before_read(k, stages=2, steps=4):
    """The consumer releases the slot before reading it: the next copy can overwrite it."""
    _ring(k, stages, steps, release_before_read=True)


@protocol(expect="violation:BP200")
def ring_read_ahead(k, steps=3):
    """The consumer peeks at the next tile before waiting for its copy to land."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=steps)
    tiles = k.SMEM(slots=steps)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            k.copy_gmem_to_smem(full.at[i], bytes=4096, dst=tiles.at[i])
    with k.otherwise():
        with k.loop(steps - 1) as i:
            k.barrier_wait(full.at[i])
            k.read(tiles.at[i], tiles.at[i + 1])
        k.barrier_wait(full.at[steps - 1])


# ---------------------------------------------------------------------------------------------
# Multicast ring in a 2-block cluster: every block's copy lands in both blocks' slot, so a slot
# may be refilled only when the consumers of *both* blocks released it.
# ---------------------------------------------------------------------------------------------

def _multicast_ring(k, steps, cluster_release):
    k.cluster(x=2)
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    if cluster_release:
        empty = k.ClusterBarrier(collective_axes="x", num_arrivals=1, num_barriers=2)
    else:
        empty = k.Barrier(num_arrivals=1, num_barriers=2)
    tiles = k.SMEM(slots=2)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            k.copy_gmem_to_smem(full.at[i % 2], bytes=4096, dst=tiles.at[i % 2],
                                collective_axes="x")
        with k.loop(2) as j:
            k.barrier_wait(empty.at[(steps - 2 + j) % 2])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % 2])
            k.read(tiles.at[i % 2])
            k.barrier_arrive(empty.at[i % 2])


@protocol(expect="verified", symbolic=("steps",))
def multicast_ring_cluster_release(k, steps=3):
    """Slots released through a ClusterBarrier: each producer waits for both blocks."""
    k.assume(steps >= 2)                              # the drain waits for two releases
    _multicast_ring(k, steps, cluster_release=True)


@protocol(expect="violation:BP200")
def multicast_ring_local_release(k, steps=3):
    """Slots released through a plain Barrier: a producer hears only its own block's consumer
    and multicasts over the peer block's slot while the peer still reads it. Deadlock-free."""
    _multicast_ring(k, steps, cluster_release=False)


# ---------------------------------------------------------------------------------------------
# tcgen05 pipeline: TMA -> SMEM ring -> tcgen05_mma into a TMEM accumulator -> epilogue
# ---------------------------------------------------------------------------------------------

def _tcgen05(k, steps, tiles_n, release="commit", acc_handoff=True):
    k.threads(3, name="wg")                            # 0: MMA issuer, 1: TMA, 2: epilogue
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
    acc_full = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    acc_empty = k.Barrier(num_arrivals=1)
    a = k.SMEM(slots=2)
    acc = k.TMEM()
    total = steps * tiles_n
    with k.when(k.thread == 1):
        with k.loop(total) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            k.copy_gmem_to_smem(full.at[i % 2], bytes=4096, dst=a.at[i % 2])
        with k.loop(2) as j:
            k.barrier_wait(empty.at[(total - 2 + j) % 2])
    with k.when(k.thread == 0):
        with k.loop(tiles_n) as t:
            if acc_handoff:
                with k.when(t >= 1):                   # the epilogue has read the last tile
                    k.barrier_wait(acc_empty)
            with k.loop(steps) as s:
                i = t * steps + s
                k.barrier_wait(full.at[i % 2])
                k.tcgen05_mma(a=a.at[i % 2], acc=acc)
                if release == "commit":
                    k.tcgen05_commit_arrive(empty.at[i % 2])
                else:                                  # the thread arrives at issue
                    k.barrier_arrive(empty.at[i % 2])
            k.tcgen05_commit_arrive(acc_full)
        if acc_handoff:
            k.barrier_wait(acc_empty)
    with k.when(k.thread == 2):
        with k.loop(tiles_n):
            k.barrier_wait(acc_full)
            k.read(acc)                                # tcgen05.ld, waited
            if acc_handoff:
                k.barrier_arrive(acc_empty)


@protocol(expect="verified", symbolic=("tiles_n",))
def tcgen05_pipeline(k, steps=2, tiles_n=2):
    """Slots released by tcgen05_commit_arrive once the MMAs reading them completed; the
    accumulator handed back by the epilogue before the next tile: race-free."""
    k.assume(tiles_n >= 1)                            # with steps = 2, the drain's two releases
    _tcgen05(k, steps, tiles_n)


@protocol(expect="violation:BP200")
def tcgen05_release_at_issue(k, steps=3, tiles_n=1):
    """The MMA thread releases the slot when it issues the MMA: TMA refills the slot while the
    tensor core still reads it."""
    _tcgen05(k, steps, tiles_n, release="arrive")


@protocol(expect="violation:BP201")
def tcgen05_accumulator_reuse(k, steps=1, tiles_n=2):
    """A persistent kernel with one TMEM accumulator and no `acc_empty` handoff: the next
    tile's MMA overwrites the accumulator while the epilogue still reads it."""
    _tcgen05(k, steps, tiles_n, acc_handoff=False)


# ---------------------------------------------------------------------------------------------
# Epilogue TMA stores: a staging buffer may be rewritten only after its store read it
# ---------------------------------------------------------------------------------------------

def _epilogue(k, tiles_n, wait, final_wait=True):
    k.threads(1, name="wg")
    out = k.SMEM()
    with k.loop(tiles_n):
        if wait == "before":
            k.wait_smem_to_gmem(0)                      # the previous tile's store is done
        k.write(out)
        k.copy_smem_to_gmem(out)
        if wait == "after":
            k.wait_smem_to_gmem(0)
    if final_wait:
        k.wait_smem_to_gmem(0)                          # the last store, before the exit


@protocol(expect="verified", symbolic=("tiles_n",))
def epilogue_store_waited(k, tiles_n=2):
    """wait_smem_to_gmem(0) before the staging buffer is rewritten."""
    k.assume(tiles_n >= 0)
    _epilogue(k, tiles_n, wait="after")


@protocol(expect="violation:BP200")
def epilogue_store_unwaited(k, tiles_n=2):
    """The next tile's results overwrite the staging buffer the TMA store still reads."""
    _epilogue(k, tiles_n, wait=None)


@protocol(expect="verified", symbolic=("tiles_n",))
def epilogue_store_drained(k, tiles_n=2):
    """Each tile waits for the previous store before rewriting the staging buffer, and the last
    store is waited for after the loop."""
    k.assume(tiles_n >= 0)
    _epilogue(k, tiles_n, wait="before")


@protocol(expect="violation:BP105")
def epilogue_exits_with_store_in_flight(k, tiles_n=2):
    """As epilogue_store_drained without the wait after the loop: the kernel exits while the
    last TMA store still reads the staging buffer, whose shared memory the next block on the SM
    may already be writing (Mosaic GPU and Triton add no wait at the end of a kernel)."""
    _epilogue(k, tiles_n, wait="before", final_wait=False)


# ---------------------------------------------------------------------------------------------
# Ping-pong attention: two compute warpgroups take turns on a shared SMEM staging tile that a
# WGMMA reads; each hands the turn over when its WGMMA is done with the tile.
# ---------------------------------------------------------------------------------------------

def _ping_pong(k, rounds, keep_in_flight):
    k.threads(2, name="wg")
    turn = k.Barrier(num_arrivals=1, num_barriers=2)
    staging = k.SMEM()
    v = k.SMEM()
    me = k.thread
    with k.loop(rounds) as r:
        with k.when((r >= 1) | (me == 1)):               # wg0 starts; then wait for your turn
            k.barrier_wait(turn.at[me])
        k.write(staging)                                 # P tile for the PV product
        k.wgmma(a=staging, b=v)
        k.wgmma_wait(keep_in_flight)
        k.barrier_arrive(turn.at[1 - me])
    with k.when(me == 0):                                # the last hand-over back to wg0
        k.barrier_wait(turn.at[0])


@protocol(expect="verified", symbolic=("rounds",))
def ping_pong_attention(k, rounds=2):
    """wgmma_wait(0) before handing the turn over: the staging tile is free."""
    k.assume(rounds >= 1)                             # wg0 waits for the last hand-over
    _ping_pong(k, rounds, keep_in_flight=0)


@protocol(expect="violation:BP200")
def ping_pong_attention_wgmma_in_flight(k, rounds=2):
    """wgmma_wait(1) leaves this round's WGMMA reading the staging tile when the other
    warpgroup gets the turn and overwrites it."""
    _ping_pong(k, rounds, keep_in_flight=1)


# ---------------------------------------------------------------------------------------------
# Public bug patterns
# ---------------------------------------------------------------------------------------------

def _wgmma_consumer(k, stages, steps, fix):
    """A Hopper warp-specialized GEMM: a TMA producer and a consumer whose WGMMAs read the
    ring's slots asynchronously."""
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= stages)            # the drain waits for `stages` releases
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    a = k.SMEM(slots=stages)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096, dst=a.at[i % stages])
        with k.loop(stages) as j:
            k.barrier_wait(empty.at[(steps - stages + j) % stages])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            if fix == "release_first":
                k.barrier_arrive(empty.at[i % stages])
            k.wgmma(a=a.at[i % stages])
            if fix == "wait_all":
                k.wgmma_wait(0)
                k.barrier_arrive(empty.at[i % stages])
            elif fix == "release_first":                   # the release moved up
                k.wgmma_wait(0)
            elif fix == "release_previous":                # keep one WGMMA in flight
                k.wgmma_wait(1)
                with k.when(i >= 1):
                    k.barrier_arrive(empty.at[(i - 1) % stages])
            else:
                k.wgmma_wait(1)
                k.barrier_arrive(empty.at[i % stages])
        if fix == "release_previous":
            k.wgmma_wait(0)
            k.barrier_arrive(empty.at[(steps - 1) % stages])


@protocol(expect="violation:BP200")
def wgmma_release_in_flight(k, stages=2, steps=3):
    """facebookexperimental/triton#1278: after wgmma_wait(1) the arrive on the slot's `empty`
    barrier fires while that slot's WGMMA may still read SMEM; the producer overwrites it."""
    _wgmma_consumer(k, stages, steps, fix=None)


@protocol(expect="verified", symbolic=("stages", "steps"))
def wgmma_release_after_wait(k, stages=2, steps=3):
    """The fix of triton#1278: wgmma_wait(0) before the release."""
    _wgmma_consumer(k, stages, steps, fix="wait_all")


@protocol(expect="violation:BP200", symbolic=("stages", "steps"))
def wgmma_after_release(k, stages=2, steps=3):
    """The slot released before its WGMMA is issued (then retired at once by wgmma_wait(0)):
    the producer may refill it while the WGMMA reads it."""
    _wgmma_consumer(k, stages, steps, fix="release_first")


@protocol(expect="verified", symbolic=("stages", "steps"))
def wgmma_release_previous(k, stages=2, steps=3):
    """Keep one WGMMA in flight, and release the previous slot (whose WGMMA wgmma_wait(1)
    retired) instead of the current one."""
    k.assume(stages >= 2)                             # the slot of the WGMMA in flight is held
    _wgmma_consumer(k, stages, steps, fix="release_previous")


def _lane_handoff(k, lanes, every_lane_arrives):
    k.threads(lanes + 1, name="t")                       # t0..: the load warp's lanes
    loaded = k.Barrier(num_arrivals=lanes if every_lane_arrives else 1)
    w = k.SMEM(slots=lanes)
    with k.when(k.thread < lanes):
        k.write(w.at[k.thread])                          # every lane stores its part
        if every_lane_arrives:
            k.barrier_arrive(loaded)
        else:
            with k.when(k.thread == 0):                  # elect_one(): one lane arrives
                k.barrier_arrive(loaded)
    with k.otherwise():                                  # the compute thread
        k.barrier_wait(loaded)
        k.read(w)


@protocol(expect="violation:BP200", symbolic=("lanes",))
def elected_lane_arrive(k, lanes=3):
    """NVIDIA/cudnn-frontend#426: every lane stores to SMEM, one elected lane arrives on a
    count-1 barrier; its arrive releases only its own stores. Racy from two lanes on."""
    k.assume(lanes >= 1)
    _lane_handoff(k, lanes, every_lane_arrives=False)


@protocol(expect="verified", symbolic=("lanes",))
def every_lane_arrives(k, lanes=3):
    """The fix of cudnn-frontend#426: the barrier counts every lane, and every lane arrives."""
    k.assume(lanes >= 1)
    _lane_handoff(k, lanes, every_lane_arrives=True)


def _mailbox(k, readers, tiles_n, ack_after_copy):
    k.threads(readers + 1, name="w")                     # w0: producer, the rest read
    k.assume(readers >= 1, tiles_n >= 1)
    ready = k.Barrier(num_arrivals=1)
    free = k.Barrier(num_arrivals=readers)
    mailbox = k.SMEM()
    with k.when(k.thread == 0):
        with k.loop(tiles_n) as t:
            with k.when(t >= 1):
                k.barrier_wait(free)                     # every reader took the last tile
            k.write(mailbox)
            k.barrier_arrive(ready)
        k.barrier_wait(free)
    with k.otherwise():
        with k.loop(tiles_n):
            k.barrier_wait(ready)
            if ack_after_copy:
                k.read(mailbox)
                k.barrier_arrive(free)
            else:
                k.barrier_arrive(free)
                k.read(mailbox)


@protocol(expect="verified", symbolic=("readers", "tiles_n"))
def mailbox_ack_after_copy(k, readers=2, tiles_n=2):
    """NVlabs/cuda-oxide#1066 fixed: readers acknowledge on `free` (count = readers) after they
    copied the tile info; the producer republishes only then."""
    _mailbox(k, readers, tiles_n, ack_after_copy=True)


@protocol(expect="violation:BP200", symbolic=("readers", "tiles_n"))
def mailbox_ack_before_copy(k, readers=2, tiles_n=2):
    """The acknowledgement sent before the copy (an arrive before the warp's lanes finished
    reading): the producer republishes the mailbox under a reader."""
    _mailbox(k, readers, tiles_n, ack_after_copy=False)


def _tmem_stats(k, tiles_n, wait_store):
    k.threads(2, name="wg")                              # wg0 softmax, wg1 correction
    stats_full = k.Barrier(num_arrivals=1)
    stats_empty = k.Barrier(num_arrivals=1)
    stats = k.TMEM()
    with k.when(k.thread == 0):
        with k.loop(tiles_n) as t:
            with k.when(t >= 1):
                k.barrier_wait(stats_empty)
            k.tcgen05_store(stats)                       # row max / sum into TMEM
            if wait_store:
                k.tcgen05_wait_store()
            k.barrier_arrive(stats_full)
        k.barrier_wait(stats_empty)
    with k.otherwise():
        with k.loop(tiles_n):
            k.barrier_wait(stats_full)
            k.read(stats)                                # tcgen05.ld + wait::ld
            k.barrier_arrive(stats_empty)


@protocol(expect="violation:BP201")
def tmem_stats_unwaited(k, tiles_n=2):
    """NVIDIA/cutlass#3653: tcgen05.st of the softmax statistics, then the arrive, with no
    tcgen05.wait::st between: the correction warpgroup may load them before they are written."""
    _tmem_stats(k, tiles_n, wait_store=False)


@protocol(expect="verified", symbolic=("tiles_n",))
def tmem_stats_waited(k, tiles_n=2):
    """The fix of cutlass#3653: tcgen05.wait::st before the arrive."""
    k.assume(tiles_n >= 1)                            # the last release is waited for
    _tmem_stats(k, tiles_n, wait_store=True)
