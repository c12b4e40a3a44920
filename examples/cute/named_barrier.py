"""Warpgroup hand-off on a named barrier (`cutlass.pipeline.NamedBarrier`, PTX `bar.sync id,
count`), the way FA4-style kernels order their softmax and correction warps: two warps sync
on barrier 1 with a thread count of 64 after warp 0 has initialised an mbarrier that warp 1
then waits on. The block has four warps; the other two do not take part.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {
    "handoff": "verified",
    "handoff_count_too_large": "violation:BP100",
    "handoff_count_above_the_block": "violation:BP140",
}


@cute.kernel
def handoff_kernel(threads: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    ready = smem.allocate_array(cutlass.Int64, 1)
    sync = pipeline.NamedBarrier(barrier_id=1, num_threads=threads)
    if warp_idx == 0:
        with cute.arch.elect_one():
            cute.arch.mbarrier_init(ready, 1)
        cute.arch.mbarrier_init_fence()
    if warp_idx < 2:
        sync.arrive_and_wait()
    if warp_idx == 0:
        with cute.arch.elect_one():
            cute.arch.mbarrier_arrive(ready)
    if warp_idx == 1:
        cute.arch.mbarrier_wait(ready, 0)


@cute.jit
def handoff_host(a: cute.Tensor, threads: cutlass.Constexpr):
    handoff_kernel(threads).launch(grid=[1, 1, 1], block=[128, 1, 1])


def _compile(threads=64):
    a = make_fake_compact_tensor(cutlass.Float32, (64,))
    return cute.compile(handoff_host, a, threads, options="--generate-line-info")


def handoff():
    """Both warps (64 threads) reach barrier 1: the init is visible to warp 1 after it."""
    return _compile()


def handoff_count_too_large():
    """Barrier 1 counts 96 threads but only two warps (64 threads) arrive: both wait
    forever."""
    return _compile(threads=96)


def handoff_count_above_the_block():
    """A thread count of 160 in a block of 128 threads: found before any exploration."""
    return _compile(threads=160)
