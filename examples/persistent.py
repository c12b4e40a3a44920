"""Persistent kernels: each block runs `tiles` tiles, each tile a K loop over a ring of 2 slots,
with barriers allocated once, so their phases run on from one tile to the next (the shape of
JAX's Hopper matmul: a TMA producer, two consumer warpgroups, a prologue of two loads, a steady
state and a drain of the last two releases).

`barrierproof prove examples/persistent.py` proves the first for every tile count and K through
one tile (the tiles are separated by the kernel's own waits: checker/symbolic/tiles.py), finds
the smallest sizes that break the second, and shows why the third may not be reduced to one
tile: one tile is clean, two are not. The last two run the same pipeline in a cluster of two
blocks that share B through a multicast copy (JAX's Hopper matmul with a cluster along M): the
first proved through one tile of the pair, the second broken at the end of its first tile.
"""

from barrierproof import protocol

STAGES = 2


def _produce(k, steps, empty, load):
    """The producer's tile: `load(slot)` fills a slot (the ring restarts at slot 0)."""
    with k.loop(STAGES) as p:                            # prologue: the first two loads
        load(p)
    with k.loop(steps - STAGES) as i:                    # steady state: reuse a released slot
        k.barrier_wait(empty.at[i % STAGES])
        load(i % STAGES)
    with k.loop(STAGES) as j:                            # drain: the last two releases
        k.barrier_wait(empty.at[(steps - STAGES + j) % STAGES])


def _consume(k, steps, full, empty, release_last):
    with k.loop(steps) as i:
        k.barrier_wait(full.at[i % STAGES])
        if release_last:
            k.barrier_arrive(empty.at[i % STAGES])
        else:
            with k.when(i < steps - 1):                  # the last step's release is skipped
                k.barrier_arrive(empty.at[i % STAGES])


def _tile(k, steps, full, empty, release_last=True):
    """One tile: thread 2 loads, threads 0 and 1 consume."""
    with k.when(k.thread == 2):
        _produce(k, steps, empty, lambda slot: k.copy_gmem_to_smem(full.at[slot], bytes=16384))
    with k.otherwise():
        _consume(k, steps, full, empty, release_last)


@protocol(expect="verified", symbolic=("tiles", "steps"))
def persistent_ring(k, tiles=2, steps=3):
    """Right for every tile count and every K of at least two steps."""
    k.threads(3, name="wg")
    k.assume(tiles >= 0, steps >= STAGES)
    full = k.Barrier(num_arrivals=1, num_barriers=STAGES)
    empty = k.Barrier(num_arrivals=2, num_barriers=STAGES)
    with k.loop(tiles):
        _tile(k, steps, full, empty)


@protocol(expect="violation:BP100", symbolic=("tiles", "steps"))
def persistent_ring_skips_last_release(k, tiles=2, steps=3):
    """The consumers skip the release of the tile's last step: the drain waits for it forever
    (smallest breaking sizes: one tile of two steps)."""
    k.threads(3, name="wg")
    k.assume(tiles >= 0, steps >= STAGES)
    full = k.Barrier(num_arrivals=1, num_barriers=STAGES)
    empty = k.Barrier(num_arrivals=2, num_barriers=STAGES)
    with k.loop(tiles):
        _tile(k, steps, full, empty, release_last=False)


@protocol(expect="violation:BP101", symbolic=("tiles",))
def signal_per_tile(k, tiles=2):
    """Thread 0 signals once per tile, thread 1 waits for it: one tile is clean, but nothing
    holds thread 0 back at a tile boundary (thread 1's tile does not end with an arrival that
    thread 0 waits for), so with two tiles its second signal completes a phase thread 1 has
    not observed yet."""
    k.threads(2, name="wg")
    k.assume(tiles >= 0)
    ready = k.Barrier(num_arrivals=1)
    with k.loop(tiles):
        with k.when(k.thread == 0):
            k.barrier_arrive(ready)
        with k.otherwise():
            k.barrier_wait(ready)


def _pair_tile(k, steps, full, empty, release_last=True):
    """One tile of a pair of blocks: thread 2 of each block loads its A tile into its own slot
    and multicasts its half of the B tile into both blocks' slot; threads 0 and 1 consume, and
    release the slot to both blocks' producers (a ClusterBarrier arrival reaches both)."""
    def load(slot):
        k.copy_gmem_to_smem(full.at[slot], bytes=16384)
        k.copy_gmem_to_smem(full.at[slot], bytes=32768, collective_axes="x")

    with k.when(k.thread == 2):
        _produce(k, steps, empty, load)
    with k.otherwise():
        _consume(k, steps, full, empty, release_last)


def _pair(k, tiles, steps, release_last=True):
    k.cluster(x=2)
    k.threads(3, name="wg")
    k.assume(tiles >= 0, steps >= STAGES)
    full = k.Barrier(num_arrivals=2, num_barriers=STAGES)       # the A copy and the B multicast
    empty = k.ClusterBarrier(collective_axes="x", num_arrivals=2, num_barriers=STAGES)
    with k.loop(tiles):
        _pair_tile(k, steps, full, empty, release_last)


@protocol(expect="verified", symbolic=("tiles", "steps"))
def persistent_multicast_pair(k, tiles=1, steps=2):
    """Right for every tile count and every K of at least two steps: a block's consumers can
    start a tile only when the other block's producer has started it too (their first slot
    needs its half of B), so the tiles of the pair are separated."""
    _pair(k, tiles, steps)
