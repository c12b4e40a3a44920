"""A fourth set of CuTe DSL kernels in the style of CUTLASS's CuTe DSL examples: an epilogue that
stages output tiles in two shared-memory buffers and stores them with TMA behind a
`PipelineTmaStore` (bulk groups, no mbarrier), and a Blackwell "input fusion" ring in which two
SIMT warps write both MMA operands into shared memory and a tcgen05 MMA warp reads them behind a
`PipelineAsyncUmma` (the MMA warp releases a stage with a tcgen05.commit), and a TMA ring whose
stages both a tcgen05 MMA warp and a SIMT warp read behind a `PipelineTmaMultiConsumersAsync`
(a stage is free once the MMAs' commit and the SIMT warp's arrival are both in); each correct
and with a bug of the kind the field reports. Checked by tests/test_unseen_frontends.py against EXPECT
(decided before running).

A missing proxy fence (threads' stores read by the async proxy: a TMA store, a tcgen05 MMA) is
a real bug the model cannot show as a race (it has no proxies): those kernels are `unknown`,
BP190 at the async read."""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {
    "c_store_ring": "verified",
    "c_store_ring_no_trailing_sync": "violation:BP200",
    "c_store_ring_no_proxy_fence": "unknown",
    "fused_operands": "verified",
    "fused_operands_written_before_acquire": "violation:BP200",
    "fused_operands_no_proxy_fence": "unknown",
    "mma_and_simt_read": "verified",
    "mma_and_simt_read_simt_releases_first": "violation:BP200",
}


# -- 1. an epilogue of two warps storing three subtiles through two TMA-store buffers --------------

C_ROWS, C_COLS, C_STAGES, SUBTILES = 64, 8, 2, 3
EPILOGUE_BARRIER = 1


@cute.kernel
def c_store_kernel(tma_c: cute.CopyAtom, mC: cute.Tensor, c_layout: cute.Layout,
                   trailing_sync: cutlass.Constexpr, fence: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    sC = smem.allocate_tensor(cutlass.Float16, c_layout, byte_alignment=128)
    store_ring = pipeline.PipelineTmaStore.create(
        num_stages=C_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * 2))
    epilogue = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER, num_threads=64)
    gC = cute.local_tile(mC, (C_ROWS, C_COLS), (0, None))
    tCsC, tCgC = cpasync.tma_partition(tma_c, 0, cute.make_layout(1),
                                       cute.group_modes(sC, 0, 2), cute.group_modes(gC, 0, 2))
    for t in cutlass.range(SUBTILES, unroll_full=True):
        buf = t % C_STAGES
        for c in cutlass.range(C_COLS, unroll_full=True):
            sC[(tidx, c, buf)] = cutlass.Float16(t)
        if cutlass.const_expr(fence):
            cute.arch.fence_proxy("async.shared", space="cta")
        epilogue.arrive_and_wait()
        if warp == 0:
            with cute.arch.elect_one():
                cute.copy(tma_c, tCsC[(None, buf)], tCgC[(None, t)])
                store_ring.producer_commit()
                store_ring.producer_acquire()   # at most C_STAGES - 1 stores still reading
        if cutlass.const_expr(trailing_sync):
            epilogue.arrive_and_wait()
    if warp == 0:
        with cute.arch.elect_one():
            store_ring.producer_tail()


@cute.jit
def c_store_host(mC: cute.Tensor, trailing_sync: cutlass.Constexpr, fence: cutlass.Constexpr):
    c_layout = cute.make_ordered_layout((C_ROWS, C_COLS, C_STAGES), order=(1, 0, 2))
    tma_c, tma_tensor = cpasync.make_tiled_tma_atom(
        cpasync.CopyBulkTensorTileS2GOp(), mC, cute.slice_(c_layout, (None, None, 0)),
        (C_ROWS, C_COLS))
    c_store_kernel(tma_c, tma_tensor, c_layout, trailing_sync, fence).launch(
        grid=[1, 1, 1], block=[64, 1, 1])


def _c_store(trailing_sync=True, fence=True):
    mC = make_fake_compact_tensor(cutlass.Float16, (C_ROWS, C_COLS * SUBTILES),
                                  stride_order=(1, 0))
    return cute.compile(c_store_host, mC, trailing_sync, fence, options="--generate-line-info")


def c_store_ring():
    """Each subtile: every thread writes its row of the buffer, fences, the two warps meet, one
    elected thread stores the buffer with TMA, commits the bulk group and waits until at most
    one store is still reading (producer_acquire); the warps meet again before the next
    subtile overwrites a buffer; producer_tail drains the last store before exit."""
    return _c_store()


def c_store_ring_no_trailing_sync():
    """No second barrier after producer_acquire: warp 1 writes subtile 2 into buffer 0 while
    warp 0 may not yet have waited for subtile 0's TMA store, which still reads buffer 0."""
    return _c_store(trailing_sync=False)


def c_store_ring_no_proxy_fence():
    """The threads' stores are not fenced (fence_proxy async.shared) before the TMA store reads
    them: whether the async proxy sees them is not modelled (BP190 at the TMA store)."""
    return _c_store(fence=False)


# -- 2. two SIMT warps fill both MMA operands, a tcgen05 MMA warp reads them (PipelineAsyncUmma) --

TILE_M, TILE_N, TILE_K, AB_STAGES, K_STEPS = 64, 64, 16, 2, 3
MMA_WARP = 2


@cute.struct
class FusedStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * AB_STAGES]


@cute.kernel
def fused_kernel(tiled_mma: cute.TiledMma, a_layout: cute.ComposedLayout,
                 b_layout: cute.ComposedLayout, write_first: cutlass.Constexpr,
                 fence: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(FusedStorage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=1024,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=1024,
                              swizzle=b_layout.inner)
    ab = pipeline.PipelineAsyncUmma.create(
        barrier_storage=storage.ab_bars.data_ptr(), num_stages=AB_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 64),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1))
    if warp < MMA_WARP:
        # thread tidx owns row tidx of the A stage (M = 64) and row tidx of the B stage (N = 64)
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, AB_STAGES)
        for k in cutlass.range(K_STEPS, unroll_full=True):
            if cutlass.const_expr(not write_first):
                ab.producer_acquire(put)
            for kk in cutlass.range(TILE_K, unroll_full=True):
                sA[((tidx, kk), 0, 0, put.index)] = cutlass.Float16(k)
                sB[((tidx, kk), 0, 0, put.index)] = cutlass.Float16(kk)
            if cutlass.const_expr(write_first):
                ab.producer_acquire(put)
            if cutlass.const_expr(fence):
                cute.arch.fence_proxy("async.shared", space="cta")
            ab.producer_commit(put)
            put.advance()
        ab.producer_tail(put)
    if warp == MMA_WARP:
        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc = tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((TILE_M, TILE_N)))
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, AB_STAGES)
        for k in cutlass.range(K_STEPS, unroll_full=True):
            ab.consumer_wait(get)
            for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
                cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, get.index)],
                          tCrB[(None, None, kb, get.index)], acc)
            ab.consumer_release(get)            # a tcgen05.commit: arrives when the MMAs are done
            get.advance()


@cute.jit
def fused_host(write_first: cutlass.Constexpr, fence: cutlass.Constexpr):
    tiled_mma = sm100_utils.make_trivial_tiled_mma(
        cutlass.Float16, cutlass.Float16, cute.nvgpu.OperandMajorMode.K,
        cute.nvgpu.OperandMajorMode.K,
        cutlass.Float32, tcgen05.CtaGroup.ONE, (TILE_M, TILE_N))
    tile = (TILE_M, TILE_N, TILE_K)
    a_layout = sm100_utils.make_smem_layout_a(tiled_mma, tile, cutlass.Float16, AB_STAGES)
    b_layout = sm100_utils.make_smem_layout_b(tiled_mma, tile, cutlass.Float16, AB_STAGES)
    fused_kernel(tiled_mma, a_layout, b_layout, write_first, fence).launch(
        grid=[1, 1, 1], block=[32 * (MMA_WARP + 1), 1, 1])


def _fused(write_first=False, fence=True):
    return cute.compile(fused_host, write_first, fence, options="--generate-line-info")


def fused_operands():
    """Three K steps through two stages: the producers acquire a stage, write their rows,
    fence and commit; the MMA warp's release arrives once its MMAs on the stage are done."""
    return _fused()


def fused_operands_written_before_acquire():
    """The producers write the stage before producer_acquire: on the third step they overwrite
    stage 0 while the first step's MMAs may still be reading it."""
    return _fused(write_first=True)


def fused_operands_no_proxy_fence():
    """No fence_proxy between the producers' stores and the commit: whether the tcgen05 MMA
    (async proxy) sees the stores is not modelled (BP190 at the MMA)."""
    return _fused(fence=False)


# -- 3. a TMA ring read by a tcgen05 MMA warp and a SIMT warp (PipelineTmaMultiConsumersAsync) ----

R_M, R_N, R_K, R_STAGES = 128, 64, 16, 2
R_MMA_WARP, R_LOAD_WARP, R_SIMT_WARP = 0, 1, 2


@cute.struct
class MultiStorage:
    ab_bars: cute.struct.MemRange[cutlass.Int64, 2 * R_STAGES]


@cute.kernel
def multi_kernel(tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor,
                 tma_b: cute.CopyAtom, mB: cute.Tensor, a_layout: cute.ComposedLayout,
                 b_layout: cute.ComposedLayout, gO: cute.Tensor, release_first: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    storage = smem.allocate(MultiStorage)
    sA = smem.allocate_tensor(cutlass.Float16, a_layout.outer, byte_alignment=1024,
                              swizzle=a_layout.inner)
    sB = smem.allocate_tensor(cutlass.Float16, b_layout.outer, byte_alignment=1024,
                              swizzle=b_layout.inner)
    stage_tx = cute.size_in_bytes(cutlass.Float16, cute.slice_(a_layout, (None, None, None, 0))) \
        + cute.size_in_bytes(cutlass.Float16, cute.slice_(b_layout, (None, None, None, 0)))
    ab = pipeline.PipelineTmaMultiConsumersAsync.create(
        barrier_storage=storage.ab_bars.data_ptr(), num_stages=R_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group_umma=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        consumer_group_async=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),  # one warp
        tx_count=stage_tx)
    thr_mma = tiled_mma.get_slice(0)
    gA = cute.local_tile(mA, (R_M, R_N, R_K), (0, 0, None), proj=(1, None, 1))
    gB = cute.local_tile(mB, (R_M, R_N, R_K), (0, 0, None), proj=(None, 1, 1))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 3),
                                       cute.group_modes(thr_mma.partition_A(gA), 0, 3))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 3),
                                       cute.group_modes(thr_mma.partition_B(gB), 0, 3))
    if warp == R_LOAD_WARP:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, R_STAGES)
        for k in cutlass.range(k_tiles):
            ab.producer_acquire(put)
            full = ab.producer_get_barrier(put)
            cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, put.index)], tma_bar_ptr=full)
            cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, put.index)], tma_bar_ptr=full)
            put.advance()
        ab.producer_tail(put)
    if warp == R_MMA_WARP:
        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc = tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((R_M, R_N)))
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, R_STAGES)
        for k in cutlass.range(k_tiles):
            ab.consumer_wait(get)
            for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
                cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, get.index)],
                          tCrB[(None, None, kb, get.index)], acc)
            ab.consumer_release(get)            # the MMAs' tcgen05.commit
            get.advance()
    if warp == R_SIMT_WARP:
        # each lane sums its row of A in every stage (a row statistic next to the GEMM)
        get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, R_STAGES)
        total = cutlass.Float32(0.0)
        for k in cutlass.range(k_tiles):
            ab.consumer_wait(get)
            if cutlass.const_expr(release_first):
                ab.consumer_release(get, pipeline.PipelineOp.AsyncThread)
            for kk in cutlass.range(R_K, unroll_full=True):
                total = total + sA[((lane, kk), 0, 0, get.index)].to(cutlass.Float32)
            if cutlass.const_expr(not release_first):
                ab.consumer_release(get, pipeline.PipelineOp.AsyncThread)   # lane 0 arrives
            get.advance()
        gO[lane] = total


@cute.jit
def multi_host(mA: cute.Tensor, mB: cute.Tensor, o: cute.Tensor, release_first: cutlass.Constexpr):
    tiled_mma = sm100_utils.make_trivial_tiled_mma(
        cutlass.Float16, cutlass.Float16, cute.nvgpu.OperandMajorMode.K,
        cute.nvgpu.OperandMajorMode.K, cutlass.Float32, tcgen05.CtaGroup.ONE, (R_M, R_N))
    tile = (R_M, R_N, R_K)
    a_layout = sm100_utils.make_smem_layout_a(tiled_mma, tile, cutlass.Float16, R_STAGES)
    b_layout = sm100_utils.make_smem_layout_b(tiled_mma, tile, cutlass.Float16, R_STAGES)
    op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
    tma_a, ta = cute.nvgpu.make_tiled_tma_atom_A(
        op, mA, cute.slice_(a_layout, (None, None, None, 0)), tile, tiled_mma)
    tma_b, tb = cute.nvgpu.make_tiled_tma_atom_B(
        op, mB, cute.slice_(b_layout, (None, None, None, 0)), tile, tiled_mma)
    multi_kernel(tiled_mma, tma_a, ta, tma_b, tb, a_layout, b_layout, o, release_first).launch(
        grid=[1, 1, 1], block=[32 * 3, 1, 1])


def _multi(release_first=False):
    k = cute.sym_int()                      # K, shared by A and B, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (R_M, k), stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (R_N, k), stride_order=(1, 0))
    o = make_fake_compact_tensor(cutlass.Float32, (32,))
    return cute.compile(multi_host, mA, mB, o, release_first, options="--generate-line-info")


def mma_and_simt_read():
    """A stage's empty barrier counts the MMA warp's commit and one arrival of the SIMT warp
    (its lane 0): the loader refills a stage once the MMAs on it are done and the SIMT warp has
    read it."""
    return _multi()


def mma_and_simt_read_simt_releases_first():
    """The SIMT warp releases the stage before reading it: once the MMAs' commit is in too,
    the loader's next TMA copy into the stage may land while the SIMT warp still reads it."""
    return _multi(release_first=True)
