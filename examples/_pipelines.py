"""Pipeline bodies shared by several example files: each correct protocol and its buggy variants
are one body with a few knobs, so a bug example differs from the correct one by what its knob
says. (The loader skips files whose name starts with `_`: this one holds no protocol.)"""

from barrierproof import minimum


def tma_ring(k, stages, consumers, steps, *, drain=True, tail=None, wait_empty=True,
             reuse_after=None, empty_arrivals=None, consumer_steps=None, skip_last_wait=False):
    """A producer warpgroup streams tiles with TMA into a ring of `stages` slots; `consumers`
    compute warpgroups wait on `full` and release `empty`. The knobs break it: no drain, a drain
    of `tail` slots, no wait on `empty`, first reuse at `reuse_after`, a wrong `empty` count,
    consumers running `consumer_steps`, or skipping their last wait."""
    k.threads(consumers + 1, name="wg")
    k.assume(stages >= 1, consumers >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers if empty_arrivals is None else empty_arrivals,
                      num_barriers=stages)
    with k.when(k.thread == consumers):            # the TMA producer
        with k.loop(steps) as i:
            if wait_empty:
                with k.when(i >= (stages if reuse_after is None else reuse_after)):
                    k.barrier_wait(empty.at[i % stages])     # slot reuse: wait for its release
            k.copy_gmem_to_smem(full.at[i % stages], bytes=16384)
        if drain:                                  # observe the last releases before exit
            last = minimum(steps, stages) if tail is None else tail
            with k.loop(last) as j:
                k.barrier_wait(empty.at[(steps - last + j) % stages])
    with k.otherwise():                            # compute warpgroups
        with k.loop(steps if consumer_steps is None else consumer_steps) as i:
            if skip_last_wait:
                with k.when(i < steps - 1):
                    k.barrier_wait(full.at[i % stages])
            else:
                k.barrier_wait(full.at[i % stages])
            k.barrier_arrive(empty.at[i % stages])


def parity_ring(k, stages, consumers, steps, *, first_reuse=None, release=None):
    """A CUTLASS-style ring with explicit phase bits: expect_tx + TMA load into `full`,
    consumers release `empty` with a plain arrive (when `release(i)` holds, if given); the
    producer waits for a release from iteration `first_reuse` (default `stages`) on and drains
    the last releases."""
    k.threads(consumers + 1, name="wg")
    k.assume(stages >= 1, consumers >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    with k.when(k.thread == consumers):            # the TMA producer
        with k.loop(steps) as i:
            with k.when(i >= (stages if first_reuse is None else first_reuse)):
                k.wait_parity(empty.at[i % stages], ((i // stages) % 2) ^ 1)
            k.arrive_expect_tx(full.at[i % stages], 8192)
            k.tma_load(full.at[i % stages], 8192)
        tail = minimum(steps, stages)
        with k.loop(tail) as j:
            v = steps - tail + j
            k.wait_parity(empty.at[v % stages], (v // stages) % 2)
    with k.otherwise():                            # compute warpgroups
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % stages], (i // stages) % 2)
            if release is None:
                k.arrive(empty.at[i % stages])
            else:
                with k.when(release(i)):
                    k.arrive(empty.at[i % stages])


def tma_mma_epilogue(k, stages, steps, *, commit_when=None):
    """Blackwell: warp 0 loads, warp 1 issues tcgen05_mma that release each slot when done, then
    commits to `mma_done` (only when `commit_when` holds, if given); the whole warpgroup waits
    on it for the epilogue."""
    k.threads(1, name="wg")
    k.warps(4)
    loaded = k.Barrier(num_arrivals=1, num_barriers=stages)
    consumed = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    mma_done = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    with k.warp_region() as w:
        with k.when(w == 0):                          # TMA warp
            with k.loop(steps) as i:
                with k.when(i >= stages):
                    k.barrier_wait(consumed.at[i % stages])
                k.copy_gmem_to_smem(loaded.at[i % stages], bytes=32768)
            tail = minimum(steps, stages)
            with k.loop(tail) as j:
                k.barrier_wait(consumed.at[(steps - tail + j) % stages])
        with k.when(w == 1):                          # MMA warp
            with k.loop(steps) as i:
                k.barrier_wait(loaded.at[i % stages])
                k.tcgen05_mma(barrier=consumed.at[i % stages])
            if commit_when is None:
                k.tcgen05_commit_arrive(mma_done)
            else:
                with k.when(commit_when):
                    k.tcgen05_commit_arrive(mma_done)
    k.barrier_wait(mma_done)                          # epilogue
