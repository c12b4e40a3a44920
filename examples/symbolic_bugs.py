"""Protocols whose bug shows only for some parameter values: `barrierproof prove` must find the
smallest breaking values (by bounded search, then a replayed trace), and `check` shows the bug at
the default values."""

from barrierproof import minimum, protocol


def ring(k, stages, consumers, steps, *, tail=None, empty_arrivals=None, reuse_after=None):
    k.threads(consumers + 1, name="wg")
    k.assume(stages >= 1, consumers >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers if empty_arrivals is None else empty_arrivals,
                      num_barriers=stages)
    with k.when(k.thread == consumers):            # the TMA producer
        with k.loop(steps) as i:
            first_reuse = stages if reuse_after is None else reuse_after
            with k.when(i >= first_reuse):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=16384)
        drain = minimum(steps, stages) if tail is None else tail
        with k.loop(drain) as j:
            k.barrier_wait(empty.at[(steps - drain + j) % stages])
    with k.otherwise():                            # compute warpgroups
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            k.barrier_arrive(empty.at[i % stages])


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
    last completion unobserved. Smallest breaking value: steps=3 (with one step warpgroup 0 never
    waits on that barrier, so it does not participate in it)."""
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
