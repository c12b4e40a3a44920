"""A Hopper mainloop in the style of the CuTe DSL's dense GEMM: a producer warp streams K tiles
of A and B into a `PipelineTmaAsync` ring (one arrive.expect_tx for both copies of a stage); a
consumer warpgroup issues the warpgroup MMAs of a stage and keeps one group in flight, so it
releases the previous stage once `wait_group(1)` says that stage's MMAs are done, and the last
stage after the loop with `wait_group(0)`. PipelineTmaAsync signals from lane 0 of each
consumer warp: the empty barriers expect one arrival per consumer warp. Compiled for sm_90a.

Each target compiles the kernel on the CPU; the bug variants change one knob of it.
"""

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor

from _tma import ring_in_smem, staged_tiles

TILE_M, TILE_N, TILE_K = 64, 64, 64
STAGES = 2
CONSUMER_WARPS = 4                          # one warpgroup; the producer warp comes after it

EXPECT = {
    "wgmma_mainloop": "verified",
    "last_stage_never_released": "violation:BP100",
    "expect_tx_of_a_only": "violation:BP105",
}


@cute.struct
class SharedStorage:
    mainloop_bars: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]


@cute.kernel
def wgmma_kernel(atom_a: cute.CopyAtom, mA: cute.Tensor, atom_b: cute.CopyAtom, mB: cute.Tensor,
                 a_layout: cute.ComposedLayout, b_layout: cute.ComposedLayout,
                 release_last: cutlass.Constexpr,
                 operands_counted: cutlass.Constexpr):
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.utils.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sA, a_bytes = ring_in_smem(smem, a_layout)
    sB, b_bytes = ring_in_smem(smem, b_layout)
    tx_bytes = a_bytes
    if cutlass.const_expr(operands_counted == 2):
        tx_bytes = a_bytes + b_bytes

    mainloop = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.mainloop_bars.data_ptr(), num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_WARPS),
        tx_count=tx_bytes)

    gA = cute.local_tile(mA, (TILE_M, TILE_K), (0, None))
    gB = cute.local_tile(mB, (TILE_N, TILE_K), (0, None))
    k_tiles = cute.size(gA, mode=[2])       # K from A's shape, set at run time
    tAsA, tAgA = cpasync.tma_partition(atom_a, 0, cute.make_layout(1),
                                       cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(atom_b, 0, cute.make_layout(1),
                                       cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))

    if warp_idx == CONSUMER_WARPS:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        for k in cutlass.range(k_tiles):
            mainloop.producer_acquire(state)
            full = mainloop.producer_get_barrier(state)
            cute.copy(atom_a, tAgA[(None, k)], tAsA[(None, state.index)], tma_bar_ptr=full)
            cute.copy(atom_b, tBgB[(None, k)], tBsB[(None, state.index)], tma_bar_ptr=full)
            mainloop.producer_commit(state)
            state.advance()
        mainloop.producer_tail(state)

    if warp_idx < CONSUMER_WARPS:
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        release = read.clone()
        for k in cutlass.range(k_tiles):
            mainloop.consumer_wait(read)
            warpgroup.fence()
            # the warpgroup MMAs on stage read.index would be issued here
            warpgroup.commit_group()
            warpgroup.wait_group(1)          # the previous stage's MMAs are done
            if k > 0:
                mainloop.consumer_release(release)
                release.advance()
            read.advance()
        warpgroup.wait_group(0)
        if cutlass.const_expr(release_last):
            mainloop.consumer_release(release)


@cute.jit
def wgmma_host(mA: cute.Tensor, mB: cute.Tensor, release_last: cutlass.Constexpr,
               operands_counted: cutlass.Constexpr):
    a_layout, atom_a, tma_a = staged_tiles(mA, TILE_M, TILE_K, STAGES)
    b_layout, atom_b, tma_b = staged_tiles(mB, TILE_N, TILE_K, STAGES)
    wgmma_kernel(atom_a, tma_a, atom_b, tma_b, a_layout, b_layout, release_last,
                 operands_counted).launch(grid=[1, 1, 1], block=[32 * (CONSUMER_WARPS + 1), 1, 1])


def _compile(release_last=True, operands_counted=2):
    k = cute.sym_int()                      # A and B share K, set at run time
    mA = make_fake_compact_tensor(cutlass.Float16, (TILE_M, k), stride_order=(1, 0))
    mB = make_fake_compact_tensor(cutlass.Float16, (TILE_N, k), stride_order=(1, 0))
    return cute.compile(wgmma_host, mA, mB, release_last, operands_counted,
                        options="--gpu-arch sm_90a")


def wgmma_mainloop():
    """Three K tiles on two stages: stage 0 is refilled for the third tile once the consumer
    released it, one step behind its wait."""
    return _compile()


def last_stage_never_released():
    """The release of the last stage after the loop is missing: the producer's tail waits for
    it forever."""
    return _compile(release_last=False)


def expect_tx_of_a_only():
    """The stage's tx count covers A's tile only, but the copies of A and B both land on the
    full barrier: the phase completes when A has landed, the consumer goes on without B, and
    the kernel can exit with B's copy still in flight."""
    return _compile(operands_counted=1)
