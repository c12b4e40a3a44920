"""Rings whose waiters skip phases on purpose, with bare parity waits, and the parity bugs that
look like them (docs/parity.md).

A bare `k.wait_parity(bar, P)` is what PTX, CUTLASS's `consumer_wait(state)` and the TTGIR of a
warp-specialized kernel carry: a parity bit, no phase number. Such a wait is judged by what it
does: it must return, and return after the same completion on every schedule. CUTLASS's sm90
ping-pong GEMM (`KernelTmaWarpSpecializedPingpong`) has two math warpgroups share one TMA ring:
the second warpgroup's PipelineState is advanced by `k_tile_count` before its first tile, and
after each tile each warpgroup advances past the other's `k_tile_count` loads, so its first wait
on a slot asks for parity 1 of a barrier that has completed once already. Its math order
barrier (an OrderedSequenceBarrier) makes the warpgroups take turns, so the wait always returns
after the completion of its own load.

PipelineState here is a load count n: slot n % stages, phase bit (n // stages) % 2;
producer_acquire waits on `empty` with the opposite bit (a fresh slot passes at once).
"""

from barrierproof import protocol


def _producer(k, full, empty, stages, loads, *, acquire_bit=1, tma=True):
    """The TMA warp: acquire slot n % stages, arm it with the tile's bytes, load; then
    producer_tail, which waits for the last releases. `tma=False`: a PipelineAsync producer,
    whose producer_commit is a plain arrive."""
    with k.loop(loads) as n:
        k.wait_parity(empty.at[n % stages], (n // stages + acquire_bit) % 2)   # producer_acquire
        if tma:
            k.arrive_expect_tx(full.at[n % stages], 4096)
            k.tma_load(full.at[n % stages], 4096)
        else:
            k.arrive(full.at[n % stages])                                      # producer_commit
    with k.loop(stages) as j:                                                  # producer_tail
        n = loads + j
        k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)


def _pingpong(k, stages, k_tiles, tiles_per_wg, *, order=True, depth=2):
    producer = 2
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    turn = k.Barrier(num_arrivals=1, num_barriers=(depth, 2))       # math_wg_order_barrier
    with k.when(k.thread == producer):
        _producer(k, full, empty, stages, 2 * tiles_per_wg * k_tiles)
    with k.otherwise():
        w = k.thread
        with k.loop(tiles_per_wg) as m:
            for step in range(2):               # the MMA turn, then the epilogue turn
                r = 2 * m + step                # the warpgroup's count of order-barrier turns
                if order:
                    # OrderedSequenceBarrier: group 0 starts one phase ahead of group 1
                    k.wait_parity(turn.at[r % depth, w], (r // depth + 1 + (w == 1)) % 2)
                if step == 0:
                    with k.loop(k_tiles) as j:
                        # tile 2m + w: the second warpgroup's state starts k_tiles loads ahead
                        n = (2 * m + w) * k_tiles + j
                        k.wait_parity(full.at[n % stages], (n // stages) % 2)  # consumer_wait
                        k.arrive(empty.at[n % stages])                        # consumer_release
                if order:
                    k.arrive(turn.at[r % depth, 1 - w])


@protocol(expect="verified", symbolic=("tiles_per_wg",))
def pingpong_bare_parity(k, stages=2, k_tiles=3, tiles_per_wg=2):
    """The ping-pong mainloop with the parity bits CUTLASS's PipelineState computes: each
    warpgroup skips the other's phases of every slot, and every wait returns after the
    completion of its own load on every schedule. `prove` proves it for every tile count."""
    k.assume(tiles_per_wg >= 0)
    _pingpong(k, stages, k_tiles, tiles_per_wg)


@protocol(expect="verified", symbolic=("tiles_per_wg",))
def pingpong_bare_parity_deep_ring(k, stages=3, k_tiles=2, tiles_per_wg=2):
    """More stages than k-tiles: a warpgroup's first wait on slot 2 is for the other's tile's
    load position, a completion it skips on other slots. A tile takes 4 positions of 3 slots:
    `prove` takes 3 tiles per iteration, a case per tiles_per_wg % 3 (stride_split.py)."""
    k.assume(tiles_per_wg >= 0)
    _pingpong(k, stages, k_tiles, tiles_per_wg)


@protocol(expect="violation:BP101")
def pingpong_bare_parity_without_order_barrier(k, stages=2, k_tiles=3, tiles_per_wg=1):
    """Without the order barrier the second warpgroup's first wait (load 3: slot 1, bit 1) can
    come before slot 1 completed at all, and bit 1 passes on the initial phase (after
    completion 0, where a schedule with turns returns after completion 2). Its early release
    completes empty[1] before the producer acquires it for load 1: that acquire returns after
    completion 0 where the release came later, and is passed by completion 1 where it came
    first, then never returns (BP101 with both schedules; the deadlock follows from it)."""
    _pingpong(k, stages, k_tiles, tiles_per_wg, order=False)


def _alternating(k, stages, k_blocks, *, turns, formula, tma=True):
    """Two consumers take alternate k-blocks of one ring: consumer c's j-th block is
    k = 2j + c. `formula`: its phase bit as (j // (stages // 2)) % 2, the shortcut that equals
    (k // stages) % 2 for even stage counts only; else (k // stages) % 2 itself. `turns`: the
    consumers take turns on a barrier pair, as the ping-pong's order barrier does."""
    k.threads(3, name="wg")
    k.assume(k_blocks >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    turn = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.when(k.thread == 2):
        _producer(k, full, empty, stages, k_blocks, tma=tma)
    with k.otherwise():
        c = k.thread
        with k.loop((k_blocks + 1 - c) // 2) as j:
            kb = 2 * j + c
            if turns:
                k.wait_parity(turn.at[c], (j + 1 + c) % 2)   # consumer 0 goes first
            bit = (j // (stages // 2)) % 2 if formula else (kb // stages) % 2
            k.wait_parity(full.at[kb % stages], bit)
            k.arrive(empty.at[kb % stages])
            if turns:
                k.arrive(turn.at[1 - c])


@protocol(expect="verified", symbolic=("k_blocks",))
def alternate_k_blocks(k, stages=4, k_blocks=8):
    """Even stage count: each consumer owns every other slot, and the shortcut phase bit is
    right. `prove` proves it for every k_blocks: per parity of k_blocks, the ring of 4 is two
    sub-rings of 2 that the producer and one consumer each step through one slot per iteration
    (checker/symbolic/stride_split.py)."""
    _alternating(k, stages, k_blocks, turns=False, formula=True)


@protocol(expect="verified")
def alternate_k_blocks_in_turn(k, stages=3, k_blocks=7):
    """Odd stage count: the consumers share every slot and skip each other's phases; taking
    turns, each waits only once the other consumed the slot's previous load, so every wait
    returns after its own block's completion."""
    _alternating(k, stages, k_blocks, turns=True, formula=False)


@protocol(expect="verified")
def alternate_k_blocks_no_turns_in_order(k, stages=3, k_blocks=7):
    """Without turns, but with fills that complete in issue order (PipelineAsync's plain
    producer_commit): a consumer reaches its wait on a slot only after the producer filled the
    slot's earlier loads, which fixes the phase the wait returns after."""
    _alternating(k, stages, k_blocks, turns=False, formula=False, tma=False)


@protocol(expect="violation:BP121", symbolic=("k_blocks",))
def alternate_k_blocks_overtaken(k, stages=3, k_blocks=4):
    """The same with TMA fills, which land in any order: consumer 1's wait for block 3 (slot 0,
    bit 1) passes on slot 0's initial phase while the copy of block 0 is still in flight
    (returning after completion 0, where another schedule returns after completion 2); its
    release lets the producer re-arm slot 0 while that phase is open: more arrivals than its
    count.

    BP121 is reported, not BP101, and rightly: the explorer reports the rule broken on the
    shortest trace, and the over-arrival is reached in 16 steps while the parity alias needs
    two schedules, the longer of 20 steps (wg1's wait on full[0] returns after completion 0 on
    one and after completion 2 on the other). The over-arrival is the alias's first effect on
    the hardware (a second arrive_expect_tx on a phase still waiting for its bytes corrupts
    it); with --ignore BP121 the same search reports the BP101 with both schedules."""
    _alternating(k, stages, k_blocks, turns=False, formula=False)


@protocol(expect="violation:BP101", symbolic=("k_blocks",))
def alternate_k_blocks_odd_stages_shortcut(k, stages=3, k_blocks=6):
    """The shortcut bit with an odd stage count names the wrong phase: consumer 0's wait for
    block 2 (slot 2, first fill, bit 0) asks for bit 1 and passes on the initial phase, and its
    release completes empty[2] before the producer acquired slot 2: that acquire returns after
    completion 0 on a schedule where the producer came first, and is passed by completion 1
    here, then never returns (BP101 with both schedules; the deadlock follows from it)."""
    _alternating(k, stages, k_blocks, turns=True, formula=True)


@protocol(expect="violation:BP101")
def producer_laps_consumer(k, steps=3):
    """A single-slot ring whose producer never waits for the consumer's release: it can run two
    fills ahead, and the consumer's first wait returns after fill 1 or after fill 3."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps):
            k.arrive(full)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full, i % 2)


@protocol(expect="violation:BP100")
def producer_acquire_wrong_initial_parity(k, stages=2, steps=4):
    """producer_acquire starts with bit 0 instead of 1 (CUTLASS's producer start state has
    phase 1): on a fresh `empty` slot the wait blocks for a release that comes only after the
    fill it guards."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 1):
        _producer(k, full, empty, stages, steps, acquire_bit=0)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % stages], (i // stages) % 2)
            k.arrive(empty.at[i % stages])


def _ring(k, stages, steps, bit):
    """PipelineAsync with `bit(i)` as the consumer's phase bit for iteration i."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 1):
        _producer(k, full, empty, stages, steps, tma=False)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % stages], bit(i))
            k.arrive(empty.at[i % stages])


@protocol(expect="violation:BP101")
def parity_from_the_loop_index(k, stages=2, steps=4):
    """The phase bit taken from the loop index, i % 2, instead of the lap, (i // stages) % 2
    (tilelang#2927): the first wait on slot 1 asks for bit 1 and passes on the slot's initial
    phase (after completion 0) or, once its fill is in, never (completion 1 has the parity it
    waits out): BP101 with both schedules; the deadlock follows from it."""
    _ring(k, stages, steps, lambda i: i % 2)


@protocol(expect="violation:BP101")
def phase_flipped_one_step_early(k, stages=2, steps=4):
    """The bit flips one iteration before the slot index wraps, ((i + 1) // stages) % 2
    (cutlass#2404): the first wait on slot 1 asks for bit 1, which passes on the slot's initial
    phase before its fill (after completion 0), and its release completes empty[1] before the
    producer acquires slot 1: that acquire returns after completion 0 where the release came
    later, and is passed by completion 1 where it came first, then never returns (BP101 with
    both schedules; the deadlock follows from it)."""
    _ring(k, stages, steps, lambda i: ((i + 1) // stages) % 2)
