"""`async_copy.mbarrier_arrive` between Gluon partitions: a loader partition fills a shared
memory slot by cp.async and signals the consumer partition through the copies' arrivals.

Each of the loader's num_warps x 32 threads arrives once its own copies are done, which the
model's one-agent partition and count-1 `cp_async_arrive` cannot state soundly (translate.py,
`cp_async_arrive`): every form is BP190 at the kernel's own line, with the obstacle of its
form, and `unknown`, whether the rest of the protocol is right or wrong."""

import inspect
import os

import pytest

pytest.importorskip("triton")

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.ampere import async_copy  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier  # noqa: E402

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.model.gluon import Launch, load  # noqa: E402
from barrierproof.model.ir import iter_ops  # noqa: E402

HERE = os.path.abspath(__file__)
LOADER_WARPS = 1


@gluon.jit
def cp_consumer(buf, bar, ptr, READ_EARLY: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * 64 + cols[None, :]
    if READ_EARLY:
        early = buf.load(layout)               # before the wait: the copies may still write
        gl.store(ptr + offs, early)
    mbarrier.wait(bar, 0)
    x = buf.load(layout)
    gl.store(ptr + offs, x * 2)


@gluon.jit
def cp_loader(buf, bar, ptr, NOINC: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [1, 1], [1, 0])
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * 64 + cols[None, :]
    async_copy.async_load(buf, ptr + offs)
    async_copy.mbarrier_arrive(bar, increment_count=not NOINC)   # the loader's arrival
    if not NOINC:
        mbarrier.arrive(bar, count=1)


@gluon.jit
def cp_handoff(ptr, NOINC: gl.constexpr, COUNT: gl.constexpr, READ_EARLY: gl.constexpr):
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf = gl.allocate_shared_memory(gl.float16, [32, 64], shared)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=COUNT)
    gl.warp_specialize([(cp_consumer, (buf, bar, ptr, READ_EARLY)),
                        (cp_loader, (buf, bar, ptr, NOINC))], [1], [24])


def handoff(noinc: bool, count: int, read_early: bool = False) -> Launch:
    return Launch(cp_handoff, args=dict(ptr="*fp16", NOINC=noinc, COUNT=count,
                                        READ_EARLY=read_early), num_warps=4, target="cuda:100")


THREADS = LOADER_WARPS * 32
CASES = {
    # correct: .noinc, the init count counts the loader's threads
    "noinc": (handoff(True, THREADS), "no phase takes more arrivals than its count"),
    # correct: the default increment, the count is the loader's one mbarrier.arrive
    "inc": (handoff(False, 1), "increment_count=True"),
    # wrong: the increment form with a count that also counts the threads (the phase never
    # completes: a deadlock on hardware)
    "inc_counts_threads": (handoff(False, 1 + THREADS), "increment_count=True"),
    # wrong: the consumer reads the slot before its wait (a race on hardware)
    "read_early": (handoff(True, THREADS, read_early=True),
                   "no phase takes more arrivals than its count"),
}


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn.fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_copies_arrival_is_bp190_at_its_line_with_its_forms_reason(case):
    launch, reason = CASES[case]
    kernel = load(launch)
    unmodeled = [op for op in iter_ops(kernel.body) if op.kind == "unmodeled"]
    assert [op.name.split(":")[0] for op in unmodeled] == ["ttng.async_copy_mbarrier_arrive"]
    assert (unmodeled[0].loc.file, unmodeled[0].loc.line) == \
        (HERE, line_of(cp_loader, "# the loader's arrival"))
    assert reason in unmodeled[0].name
    verdict = check_kernel(kernel, options=Options())
    # the correct hand-offs and the wrong ones alike: unknown, for this arrival alone
    assert (verdict.verdict, verdict.codes) == ("unknown", ["BP190"])
    assert "ttng.async_copy_mbarrier_arrive" in verdict.diagnostics[0].message
