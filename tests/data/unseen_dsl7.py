"""More barrier patterns of the field, written as a new user would from public descriptions of
CUTLASS's sm90/sm100 pipelines and the PTX mbarrier rules, each correct one beside a buggy twin.
Not in examples/ (no generated specs); tests/test_unseen_dsl7.py checks them.
"""

from barrierproof import minimum, protocol

TILE = 8192


def _producer_tail(k, empty, stages, steps):
    """CUTLASS's producer_tail: wait for the consumers' releases of the last `stages` slots."""
    last = minimum(steps, stages)
    with k.loop(last) as j:
        v = steps - last + j
        k.wait_parity(empty.at[v % stages], (v // stages) % 2)


# -- 1. A TMA ring feeding a parameterised number of consumer warpgroups: the `empty` barrier of
#       each slot must count every consumer's release (CUTLASS: num_consumers arrivals).

def _consumer_ring(k, stages, consumers, steps, release_count):
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=release_count, num_barriers=stages)
    tiles = k.SMEM(slots=stages)
    with k.when(k.thread == consumers):                  # producer warpgroup
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ 1)          # producer_acquire
            k.arrive_expect_tx(full.at[s], TILE)
            k.tma_load(full.at[s], TILE, dst=tiles.at[s])
        _producer_tail(k, empty, stages, steps)
    with k.otherwise():
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(full.at[s], (i // stages) % 2)
            k.read(tiles.at[s])
            k.arrive(empty.at[s])                          # consumer_release


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def empty_counts_every_consumer(k, stages=2, consumers=2, steps=4):
    k.assume(stages >= 1, consumers >= 1, consumers <= 3, steps >= 0)
    _consumer_ring(k, stages, consumers, steps, consumers)


@protocol(expect="violation:BP200", symbolic=("stages", "consumers", "steps"))
def empty_counts_one_consumer_short(k, stages=2, consumers=2, steps=4):
    """`consumers - 1` arrivals complete a slot's release: once all but one consumer released
    it, the producer refills the slot under the last consumer's read."""
    k.assume(stages >= 1, consumers >= 2, consumers <= 3, steps >= 0)
    _consumer_ring(k, stages, consumers, steps, consumers - 1)


# -- 2. A UMMA accumulator ring of two stages over `tiles`: the MMA warp acquires a free
#       accumulator (acc_empty), commits acc_full when the tile's MMAs are done; the epilogue
#       waits acc_full, loads the accumulator from TMEM, and releases acc_empty.

def _acc_ring(k, tiles, release_before_load_done):
    k.threads(2, name="wg")                              # wg0: MMA warp, wg1: epilogue
    acc_full = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
    acc_empty = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
    acc = k.TMEM(slots=2)
    with k.when(k.thread == 0):
        with k.loop(tiles) as t:
            s, phase = t % 2, (t // 2) % 2
            k.wait_parity(acc_empty.at[s], phase ^ 1)
            k.tcgen05_mma(acc=acc.at[s])
            k.tcgen05_commit_arrive(acc_full.at[s])
        _producer_tail(k, acc_empty, 2, tiles)           # the epilogue's last releases
    with k.otherwise():
        with k.loop(tiles) as t:
            s = t % 2
            k.wait_parity(acc_full.at[s], (t // 2) % 2)
            k.tcgen05_load(acc.at[s])
            if release_before_load_done:
                k.arrive(acc_empty.at[s])
                k.tcgen05_wait_load()
            else:
                k.tcgen05_wait_load()
                k.arrive(acc_empty.at[s])


@protocol(expect="verified", symbolic=("tiles",))
def acc_ring_released_after_load(k, tiles=3):
    k.assume(tiles >= 0)
    _acc_ring(k, tiles, release_before_load_done=False)


@protocol(expect="violation:BP201", symbolic=("tiles",))
def acc_ring_released_with_load_in_flight(k, tiles=3):
    """The epilogue releases the accumulator before tcgen05.wait::ld: the MMA warp's next tile
    on that accumulator overwrites it while the load still reads it."""
    k.assume(tiles >= 0)
    _acc_ring(k, tiles, release_before_load_done=True)


# -- 3. An epilogue store ring: the tile in slot t % stages is written, then stored by TMA; before
#       writing a slot again the thread waits until at most stages - 1 stores are in flight.

def _store_ring(k, stages, steps, in_flight):
    k.threads(1, name="wg")
    out = k.SMEM(slots=stages)
    with k.loop(steps) as i:
        k.wait_smem_to_gmem(in_flight)
        k.write(out.at[i % stages])
        k.copy_smem_to_gmem(out.at[i % stages])
    k.wait_smem_to_gmem(0)


@protocol(expect="verified", symbolic=("stages", "steps"))
def store_ring_bounds_stores_in_flight(k, stages=2, steps=4):
    k.assume(stages >= 1, steps >= 0)
    _store_ring(k, stages, steps, stages - 1)


@protocol(expect="violation:BP200", symbolic=("stages", "steps"))
def store_ring_allows_one_store_too_many(k, stages=2, steps=4):
    """Waiting for `stages` stores in flight lets the store of slot i % stages from `stages`
    steps ago still read the slot being written."""
    k.assume(stages >= 1, steps >= 0)
    _store_ring(k, stages, steps, stages)


# -- 4. A 2-CTA cluster ring with multicast loads: each block's producer loads half a tile into
#       both blocks, so a slot is free only once the consumers of both blocks released it. Each
#       consumer arrives on its own block's `empty` and, remotely, on the peer's.

def _cluster_ring(k, steps, empty_count, tail=True):
    k.cluster(x=2)
    k.threads(2, name="wg")                              # wg0: consumer, wg1: producer
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=empty_count, num_barriers=2)
    b = k.block("x")
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            s, phase = i % 2, (i // 2) % 2
            k.wait_parity(empty.at[s], phase ^ 1)
            k.arrive_expect_tx(full.at[s], TILE)
            k.tma_load(full.at[s], TILE, collective_axes="x")
        if tail:
            _producer_tail(k, empty, 2, steps)
    with k.otherwise():
        with k.loop(steps) as i:
            s = i % 2
            k.wait_parity(full.at[s], (i // 2) % 2)
            k.arrive(empty.at[s])
            k.arrive(empty.on(1 - b, index=s))


@protocol(expect="verified", symbolic=("steps",))
def cluster_empty_counts_both_blocks(k, steps=3):
    k.assume(steps >= 0)
    _cluster_ring(k, steps, 2)


@protocol(expect="violation:BP121", symbolic=("steps",))
def cluster_empty_counts_own_block(k, steps=3):
    """`empty` counts one consumer although both blocks' consumers arrive on it: the peer's
    release completes a phase early, so the producer refills a slot the local consumer has not
    released, and its multicast lands in a peer still reading."""
    k.assume(steps >= 0)
    _cluster_ring(k, steps, 1)


@protocol(expect="violation:BP146", symbolic=("steps",))
def cluster_ring_without_producer_tail(k, steps=3):
    """No producer_tail: once its consumer released the last tile, a block may exit while the
    peer's consumer still arrives remotely on its `empty` (harmless in one CTA, where the
    unobserved completions die with the block)."""
    k.assume(steps >= 0)
    _cluster_ring(k, steps, 2, tail=False)


# -- 5. The wait parity of a ring slot is the parity of its lap, (i // stages) % 2, not of the
#       step (CUTLASS's PipelineState flips its phase when the index wraps).

def _phase_ring(k, stages, steps, lap_parity):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    tiles = k.SMEM(slots=stages)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ 1)
            k.copy_gmem_to_smem(full.at[s], bytes=TILE, dst=tiles.at[s])
        _producer_tail(k, empty, stages, steps)
    with k.otherwise():
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(full.at[s], (i // stages) % 2 if lap_parity else i % 2)
            k.read(tiles.at[s])
            k.arrive(empty.at[s])


@protocol(expect="verified", symbolic=("stages", "steps"))
def consumer_waits_parity_of_lap(k, stages=2, steps=4):
    k.assume(stages >= 1, steps >= 0)
    _phase_ring(k, stages, steps, lap_parity=True)


@protocol(expect="violation:BP200", symbolic=("stages", "steps"))
def consumer_waits_parity_of_step(k, stages=2, steps=4):
    """`i % 2` is the lap's parity only for one stage: with two, step 1 waits for parity 1 on
    slot 1, which its fresh barrier already shows (the phase before phase 0), so the consumer
    reads slot 1 before its copy landed."""
    k.assume(stages >= 1, steps >= 0)
    _phase_ring(k, stages, steps, lap_parity=False)


# -- 6. A split barrier: every warpgroup arrives at the end of its step and waits before the
#       next one (arrive early, wait late). One warpgroup's arrival is predicated off on the
#       last step, the others still wait for it.

def _split_barrier(k, groups, steps, skip_last):
    k.threads(groups, name="wg")
    step = k.Barrier(num_arrivals=groups)
    work = k.SMEM(slots=groups)
    with k.loop(steps) as i:
        k.write(work.at[k.thread])
        if skip_last:
            with k.when((k.thread != 0) | (i + 1 < steps)):
                k.barrier_arrive(step)
        else:
            k.barrier_arrive(step)
        k.barrier_wait(step)


@protocol(expect="verified", symbolic=("groups", "steps"))
def split_barrier_every_step(k, groups=2, steps=3):
    k.assume(groups >= 1, groups <= 3, steps >= 0)
    _split_barrier(k, groups, steps, skip_last=False)


@protocol(expect="violation:BP100", symbolic=("groups", "steps"))
def split_barrier_arrival_skipped_on_last_step(k, groups=2, steps=3):
    """Warpgroup 0 skips its arrival on the last step (`i + 1 < steps` guarding the arrive as if
    no one waited after the loop): the last phase never completes."""
    k.assume(groups >= 1, groups <= 3, steps >= 0)
    _split_barrier(k, groups, steps, skip_last=True)
