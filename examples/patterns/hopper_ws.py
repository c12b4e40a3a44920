"""Hopper warp-specialized matmul as in JAX's hopper_matmul_mgpu.py / emit_pipeline_warp_
specialized and CUTLASS sm90 KernelTmaWarpSpecializedCooperative: three warpgroups, two compute
warpgroups and one memory warpgroup in which a single warp (`core_map` over a WarpMesh,
`pl.when(warp == 0)`) issues the TMA copies into a ring of `stages` slots; both compute
warpgroups read every slot (cooperative: each owns half of the output tile) and release it.
"""

from barrierproof import minimum, protocol


def hopper_ws(k, stages, steps, *, only_warp0=True, drain="min"):
    k.threads(3, name="wg")
    k.warps(4)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=2, num_barriers=stages)
    with k.when(k.thread == 2):                                   # memory warpgroup
        with k.warp_region() as w:
            with k.when((w == 0) if only_warp0 else (w >= 0)):
                with k.loop(steps) as i:
                    with k.when(i >= stages):
                        k.barrier_wait(empty.at[i % stages])
                    k.copy_gmem_to_smem(full.at[i % stages], bytes=16384)
                if drain == "min":
                    tail = minimum(steps, stages)
                    with k.loop(tail) as j:
                        k.barrier_wait(empty.at[(steps - tail + j) % stages])
                else:                                             # "all": every slot
                    with k.loop(stages) as j:
                        k.barrier_wait(empty.at[(steps - stages + j) % stages])
    with k.otherwise():                                           # compute warpgroups
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            k.barrier_arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def hopper_ws_matmul(k, stages=2, steps=3):
    """One TMA warp feeding two compute warpgroups, drained: correct."""
    k.assume(stages >= 1, steps >= 0)
    hopper_ws(k, stages, steps)


@protocol(expect="violation:BP121")
def hopper_ws_every_warp_issues(k, stages=2, steps=2):
    """The `warp == 0` guard is missing: all four warps of the memory warpgroup issue each copy,
    so full[s] (count 1) receives a second arrive.expect_tx while the first copy is still in
    flight: pending goes below zero (undefined behaviour)."""
    hopper_ws(k, stages, steps, only_warp0=False)


@protocol(expect="violation:BP100")
def hopper_ws_drain_assumes_full_ring(k, stages=3, steps=2):
    """The drain waits on all `stages` slots (steps < stages): it waits on a slot that was never
    filled, whose release never comes."""
    hopper_ws(k, stages, steps, drain="all")
