"""`plgpu.barrier_test`: a non-blocking barrier_wait (warp context). When the completion the
thread's private parity bit waits for has happened, the test observes it and the bit flips,
exactly as a successful barrier_wait; otherwise nothing changes. A test whose answer the kernel
ignores can therefore consume a phase, and a poll repeated until it succeeds is a wait."""

from barrierproof import protocol


@protocol(expect="verified", symbolic=("steps",))
def poll_until_full(k, steps=3):
    """The consumer warp polls `full` until it succeeds (a retried test, a wait), then hands the
    slot back."""
    k.threads(2, name="w")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1)
    with k.loop(steps):
        with k.when(k.thread == 0):
            k.barrier_arrive(full)
            k.barrier_wait(empty)
        with k.otherwise():
            k.barrier_test(full, retry=True)
            k.barrier_arrive(empty)


@protocol(expect="verified")
def test_after_an_ordering_wait(k):
    """The producer completes `full` before it signals `go`; once the consumer has waited for
    `go`, its test of `full` is sure to succeed, so the single test observes the completion."""
    k.threads(2, name="w")
    full = k.Barrier(num_arrivals=1)
    go = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(full)
        k.barrier_arrive(go)
    with k.otherwise():
        k.barrier_wait(go)
        k.barrier_test(full)


@protocol(expect="violation:BP100")
def ignored_test_consumes_the_phase(k):
    """The consumer tests `full`, ignores the answer and then waits: when the test succeeded it
    already observed the completion, so the wait waits for the next one, which never comes."""
    k.threads(2, name="w")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(full)
    with k.otherwise():
        k.barrier_test(full)
        k.barrier_wait(full)


@protocol(expect="violation:BP103")
def test_that_may_miss_the_completion(k):
    """The consumer's only observation is one test, which may run before the arrival: the
    kernel can exit with the completion unobserved (Pallas rule 2)."""
    k.threads(2, name="w")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(full)
    with k.otherwise():
        k.barrier_test(full)
