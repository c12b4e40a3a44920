"""Protocols whose bug shows only for some parameter values: `barrierproof prove` must find the
smallest breaking values (by bounded search, then a replayed trace), and `check` shows the bug at
the default values."""

from _pipelines import parity_ring, tma_mma_epilogue, tma_ring as ring
from barrierproof import maximum, protocol


@protocol(expect="violation:BP100", symbolic=("stages", "consumers", "steps"))
def drain_every_stage(k, stages=3, consumers=1, steps=2):
    """The drain waits on all `stages` slots instead of min(steps, stages): correct whenever
    steps >= stages, a deadlock when steps < stages (it waits for a release of a slot that was
    never filled). Smallest breaking values: stages=1, consumers=1, steps=0."""
    ring(k, stages, consumers, steps, tail=stages)


@protocol(expect="violation:BP100", symbolic=("stages", "consumers", "steps"))
def empty_counts_two_consumers(k, stages=2, consumers=1, steps=2):
    """`empty` counts two releases per use, hard-coded: correct only for consumers == 2. With one
    consumer the producer waits forever for a second release. Smallest breaking values: stages=1,
    consumers=1, steps=1."""
    ring(k, stages, consumers, steps, empty_arrivals=2)


@protocol(expect="violation:BP121", symbolic=("stages", "consumers", "steps"))
def reuse_one_iteration_late(k, stages=2, consumers=1, steps=3):
    """The producer starts waiting on `empty` one iteration too late (i > stages instead of
    i >= stages): harmless while steps <= stages; once steps > stages it refills slot 0 while
    the previous copy is still in flight, arriving on a phase with no arrivals left.
    Smallest breaking values: stages=1, consumers=1, steps=2."""
    ring(k, stages, consumers, steps, reuse_after=stages + 1)


@protocol(expect="violation:BP103", symbolic=("steps",))
def pingpong_even_handback(k, steps=3):
    """Ping-pong where warpgroup 0 observes the final hand-back only for an even number of steps
    (a tail iteration written for the even case): an odd number of steps exits with warpgroup 1's
    last completion unobserved. Smallest breaking value: steps=1 (warpgroup 1's one arrival
    completes turn[0], which no thread ever waits on: Pallas rule 2, completions == waits)."""
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    turn = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.loop(steps) as i:
        with k.when(k.thread == 0):
            with k.when(i > 0):
                k.barrier_wait(turn.at[0])
            k.barrier_arrive(turn.at[1])
        with k.otherwise():
            k.barrier_wait(turn.at[1])
            k.barrier_arrive(turn.at[0])
    with k.when((k.thread == 0) & (steps > 0) & (steps % 2 == 0)):
        k.barrier_wait(turn.at[0])


@protocol(expect="violation:BP100", symbolic=("steps",))
def schedule_barrier_odd_tail(k, steps=3):
    """Both warpgroups meet at a schedule barrier every step, but warpgroup 1 skips the meeting of
    the last step when the trip count is odd: warpgroup 0 waits forever. Smallest breaking value:
    steps=1."""
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    sched = k.Barrier(num_arrivals=2)
    with k.loop(steps) as i:
        with k.when((k.thread == 0) | (i < steps - 1) | (steps % 2 == 0)):
            k.barrier_arrive(sched)
            k.barrier_wait(sched)


@protocol(expect="violation:BP100", symbolic=("stages", "consumers", "steps"))
def release_skipped_when_steps_mod_stages_is_1(k, stages=2, consumers=1, steps=3):
    """The consumers skip the release of the last slot when `steps % stages == 1` (a tail case
    written for a partial last round): the producer's drain waits for that release forever.
    Never with one stage; smallest breaking values: stages=2, consumers=1, steps=1."""
    parity_ring(k, stages, consumers, steps,
                release=lambda i: (i != steps - 1) | (steps % stages != 1))


@protocol(expect="violation:BP121", symbolic=("stages", "consumers", "steps"))
def reuse_assumes_double_buffering(k, stages=1, consumers=1, steps=2):
    """CUTLASS-style parity ring whose producer waits for a slot's release only from iteration
    max(stages, 2) on (written for double buffering): correct for every stages >= 2, but with a
    single stage the second load refills the slot before its first phase was consumed.
    Smallest breaking values: stages=1, consumers=1, steps=2."""
    parity_ring(k, stages, consumers, steps, first_reuse=maximum(stages, 2))


@protocol(expect="violation:BP100", symbolic=("stages", "steps"))
def tcgen05_commit_only_even_steps(k, stages=2, steps=3):
    """Blackwell TMA -> tcgen05_mma(barrier=) -> tcgen05_commit_arrive -> epilogue, where the
    MMA warp commits the accumulator only when `steps` is even: with an odd trip count the
    epilogue waits forever for `mma_done`. Smallest breaking values: stages=1, steps=1."""
    k.assume(stages >= 1, steps >= 1)
    tma_mma_epilogue(k, stages, steps, commit_when=steps % 2 == 0)


@protocol(expect="violation:BP104", symbolic=("turns",))
def parity_handoff_half_finished(k, turns=3):
    """wg0 hands wg1 a turn per step and waits for it back, both through parity waits (the
    last hand-back stays unobserved: harmless there), and both arrive on `finished` (count 2)
    at the end; wg1 arrives only after an even number of turns, so the phase stays open at
    exit. Smallest breaking value: turns=1."""
    k.threads(2, name="wg")
    k.assume(turns >= 0)
    turn = k.Barrier(num_arrivals=1)
    back = k.Barrier(num_arrivals=1)
    finished = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 0):
        with k.loop(turns) as m:
            with k.when(m >= 1):
                k.wait_parity(back, (m - 1) % 2)
            k.arrive(turn)
        k.arrive(finished)
    with k.otherwise():
        with k.loop(turns) as m:
            k.wait_parity(turn, m % 2)
            k.arrive(back)
        with k.when(turns % 2 == 0):
            k.arrive(finished)
