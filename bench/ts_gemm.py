"""A persistent GEMM written in the CuTe DSL's task-scheduling (TS) framework
(`cutlass.experimental.task_scheduling`, nvidia-cutlass-dsl 4.8), for bench/nvidia_checker.py:
the twin of the CuTe DSL kernel of examples/cute/ts_twins.py, with the same warps, rings, stage
counts and bugs, once as TS tasks over resources (what NVIDIA's exhaustive checker reads) and
once as CuTe pipelines (what barrierproof reads).

The TS form declares, per resource, a pipeline type and its stage count; the tasks' schedules
say acquire/work/commit on the producer side and wait/work/release on the consumer side, and
the framework generates the mbarrier code from that. Only the schedules matter to the checker,
so the work methods' bodies (the TMA copies, MMAs and stores) are left out here.

    kernel = gemm(k_tiles=2)
    check_all_interleavings(kernel.tasks, num_tiles=3)       # NVIDIA's exhaustive checker
    TaskManager(tasks=kernel.tasks, resource_dependency_graph=kernel.graph, verbose=False)
"""

from __future__ import annotations

from dataclasses import dataclass

import cutlass.pipeline as pipeline
from cutlass.experimental.task_scheduling.memory import SmemAllocation, TmemAllocation
from cutlass.experimental.task_scheduling.resources import (
    MemoryResource, PipelineConfig, StageInfo, consumer_work, producer_work)
from cutlass.experimental.task_scheduling.schedule_builder import domain_loop, schedule
from cutlass.experimental.task_scheduling.task import Task

# The shapes of examples/cute/ts_twins.py: a 128x128 tile, 64-wide K steps of fp16.
TILE_M, TILE_N, TILE_K = 128, 128, 64
AB_STAGES, ACC_STAGES = 2, 2
STAGE_BYTES = (TILE_M + TILE_N) * TILE_K * 2
EPILOGUE_WARPS = 1                  # warp 0; warp 1 issues the MMAs, warp 2 the TMA loads
ONE_CTA = (1, 1, 1, 1)             # cta_layout_vmnk of a kernel without a cluster


class GmemAb(MemoryResource):
    """The A and B tiles in global memory: read by the TMA warp, no pipeline."""

    @consumer_work
    def tile_coords(self, stage_info: StageInfo) -> None:
        """The coordinates of this K step's tiles (computed, not loaded)."""


class SmemAb(MemoryResource):
    """The A/B ring in shared memory: TMA fills a stage, the tensor cores read it."""

    def __init__(self, stages: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.ring = SmemAllocation("smem_ab", STAGE_BYTES * stages, alignment=1024)

    def get_smem_requirements(self):
        return [self.ring]

    @producer_work
    def tma_load(self, stage_info: StageInfo) -> None:
        """The A and B copies of one K step into the acquired stage."""

    @consumer_work
    def descriptors(self, stage_info: StageInfo) -> None:
        """The shared-memory descriptors of the stage the MMAs read."""


class TmemC(MemoryResource):
    """The accumulator ring (ACC_STAGES tiles of TMEM): MMAs fill it, the epilogue drains it."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.columns = TmemAllocation("tmem_c", TILE_N * ACC_STAGES)

    def get_tmem_requirements(self):
        return [self.columns]

    @producer_work
    def mma(self, stage_info: StageInfo) -> None:
        """tcgen05 MMAs of one K step, reading the A/B stage."""

    @consumer_work
    def load_tile(self, stage_info: StageInfo) -> None:
        """tcgen05.ld of the accumulator stage into registers."""


class GmemD(MemoryResource):
    """C in global memory: the epilogue's stores."""

    @producer_work
    def store(self, stage_info: StageInfo) -> None:
        """The stores of one output tile."""


@dataclass
class TsKernel:
    tasks: list
    graph: dict


@dataclass(frozen=True)
class Shape:
    """Which warps run which task, the A/B ring's depth and the epilogue's registers."""
    epilogue_warps: int
    mma_warp: int
    tma_warp: int
    ab_stages: int
    warps: int                      # the CTA's warps: the rest are padding
    epilogue_registers: int = 40


# examples/cute/ts_twins.py's PERSISTENT and TUTORIAL shapes (the latter the task-scheduling
# tutorial GEMM's: epilogue warps 0-3, TMA warp 4, MMA warp 5, padding 6-7, three A/B stages).
PERSISTENT = Shape(epilogue_warps=EPILOGUE_WARPS, mma_warp=1, tma_warp=2, ab_stages=AB_STAGES,
                   warps=4)
TUTORIAL = Shape(epilogue_warps=4, mma_warp=5, tma_warp=4, ab_stages=3, warps=8,
                 epilogue_registers=160)


def _ab_ring(stages: int) -> SmemAb:
    return SmemAb(stages, name="SmemAb",
                  pipeline_config=PipelineConfig.create_tma_umma_pipeline_cfg(
                      num_stages=stages, num_bytes=STAGE_BYTES,
                      producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
                      consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
                      cta_layout_vmnk=ONE_CTA))


def _acc_ring(consumer_arrivals: int) -> TmemC:
    return TmemC(name="TmemC", pipeline_config=PipelineConfig.create_umma_async_pipeline_cfg(
        num_stages=ACC_STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumer_arrivals),
        cta_layout_vmnk=ONE_CTA))


def gemm(k_tiles: int, shape: Shape = PERSISTENT, acc_consumer_arrivals: int | None = None,
         release_acc: bool = True, release_first: bool = False) -> TsKernel:
    """One tile's schedule: TMA warp -> TmaUmma ring -> MMA warp -> UmmaAsync accumulator ring
    -> epilogue warps (the checker repeats it `num_tiles` times for a persistent kernel).
    `acc_consumer_arrivals`: the accumulator's consumer group size (default: every epilogue
    thread, as each arrives on release); `release_acc=False`: the epilogue never releases the
    accumulator stage it waited for; `release_first`: the MMA warp releases the A/B stage
    before its MMAs read it."""
    if acc_consumer_arrivals is None:
        acc_consumer_arrivals = 32 * shape.epilogue_warps
    gmem, smem = GmemAb(name="GmemAb"), _ab_ring(shape.ab_stages)
    acc, out = _acc_ring(acc_consumer_arrivals), GmemD(name="GmemD")

    @schedule
    def load(gmem, smem):
        with domain_loop(0, k_tiles, 1):
            gmem.tile_coords()
            smem.try_acquire()
            smem.acquire()
            smem.tma_load()
            smem.commit()

    @schedule
    def mma(smem, acc):
        acc.try_acquire()
        acc.acquire()
        with domain_loop(0, k_tiles, 1):
            smem.try_wait()
            smem.wait()
            smem.descriptors()
            if release_first:
                smem.release()
            acc.mma()
            if not release_first:
                smem.release()
        acc.commit()

    @schedule
    def epilogue(acc, out):
        with domain_loop(0, k_tiles, 1):
            pass
        acc.try_wait()
        acc.wait()
        acc.load_tile()
        if release_acc:
            acc.release()
        out.store()

    tasks = [
        Task(name="LoadTask", src_resources=[gmem], dst_resources=[smem],
             warp_idx=shape.tma_warp, num_warps=1, schedule=load(gmem, smem), num_registers=40),
        Task(name="MmaTask", src_resources=[smem], dst_resources=[acc], warp_idx=shape.mma_warp,
             num_warps=1, schedule=mma(smem, acc), num_registers=40),
        Task(name="StoreTask", src_resources=[acc], dst_resources=[out], warp_idx=0,
             num_warps=shape.epilogue_warps, schedule=epilogue(acc, out),
             num_registers=shape.epilogue_registers),
    ]
    first_idle = max(shape.tma_warp, shape.mma_warp) + 1
    if first_idle < shape.warps:
        tasks.append(_padding(k_tiles, first_idle, shape.warps - first_idle))
    return TsKernel(tasks, {smem: [gmem], acc: [smem], out: [acc]})


def _padding(k_tiles: int, warp: int, warps: int) -> Task:
    """The idle warps of the last warp group (register reallocation is per four warps)."""
    @schedule
    def idle():
        with domain_loop(0, k_tiles, 1):
            pass
    return Task(name="PaddingTask", src_resources=[], dst_resources=[], warp_idx=warp,
                num_warps=warps, schedule=idle(), num_registers=40)
