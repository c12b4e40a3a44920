"""Global semaphores (`pl.get_global(plgpu.SemaphoreType.REGULAR)`, `pl.semaphore_signal`,
`pl.semaphore_wait`), as JAX's all-gather collective matmul uses them: every block signals once
per step and every thread waits, without decrementing, until all blocks of the step have
signalled.

A semaphore is one counter for the whole grid. The model checks one cluster; `copies=` says how
many clusters of the grid run the same program and signal in lockstep with it, so each modelled
signal counts that many times (the Pallas frontend sets it to the grid size). Waits on such a
counter must not decrement (a monotone counter makes the lockstep clusters interchangeable);
a decrementing one is reported as unmodelled (BP190).
"""

from barrierproof import protocol


def all_signal_then_wait(k, steps, blocks, copies, *, wait_for=None, decrement=False):
    k.cluster(x=blocks)
    k.threads(2, name="wg")
    sem = k.Semaphore(copies=copies)
    done = k.Barrier(num_arrivals=2)       # the block's own threads meet after each step
    with k.loop(steps) as s:
        with k.when(k.thread == 0):
            k.semaphore_signal(sem)
        total = blocks * copies * (s + 1) if wait_for is None else wait_for(s)
        k.semaphore_wait(sem, total, decrement=decrement)
        k.barrier_arrive(done)
        k.barrier_wait(done)


@protocol(expect="verified", symbolic=("steps",))
def step_semaphore_two_blocks(k, steps=3):
    """Both blocks of a 2-block cluster signal once per step; everyone waits for all of them."""
    k.assume(steps >= 0)
    all_signal_then_wait(k, steps, blocks=2, copies=1)


@protocol(expect="verified", symbolic=("steps",))
def step_semaphore_in_lockstep(k, steps=3):
    """One modelled cluster standing for 8 that signal alike (copies=8)."""
    k.assume(steps >= 0)
    all_signal_then_wait(k, steps, blocks=1, copies=8)


@protocol(expect="violation:BP100")
def step_semaphore_waits_for_one_signal_too_many(k, steps=2):
    """The wait counts one block more than the grid has: nobody passes the first step."""
    all_signal_then_wait(k, steps, blocks=2, copies=1, wait_for=lambda s: 2 * (s + 1) + 1)


@protocol(expect="unknown")
def step_semaphore_decrements_in_lockstep(k, steps=2):
    """A decrementing wait on a counter the lockstep clusters share: outside the model."""
    all_signal_then_wait(k, steps, blocks=1, copies=8, decrement=True)
