"""CUTLASS `OrderedSequenceBarrier<SequenceDepth, SequenceLength>` (cutlass/pipeline/
sm90_pipeline.hpp), as used by the sm90 ping-pong GEMM (`math_wg_order_barrier`) to make math
warpgroups take turns on the tensor core and in the epilogue.

barrier[depth][length], each counting the group's arrivals (one per warpgroup here). Group g's
stage is a PipelineState<depth> whose phase starts at 1 for group 0 ("Group 0 - starts with an
opposite phase") and 0 for the others. wait() = try_wait.parity(barrier[stage][g], phase);
arrive() = arrive(barrier[stage][(g + 1) % length]) then ++stage.

Each group takes `turns` turns (in the ping-pong kernel: MMA, epilogue, MMA, epilogue...).
"""

from barrierproof import minimum, protocol


def ordered_sequence(k, groups, depth, turns, *, drain=True, group0_opposite=True):
    k.threads(groups, name="wg")
    order = k.Barrier(num_arrivals=1, num_barriers=(depth, groups))
    with k.loop(groups) as g:
        with k.when(k.thread == g):
            first = 1 if group0_opposite else 0
            with k.loop(turns) as m:
                phase = (m // depth) % 2
                with k.when(g == 0):
                    k.wait_parity(order.at[m % depth, g], phase ^ first)
                with k.otherwise():
                    k.wait_parity(order.at[m % depth, g], phase)
                # ... the group's MMA or epilogue ...
                k.arrive(order.at[m % depth, (g + 1) % groups])
            if drain:
                # group 0 observes the last `depth` hand-backs of the last group before exit
                with k.when(g == 0):
                    tail = minimum(turns, depth)
                    with k.loop(tail) as j:
                        m = turns - tail + j + depth
                        k.wait_parity(order.at[m % depth, 0], ((m // depth) % 2) ^ first)


@protocol(expect="verified", symbolic=("depth", "turns"))
def ordered_sequence_2wg(k, depth=2, turns=4):
    """Ping-pong GEMM: two math warpgroups, depth 2 (MMA and epilogue), plus a drain in which
    warpgroup 0 observes warpgroup 1's last two arrivals. Correct."""
    k.assume(depth >= 1, turns >= 0)
    ordered_sequence(k, 2, depth, turns)


@protocol(expect="verified", symbolic=("depth", "turns"))
def ordered_sequence_2wg_as_in_cutlass(k, depth=2, turns=4):
    """Exactly CUTLASS's usage, without a drain: the last `depth` arrivals of warpgroup 1 on
    group 0's barriers complete phases nobody waits for. Harmless on hardware (the barriers die
    with the CTA), and these are PTX parity waits, which follow the hardware's rules
    (docs/parity.md): Pallas's rule 2 (completions == waits, BP103) is for barrier_wait."""
    k.assume(depth >= 1, turns >= 0)
    ordered_sequence(k, 2, depth, turns, drain=False)


@protocol(expect="verified", symbolic=("depth", "turns"))
def ordered_sequence_3wg(k, depth=2, turns=3):
    """Three warpgroups taking turns 0 -> 1 -> 2 -> 0 ..., with group 0's drain. Correct."""
    k.assume(depth >= 1, turns >= 0)
    ordered_sequence(k, 3, depth, turns)


@protocol(expect="violation:BP100")
def ordered_sequence_3wg_no_opposite_phase(k, depth=2, turns=3):
    """Group 0 starts with phase 0 like every other group (the "opposite phase" of group 0
    forgotten): everybody waits for somebody else's first arrival."""
    ordered_sequence(k, 3, depth, turns, group0_opposite=False)
