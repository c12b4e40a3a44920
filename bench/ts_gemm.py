"""A persistent GEMM written in the CuTe DSL's task-scheduling (TS) framework
(`cutlass.experimental.task_scheduling`, nvidia-cutlass-dsl 4.8), for bench/nvidia_checker.py:
the twin of the CuTe DSL kernel of examples/cute/ts_twins.py, with the same warps, rings, stage
counts and bugs, once as TS tasks over resources (what NVIDIA's exhaustive checker reads) and
once as CuTe pipelines (what barrierproof reads).

The TS form declares, per resource, a pipeline type and its stage count; the tasks' schedules
say acquire/work/commit on the producer side and wait/work/release on the consumer side, and
the framework generates the mbarrier code from that. Only the schedules matter to the checker,
so the work methods' bodies (the TMA copies, MMAs and stores) are left out here.

    kernel = persistent_gemm(k_tiles=2)
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

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.ring = SmemAllocation("smem_ab", STAGE_BYTES * AB_STAGES, alignment=1024)

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


def _ab_ring(stages: int = AB_STAGES) -> SmemAb:
    return SmemAb(name="SmemAb", pipeline_config=PipelineConfig.create_tma_umma_pipeline_cfg(
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


def _load_task(gmem: GmemAb, smem: SmemAb, k_tiles: int) -> Task:
    @schedule
    def load(gmem, smem):
        with domain_loop(0, k_tiles, 1):
            gmem.tile_coords()
            smem.try_acquire()
            smem.acquire()
            smem.tma_load()
            smem.commit()
    return Task(name="LoadTask", src_resources=[gmem], dst_resources=[smem], warp_idx=2,
                num_warps=1, schedule=load(gmem, smem), num_registers=40)


def persistent_gemm(k_tiles: int, acc_consumer_arrivals: int = 32 * EPILOGUE_WARPS,
                    release_acc: bool = True, release_first: bool = False) -> TsKernel:
    """One tile's schedule of the persistent GEMM (the checker repeats it `num_tiles` times):
    TMA warp -> TmaUmma ring -> MMA warp -> UmmaAsync accumulator ring -> epilogue warp
    (examples/cute/ts_twins.py::persistent_gemm). `acc_consumer_arrivals`: the accumulator's
    consumer group size (every epilogue thread arrives on release: 32); `release_acc=False`:
    the epilogue never releases the accumulator stage it waited for."""
    gmem, smem = GmemAb(name="GmemAb"), _ab_ring()
    acc, out = _acc_ring(acc_consumer_arrivals), GmemD(name="GmemD")

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

    mma_task = Task(name="MmaTask", src_resources=[smem], dst_resources=[acc], warp_idx=1,
                    num_warps=1, schedule=mma(smem, acc), num_registers=40)
    store_task = Task(name="StoreTask", src_resources=[acc], dst_resources=[out], warp_idx=0,
                      num_warps=EPILOGUE_WARPS, schedule=epilogue(acc, out), num_registers=40)
    return TsKernel([_load_task(gmem, smem, k_tiles), mma_task, store_task,
                     _padding(k_tiles, 3)],
                    {smem: [gmem], acc: [smem], out: [acc]})


def _padding(k_tiles: int, warp: int) -> Task:
    """An idle warp of the warp group (register reallocation is per four warps)."""
    @schedule
    def idle():
        with domain_loop(0, k_tiles, 1):
            pass
    return Task(name=f"PaddingTask{warp}", src_resources=[], dst_resources=[], warp_idx=warp,
                num_warps=1, schedule=idle(), num_registers=40)
