"""The smallest protocols: one thread hands a phase to another."""

from barrierproof import protocol


@protocol(expect="verified")
def single_handoff(k):
    """Thread 0 arrives, thread 1 waits: one phase, observed once."""
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(ready)
    with k.otherwise():
        k.barrier_wait(ready)


@protocol(expect="violation:BP100")
def wrong_arrival_count(k):
    """num_arrivals=2 but only one thread arrives: the waiter never wakes."""
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 0):
        k.barrier_arrive(ready)
    with k.otherwise():
        k.barrier_wait(ready)


@protocol(expect="violation:BP101")
def arrivals_without_waiter(k, steps=3):
    """The producer keeps arriving without waiting for the consumer to observe each phase:
    the second completion flips the parity back under a consumer still at the first."""
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps):
            k.barrier_arrive(ready)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(ready)


@protocol(expect="violation:BP102")
def late_join(k):
    """Thread 1 starts waiting on `data` only after it already completed twice."""
    k.threads(2, name="wg")
    data = k.Barrier(num_arrivals=1)
    go = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(data)
        k.barrier_arrive(data)
        k.barrier_arrive(go)
    with k.otherwise():
        k.barrier_wait(go)
        k.barrier_wait(data)


@protocol(expect="violation:BP104")
def pending_arrivals_at_exit(k):
    """One of two expected arrivals: the phase never completes, and nobody notices."""
    k.threads(2, name="wg")
    done = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 0):
        k.barrier_arrive(done)


@protocol(expect="unknown")
def semaphore_handoff(k):
    """Synchronization the model does not cover (written here as `k.unmodeled`, as the Pallas
    frontend keeps an unknown primitive) makes the verdict `unknown`, never `verified`."""
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.unmodeled("semaphore_signal")
        k.barrier_arrive(ready)
    with k.otherwise():
        k.unmodeled("semaphore_wait")
        k.barrier_wait(ready)


@protocol(expect="violation:BP103")
def arrivals_nobody_waits_for(k, steps=2):
    """A `done` barrier the producer arrives on every step, which no thread ever waits on: its
    phases complete unobserved. Pallas's rule 2 (completions == waits over a barrier's
    lifetime) covers a barrier nobody waits on too; JAX's interpreter cannot see it (its exit
    check skips threads that never waited)."""
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps):
            k.barrier_arrive(ready)
            k.barrier_arrive(done)
            k.barrier_wait(ack)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(ready)
            k.barrier_arrive(ack)
