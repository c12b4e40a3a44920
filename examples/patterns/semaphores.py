"""Global semaphores (`pl.get_global(plgpu.SemaphoreType.REGULAR)`, `pl.semaphore_signal`,
`pl.semaphore_wait`), as JAX's all-gather collective matmul uses them: every block signals once
per step and every thread waits, without decrementing, until all blocks of the step have
signalled.

A semaphore is one counter for the whole grid. The model checks one cluster; `copies=` says how
many clusters of the grid run the same program and signal in lockstep with it, so each modelled
signal counts that many times (the Pallas frontend sets it to the grid size). While waits only read
the counter, one modelled cluster stands for all of them. A decrementing wait takes from the
counter what the other clusters' waits then lack: the lockstep clusters are then modelled as
blocks of their own, all taking from the one counter (up to 16 blocks; beyond, or with a
cluster barrier that would span them, the wait is reported as unmodelled, BP190).
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


@protocol(expect="violation:BP100")
def step_semaphore_decrements_in_lockstep(k, steps=2):
    """A decrementing wait on a counter the 8 lockstep clusters share: the first thread through
    takes all 8 signals of the step, every other thread waits for 8 more, which only a cluster
    whose two threads both got through would send."""
    all_signal_then_wait(k, steps, blocks=1, copies=8, decrement=True)


@protocol(expect="verified", symbolic=("steps",))
def step_semaphore_each_takes_its_own_signal(k, steps=2):
    """Decrementing waits that take one signal each, and every thread of the 2 lockstep
    clusters signals once per step: no thread can starve another."""
    k.assume(steps >= 0)
    k.threads(2, name="wg")
    sem = k.Semaphore(copies=2)
    with k.loop(steps):
        k.semaphore_signal(sem)
        k.semaphore_wait(sem, 1, decrement=True)


def _parallel_signals(k, sent_needed):
    """`plgpu.semaphore_signal_parallel` to two semaphores (one fence for both signals, which
    land in no guaranteed order): the producer tells the consumer that a tile was sent and that
    its buffer is ready; the consumer waits for both, in its own order."""
    k.threads(2, name="wg")
    sent = k.Semaphore(name="sent")
    ready = k.Semaphore(name="ready")
    with k.loop(2):
        with k.when(k.thread == 0):
            k.semaphore_signal_parallel(sent, ready)
        with k.otherwise():
            k.semaphore_wait(ready, 1)
            k.semaphore_wait(sent, sent_needed)


@protocol(expect="verified")
def parallel_signals_to_two_semaphores(k):
    """The consumer takes one signal of each per step, whichever lands first."""
    _parallel_signals(k, 1)


@protocol(expect="violation:BP100")
def parallel_signals_waited_twice(k):
    """The consumer takes two `sent` signals in the first step: the second step's never comes."""
    _parallel_signals(k, 2)
