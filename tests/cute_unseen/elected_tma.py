"""Raw `cute.arch.mbarrier_*` with an elected thread, no pipeline class: a load warp's elected
lane arms each stage's `full` barrier with `arrive_and_expect_tx` and issues the TMA copy on
it; two consumer warps wait on `full`, then lane 0 of each arrives on `empty` (count 2). The
phases are kept by hand (stage = k % STAGES, phase flips each lap); three stages, seven K
tiles.
"""

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor

ROWS, COLS = 64, 32
CONSUMERS = 2
LOADER = CONSUMERS

EXPECT = {
    "elected": "verified",
    "elected_half_the_bytes": "violation:BP130",
    "elected_phase_not_toggled": "violation:BP101",
    "elected_every_lane_releases": "violation:BP121",
    "elected_no_init_fence": "violation:BP147",
}


@cute.kernel
def elected_kernel(atom: cute.CopyAtom, mA: cute.Tensor, layout: cute.ComposedLayout,
                   stages: cutlass.Constexpr, k_tiles: cutlass.Constexpr,
                   byte_scale: cutlass.Constexpr, flips: cutlass.Constexpr,
                   one_lane: cutlass.Constexpr, fenced: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    full = smem.allocate_array(cutlass.Int64, stages)
    empty = smem.allocate_array(cutlass.Int64, stages)
    tiles = smem.allocate_tensor(cutlass.Float16, layout.outer, byte_alignment=128,
                                 swizzle=layout.inner)
    tile_bytes = cute.size_in_bytes(cutlass.Float16, cute.slice_(layout, (None, None, 0)))
    if warp == LOADER:
        with cute.arch.elect_one():
            for s in cutlass.range_constexpr(stages):
                cute.arch.mbarrier_init(full + s, 1)
                cute.arch.mbarrier_init(empty + s, CONSUMERS)
        if cutlass.const_expr(fenced):
            cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()

    gA = cute.local_tile(mA, (ROWS, COLS), (0, None))
    sT, gT = cpasync.tma_partition(atom, 0, cute.make_layout(1),
                                   cute.group_modes(tiles, 0, 2), cute.group_modes(gA, 0, 2))
    if warp == LOADER:
        for k in cutlass.range(k_tiles):
            stage = k % stages
            lap = (k // stages) % 2
            cute.arch.mbarrier_wait(empty + stage, lap ^ 1)
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(full + stage, tile_bytes * byte_scale)
                cute.copy(atom, gT[(None, k)], sT[(None, stage)], tma_bar_ptr=full + stage)
    if warp < CONSUMERS:
        for k in cutlass.range(k_tiles):
            stage = k % stages
            lap = (k // stages) % 2 if cutlass.const_expr(flips) else 0
            cute.arch.mbarrier_wait(full + stage, lap)
            if cutlass.const_expr(one_lane):
                if lane == 0:
                    cute.arch.mbarrier_arrive(empty + stage)
            else:
                cute.arch.mbarrier_arrive(empty + stage)


@cute.jit
def elected_host(mA: cute.Tensor, stages: cutlass.Constexpr, k_tiles: cutlass.Constexpr,
                 byte_scale: cutlass.Constexpr, flips: cutlass.Constexpr,
                 one_lane: cutlass.Constexpr, fenced: cutlass.Constexpr):
    layout = cute.make_composed_layout(
        cute.make_swizzle(2, 4, 3), 0,
        cute.make_ordered_layout((ROWS, COLS, stages), order=(1, 0, 2)))
    atom, tensor = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                               cute.slice_(layout, (None, None, 0)),
                                               (ROWS, COLS))
    elected_kernel(atom, tensor, layout, stages, k_tiles, byte_scale, flips, one_lane,
                   fenced).launch(grid=[1, 1, 1], block=[32 * (CONSUMERS + 1), 1, 1])


def _compile(stages=3, k_tiles=7, byte_scale=1, flips=True, one_lane=True, fenced=True):
    mA = make_fake_compact_tensor(cutlass.Float16, (ROWS, COLS * k_tiles), stride_order=(1, 0))
    return cute.compile(elected_host, mA, stages, k_tiles, byte_scale, flips, one_lane, fenced)


def elected():
    return _compile()


def elected_half_the_bytes():
    """expect_tx asks for twice the tile: the copy lands half of it, the phase never
    completes and the consumers wait forever."""
    return _compile(byte_scale=2)


def elected_phase_not_toggled():
    """The consumers wait on parity 0 on every lap: on the second lap the wait returns for the
    first lap's completion, the consumers release stages not yet refilled and the ring
    ends with a wait no arrival completes."""
    return _compile(flips=False)


def elected_every_lane_releases():
    """Every lane of a consumer warp arrives on `empty`, which counts one per warp."""
    return _compile(one_lane=False)


def elected_no_init_fence():
    """The inits are published by the block barrier but never fenced (fence.mbarrier_init):
    the TMA unit may not see them."""
    return _compile(fenced=False)
