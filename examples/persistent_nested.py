"""Persistent kernels whose ring runs on across tiles: an outer loop over the tiles a block
walks (`tiles`, set at run time) around an inner loop over each tile's K steps (`ksteps`, set at
run time too), the ring position the running count `t * ksteps + kk` of the K steps done so far,
as CUTLASS's `PipelineState` keeps it (its index and phase advance on every K step and are never
reset between tiles). The producer loads without draining between tiles, so it runs ahead into
the next tile while the consumers finish this one; it drains the ring once, before exit.

`barrierproof prove examples/persistent_nested.py` proves the correct ones for every tile count,
every K and every stage count (checker/symbolic/nested.py turns the two loops into one loop over
the running position, the same program), and finds the smallest sizes that break the others.
"""

from barrierproof import minimum, protocol

TILE = 16384


def ring_over_tiles(k, stages, consumers, tiles, ksteps, *, consumer_resets=False,
                    first_lap_per_tile=False, consumer_ksteps=None, consumer_tiles=None):
    """A TMA producer fills a ring of `stages` slots with the K steps of each tile; `consumers`
    warpgroups wait on each slot's phase and release it. The knobs break it: the consumers
    restart their pipeline state at every tile (`consumer_resets`), the producer skips its
    acquire on the first lap of every tile, the consumers run `consumer_ksteps` per tile or
    `consumer_tiles` tiles."""
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    with k.when(k.thread == consumers):                        # the TMA producer
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk                            # its PipelineState, never reset
                with k.when((kk if first_lap_per_tile else i) >= stages):
                    k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)
                k.arrive_expect_tx(full.at[i % stages], TILE)
                k.tma_load(full.at[i % stages], TILE)
        steps = tiles * ksteps                                 # producer_tail
        last = minimum(steps, stages)
        with k.loop(last) as j:
            v = steps - last + j
            k.wait_parity(empty.at[v % stages], (v // stages) % 2)
    with k.otherwise():                                        # the math warpgroups
        with k.loop(tiles if consumer_tiles is None else consumer_tiles) as t:
            with k.loop(ksteps if consumer_ksteps is None else consumer_ksteps) as kk:
                i = kk if consumer_resets else t * ksteps + kk
                k.wait_parity(full.at[i % stages], (i // stages) % 2)
                k.arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "consumers", "tiles", "ksteps"))
def persistent_ring(k, stages=2, consumers=1, tiles=2, ksteps=3):
    """Correct for every stage count, consumer count, tile count and K."""
    k.assume(stages >= 1, consumers >= 1, tiles >= 0, ksteps >= 0)
    ring_over_tiles(k, stages, consumers, tiles, ksteps)


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def persistent_ring_two_stages(k, stages=2, consumers=2, tiles=2, ksteps=3):
    """Two slots, two consumer warpgroups: correct for every tile count and K."""
    k.assume(tiles >= 0, ksteps >= 1)
    ring_over_tiles(k, stages, consumers, tiles, ksteps)


@protocol(expect="violation:BP101", symbolic=("tiles", "ksteps"))
def consumer_phase_reset_per_tile(k, stages=2, consumers=1, tiles=2, ksteps=3):
    """The consumers make a fresh pipeline state for every tile (slot 0, phase 0) while the
    producer's runs on: once a tile's K steps are not a multiple of the stage count, the
    consumers wait on the wrong slot with the wrong phase."""
    k.assume(tiles >= 0, ksteps >= 1)
    ring_over_tiles(k, stages, consumers, tiles, ksteps, consumer_resets=True)


@protocol(expect="violation:BP121", symbolic=("tiles", "ksteps"))
def producer_first_lap_every_tile(k, stages=2, consumers=1, tiles=2, ksteps=3):
    """The producer's acquire is guarded by the tile's K step (`kk >= stages`) instead of its
    running position: at the start of every tile after the first it refills slots without
    waiting for their release."""
    k.assume(tiles >= 0, ksteps >= 1)
    ring_over_tiles(k, stages, consumers, tiles, ksteps, first_lap_per_tile=True)


@protocol(expect="violation:BP101", symbolic=("tiles", "ksteps"))
def consumer_one_k_step_short(k, stages=2, consumers=1, tiles=2, ksteps=3):
    """The consumers run one K step fewer per tile than the producer loads."""
    k.assume(tiles >= 0, ksteps >= 1)
    ring_over_tiles(k, stages, consumers, tiles, ksteps, consumer_ksteps=ksteps - 1)


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def persistent_ceil_tiles_ring(k, stages=2, consumers=1, tiles=5, blocks=2, ksteps=2):
    """A static persistent schedule: each of `blocks` blocks walks ceil(tiles / blocks) tiles
    (CUTLASS's StaticPersistentTileScheduler, the tail predicated inside), its ring running on
    across them: correct for every tile count and K."""
    k.assume(tiles >= 0, blocks >= 1, ksteps >= 0)
    ring_over_tiles(k, stages, consumers, (tiles + blocks - 1) // blocks, ksteps)


@protocol(expect="violation:BP100", symbolic=("tiles", "ksteps"))
def persistent_consumer_counts_floor(k, stages=2, consumers=1, tiles=5, blocks=2, ksteps=2):
    """The consumers count floor(tiles / blocks) tiles, the producer ceil: when the blocks do
    not divide the tiles, the producer's tail waits for releases nobody makes."""
    k.assume(tiles >= 0, blocks >= 1, ksteps >= 0)
    ring_over_tiles(k, stages, consumers, (tiles + blocks - 1) // blocks, ksteps,
                    consumer_tiles=tiles // blocks)


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def flat_producer_nested_consumers(k, stages=2, consumers=2, tiles=2, ksteps=3):
    """The producer walks all `tiles * ksteps` loads in one loop (JAX's Blackwell matmul's TMA
    warp), the consumers tile by tile: the same positions, correct for every tile count and K."""
    k.assume(tiles >= 0, ksteps >= 1)
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    steps = tiles * ksteps
    with k.when(k.thread == consumers):
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=TILE)
        last = minimum(steps, stages)
        with k.loop(last) as j:
            k.barrier_wait(empty.at[(steps - last + j) % stages])
    with k.otherwise():
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                k.barrier_wait(full.at[i % stages])
                k.barrier_arrive(empty.at[i % stages])
