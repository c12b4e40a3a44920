"""The sm90 ping-pong GEMM's mainloop (CUTLASS `KernelTmaWarpSpecializedPingpong`): one TMA
producer warpgroup and two math warpgroups that take turns on whole output tiles.

The producer fills one ring of `stages` slots with every k-tile of every output tile in order
(tile t, k-tile j is load n = t * k_tiles + j). Math warpgroup w computes tiles w, w + 2, ...;
each keeps its own pipeline state (CUTLASS's PipelineState: slot n % stages, phase n // stages),
and the second one starts `k_tiles` loads ahead ("advance 2nd Math WG pipeline states to the end
of 1st Math WG") and, after each tile, skips the other warpgroup's `k_tiles` loads. So each
warpgroup waits only on the phases of its own loads, with try_wait.parity on the phase its state
names: `k.wait_parity(bar, phase=n // stages)`. The order barrier (an OrderedSequenceBarrier,
examples/patterns/ordered_sequence.py) makes the warpgroups take turns: MMA of tile t, then MMA
of tile t + 1 by the other one, then the epilogues, so a warpgroup reaches its first wait on a
slot only once the other has consumed the slot's previous load: the barrier is never two phases
ahead of the phase the waiter means. That is the hardware's rule for parity waits
(docs/parity.md); the Pallas rule "every waiter observes every completion" would call it BP101.
"""

from barrierproof import protocol


def pingpong(k, stages, k_tiles, tiles_per_wg, *, offset=True, order=True, depth=2):
    producer = 2
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)      # one math warpgroup per load
    turn = k.Barrier(num_arrivals=1, num_barriers=(depth, 2))   # math_wg_order_barrier
    loads = 2 * tiles_per_wg * k_tiles
    with k.when(k.thread == producer):
        with k.loop(loads) as n:
            k.wait_parity(empty.at[n % stages], phase=n // stages - 1)     # producer_acquire
            k.arrive_expect_tx(full.at[n % stages], 4096)
            k.tma_load(full.at[n % stages], 4096)
        with k.loop(stages) as j:                                          # producer_tail
            n = loads + j
            k.wait_parity(empty.at[n % stages], phase=n // stages - 1)
    with k.otherwise():
        w = k.thread
        with k.loop(tiles_per_wg) as m:
            t = 2 * m + w                                 # this warpgroup's m-th output tile
            for step in range(2):                         # its MMA turn, then its epilogue turn
                r = 2 * m + step                          # the warpgroup's turn count
                if order:
                    # group 0 starts with the opposite phase (OrderedSequenceBarrier)
                    k.wait_parity(turn.at[r % depth, w], phase=r // depth - 1 + (w == 1))
                if step == 0:
                    with k.loop(k_tiles) as j:
                        # the pipeline state of the second warpgroup starts k_tiles ahead
                        n = t * k_tiles + j if offset else 2 * m * k_tiles + j
                        k.wait_parity(full.at[n % stages], phase=n // stages)   # consumer_wait
                        k.arrive(empty.at[n % stages])                         # consumer_release
                if order:
                    k.arrive(turn.at[r % depth, 1 - w])


@protocol(expect="verified", symbolic=("stages", "tiles_per_wg"))
def pingpong_offset_states(k, stages=2, k_tiles=3, tiles_per_wg=2):
    """Two math warpgroups with offset pipeline states, in turn: correct on hardware."""
    k.assume(stages >= 1, k_tiles >= 1, tiles_per_wg >= 0)
    pingpong(k, stages, k_tiles, tiles_per_wg)


@protocol(expect="verified", symbolic=("stages", "tiles_per_wg"))
def pingpong_more_stages_than_k_tiles(k, stages=3, k_tiles=2, tiles_per_wg=2):
    """The ring is deeper than a tile: the producer runs into the other warpgroup's loads."""
    k.assume(stages >= 1, k_tiles >= 1, tiles_per_wg >= 0)
    pingpong(k, stages, k_tiles, tiles_per_wg)


@protocol(expect="violation:BP101")
def pingpong_without_order_barrier(k, stages=2, k_tiles=2, tiles_per_wg=1):
    """No order barrier: the second warpgroup can reach its first wait, on slot
    k_tiles % stages with phase k_tiles // stages, before the first has consumed that slot's
    earlier load; the barrier is a phase behind the one it means and has that phase's parity,
    so the wait returns at once, for the wrong phase (its data is not there yet)."""
    pingpong(k, stages, k_tiles, tiles_per_wg, order=False)


@protocol(expect="violation:BP101")
def pingpong_second_state_not_advanced(k, stages=2, k_tiles=2, tiles_per_wg=1):
    """The second warpgroup's pipeline state is not advanced by k_tiles: it waits for the
    phases of the first warpgroup's loads, which have already completed."""
    pingpong(k, stages, k_tiles, tiles_per_wg, offset=False)
