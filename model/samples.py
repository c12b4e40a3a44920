"""The two smallest protocols, shared by the examples in the docstrings: a one-arrival handoff
(correct) and the same handoff with a barrier that expects two arrivals (BP100: the waiter waits
for an arrival nobody makes)."""

from .dsl import protocol


@protocol(expect="verified")
def handoff(k):
    k.threads(2, name="wg")
    bar = k.Barrier()
    with k.when(k.thread == 0):
        k.barrier_arrive(bar)
    with k.otherwise():
        k.barrier_wait(bar)


@protocol(expect="violation:BP100")
def lost_arrival(k):
    k.threads(2, name="wg")
    bar = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 0):
        k.barrier_arrive(bar)
    with k.otherwise():
        k.barrier_wait(bar)
