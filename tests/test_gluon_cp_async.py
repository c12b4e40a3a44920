"""`async_copy.mbarrier_arrive` between Gluon partitions: a loader partition fills a shared
memory slot by cp.async and signals the consumer partition through the copies' arrivals.

With `increment_count=False` (.noinc) each of the loader's num_warps x 32 threads arrives once
its own copies are done, and the barrier's count counts them: the correct hand-off is
verified, and a consumer reading early or a count off by one is its violation on the kernel's
lines. With the default increment each thread also raises the pending count at issue, which
the model does not order across the partition's warps: BP190 at the line, with that reason."""

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
from barrierproof.model import primitives as K  # noqa: E402

HERE = os.path.abspath(__file__)
LOADER_WARPS = 1


@gluon.jit
def tile_offsets(layout: gl.constexpr):
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * 64 + cols[None, :]


@gluon.jit
def cp_consumer(buf, bar, ptr, READ_EARLY: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    offs = tile_offsets(layout)
    if READ_EARLY:
        early = buf.load(layout)               # before the wait: the copies may still write
        gl.store(ptr + offs, early)
    mbarrier.wait(bar, 0)
    x = buf.load(layout)
    gl.store(ptr + offs, x * 2)


@gluon.jit
def cp_loader(buf, bar, ptr, NOINC: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [1, 1], [1, 0])
    offs = tile_offsets(layout)
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
ARRIVAL = "# the loader's arrival"


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn.fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


def verdict(launch: Launch):
    return check_kernel(load(launch), options=Options())


def test_noinc_hand_off_counting_the_threads_is_verified_one_arrival_per_thread():
    kernel = load(handoff(True, THREADS))
    arrivals = [op for op in iter_ops(kernel.body) if op.kind == K.CP_ASYNC_ARRIVE]
    assert len(arrivals) == THREADS
    assert {(op.loc.file, op.loc.line) for op in arrivals} == {(HERE, line_of(cp_loader, ARRIVAL))}
    assert check_kernel(kernel, options=Options()).verdict == "verified"


def test_reading_the_slot_before_the_wait_races_with_the_copy():
    v = verdict(handoff(True, THREADS, read_early=True))
    assert (v.verdict, v.codes) == ("violation", ["BP200"])
    where = f"{os.path.basename(HERE)}:{line_of(cp_loader, 'async_copy.async_load(')}"
    assert where in v.diagnostics[0].message
    assert f"{os.path.basename(HERE)}:{line_of(cp_consumer, 'early = buf.load')}" in \
        v.diagnostics[0].message


def test_a_count_of_one_lets_the_first_thread_complete_the_phase_while_copies_write():
    # the other threads' arrivals spill into later phases; the consumer's wait passes on the
    # first, some thread's copy still in flight
    v = verdict(handoff(True, 1))
    assert (v.verdict, v.codes) == ("violation", ["BP200"])
    assert f"{os.path.basename(HERE)}:{line_of(cp_consumer, 'x = buf.load')}" in \
        v.diagnostics[0].message


def test_a_count_above_the_threads_never_completes_the_phase():
    v = verdict(handoff(True, THREADS + 1))
    assert (v.verdict, v.codes) == ("violation", ["BP100"])
    assert v.diagnostics[0].location.endswith(
        f"{os.path.basename(HERE)}:{line_of(cp_consumer, 'mbarrier.wait(bar, 0)')}")


# the increment form: the right count (the loader's one mbarrier.arrive) and one that also
# counts the threads (a deadlock on hardware) are alike refused
@pytest.mark.parametrize("count", [1, 1 + THREADS])
def test_the_increment_form_is_bp190_at_its_line_with_its_reason(count):
    kernel = load(handoff(False, count))
    unmodeled = [op for op in iter_ops(kernel.body) if op.kind == K.UNMODELED]
    assert [op.name.split(":")[0] for op in unmodeled] == ["ttng.async_copy_mbarrier_arrive"]
    assert (unmodeled[0].loc.file, unmodeled[0].loc.line) == (HERE, line_of(cp_loader, ARRIVAL))
    assert "increment_count=True" in unmodeled[0].name
    v = check_kernel(kernel, options=Options())
    assert (v.verdict, v.codes) == ("unknown", ["BP190"])
