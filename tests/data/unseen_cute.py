"""CuTe DSL kernels a new user wrote in the style of CUTLASS's CuTe DSL examples: a Hopper
mainloop streaming A and B through one `PipelineTmaAsync` ring to a consumer warpgroup that reads
the stages, and a persistent kernel on raw `cute.arch.mbarrier_*` calls and one TMA barrier,
each correct and with the bugs people report, plus constructs outside the model (BP190); then
the participant API (`make_participants` handles, `try_acquire`, `defer_sync`), warps taking
turns through `PipelineOrder`, a wait written as a spin on `mbarrier_try_wait`, and an Ampere
cp.async ring waited by commit group (its last group empty: it counts, and is no copy left
running at exit), and threads storing strided rows of a column-major tile (the warps' elements
interleave without overlapping), by cp.async and by plain stores.
Checked by tests/test_unseen_frontends.py against EXPECT (decided before running)."""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.cutlass_dsl import dsl_user_op

BM, BN, BK = 64, 64, 64
STAGES = 2
CONSUMER_WARPS = 2
PRODUCER_WARP = CONSUMER_WARPS


def _swizzled(rows, cols, stages):
    return cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0,
                                     cute.make_ordered_layout((rows, cols, stages),
                                                              order=(1, 0, 2)))


def _tma_load(tensor, layout, rows, cols):
    return cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), tensor,
                                       cute.slice_(layout, (None, None, 0)), (rows, cols))


# -- 1. A and B through one PipelineTmaAsync ring, read by a consumer warpgroup ------------

@cute.struct
class RingStorage:
    bars: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]


@cute.kernel
def ab_kernel(a_atom: cute.CopyAtom, mA: cute.Tensor, b_atom: cute.CopyAtom, mB: cute.Tensor,
              a_layout: cute.ComposedLayout, b_layout: cute.ComposedLayout,
              k_tiles: cutlass.Constexpr, count_b: cutlass.Constexpr,
              consumer_arrivals: cutlass.Constexpr, release_first: cutlass.Constexpr,
              tail: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(RingStorage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=128,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=128,
                              swizzle=b_layout.inner)
    a_bytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(a_layout, (None, None, 0)))
    b_bytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(b_layout, (None, None, 0)))
    tx = a_bytes
    if cutlass.const_expr(count_b):
        tx = a_bytes + b_bytes
    ring = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.bars.data_ptr(), num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumer_arrivals),
        tx_count=tx)
    gA = cute.local_tile(mA, (BM, BK), (0, None))
    gB = cute.local_tile(mB, (BN, BK), (0, None))
    tAsA, tAgA = cpasync.tma_partition(a_atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(b_atom, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))

    if warp == PRODUCER_WARP:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(k_tiles):
            ring.producer_acquire(state)
            full = ring.producer_get_barrier(state)
            cute.copy(a_atom, tAgA[(None, k)], tAsA[(None, state.index)], tma_bar_ptr=full)
            cute.copy(b_atom, tBgB[(None, k)], tBsB[(None, state.index)], tma_bar_ptr=full)
            ring.producer_commit(state)
            state.advance()
        if cutlass.const_expr(tail):
            ring.producer_tail(state)

    if warp < CONSUMER_WARPS:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        acc = cute.make_rmem_tensor((8,), cutlass.Float32)
        acc.fill(0.0)
        lane = cute.arch.lane_idx()
        for k in cutlass.range(k_tiles):
            ring.consumer_wait(state)
            if cutlass.const_expr(release_first):
                ring.consumer_release(state)
            for i in cutlass.range_constexpr(8):
                acc[i] += sA[(lane, warp * 8 + i, state.index)].to(cutlass.Float32) * \
                    sB[(lane, warp * 8 + i, state.index)].to(cutlass.Float32)
            if cutlass.const_expr(not release_first):
                ring.consumer_release(state)
            state.advance()


@cute.jit
def ab_host(mA: cute.Tensor, mB: cute.Tensor, k_tiles: cutlass.Constexpr,
            count_b: cutlass.Constexpr, consumer_arrivals: cutlass.Constexpr,
            release_first: cutlass.Constexpr, tail: cutlass.Constexpr):
    a_layout = _swizzled(BM, BK, STAGES)
    b_layout = _swizzled(BN, BK, STAGES)
    a_atom, tA = _tma_load(mA, a_layout, BM, BK)
    b_atom, tB = _tma_load(mB, b_layout, BN, BK)
    ab_kernel(a_atom, tA, b_atom, tB, a_layout, b_layout, k_tiles, count_b, consumer_arrivals,
              release_first, tail).launch(grid=[1, 1, 1], block=[32 * (CONSUMER_WARPS + 1), 1, 1])


def _ab(k_tiles=3, count_b=True, consumer_arrivals=CONSUMER_WARPS, release_first=False,
        tail=True):
    mA = make_fake_compact_tensor(cutlass.Float16, (BM, BK * k_tiles), stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (BN, BK * k_tiles), stride_order=(1, 0))
    return cute.compile(ab_host, mA, mB, k_tiles, count_b, consumer_arrivals, release_first,
                        tail, options="--generate-line-info")


def ab_ring():
    """Three K tiles through two stages: A and B land on one full barrier per stage, whose
    expect_tx counts both copies; each consumer warp releases the stage after reading it."""
    return _ab()


def ab_ring_expects_a_only():
    """tx_count is A's bytes only: the stage completes when A lands, and the consumers read B
    while its copy is still writing it (or B's bytes land on a phase already complete)."""
    return _ab(count_b=False)


def ab_ring_releases_before_reading():
    """The consumers release the stage before reading it: the producer refills it under them."""
    return _ab(release_first=True)


def ab_ring_consumer_count_off_by_one():
    """The consumer group is sized one more than the warps that release: `empty` never
    completes and the producer hangs on its refill."""
    return _ab(consumer_arrivals=CONSUMER_WARPS + 1)


def ab_ring_without_producer_tail():
    """The producer warp exits without producer_tail: the consumers' last releases complete
    `empty` phases no one waits for. First guess BP103; in one block that is harmless (the
    block's shared memory lives until its last warp exits, and an unobserved completion of a
    PTX barrier breaks nothing): the tail matters when the releases come from another block of
    a cluster, which may land after this block exited (BP146)."""
    return _ab(tail=False)


# -- 2. persistent tiles on one raw TMA barrier -------------------------------------------

@cute.kernel
def tiles_kernel(atom: cute.CopyAtom, mA: cute.Tensor, layout: cute.ComposedLayout,
                 num_tiles: cutlass.Constexpr, reset_phase: cutlass.Constexpr,
                 expect_twice: cutlass.Constexpr, spin: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    bar = smem.allocate_array(cutlass.Int64, 1)
    sA = smem.allocate_tensor(cutlass.Float16, layout.outer, byte_alignment=128,
                              swizzle=layout.inner)
    nbytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(layout, (None, None, 0)))
    if warp == 0:
        with cute.arch.elect_one():
            cute.arch.mbarrier_init(bar, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.barrier()
    gA = cute.local_tile(mA, (BM, BK), (None, 0))
    tAsA, tAgA = cpasync.tma_partition(atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    phase = cutlass.Int32(0)
    for t in cutlass.range(num_tiles):
        if cutlass.const_expr(reset_phase):
            phase = cutlass.Int32(0)
        if warp == 0:
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(bar, nbytes)
                if cutlass.const_expr(expect_twice):
                    cute.arch.mbarrier_expect_tx(bar, nbytes)
            cute.copy(atom, tAgA[(None, t)], tAsA[(None, 0)], tma_bar_ptr=bar)
        if cutlass.const_expr(spin):        # the wait written out as a spin on try_wait
            while not cute.arch.mbarrier_try_wait(bar, phase):
                pass
        else:
            cute.arch.mbarrier_wait(bar, phase)
        phase = phase ^ 1
        tid, _, _ = cute.arch.thread_idx()
        sA[(tid, 0, 0)] = sA[(tid, 0, 0)] * cutlass.Float16(2.0)
        cute.arch.barrier()          # everyone is done with the tile before the next load


@cute.jit
def tiles_host(mA: cute.Tensor, num_tiles: cutlass.Constexpr, reset_phase: cutlass.Constexpr,
               expect_twice: cutlass.Constexpr, spin: cutlass.Constexpr):
    layout = _swizzled(BM, BK, 1)
    atom, tA = _tma_load(mA, layout, BM, BK)
    tiles_kernel(atom, tA, layout, num_tiles, reset_phase, expect_twice, spin).launch(
        grid=[1, 1, 1], block=[64, 1, 1])


def _tiles(num_tiles=3, reset_phase=False, expect_twice=False, spin=False):
    mA = make_fake_compact_tensor(cutlass.Float16, (BM * num_tiles, BK), stride_order=(1, 0))
    return cute.compile(tiles_host, mA, num_tiles, reset_phase, expect_twice, spin,
                        options="--generate-line-info")


def tiles():
    """Three tiles through one stage: the parity flips after every wait."""
    return _tiles()


def tiles_phase_reset_per_tile():
    """The parity restarts at 0 on every tile: the second tile's wait passes on the first
    tile's completion, and the threads read a tile still landing."""
    return _tiles(reset_phase=True)


def tiles_expect_counted_twice():
    """arrive_and_expect_tx and a second expect_tx for the same copy: the barrier waits for
    bytes that never come: BP130 (tx never returns to 0) names the cause of the hang."""
    return _tiles(expect_twice=True)


# -- 3. outside the model ------------------------------------------------------------------

@cute.kernel
def cluster_kernel(atom: cute.CopyAtom, mA: cute.Tensor, layout: cute.ComposedLayout):
    smem = cutlass.memory.SmemAllocator()
    bar = smem.allocate_array(cutlass.Int64, 1)
    sA = smem.allocate_tensor(cutlass.Float16, layout.outer, byte_alignment=128,
                              swizzle=layout.inner)
    nbytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(layout, (None, None, 0)))
    with cute.arch.elect_one():
        cute.arch.mbarrier_init(bar, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive()
    cute.arch.cluster_wait()
    gA = cute.local_tile(mA, (BM, BK), (None, 0))
    tAsA, tAgA = cpasync.tma_partition(atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(bar, nbytes)
    cute.copy(atom, tAgA[(None, 0)], tAsA[(None, 0)], tma_bar_ptr=bar)
    cute.arch.mbarrier_wait(bar, 0)
    cute.arch.cluster_arrive()
    cute.arch.cluster_wait()


@cute.jit
def cluster_host(mA: cute.Tensor):
    layout = _swizzled(BM, BK, 1)
    atom, tA = _tma_load(mA, layout, BM, BK)
    cluster_kernel(atom, tA, layout).launch(grid=[2, 1, 1], block=[32, 1, 1],
                                            cluster=[2, 1, 1])


def cluster_of_two():
    """A launch with clusters of two blocks: what a cluster shares is outside the one-block
    model unless read; a single-block load per block, so either verified or BP190, never a
    crash."""
    mA = make_fake_compact_tensor(cutlass.Float16, (BM * 2, BK), stride_order=(1, 0))
    return cute.compile(cluster_host, mA, options="--generate-line-info")


EXPECT = {
    "ab_ring": "verified",
    "ab_ring_expects_a_only": "violation:BP200",
    "ab_ring_releases_before_reading": "violation:BP200",
    "ab_ring_consumer_count_off_by_one": "violation:BP100",
    "ab_ring_without_producer_tail": "verified",
    "tiles": "verified",
    "tiles_phase_reset_per_tile": "violation:BP200",
    "tiles_expect_counted_twice": "violation:BP130",
    "cluster_of_two": "unknown",
}


@dsl_user_op
def _bar_sync_ptx(barrier_id: int, threads: int, *, loc=None, ip=None):
    """A named barrier written as inline PTX, as hand-tuned kernels do."""
    llvm.inline_asm(None, [], f"bar.sync {barrier_id}, {threads};", "", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


@cute.kernel
def handoff_kernel():
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    buf = smem.allocate_tensor(cutlass.Float32, cute.make_layout(64), byte_alignment=16)
    tid, _, _ = cute.arch.thread_idx()
    if warp == 0:
        buf[tid] = cutlass.Float32(1.0)
    _bar_sync_ptx(1, 64)
    if warp == 1:
        buf[tid - 32] = buf[tid - 32] + cutlass.Float32(1.0)


@cute.jit
def handoff_host(a: cute.Tensor):
    handoff_kernel().launch(grid=[1, 1, 1], block=[64, 1, 1])


def ptx_named_barrier():
    """Warp 0 writes, both warps meet on `bar.sync 1, 64` in inline PTX, warp 1 reads: the
    barrier is real but hidden in an asm string (BP190 at its line, never dropped)."""
    return cute.compile(handoff_host, make_fake_compact_tensor(cutlass.Float32, (64,)),
                        options="--generate-line-info")


EXPECT["ptx_named_barrier"] = "unknown"


# -- 4. the participant API: PipelineProducer / PipelineConsumer handles --------------------
# (`make_participants`, a producer that peeks with `try_acquire` before it blocks, barriers
# set up with `defer_sync=True` and synchronized by the user, as CUTLASS's newer GEMMs do)

@cute.struct
class HandleStorage:
    bars: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]


@cute.kernel
def handles_kernel(atom: cute.CopyAtom, mA: cute.Tensor, layout: cute.ComposedLayout,
                   k_tiles: cutlass.Constexpr, release_every: cutlass.Constexpr,
                   init_sync: cutlass.Constexpr, producer_phase: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(HandleStorage)
    sA = smem.allocate_tensor(cutlass.Float16, layout.outer, byte_alignment=128,
                              swizzle=layout.inner)
    ring = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.bars.data_ptr(), num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_WARPS),
        tx_count=cute.size_in_bytes(cutlass.Float16, cute.slice_(layout, (None, None, 0))),
        defer_sync=True)
    if cutlass.const_expr(init_sync):
        pipeline.pipeline_init_arrive()
        pipeline.pipeline_init_wait()
    producer, consumer = ring.make_participants()
    gA = cute.local_tile(mA, (BM, BK), (0, None))
    tAsA, tAgA = cpasync.tma_partition(atom, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))

    if warp == PRODUCER_WARP:
        if cutlass.const_expr(producer_phase is None):
            for k in cutlass.range(k_tiles):
                ready = producer.try_acquire()
                handle = producer.acquire_and_advance(ready)
                cute.copy(atom, tAgA[(None, k)], tAsA[(None, handle.index)],
                          tma_bar_ptr=handle.barrier)
                handle.commit()
            producer.tail()
        else:
            # the state written out by hand, its phase given by the caller
            state = pipeline.PipelineState(STAGES, cutlass.Int32(0), cutlass.Int32(0),
                                           cutlass.Int32(producer_phase))
            for k in cutlass.range(k_tiles):
                ring.producer_acquire(state)
                cute.copy(atom, tAgA[(None, k)], tAsA[(None, state.index)],
                          tma_bar_ptr=ring.producer_get_barrier(state))
                ring.producer_commit(state)
                state.advance()
            ring.producer_tail(state)

    if warp < CONSUMER_WARPS:
        lane = cute.arch.lane_idx()
        total = cutlass.Float32(0.0)
        for k in cutlass.range(k_tiles):
            handle = consumer.wait_and_advance()
            for i in cutlass.range_constexpr(4):
                total += sA[(lane, warp * 4 + i, handle.index)].to(cutlass.Float32)
            if k % release_every == 0:
                handle.release()


@cute.jit
def handles_host(mA: cute.Tensor, k_tiles: cutlass.Constexpr, release_every: cutlass.Constexpr,
                 init_sync: cutlass.Constexpr, producer_phase: cutlass.Constexpr):
    layout = _swizzled(BM, BK, STAGES)
    atom, tA = _tma_load(mA, layout, BM, BK)
    handles_kernel(atom, tA, layout, k_tiles, release_every, init_sync, producer_phase).launch(
        grid=[1, 1, 1], block=[32 * (CONSUMER_WARPS + 1), 1, 1])


def _handles(k_tiles=4, release_every=1, init_sync=True, producer_phase=None):
    mA = make_fake_compact_tensor(cutlass.Float16, (BM, BK * k_tiles), stride_order=(1, 0))
    return cute.compile(handles_host, mA, k_tiles, release_every, init_sync, producer_phase,
                        options="--generate-line-info")


def handles():
    """Four K tiles through two stages with the participant API: the producer peeks with
    try_acquire, then acquires and advances; each consumer warp releases its handle."""
    return _handles()


def handles_release_on_even_steps():
    """The consumers release a handle only on even K steps: stage 1 is never given back and
    the producer's second lap on it never returns."""
    return _handles(release_every=2)


def handles_without_init_sync():
    """`defer_sync=True` and no `pipeline_init_arrive`/`pipeline_init_wait`: the warps use
    barriers whose initialisation other threads may not see yet."""
    return _handles(init_sync=False)


def handles_producer_state_in_phase_0():
    """A producer state written by hand with the consumer's starting phase 0: its first acquire
    waits for a release of a stage never filled."""
    return _handles(producer_phase=0)


def handles_producer_state_in_phase_1():
    """The same state with phase 1, what `make_pipeline_state(Producer, ...)` builds."""
    return _handles(producer_phase=1)


EXPECT.update({
    "handles": "verified",
    "handles_release_on_even_steps": "violation:BP100",
    "handles_without_init_sync": "violation:BP147",
    "handles_producer_state_in_phase_0": "violation:BP100",
    "handles_producer_state_in_phase_1": "verified",
})


# -- 5. PipelineOrder: two warps take turns on one shared buffer -----------------------------

@cute.struct
class OrderStorage:
    bars: cute.struct.MemRange[cutlass.Int64, 2]


@cute.kernel
def order_kernel(turns: cutlass.Constexpr, same_group: cutlass.Constexpr,
                 unrolled: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(OrderStorage)
    acc = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    group = warp
    if cutlass.const_expr(same_group):
        group = cutlass.Int32(0)
    order = pipeline.PipelineOrder.create(
        barrier_storage=storage.bars.data_ptr(), depth=1, length=2, group_id=group,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32))
    lane = cute.arch.lane_idx()
    # PipelineOrder keeps its PipelineState inside the object: a Python-unrolled loop sees it
    # advance, a `cutlass.range` loop does not carry it (no loop variable is assigned)
    if cutlass.const_expr(unrolled):
        for t in cutlass.range_constexpr(turns):
            order.wait()
            acc[lane] = acc[lane] + cutlass.Float32(1.0)
            order.arrive()
    else:
        for t in cutlass.range(turns):
            order.wait()
            acc[lane] = acc[lane] + cutlass.Float32(1.0)
            order.arrive()


@cute.jit
def order_host(a: cute.Tensor, turns: cutlass.Constexpr, same_group: cutlass.Constexpr,
               unrolled: cutlass.Constexpr):
    order_kernel(turns, same_group, unrolled).launch(grid=[1, 1, 1], block=[64, 1, 1])


def _order(turns=3, same_group=False, unrolled=True):
    return cute.compile(order_host, make_fake_compact_tensor(cutlass.Float32, (64,)), turns,
                        same_group, unrolled, options="--generate-line-info")


def ordered_turns():
    """Warp 0 then warp 1, three turns each, on one barrier per group: each warp's 32 lanes
    arrive on the other's barrier, whose count is 32."""
    return _order()


def ordered_turns_both_lead():
    """Both warps built as group 0: both start with the turn and update the buffer at once."""
    return _order(same_group=True)


def ordered_turns_in_a_dynamic_loop():
    """The same turns in a `cutlass.range` loop: the order's state is not loop-carried, so
    every turn waits with the first turn's parity, and warp 1's second wait passes on the
    completion of its first. First guess `verified` (the IR shows the state is not carried)."""
    return _order(unrolled=False)


EXPECT.update({
    "ordered_turns": "verified",
    "ordered_turns_both_lead": "violation:BP200",
    "ordered_turns_in_a_dynamic_loop": "violation:BP200",
})


# -- 6. a wait written as a spin on try_wait (the tiles kernel of section 2) ---------------

def spin_wait():
    """`while not mbarrier_try_wait(bar, phase): pass`, the wait written out: three tiles."""
    return _tiles(spin=True)


def spin_wait_phase_stuck():
    """The spin restarts its parity at 0 on every tile: from the second tile on it passes on
    the first tile's completion and reads a tile still landing."""
    return _tiles(spin=True, reset_phase=True)


EXPECT.update({
    "spin_wait": "verified",
    "spin_wait_phase_stuck": "violation:BP200",
})


# -- 7. Ampere cp.async, as CUTLASS's Ampere GEMM stages its tiles: each thread copies its row
# of the next stage, commit_group, wait_group(1) for the stage about to be read, a CTA barrier,
# then each thread reads its neighbour's row (a row-major tile: each warp's rows are one range)

CP_ROWS, CP_COLS = 64, 4


@cute.kernel
def cp_ring_kernel(gA: cute.Tensor, gO: cute.Tensor, steps: cutlass.Constexpr,
                   wait: cutlass.Constexpr, row_major: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    order = (1, 0, 2) if cutlass.const_expr(row_major) else (0, 1, 2)
    sA = smem.allocate_tensor(cutlass.Float32,
                              cute.make_ordered_layout((CP_ROWS, CP_COLS, 2), order=order),
                              byte_alignment=16)
    atom = cute.make_copy_atom(cpasync.CopyG2SOp(), cutlass.Float32, num_bits_per_copy=32)
    acc = cute.make_fragment_like(sA[(tidx, None, 0)])
    acc.fill(0.0)
    cute.copy(atom, gA[(tidx, None, 0)], sA[(tidx, None, 0)])
    cute.arch.cp_async_commit_group()
    for k in cutlass.range(steps, unroll_full=True):
        if k + 1 < steps:
            cute.copy(atom, gA[(tidx, None, k + 1)], sA[(tidx, None, (k + 1) % 2)])
        cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(wait)
        cute.arch.sync_threads()
        row = cute.make_fragment_like(sA[(tidx, None, 0)])
        cute.autovec_copy(sA[((tidx + 1) % CP_ROWS, None, k % 2)], row)
        acc.store(acc.load() + row.load())
        cute.arch.sync_threads()              # the stage is read before the next copy into it
    cute.autovec_copy(acc, gO[(tidx, None)])


@cute.jit
def cp_ring_host(a: cute.Tensor, o: cute.Tensor, steps: cutlass.Constexpr,
                 wait: cutlass.Constexpr, row_major: cutlass.Constexpr):
    cp_ring_kernel(a, o, steps, wait, row_major).launch(grid=[1, 1, 1], block=[CP_ROWS, 1, 1])


def _cp_ring(steps=4, wait=1, row_major=True):
    a = make_fake_compact_tensor(cutlass.Float32, (CP_ROWS, CP_COLS, steps),
                                 stride_order=(1, 0, 2))
    o = make_fake_compact_tensor(cutlass.Float32, (CP_ROWS, CP_COLS), stride_order=(1, 0))
    return cute.compile(cp_ring_host, a, o, steps, wait, row_major,
                        options="--generate-line-info")


def cp_async_ring():
    return _cp_ring()


def cp_async_ring_waits_one_group_short():
    """wait_group(2) with two groups in flight: the stage about to be read may still land."""
    return _cp_ring(wait=2)


def cp_async_ring_interleaved():
    """A column-major tile: each thread's row is 64-element strided, so the two warps' rows
    interleave; each warp writes its own elements only, never the other's (no write-write
    race)."""
    return _cp_ring(row_major=False)


def cp_async_ring_interleaved_one_group_short():
    """The interleaved tile with wait_group(2): the neighbour's row may still land (the
    neighbour of thread 31 is thread 32, in the other warp)."""
    return _cp_ring(wait=2, row_major=False)


EXPECT.update({
    "cp_async_ring": "verified",
    "cp_async_ring_waits_one_group_short": "violation:BP200",
    "cp_async_ring_interleaved": "verified",
    "cp_async_ring_interleaved_one_group_short": "violation:BP200",
})


# -- 8. Plain SIMT stores to interleaved rows: a column-major (64, 4) tile, each thread stores
# its row (elements tidx + 64 * j) from registers, a CTA barrier, then reads its neighbour's row

@cute.kernel
def rows_kernel(gO: cute.Tensor, sync: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((CP_ROWS, CP_COLS)),
                              byte_alignment=16)
    mine = cute.make_fragment_like(sA[(tidx, None)])
    mine.fill(1.0)
    cute.autovec_copy(mine, sA[(tidx, None)])
    if cutlass.const_expr(sync):
        cute.arch.sync_threads()
    row = cute.make_fragment_like(sA[(tidx, None)])
    cute.autovec_copy(sA[((tidx + 1) % CP_ROWS, None)], row)
    cute.autovec_copy(row, gO[(tidx, None)])


@cute.jit
def rows_host(o: cute.Tensor, sync: cutlass.Constexpr):
    rows_kernel(o, sync).launch(grid=[1, 1, 1], block=[CP_ROWS, 1, 1])


def _rows(sync):
    o = make_fake_compact_tensor(cutlass.Float32, (CP_ROWS, CP_COLS), stride_order=(1, 0))
    return cute.compile(rows_host, o, sync, options="--generate-line-info")


def rows_interleaved():
    """The two warps store disjoint, interleaved elements; the barrier orders the stores
    before the neighbours' reads."""
    return _rows(sync=True)


def rows_interleaved_no_sync():
    """No barrier: thread 31 reads row 32, which warp 1 may not have stored yet."""
    return _rows(sync=False)


EXPECT.update({
    "rows_interleaved": "verified",
    "rows_interleaved_no_sync": "violation:BP200",
})
