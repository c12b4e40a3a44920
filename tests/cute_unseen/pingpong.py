"""Two math warpgroups taking turns on named barriers (the ping-pong schedule of Hopper's
pingpong GEMM and FA3): warpgroup g waits on its own barrier (`arrive_and_wait`, id 4+g) before
its math and then lets the other one go (`arrive` on the other's id); warpgroup 1 lets 0 start
and skips its last hand-over, so every phase has 256 threads.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.runtime import make_fake_compact_tensor

WG_THREADS = 128
FIRST_ID = 4

EXPECT = {
    "pingpong": "verified",
    "pingpong_no_kickoff": "violation:BP100",
    "pingpong_handover_counts_one_warpgroup": "violation:BP142",
    "pingpong_last_handover_kept": "verified",
}


@cute.kernel
def pingpong_kernel(turns: cutlass.Constexpr, kickoff: cutlass.Constexpr,
                    handover_threads: cutlass.Constexpr, skip_last: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    wg = warp // 4
    mine = pipeline.NamedBarrier(barrier_id=FIRST_ID + wg, num_threads=2 * WG_THREADS)
    other = pipeline.NamedBarrier(barrier_id=FIRST_ID + 1 - wg, num_threads=handover_threads)
    if cutlass.const_expr(kickoff):
        if wg == 1:
            other.arrive()
    for t in cutlass.range(turns):
        mine.arrive_and_wait()
        # ... this warpgroup's math on its own tile ...
        if cutlass.const_expr(skip_last):
            if wg == 0 or t < turns - 1:
                other.arrive()
        else:
            other.arrive()


@cute.jit
def pingpong_host(a: cute.Tensor, turns: cutlass.Constexpr, kickoff: cutlass.Constexpr,
                  handover_threads: cutlass.Constexpr, skip_last: cutlass.Constexpr):
    pingpong_kernel(turns, kickoff, handover_threads, skip_last).launch(
        grid=[1, 1, 1], block=[2 * WG_THREADS, 1, 1])


def _compile(turns=3, kickoff=True, handover_threads=2 * WG_THREADS, skip_last=True):
    a = make_fake_compact_tensor(cutlass.Float32, (16,))
    return cute.compile(pingpong_host, a, turns, kickoff, handover_threads, skip_last)


def pingpong():
    return _compile()


def pingpong_no_kickoff():
    """Nobody lets warpgroup 0 start: both wait on their own barrier forever."""
    return _compile(kickoff=False)


def pingpong_handover_counts_one_warpgroup():
    """The hand-over's NamedBarrier object is sized for one warpgroup (128) while the waiting
    side's says 256: one barrier id, two thread counts in one phase."""
    return _compile(handover_threads=WG_THREADS)


def pingpong_last_handover_kept():
    """Warpgroup 1 hands over after its last turn too: 128 arrivals on barrier 4 that no one
    waits for. A bar.arrive does not wait, and a named barrier need not be drained at exit,
    so this is not a hang."""
    return _compile(skip_last=False)
