"""CUTLASS-style PipelineTmaAsync: explicit phase bits, arrive.expect_tx and bulk copies that
only complete_tx."""

from barrierproof import protocol


def pipeline(k, stages, consumers, steps, *, expect_bytes=8192, copy_bytes=8192, copy=True,
             consumer_parity=None, tail=True):
    k.threads(consumers + 1, name="wg")
    k.assume(stages >= 1, consumers >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    with k.when(k.thread == consumers):                  # producer
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ 1)         # producer_acquire
            k.arrive_expect_tx(full.at[s], expect_bytes)
            if copy:
                k.tma_load(full.at[s], copy_bytes)
        if tail:                                           # producer_tail
            with k.loop(stages) as j:
                i = steps + j
                k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)
    with k.otherwise():                                    # consumers
        with k.loop(steps) as i:
            s = i % stages
            parity = (i // stages) % 2 if consumer_parity is None else consumer_parity(i)
            k.wait_parity(full.at[s], parity)             # consumer_wait
            k.arrive(empty.at[s])                          # consumer_release


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def pipeline_tma_async(k, stages=2, consumers=2, steps=4):
    """The full pipeline with producer tail."""
    pipeline(k, stages, consumers, steps)


@protocol(expect="violation:BP130")
def expect_tx_larger_than_copy(k, stages=2, consumers=1, steps=2):
    """expect_tx announces 8192 bytes, the copy delivers 4096: the phase never completes."""
    pipeline(k, stages, consumers, steps, copy_bytes=4096)


@protocol(expect="violation:BP130")
def expect_tx_without_copy(k, stages=2, consumers=1, steps=2):
    """arrive.expect_tx with no bulk copy behind it."""
    pipeline(k, stages, consumers, steps, copy=False)


@protocol(expect="violation:BP101")
def ring_parity_on_single_slot(k, steps=3):
    """The ring formula (i // stages) % 2 with stages=2 used on a single-slot barrier: the wait
    of iteration 1 asks for the parity of iteration 0 again. Where it comes before the second
    copy lands it passes at once, after the completion it already saw (stale data: a race where
    memory is declared); where the copy landed first the barrier is a phase past that one and
    it never passes. The same wait returns after completion 1 on one schedule and is passed by
    completion 2 on the other: parity aliasing, reported with both schedules (the deadlock
    follows from it)."""
    k.threads(2, name="wg")
    done = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            k.arrive_expect_tx(done, 1024)
            k.tma_load(done, 1024)
            k.wait_parity(ack, i % 2)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(done, (i // 2) % 2)
            k.arrive(ack)


@protocol(expect="violation:BP121")
def two_producers_expect_tx(k):
    """Two producers arrive.expect_tx on a barrier that counts one arrival: the second arrival
    comes while the bytes are still in flight, driving the pending count below zero."""
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread < 2):
        k.arrive_expect_tx(full, 4096)
        k.tma_load(full, 4096)
    with k.otherwise():
        k.wait_parity(full, 0)


@protocol(expect="violation:BP101")
def parity_not_toggled(k, stages=1, consumers=1, steps=3):
    """The consumer always waits for parity 0: on the second use of the slot its wait passes at
    once on the phase it already saw (after completion 1), or, once the second fill is in,
    never (completion 2 has the parity it waits out): parity aliasing, reported with both
    schedules (the deadlock follows from it)."""
    pipeline(k, stages, consumers, steps, consumer_parity=lambda i: 0)
