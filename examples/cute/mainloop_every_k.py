"""A warp-specialized TMA mainloop whose K-tile count is a runtime kernel argument
(`k_tiles: cutlass.Int32`), as CUTLASS's GEMMs take it from the problem shape: one producer
warp, two consumer warps, a `PipelineTmaAsync` ring of three stages with the producer's tail.
The frontend reads the trip count as the parameter `k_tiles` (the kernel read at several
values and joined), so `check` explores k_tiles = 4 and `prove` answers for every K:

    barrierproof prove examples/cute/mainloop_every_k.py::runtime_k
    ... proved (proved for all k_tiles with (k_tiles >= 1): ...)
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

ROWS, COLS = 64, 64
CONSUMERS = 2

EXPECT = {
    "runtime_k": "verified",
    "runtime_k_tx_doubled": "violation:BP130",
    "runtime_k_consumer_phase_stuck": "violation:BP101",
}


@cute.struct
class Bars:
    ring: cute.struct.MemRange[cutlass.Int64, 2 * 3]


@cute.kernel
def runtime_k_kernel(atom: cute.CopyAtom, mA: cute.Tensor, layout: cute.ComposedLayout,
                     k_tiles: cutlass.Int32, stages: cutlass.Constexpr,
                     tx_scale: cutlass.Constexpr, flips: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    bars = smem.allocate(Bars)
    tiles = smem.allocate_tensor(cutlass.Float16, layout.outer, byte_alignment=128,
                                 swizzle=layout.inner)
    tile_bytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(layout, (None, None, 0)))
    ring = pipeline.PipelineTmaAsync.create(
        barrier_storage=bars.ring.data_ptr(), num_stages=stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMERS),
        tx_count=tile_bytes * tx_scale)
    gA = cute.local_tile(mA, (ROWS, COLS), (0, None))
    sT, gT = cpasync.tma_partition(atom, 0, cute.make_layout(1),
                                   cute.group_modes(tiles, 0, 2), cute.group_modes(gA, 0, 2))
    if warp == CONSUMERS:
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        for k in cutlass.range(k_tiles):
            ring.producer_acquire(put)
            cute.copy(atom, gT[(None, k)], sT[(None, put.index)],
                      tma_bar_ptr=ring.producer_get_barrier(put))
            put.advance()
        ring.producer_tail(put)
    if warp < CONSUMERS:
        for k in cutlass.range(k_tiles):
            phase = (k // stages) % 2 if cutlass.const_expr(flips) else 0
            get = pipeline.PipelineState(stages, k, k % stages, phase)
            ring.consumer_wait(get)
            ring.consumer_release(get)


@cute.jit
def runtime_k_host(mA: cute.Tensor, k_tiles: cutlass.Int32, stages: cutlass.Constexpr,
                   tx_scale: cutlass.Constexpr, flips: cutlass.Constexpr):
    layout = cute.make_composed_layout(
        cute.make_swizzle(3, 4, 3), 0,
        cute.make_ordered_layout((ROWS, COLS, stages), order=(1, 0, 2)))
    atom, tensor = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                               cute.slice_(layout, (None, None, 0)),
                                               (ROWS, COLS))
    runtime_k_kernel(atom, tensor, layout, k_tiles, stages, tx_scale, flips).launch(
        grid=[1, 1, 1], block=[32 * (CONSUMERS + 1), 1, 1])


def _compile(tx_scale=1, flips=True):
    mA = make_fake_compact_tensor(cutlass.Float16, (ROWS, COLS * 8), stride_order=(1, 0))
    return cute.compile(runtime_k_host, mA, cutlass.Int32(8), 3, tx_scale, flips)


def runtime_k():
    return _compile()


def runtime_k_tx_doubled():
    """expect_tx asks for two tiles per stage; one lands."""
    return _compile(tx_scale=2)


def runtime_k_consumer_phase_stuck():
    """The consumers rebuild their state with phase 0 on every lap: from the second lap their
    waits return on the first lap's completions."""
    return _compile(flips=False)
