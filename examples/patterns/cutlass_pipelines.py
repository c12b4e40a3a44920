"""CUTLASS pipelines written at the PTX level (explicit phase bits, as in
cutlass/include/cutlass/pipeline/sm90_pipeline.hpp):

- `PipelineAsync`: producer_acquire = wait(empty[s], phase ^ 1), producer_commit = arrive(full[s]),
  consumer_wait = wait(full[s], phase), consumer_release = arrive(empty[s]), producer_tail.
- the sm90 mainloop "release lag": the consumer keeps one wgmma in flight
  (warpgroup_wait<K_PIPE_MMAS>), releases the slot of k-tile i-1 after issuing k-tile i, and
  `mma_tail` releases the last one.
- `PipelineTmaAsync` with cluster multicast (2x1 cluster, B multicast along x): every block's
  producer arrive.expect_tx's the full tile (A + B bytes), loads A locally and its half of B
  multicast into both blocks; every consumer releases slot s in every block that multicasts into
  it (ClusterBarrier arrive on the peer's empty barrier, empty count = consumers * cluster_x);
  producer_tail keeps a block alive until its peers stopped arriving on it.

Multicast copies follow barrierproof's convention: `bytes=` is the total a copy delivers across
its blocks, split evenly (each block's half of B is written `bytes=B` with collective_axes="x":
B/2 lands on each block's barrier from each of the two issuers).
"""

from barrierproof import minimum, protocol


# -- PipelineAsync ---------------------------------------------------------------------------

def _pipeline_async(k, stages, consumers, steps, *, tail_parity_bug=False):
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    with k.when(k.thread == consumers):                       # producer
        with k.loop(steps) as i:
            k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)   # producer_acquire
            k.arrive(full.at[i % stages])                                  # producer_commit
        with k.loop(stages) as j:                                          # producer_tail
            n = steps + j
            k.wait_parity(empty.at[n % stages], ((n // stages) % 2) ^ 1)
    with k.otherwise():                                        # consumers
        with k.loop(steps) as i:
            phase = (i // stages) % 2
            if tail_parity_bug:
                # the last iteration reuses the previous iteration's phase bit
                phase = ((minimum(i, steps - 2) // stages) % 2)
            k.wait_parity(full.at[i % stages], phase)                      # consumer_wait
            k.arrive(empty.at[i % stages])                                 # consumer_release


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def pipeline_async(k, stages=2, consumers=2, steps=3):
    """CUTLASS PipelineAsync with producer_tail: correct. The tail waits `stages` more acquires,
    which for slots never used (steps < stages) pass at once on the initial phase."""
    k.assume(stages >= 1, consumers >= 1, steps >= 0)
    _pipeline_async(k, stages, consumers, steps)



@protocol(expect="violation:BP101")
def pipeline_async_tail_parity_stale(k, stages=2, consumers=1, steps=3):
    """The consumer's phase bit is not toggled for the tail iteration (it reuses iteration
    steps-2's bit). With steps=3, stages=2 the consumer's wait on full[0] at i=2 asks for the
    parity of i=0's phase: it passes at once after completion 1 (stale), or, once the second
    fill is in, never: a wait whose phase depends on the schedule (parity aliasing, BP101 with
    both schedules; the deadlock follows from it)."""
    _pipeline_async(k, stages, consumers, steps, tail_parity_bug=True)




# -- sm90 mainloop: one wgmma in flight, release lag --------------------------------------------

def release_lag(k, stages, steps, *, guard_tail=False):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 1):                                # TMA producer
        with k.loop(steps) as i:
            k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)
            k.arrive_expect_tx(full.at[i % stages], 4096)
            k.tma_load(full.at[i % stages], 4096)
        with k.loop(stages) as j:
            n = steps + j
            k.wait_parity(empty.at[n % stages], ((n // stages) % 2) ^ 1)
    with k.otherwise():                                        # MMA warpgroup
        # prologue: k-tile 0, no release yet (its wgmma is still in flight)
        k.wait_parity(full.at[0], 0)
        with k.loop(steps - 1) as t:
            i = t + 1
            k.wait_parity(full.at[i % stages], (i // stages) % 2)
            # warpgroup_wait<1>(): the wgmma of k-tile i-1 is done, release its slot
            k.arrive(empty.at[(i - 1) % stages])
        # mma_tail: release the last k-tile
        last = steps - 1
        if guard_tail:
            with k.when(steps > 1):
                k.arrive(empty.at[last % stages])
        else:
            k.arrive(empty.at[last % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def mainloop_release_lag(k, stages=2, steps=3):
    """The sm90 consumer mainloop with K_PIPE_MMAS=1: release of k-tile i-1 after issuing i,
    mma_tail releases the last. Every slot is released exactly once per fill. Correct with at
    least two stages (CUTLASS static_asserts K_PIPE_MMAS < K_PIPE_MAX)."""
    k.assume(stages >= 2, steps >= 1)
    release_lag(k, stages, steps)


@protocol(expect="violation:BP100", symbolic=("stages", "steps"))
def mainloop_release_lag_single_stage(k, stages=1, steps=2):
    """The same mainloop with one stage (what CUTLASS's K_PIPE_MMAS < K_PIPE_MAX assertion rules
    out): the consumer still holds slot 0 for the wgmma in flight when it waits for slot 0's next
    fill, and the producer waits for that slot's release. `prove` found it when the stage count
    was declared symbolic with only `stages >= 1`."""
    k.assume(stages >= 1, steps >= 1)
    release_lag(k, stages, steps)


@protocol(expect="violation:BP100", symbolic=("stages", "steps"))
def mainloop_release_lag_trip_count_one(k, stages=2, steps=1):
    """mma_tail guarded by `k_tile_count > 1` (the author assumed the loop releases the
    prologue's tile): with a single k-tile slot 0 is never released and producer_tail hangs."""
    k.assume(stages >= 2, steps >= 1)
    release_lag(k, stages, steps, guard_tail=True)


# -- PipelineTmaAsync with cluster multicast -------------------------------------------------

A_BYTES, B_BYTES = 4096, 8192


def tma_multicast(k, stages, consumers, steps, *, expect_bytes=A_BYTES + B_BYTES,
                  empty_per_block=True, tail=True):
    k.cluster(x=2)
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers * (2 if empty_per_block else 1),
                      num_barriers=stages)
    with k.when(k.thread == consumers):                        # producer warp
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(empty.at[s], ((i // stages) % 2) ^ 1)
            k.arrive_expect_tx(full.at[s], expect_bytes)
            k.tma_load(full.at[s], A_BYTES)                        # A: local
            k.tma_load(full.at[s], B_BYTES, collective_axes="x")   # B: my half, to both blocks
        if tail:
            with k.loop(stages) as j:
                n = steps + j
                k.wait_parity(empty.at[n % stages], ((n // stages) % 2) ^ 1)
    with k.otherwise():                                        # consumer warpgroups
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(full.at[s], (i // stages) % 2)
            with k.loop(2) as dst:                             # release in every source block
                k.arrive(empty.on(dst, index=s))


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def tma_multicast_2x1(k, stages=2, consumers=1, steps=3):
    """PipelineTmaAsync in a 2x1 cluster with B multicast along x: correct."""
    k.assume(stages >= 1, consumers >= 1, steps >= 0)
    tma_multicast(k, stages, consumers, steps)


@protocol(expect="violation:BP121")
def tma_multicast_empty_counts_local_consumers_only(k, stages=2, consumers=1, steps=3):
    """empty[] initialised with the local consumer count only (forgot the multicast peers):
    each slot gets two releases per use and completes twice, so the producer's next
    producer_acquire passes a lap early and its arrive.expect_tx lands on a `full` phase that
    is still open: more arrivals than the count (undefined behaviour)."""
    tma_multicast(k, stages, consumers, steps, empty_per_block=False)



@protocol(expect="violation:BP146")
def tma_multicast_expect_tx_counts_own_half(k, stages=2, consumers=1, steps=1):
    """expect_tx = A + B/2 (only the block's own half of B): the phase completes as soon as A and
    one half land, the consumer reads a half-written tile and a block can exit while its peer
    still multicasts into its shared memory (BP146; with the blocks kept alive, the copy still
    in flight at exit, BP105). The underlying bug is the early completion (a smem race)."""
    tma_multicast(k, stages, consumers, steps, expect_bytes=A_BYTES + B_BYTES // 2)


@protocol(expect="violation:BP146")
def tma_multicast_without_producer_tail(k, stages=2, consumers=1, steps=3):
    """No producer_tail: a block's producer exits without observing the last releases of its
    slots, so its block can retire while the peer still arrives on its barriers (BP146; the
    unobserved releases themselves are BP103)."""
    tma_multicast(k, stages, consumers, steps, tail=False)
