"""A ring of shared-memory slots on raw `cute.arch.mbarrier_*` calls: a producer warp fills
slot i % stages and signals `full` from one elected lane; a consumer warp waits on `full`,
then every one of its 32 lanes arrives on `empty` (so `empty` expects 32 arrivals). Each side
tracks its parity by hand: it flips each time the slot index wraps.
"""

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {
    "ring": "verified",
    "ring_parity_not_toggled": "violation:BP101",
    "ring_empty_counts_one_arrival": "violation:BP121",
    "ring_without_init_fence_and_sync": "violation:BP147",
    "ring_trip_count_at_run_time": "verified",
    "ring_consumer_tries_first": "verified",
}


@cute.kernel
def ring_kernel(steps: cutlass.Int32, stages: cutlass.Constexpr, trips: cutlass.Constexpr,
                empty_arrivals: cutlass.Constexpr, toggle: cutlass.Constexpr,
                sync_after_init: cutlass.Constexpr, dynamic_trips: cutlass.Constexpr,
                try_first: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    full = smem.allocate_array(cutlass.Int64, stages)
    empty = smem.allocate_array(cutlass.Int64, stages)
    if warp_idx == 0:
        with cute.arch.elect_one():
            for s in cutlass.range_constexpr(stages):
                cute.arch.mbarrier_init(full + s, 1)
                cute.arch.mbarrier_init(empty + s, empty_arrivals)
    if cutlass.const_expr(sync_after_init):
        cute.arch.mbarrier_init_fence()
        cute.arch.barrier()
    n = trips
    if cutlass.const_expr(dynamic_trips):
        n = steps

    if warp_idx == 0:                      # producer
        for i in cutlass.range(n):
            slot = i % stages
            phase = (i // stages) % 2 if cutlass.const_expr(toggle) else 0
            cute.arch.mbarrier_wait(empty + slot, phase ^ 1)
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive(full + slot)
    if warp_idx == 1:                      # consumer: all 32 lanes release
        for i in cutlass.range(n):
            slot = i % stages
            phase = (i // stages) % 2 if cutlass.const_expr(toggle) else 0
            if cutlass.const_expr(try_first):
                if not cute.arch.mbarrier_try_wait(full + slot, phase):
                    cute.arch.mbarrier_wait(full + slot, phase)
            else:
                cute.arch.mbarrier_wait(full + slot, phase)
            cute.arch.mbarrier_arrive(empty + slot)


@cute.jit
def ring_host(a: cute.Tensor, steps: cutlass.Int32, stages: cutlass.Constexpr,
              trips: cutlass.Constexpr, empty_arrivals: cutlass.Constexpr,
              toggle: cutlass.Constexpr, sync_after_init: cutlass.Constexpr,
              dynamic_trips: cutlass.Constexpr, try_first: cutlass.Constexpr):
    ring_kernel(steps, stages, trips, empty_arrivals, toggle, sync_after_init,
                dynamic_trips, try_first).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _compile(stages=2, trips=5, empty_arrivals=32, toggle=True, sync_after_init=True,
             dynamic_trips=False, try_first=False):
    a = make_fake_compact_tensor(cutlass.Float32, (128,))
    return cute.compile(ring_host, a, cutlass.Int32(trips), stages, trips, empty_arrivals,
                        toggle, sync_after_init, dynamic_trips, try_first,
                        options="--generate-line-info")


def ring():
    """Two slots, five steps: the parity flips on every wrap on both sides."""
    return _compile()


def ring_parity_not_toggled():
    """Both sides wait on parity 0 (producer: 1) on every lap: on the second lap a wait
    passes on the completion it already observed, so the producer refills a slot the consumer
    has not released (parity aliasing)."""
    return _compile(toggle=False)


def ring_empty_counts_one_arrival():
    """`empty` is initialised for one arrival, but all 32 lanes of the consumer warp arrive:
    the phase completes at the first lane and the other 31 arrive past its count."""
    return _compile(empty_arrivals=1)


def ring_without_init_fence_and_sync():
    """No fence and no CTA barrier after the init: the consumer warp may wait on a barrier
    whose init it cannot see yet."""
    return _compile(sync_after_init=False)


def ring_trip_count_at_run_time():
    """The trip count is a kernel argument, known only at run time: the frontend reads the
    kernel at several values of `steps` and joins them into one IR whose loops run `steps`
    times, a parameter (`check` explores steps = 4; `prove` answers for every steps >= 1)."""
    return _compile(dynamic_trips=True)


def ring_consumer_tries_first():
    """The consumer polls with a non-blocking try_wait and blocks on the same phase only if
    it failed (what a pipeline's consumer_try_wait token does): either way it has observed
    that phase, so the frontend reads it as one wait."""
    return _compile(try_first=True)
