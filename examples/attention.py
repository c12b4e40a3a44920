"""Attention-style schedules: two compute warpgroups take turns on the tensor core."""

from barrierproof import protocol


@protocol(expect="verified", symbolic=("steps",))
def pingpong_schedule(k, steps=4):
    """FlashAttention-3 ping-pong: warpgroup 0 goes first; each hands the turn to the other
    after its matmul. Warpgroup 0 observes the final hand-back before it exits."""
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
    with k.when((k.thread == 0) & (steps > 0)):
        k.barrier_wait(turn.at[0])


@protocol(expect="verified", symbolic=("steps",))
def schedule_barrier(k, steps=4):
    """Pallas attention's schedule barrier: both warpgroups arrive, then wait, every step."""
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    sched = k.Barrier(num_arrivals=2)
    with k.loop(steps):
        k.barrier_arrive(sched)
        k.barrier_wait(sched)


@protocol(expect="violation:BP103")
def pingpong_missing_final_wait(k, steps=3):
    """Warpgroup 0 exits without observing warpgroup 1's last hand-back."""
    k.threads(2, name="wg")
    turn = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.loop(steps) as i:
        with k.when(k.thread == 0):
            with k.when(i > 0):
                k.barrier_wait(turn.at[0])
            k.barrier_arrive(turn.at[1])
        with k.otherwise():
            k.barrier_wait(turn.at[1])
            k.barrier_arrive(turn.at[0])


@protocol(expect="violation:BP101")
def leader_overruns_warps(k, steps=2):
    """A leader warp arrives on a per-step barrier that all four warps wait on, without waiting
    for them: its next arrival completes a phase a warp still waiting has not observed."""
    k.threads(1, name="wg")
    k.warps(4)
    step = k.Barrier(num_arrivals=1)
    with k.warp_region() as w:
        with k.loop(steps):
            with k.when(w == 0):
                k.barrier_arrive(step)
            k.barrier_wait(step)


@protocol(expect="violation:BP101")
def surplus_arrivals(k, steps=2):
    """Each consumer releases twice per step on a barrier counting one release per consumer:
    a phase completes early, before the producer observed the previous one."""
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 2):
        with k.loop(steps):
            k.barrier_arrive(full)
            k.barrier_wait(empty)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(full)
            k.barrier_arrive(empty)
            k.barrier_arrive(empty)
