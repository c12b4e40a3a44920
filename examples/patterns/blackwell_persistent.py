"""Blackwell (sm100) persistent GEMM, as in CUTLASS PipelineTmaUmmaAsync /
PipelineUmmaAsync (cutlass/pipeline/sm100_pipeline.hpp) and JAX's blackwell_matmul_mgpu.py:

- warp 0 (TMA) fills a ring of `stages` smem slots; warp 1 (MMA) waits each slot, issues
  tcgen05_mma and releases the slot with tcgen05_commit_arrive(empty[s]) (the commit arrives
  once the MMAs reading the slot have completed);
- the accumulator lives in TMEM, double buffered: after a tile's last MMA the MMA warp commits
  to acc_full[a]; epilogue warps 2 and 3 wait acc_full[a], read TMEM, and arrive on acc_empty[a]
  (count 2) so the MMA warp may reuse that accumulator two tiles later; the MMA warp drains
  acc_empty at the end (accumulator_pipeline.producer_tail);
- a CLC (`try_cluster_cancel`) scheduler: the scheduler queries the next tile asynchronously;
  the response arrives on clc_full; every consumer of the response (scheduler and worker)
  releases clc_empty before the next query may overwrite it.
"""

from barrierproof import minimum, protocol


def umma_persistent(k, stages, tiles, ksteps, *, acc_empty_count=2, mma_waits_acc=True):
    k.threads(1, name="wg")
    k.warps(4)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    acc_full = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
    acc_empty = k.Barrier(num_arrivals=acc_empty_count, num_barriers=2)
    steps = tiles * ksteps
    with k.warp_region() as w:
        with k.when(w == 0):                                       # TMA warp
            with k.loop(steps) as i:
                with k.when(i >= stages):
                    k.barrier_wait(empty.at[i % stages])
                k.copy_gmem_to_smem(full.at[i % stages], bytes=16384)
            tail = minimum(steps, stages)
            with k.loop(tail) as j:
                k.barrier_wait(empty.at[(steps - tail + j) % stages])
        with k.when(w == 1):                                       # MMA warp
            with k.loop(tiles) as t:
                if mma_waits_acc:
                    with k.when(t >= 2):
                        k.barrier_wait(acc_empty.at[t % 2])
                with k.loop(ksteps) as kk:
                    i = t * ksteps + kk
                    k.barrier_wait(full.at[i % stages])
                    k.tcgen05_mma()
                    k.tcgen05_commit_arrive(empty.at[i % stages])
                k.tcgen05_commit_arrive(acc_full.at[t % 2])
            acc_tail = minimum(tiles, 2)
            with k.loop(acc_tail) as j:
                k.barrier_wait(acc_empty.at[(tiles - acc_tail + j) % 2])
        with k.when(w >= 2):                                       # epilogue warps
            with k.loop(tiles) as t:
                k.barrier_wait(acc_full.at[t % 2])
                k.barrier_arrive(acc_empty.at[t % 2])


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def umma_persistent_gemm(k, stages=2, tiles=3, ksteps=2):
    """TMA -> tcgen05 ring with commit-released slots, double-buffered TMEM accumulator with
    per-tile acc_full / acc_empty, drained on both sides: correct."""
    k.assume(stages >= 1, tiles >= 0, ksteps >= 1)
    umma_persistent(k, stages, tiles, ksteps)


@protocol(expect="violation:BP101")
def umma_mma_reuses_accumulator_without_wait(k, stages=2, tiles=3, ksteps=1):
    """The MMA warp starts tile t+2 in accumulator t%2 without waiting acc_empty: its commit
    completes acc_full[0] a second time while the epilogue warps have not observed the first."""
    umma_persistent(k, stages, tiles, ksteps, mma_waits_acc=False)



def clc(k, tiles, *, wait_empty=True, drain=True):
    k.threads(2, name="wg")
    clc_full = k.Barrier(num_arrivals=1)
    clc_empty = k.Barrier(num_arrivals=2)
    with k.when(k.thread == 0):                                    # scheduler + worker
        with k.loop(tiles) as t:
            if wait_empty:
                with k.when(t > 0):
                    k.barrier_wait(clc_empty)
            k.try_cluster_cancel(clc_full)
            k.barrier_wait(clc_full)
            k.barrier_arrive(clc_empty)
        if drain:
            with k.when(tiles > 0):
                k.barrier_wait(clc_empty)
    with k.otherwise():                                            # other worker
        with k.loop(tiles):
            k.barrier_wait(clc_full)
            k.barrier_arrive(clc_empty)


@protocol(expect="verified", symbolic=("tiles",))
def clc_scheduler(k, tiles=3):
    """try_cluster_cancel response pipeline with one response slot: correct (the last query
    is the one that reports "no more tiles")."""
    k.assume(tiles >= 0)
    clc(k, tiles)


@protocol(expect="violation:BP101")
def clc_query_before_release(k, tiles=3):
    """The scheduler issues the next try_cluster_cancel without waiting clc_empty: two responses
    can arrive before the other worker observes the first."""
    clc(k, tiles, wait_empty=False, drain=False)
