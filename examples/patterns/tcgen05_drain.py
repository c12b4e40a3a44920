"""An MMA warp that releases each ring slot by a tcgen05 commit and drains by waiting for its last
release: the CUTLASS / CuTe DSL / Gluon idiom whose producer's first wait on a fresh `empty` slot
asks for parity 1 (CUTLASS's "producer start phase 1", Gluon's `mbarrier.wait(empty, phase ^ 1)`)
and passes at once. The tcgen05 queue completes in issue order, so the last release landing means
every earlier one has: nothing is in flight at exit. Beside each correct ring, the twins a
changed bit or a missing wait breaks (verdicts from `barrierproof check`)."""

from barrierproof import protocol


def _ring(k, steps, stages, *, stated=False, consumer_bit=0, producer_waits=True, drain=True):
    k.threads(2, name="w")      # 0: TMA producer, 1: MMA issuer
    k.assume(steps >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    with k.when(k.thread == 0):
        with k.loop(steps) as p:
            if producer_waits:
                if stated:
                    k.wait_parity(empty.at[p % stages], phase=p // stages - 1)
                else:
                    k.wait_parity(empty.at[p % stages], (p // stages + 1) % 2)
            k.copy_gmem_to_smem(full.at[p % stages], bytes=8192)
    with k.when(k.thread == 1):
        with k.loop(steps) as p:
            if stated:
                k.wait_parity(full.at[p % stages], phase=p // stages)
            else:
                k.wait_parity(full.at[p % stages], (p // stages + consumer_bit) % 2)
            k.tcgen05_commit_arrive(empty.at[p % stages])
        if drain:
            last = steps - 1
            if stated:
                k.wait_parity(empty.at[last % stages], phase=last // stages)
            else:
                k.wait_parity(empty.at[last % stages], (last // stages) % 2)


@protocol(expect="verified", symbolic=("steps",))
def mma_ring_bare_parity(k, steps=4, stages=2):
    """Bare parity bits, as PTX and a compiled kernel carry them."""
    _ring(k, steps, stages)


@protocol(expect="verified", symbolic=("steps",))
def mma_ring_stated_phase(k, steps=4, stages=2):
    """The same ring with CUTLASS's PipelineState phases stated (`phase=`)."""
    _ring(k, steps, stages, stated=True)


@protocol(expect="violation:BP101", symbolic=("steps",))
def mma_ring_consumer_wrong_parity(k, steps=4, stages=2):
    """The MMA warp waits on `full` with the producer's start parity: its first wait passes on
    the fresh barrier before any load (parity aliasing)."""
    _ring(k, steps, stages, consumer_bit=1)


@protocol(expect="violation:BP121", symbolic=("steps",))
def mma_ring_producer_never_acquires(k, steps=4, stages=2):
    """The producer refills a slot without waiting for its release."""
    _ring(k, steps, stages, producer_waits=False)


@protocol(expect="violation:BP105", symbolic=("steps",))
def mma_ring_no_drain(k, steps=4, stages=2):
    """Nobody waits for the last releases: the kernel can exit with commits in flight."""
    _ring(k, steps, stages, drain=False)


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def persistent_umma_gemm(k, tiles=3, ksteps=2, stages=2):
    """A persistent UMMA GEMM: a TMA warp, an MMA warp and an epilogue warp over tiles x K-steps,
    a double-buffered TMEM accumulator (acc_full / acc_empty), producer-start-phase-1 bare
    parities and no assumption on the counts. Nobody drains `empty`: the MMA warp's per-tile
    commit on `acc_full`, which the epilogue waits for, is the last op of its queue."""
    k.threads(3, name="w")      # 0: TMA, 1: MMA, 2: epilogue
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
    acc_full = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
    acc_empty = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.when(k.thread == 0):
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                p = t * ksteps + kk
                k.wait_parity(empty.at[p % stages], (p // stages + 1) % 2)
                k.copy_gmem_to_smem(full.at[p % stages], bytes=8192)
    with k.when(k.thread == 1):
        with k.loop(tiles) as t:
            k.wait_parity(acc_empty.at[t % 2], (t // 2 + 1) % 2)
            with k.loop(ksteps) as kk:
                p = t * ksteps + kk
                k.wait_parity(full.at[p % stages], (p // stages) % 2)
                k.tcgen05_mma()
                k.tcgen05_commit_arrive(empty.at[p % stages])
            k.tcgen05_commit_arrive(acc_full.at[t % 2])
    with k.when(k.thread == 2):
        with k.loop(tiles) as t:
            k.wait_parity(acc_full.at[t % 2], (t // 2) % 2)
            k.arrive(acc_empty.at[t % 2])
