"""Hopper-matmul style pipelines: a producer warpgroup streams tiles with TMA into a ring of
`stages` shared-memory slots; `consumers` compute warpgroups read each slot and release it."""

from _pipelines import tma_ring as ring
from barrierproof import minimum, protocol


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def tma_ring(k, stages=2, consumers=2, steps=4):
    """k-stage TMA ring, 2 consumer warpgroups, drained: correct."""
    ring(k, stages, consumers, steps)


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def tma_ring_single_step(k, stages=3, consumers=2, steps=1):
    """Trip count 1 (fewer steps than stages): the drain must not wait for unused slots."""
    ring(k, stages, consumers, steps)


@protocol(expect="verified", symbolic=("stages", "consumers", "steps"))
def prefetch_ring(k, stages=3, consumers=2, steps=4):
    """Prefetch distance 1, the usual Hopper mainloop shape: the producer loads slot 0 before
    its loop, then iteration i loads the tile of step i + 1 into slot (i + 1) % stages while the
    consumers work on step i in slot i % stages. Its loop has one iteration fewer than theirs,
    and a slot is reused only after the consumers released it: correct for every stage count and
    every trip count >= 1 (with 0 steps the prologue's copy would still be in flight at exit)."""
    k.threads(consumers + 1, name="wg")
    k.assume(stages >= 1, consumers >= 1, steps >= 1)    # the prologue load always runs
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    with k.when(k.thread == consumers):            # the TMA producer
        k.copy_gmem_to_smem(full.at[0 % stages], bytes=16384)     # prologue: step 0
        with k.loop(steps - 1) as i:
            with k.when(i + 1 >= stages):          # slot reuse: wait for its release
                k.barrier_wait(empty.at[(i + 1) % stages])
            k.copy_gmem_to_smem(full.at[(i + 1) % stages], bytes=16384)
        tail = minimum(steps, stages)              # observe the last releases before exit
        with k.loop(tail) as j:
            k.barrier_wait(empty.at[(steps - tail + j) % stages])
    with k.otherwise():                            # compute warpgroups
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            k.barrier_arrive(empty.at[i % stages])


@protocol(expect="violation:BP103")
def ring_without_drain(k, stages=2, consumers=2, steps=4):
    """The producer exits without observing the last releases of its slots."""
    ring(k, stages, consumers, steps, drain=False)


@protocol(expect="violation:BP121")
def consumer_lapped_by_producer(k, stages=2, consumers=2, steps=4):
    """The producer never waits on `empty`: it refills a slot whose previous copy has not even
    landed, so its arrive.expect_tx arrives on a phase with no arrivals left (undefined)."""
    ring(k, stages, consumers, steps, drain=False, wait_empty=False)


@protocol(expect="violation:BP101")
def empty_count_too_small(k, stages=2, consumers=2, steps=4):
    """`empty` expects 1 arrival but 2 consumer warpgroups release: each release completes a
    phase, so the second completes one the producer has not observed."""
    ring(k, stages, consumers, steps, empty_arrivals=1)


@protocol(expect="violation:BP100")
def empty_count_too_large(k, stages=2, consumers=2, steps=4):
    """`empty` expects 3 releases per use but only 2 consumers arrive: the producer hangs."""
    ring(k, stages, consumers, steps, empty_arrivals=3)


@protocol(expect="violation:BP100")
def roles_disagree_on_trip_count(k, stages=2, consumers=2, steps=4):
    """The consumers run one iteration more than the producer feeds."""
    ring(k, stages, consumers, steps, consumer_steps=steps + 1)


@protocol(expect="violation:BP101")
def early_exit_skips_wait(k, stages=2, consumers=1, steps=3):
    """The last iteration skips its wait on `full` (an early-return path): the consumer releases
    a slot it never saw filled, letting the producer complete a phase behind its back."""
    ring(k, stages, consumers, steps, skip_last_wait=True)


@protocol(expect="error:BP120")
def index_without_modulo(k, stages=2, steps=4):
    """`full.at[i]` instead of `full.at[i % stages]`: the index runs past num_barriers."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            k.copy_gmem_to_smem(full.at[i], bytes=4096)
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i])
