"""The Gluon frontend: kernels compiled to TTGIR on the CPU, each construct translated, the
examples' verdicts, and counterexamples on the kernel's own Python lines."""

import inspect
import os
import sys

import pytest

pytest.importorskip("triton")

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.ampere import async_copy  # noqa: E402
from triton.experimental.gluon.language.nvidia.blackwell import clc, tcgen05_commit  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma,  # noqa: E402
                                                             warpgroup_mma, warpgroup_mma_wait)

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.gluon import Launch, load, tensor_desc  # noqa: E402
from barrierproof.model.interpreter import replay  # noqa: E402
from barrierproof.model.expr import same  # noqa: E402
from barrierproof.model.ir import Loop, ModelError, Op, Var, When, iter_ops, walk  # noqa: E402
from barrierproof.model.semantics import System  # noqa: E402

from conftest import EXAMPLES  # noqa: E402

HERE = os.path.abspath(__file__)
EXAMPLE = os.path.join(EXAMPLES, "gluon", "ws_matmul.py")
PERSISTENT = os.path.join(EXAMPLES, "gluon", "persistent_matmul.py")
AUTO_WS = os.path.join(EXAMPLES, "gluon", "tl_warp_specialized.py")
PIPELINED = os.path.join(EXAMPLES, "gluon", "tcgen05_pipeline.py")
ATTENTION = os.path.join(EXAMPLES, "gluon", "attention_forward.py")
STORE = os.path.join(EXAMPLES, "gluon", "store_epilogue.py")
CLC = os.path.join(EXAMPLES, "gluon", "clc_persistent.py")
MULTICTA = os.path.join(EXAMPLES, "gluon", "multicta_ring.py")
TWO_CTA = os.path.join(EXAMPLES, "gluon", "two_cta_matmul.py")


def line_of(fn, text: str) -> int:
    """The line of this file on which `text` appears inside `fn`."""
    lines, start = inspect.getsourcelines(fn.fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


# -- kernels, one construct each -------------------------------------------------------------

@gluon.jit
def counters(desc, n, STAGES: gl.constexpr):
    """A single partition cycling a ring with carried slot and phase counters."""
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_type.shape, desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    slot = 0
    phase = 0
    for k in range(n):
        mbarrier.expect(bars.index(slot), desc.block_type.nbytes)
        tma.async_load(desc, [0, k * 64], bars.index(slot), bufs.index(slot))
        mbarrier.wait(bars.index(slot), phase)
        slot += 1
        if slot == STAGES:
            slot = 0
            phase ^= 1


@gluon.jit
def drained(desc, n, STAGES: gl.constexpr):
    """A ring's last STAGES - 1 tiles consumed by a loop of their own (`range(n - 2, n)`)."""
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_type.shape, desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    for k in range(n - (STAGES - 1), n):
        mbarrier.expect(bars.index(k % STAGES), desc.block_type.nbytes)
        tma.async_load(desc, [0, k * 64], bars.index(k % STAGES), bufs.index(k % STAGES))
        mbarrier.wait(bars.index(k % STAGES), (k // STAGES) & 1)


@gluon.jit
def persistent(n_tiles, SKIP_ARRIVE: gl.constexpr):
    """`for tile in range(pid, n, num_programs)` with a predicated arrive and a branch."""
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    done = 0
    for tile in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        if SKIP_ARRIVE:
            if done % 2 == 0:
                mbarrier.arrive(bar, count=1)
        else:
            mbarrier.arrive(bar, count=1, pred=tile < n_tiles)
        mbarrier.wait(bar, done & 1)
        done += 1


@gluon.jit
def commit_ws(bar_count: gl.constexpr):
    """A commit in a worker partition, waited on by the default partition."""
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=bar_count)
    gl.warp_specialize([(waiter, (bar,)), (committer, (bar,))], [1], [24])


@gluon.jit
def waiter(bar):
    mbarrier.wait(bar, 0)


@gluon.jit
def committer(bar):
    tcgen05_commit(bar)


@gluon.jit
def unknown_sync(n):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    async_copy.mbarrier_arrive(bar, increment_count=True)
    mbarrier.arrive(bar, count=1)
    mbarrier.wait(bar, 0)


@gluon.jit
def does_not_compile(n):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.wait(bar, undefined_name)  # noqa: F821


@gluon.jit
def prologue_epilogue(desc):
    """A load waited on before warp_specialize, an arrive after it."""
    buf = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.init(done, count=1)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load(desc, [0, 0], bar, buf)
    mbarrier.wait(bar, 0)
    gl.warp_specialize([(waiter, (done,)), (waiter, (done,))], [1], [24])
    mbarrier.arrive(done, count=1)


@gluon.jit
def no_closed_form(n, CONST_TRIP: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    phase = 0
    trip = n
    if CONST_TRIP:
        trip = 3
    for k in range(trip):
        mbarrier.arrive(bar, count=1)
        mbarrier.wait(bar, phase)
        phase = (phase * 3 + 1) % 2


@gluon.jit
def hopper_wgmma(a_desc, b_desc, K, STAGES: gl.constexpr, num_warps: gl.constexpr):
    """Hopper: TMA into a ring, asynchronous wgmma with one left in flight."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, 64, 16])
    acc = gl.zeros((64, 64), gl.float32, layout)
    for k in range(gl.cdiv(K, 64)):
        s = k % STAGES
        mbarrier.expect(bars.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [0, k * 64], bars.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [k * 64, 0], bars.index(s), b_bufs.index(s))
        mbarrier.wait(bars.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])


DESC = tensor_desc("fp16", [128, 64])


def verdict_of(kernel, **kw):
    return check_kernel(kernel, options=Options(**kw))


# -- constructs ------------------------------------------------------------------------------

def test_carried_ring_counters_have_closed_forms_and_the_ring_is_verified():
    kernel = load(Launch(counters, args=dict(desc=DESC, n=7, STAGES=3)))
    loops = [s for s in walk(kernel.body) if isinstance(s, Loop)]
    assert len(loops) == 1 and repr(loops[0].trip) == "n"
    wait = next(op for op in iter_ops(kernel.body) if op.kind == "wait_parity")
    k = loops[0].var
    assert repr(wait.parity) == f"(({k} // 3) % 2)"
    assert repr(wait.barrier) == f"bars[({k} % 3)]"
    load_op = next(op for op in iter_ops(kernel.body) if op.kind == "tma_load")
    assert load_op.bytes.value == 128 * 64 * 2
    assert load_op.loc.file == HERE and load_op.loc.line == line_of(counters, "tma.async_load")
    assert kernel.params["n"].default == 7 and kernel.params["n"].symbolic
    # the copy writes its slot of the ring: races are judged per slot
    assert [repr(w) for w in load_op.writes] == [f"bufs[({k} % 3)]"]
    assert [b.name for b in kernel.buffers] == ["bufs"] and not kernel.buffers[0].scalar
    v = verdict_of(kernel)
    assert v.verdict == "verified", v.diagnostics


def test_a_drain_loop_runs_a_constant_count_and_its_slots_read_as_floor_division():
    """A C remainder of a loop position `n - 2 + j` is `%` when `assume` keeps it >= 0; without
    the assumption the position may be negative and the C form stays (unknown to `prove`)."""
    def wait_of(**kw):
        kernel = load(Launch(drained, args=dict(desc=DESC, n=7, STAGES=3), **kw))
        # `n - (n - 2)` iterations: 2, for every n
        assert [repr(s.trip) for s in walk(kernel.body) if isinstance(s, Loop)] == ["2"]
        return next(op for op in iter_ops(kernel.body) if op.kind == "wait_parity")
    wait = wait_of(assume=lambda n: n >= 2)
    assert "max" not in repr(wait.barrier) and repr(wait.barrier).endswith("% 3)]")
    assert "max" not in repr(wait.parity)
    assert "max" in repr(wait_of().barrier)


def test_persistent_loop_predicates_and_branches():
    kernel = load(Launch(persistent, args=dict(n_tiles=5, SKIP_ARRIVE=False), grid=(2,)))
    assert {"pid_x", "num_programs_x", "n_tiles"} <= set(kernel.params)
    assert kernel.params["num_programs_x"].default == 2
    loop = next(s for s in walk(kernel.body) if isinstance(s, Loop))
    assert "num_programs_x" in repr(loop.trip) and "pid_x" in repr(loop.trip)
    assert any(isinstance(s, When) for s in loop.body)         # the predicated arrive
    assert verdict_of(kernel).verdict == "verified"
    # arriving on every other tile only: the second tile's wait never returns
    skipping = load(Launch(persistent, args=dict(n_tiles=5, SKIP_ARRIVE=True)))
    branch = next(s for s in walk(skipping.body) if isinstance(s, When))
    assert repr(branch.cond) == f"(({loop.var} % 2) == 0)"
    assert [o.kind for o in iter_ops(branch.then)] == ["arrive"]
    v = verdict_of(skipping)
    assert v.verdict == "violation" and v.codes[0] == "BP100", v.label


def test_warp_specialize_partitions_and_commit():
    kernel = load(Launch(commit_ws, args=dict(bar_count=1)))
    assert kernel.num_threads.value == 2 and kernel.thread_axis == "partition"
    [note] = [n for n in kernel.notes if n.startswith("threads: ")]
    assert note.startswith("threads: partition0 = the default partition (4 warps); "
                           "partition1 = worker 0 (1 warp, from ")
    assert f"test_gluon.py:{line_of(committer, 'tcgen05_commit(bar)')})" in note
    kinds = [op.kind for op in iter_ops(kernel.body)]
    assert kinds == ["wait_parity", "tcgen05_commit_arrive"]
    assert verdict_of(kernel).verdict == "verified"
    wrong = verdict_of(load(Launch(commit_ws, args=dict(bar_count=2))))
    assert wrong.verdict == "violation" and wrong.codes[0] == "BP100"


def test_a_launch_is_compiled_once_while_its_arguments_and_files_are_unchanged():
    """model/built.py: the second load of one launch is the first's IR in a kernel of its own;
    its `args` changed in place compile it again."""
    launch = Launch(commit_ws, args=dict(bar_count=1))
    first, again = load(launch), load(launch)
    assert again is not first and again.body is first.body
    launch.args["bar_count"] = 2
    changed = load(launch)
    assert changed.body is not first.body
    assert verdict_of(changed).codes[0] == "BP100"


def test_a_tl_kernel_is_checked_after_triton_warp_specializes_it():
    kernel = next(t for t in ALL_TARGETS if t.name == "three_stages").build()
    assert kernel.num_threads.value == 3                 # default, load and MMA partitions
    kinds = {op.kind for op in kernel.ops()}
    assert {"tma_load", "arrive_expect_tx", "wait_parity", "tcgen05_commit_arrive"} <= kinds
    assert "unmodeled" not in kinds
    rings = [b for b in kernel.barriers if b.shape and b.shape[0].value == 3]
    assert len(rings) == 2                               # num_stages=3: ready and empty rings


@gluon.jit
def reinit(n):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    for k in range(n):
        mbarrier.arrive(bar, count=1)
        mbarrier.wait(bar, 0)
        mbarrier.init(bar, count=1)


def test_a_barrier_initialised_again_is_bp190():
    kernel = load(Launch(reinit, args=dict(n=2)))
    [op] = [op for op in kernel.ops() if op.kind == "unmodeled"]
    assert "re-initialisation" in op.name
    assert op.loc.line == line_of(reinit, "mbarrier.init(bar, count=1)") + 4
    # without the re-init the second wait never returns: a violation that says it ignored BP190
    v = verdict_of(kernel)
    assert "BP190" in v.codes and any("BP190" in note for note in v.notes)


def test_hopper_wgmma_reads_its_operands_until_its_wait():
    def launch(stages):
        return Launch(hopper_wgmma, args=dict(a_desc=tensor_desc("fp16", [64, 64]),
                                              b_desc=tensor_desc("fp16", [64, 64]), K=256,
                                              STAGES=stages), target="cuda:90")
    kernel = load(launch(2))
    assert [op.kind for op in kernel.ops()][-3:] == ["wgmma", "wgmma_wait", "wgmma_wait"]
    assert verdict_of(kernel).verdict == "verified"
    # one slot and one wgmma left in flight: the next load overwrites what it still reads
    v = verdict_of(load(launch(1)))
    assert v.verdict == "violation" and v.codes[0] == "BP200"


def test_code_around_warp_specialize_is_ordered_with_the_partitions():
    kernel = load(Launch(prologue_epilogue, args=dict(desc=DESC)))
    names = [b.name for b in kernel.barriers]
    assert "warp_specialize_start" in names and "warp_specialize_end" in names
    # the arrive after warp_specialize needs every partition to have returned: both workers
    # wait for `done`, which only the default partition arrives on after the join
    v = verdict_of(kernel)
    assert v.verdict == "violation" and v.codes[0] == "BP100"


def test_a_carry_without_closed_form_is_unrolled_or_bp190():
    unrolled = load(Launch(no_closed_form, args=dict(n=3, CONST_TRIP=True)))
    assert not any(isinstance(s, Loop) for s in walk(unrolled.body))
    assert [op.parity.value for op in unrolled.ops() if op.kind == "wait_parity"] == [0, 1, 0]
    assert verdict_of(unrolled).verdict == "verified"
    # a trip count from an argument: unrolled at the launch's value, which it is checked at only
    at_launch = load(Launch(no_closed_form, args=dict(n=3, CONST_TRIP=False)))
    assert [op.parity.value for op in at_launch.ops() if op.kind == "wait_parity"] == [0, 1, 0]
    assert "n" not in at_launch.params
    [note] = [n for n in at_launch.notes if n.startswith("checked at n = 3 only")]
    line = line_of(no_closed_form, "for k in range(trip)")
    assert note.endswith(f"the loop-carried phase of the loop at "
                         f"{os.path.relpath(HERE)}:{line} has no closed form"), note
    assert verdict_of(at_launch).verdict == "verified"
    # too many iterations to unroll at the launch's value: BP190 at the loop
    symbolic = load(Launch(no_closed_form, args=dict(n=1000, CONST_TRIP=False)))
    ops = list(symbolic.ops())
    assert len(ops) == 1 and ops[0].kind == "unmodeled" and "no closed form" in ops[0].name
    assert ops[0].loc.line == line_of(no_closed_form, "for k in range(trip)")
    assert verdict_of(symbolic).verdict == "unknown"


def test_an_unknown_op_is_bp190_at_its_line():
    kernel = load(Launch(unknown_sync, args=dict(n=1)))
    unmodeled = [op for op in iter_ops(kernel.body) if op.kind == "unmodeled"]
    assert len(unmodeled) == 1 and \
        unmodeled[0].name.startswith("ttng.async_copy_mbarrier_arrive")
    assert unmodeled[0].loc.file == HERE
    assert unmodeled[0].loc.line == line_of(unknown_sync, "async_copy.mbarrier_arrive(bar")
    v = verdict_of(kernel)
    assert v.verdict == "unknown" and v.codes == ["BP190"]
    assert unmodeled[0].name.split(":")[0] in v.diagnostics[0].message


def test_a_kernel_that_does_not_compile_is_an_input_error_at_its_line():
    with pytest.raises(ModelError) as err:
        load(Launch(does_not_compile, args=dict(n=1)))
    assert err.value.loc is not None and err.value.loc.line == line_of(does_not_compile,
                                                                       "undefined_name")


def test_a_missing_argument_is_an_input_error():
    with pytest.raises(ModelError, match="argument 'n' of counters has no value") as err:
        load(Launch(counters, args=dict(desc=DESC, STAGES=2)))
    # at the launch's line, with the kernel's arguments in the hint
    assert os.path.abspath(err.value.loc.file) == HERE
    assert "counters(desc, n, STAGES" in err.value.hint


def test_a_malformed_launch_is_an_input_error_at_its_line():
    """What a user gets wrong in a Launch is said at the Launch(...) line, before compiling."""
    cases = {"has no argument 'K'": dict(args=dict(desc=DESC, n=2, STAGES=2, K=3)),
             # a misspelt argument is named (with the closest), not the one left without value
             r"has no argument 'nn' \(did you mean 'n'\?\)": dict(args=dict(desc=DESC, nn=2,
                                                                               STAGES=2)),
             "num_warps is given twice": dict(args=dict(desc=DESC, n=2, STAGES=2, num_warps=8)),
             r"num_warps=3\) is not a power of two": dict(args=dict(desc=DESC, n=2, STAGES=2),
                                                          num_warps=3),
             "'n' = 2.0 cannot be given": dict(args=dict(desc=DESC, n=2.0, STAGES=2))}
    for message, given in cases.items():
        launch = Launch(counters, **given)
        line = sys._getframe().f_lineno - 1
        with pytest.raises(ModelError, match=message) as err:
            load(launch)
        where = err.value.loc
        assert (os.path.abspath(where.file), where.line) == (HERE, line), message
        assert err.value.hint, message
    # a constexpr of the wrong type fails in Triton, at the kernel's line: the hint names it
    with pytest.raises(ModelError, match="must be integers") as err:
        load(Launch(counters, args=dict(desc=DESC, n=2, STAGES="2")))
    assert "STAGES='2'" in err.value.hint
    assert err.value.loc.line == line_of(counters, "bufs = ")


# -- the examples ----------------------------------------------------------------------------

TARGETS = resolve(EXAMPLE)
ALL_TARGETS = resolve(os.path.join(EXAMPLES, "gluon"))


def _readme_rows() -> dict:
    readme = os.path.join(os.path.dirname(EXAMPLES), "docs", "frontends.md")
    rows = {}
    for line in open(readme, encoding="utf-8").read().split("| Gluon example |", 1)[1] \
            .splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


README_ROWS = _readme_rows()


def test_the_loader_finds_every_launch_of_the_example():
    assert {t.kind for t in TARGETS} == {"gluon"}
    assert {t.name for t in TARGETS} == {"ring", "ring_two_stages", "wrong_empty_phase",
                                         "expect_one_of_two_loads", "slot_never_released",
                                         "ready_counts_two_arrivals"}
    assert [t.name for t in resolve(EXAMPLE + "::ring")] == ["ring"]
    assert {os.path.abspath(t.path) for t in ALL_TARGETS} == {EXAMPLE, PERSISTENT, AUTO_WS,
                                                                 PIPELINED, ATTENTION, STORE, CLC,
                                                                 MULTICTA, TWO_CTA}
    assert all(t.expect for t in ALL_TARGETS)


def test_a_launch_needs_no_expect_entry(tmp_path):
    """A module-level Launch is a declaration: without EXPECT it is still a target (with no
    expected verdict), and EXPECT, where given, gives its verdict."""
    src = open(EXAMPLE).read()
    bare = tmp_path / "bare.py"
    bare.write_text(src[:src.index("EXPECT = {")])
    found = resolve(str(bare))
    assert {t.name for t in found} == {t.name for t in TARGETS}
    assert all(t.kind == "gluon" and not t.expect for t in found)
    assert {t.name: t.expect for t in TARGETS}["wrong_empty_phase"] == "violation:BP100"


def test_carried_counters_across_tiles_of_a_persistent_kernel():
    """The tutorials' Counter aggregate, kept across tiles: closed forms of nested carries."""
    kernel = next(t for t in ALL_TARGETS if t.name == "persistent").build()
    assert {"pid_x", "num_programs_x", "a_desc_shape_1", "c_desc_shape_0"} <= set(kernel.params)
    assert kernel.params["a_desc_shape_1"].default == 256
    loops = [s for s in walk(kernel.body) if isinstance(s, Loop)]
    assert len(loops) == 5                                  # no loop unrolled
    assert not [op for op in kernel.ops() if op.kind == "unmodeled"]


@pytest.mark.parametrize("target", ALL_TARGETS, ids=lambda t: t.name)
def test_example_verdict_and_counterexample_on_the_kernels_lines(target):
    kernel = target.build()
    v = check_kernel(kernel, source=target.ref)
    assert v.matches(target.expect), (v.label, v.diagnostics)
    # the README's table (bench/gluon_table.py) says the same
    row = README_ROWS[f"`{os.path.basename(target.path)}::{target.name}`"]
    assert row[3:5] == [str(v.states), v.label], row
    example = os.path.abspath(target.path)
    for op in kernel.ops():
        assert op.loc.file == example, op
    if v.verdict == "violation":
        trace = v.trace
        run = replay(System(kernel, trace.params, trace.grid_position), trace.actions)
        assert run.violation is not None and run.violation.code == v.codes[0]
        where, line = v.diagnostics[0].location.rsplit(":", 1)
        source = open(example).read().splitlines()
        assert os.path.abspath(where) == example
        if v.codes[0] in ("BP100", "BP101", "BP130"):     # a stuck or stale wait: its line
            assert "mbarrier.wait" in source[int(line) - 1]
        elif v.codes[0] == "BP146":                 # a remote arrival into an exited CTA
            assert "mbarrier.arrive" in source[int(line) - 1]
        else:                                       # a race: the line of one of the accesses
            assert any(w in source[int(line) - 1]
                       for w in ("tma.", "tcgen05", ".load(", "clc."))
        lines = {int(step.location.rsplit(":", 1)[1]) for step in trace.steps
                 if step.location and step.agent_kind == "thread"}
        assert all("mbarrier." in source[n - 1] or "tma." in source[n - 1]
                   or "tcgen05" in source[n - 1] or "clc." in source[n - 1] for n in lines), lines


# -- the command line and the docstrings ---------------------------------------------------

def test_check_on_the_command_line_shows_the_kernels_lines(capsys, tmp_path):
    from barrierproof.cli import main
    assert main(["check", EXAMPLE + "::wrong_empty_phase", "--no-cache"]) == 1
    out = capsys.readouterr().out
    source = open(EXAMPLE).read().splitlines()
    wait = next(n for n, line in enumerate(source, 1) if "mbarrier.wait(empty_bars" in line)
    assert f"ws_matmul.py:{wait}" in out and "BP100" in out      # the loader's wait on `empty`
    assert main(["check", EXAMPLE + "::ring", "--param", "K=192", "--no-cache"]) == 0
    bad = tmp_path / "bad.py"
    bad.write_text("from barrierproof.model.gluon import Launch\n"
                   "def plain(): pass\n"
                   "k = Launch(plain)\nEXPECT = {'k': 'verified'}\n")
    capsys.readouterr()
    assert main(["check", str(bad), "--no-cache"]) == 3
    err = capsys.readouterr()
    assert "is not a @gluon.jit kernel" in err.out + err.err


@pytest.mark.parametrize("name", ["ttgir", "carries", "launch"])
def test_docstring_examples(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(f"barrierproof.model.gluon.{name}"))
    assert result.attempted > 0 and result.failed == 0


@gluon.jit
def _keep_above(x, i):
    return gl.where(i > 3, x, 0.0)


@gluon.jit
def data_between_barriers(ptr):
    """Reductions, scans and elementwise maps (ops with combiner regions, printed in MLIR's
    generic form) between barrier operations: local data, not synchronization."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, 128, layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    x = gl.cumsum(gl.load(ptr + offs), 0)
    x = gl.map_elementwise(_keep_above, x, offs)
    mbarrier.arrive(bar, count=1)
    gl.store(ptr + offs, x + gl.max(x, 0))
    mbarrier.wait(bar, 0)


def test_reductions_scans_and_elementwise_maps_are_local_data():
    kernel = load(Launch(data_between_barriers, args=dict(ptr="*fp32")))
    assert [op.kind for op in kernel.ops()] == ["arrive", "wait_parity"]
    assert verdict_of(kernel).verdict == "verified"


def test_attention_rings_keep_their_loops_and_rows_of_a_buffer_are_slots():
    """The K/V ring advanced twice per block (`((c + 1) % S + 1) % S`, its phase xor'ed with one
    wrap test per advance) has a closed form, so the loops stay loops over N_CTX; and the two
    softmax partitions' rows of the [2, M] alpha buffer (`alpha_smem.index(h)`) are slots of
    their own, not one buffer both write."""
    for name in ("attention", "attention_persistent"):
        kernel = next(t for t in ALL_TARGETS if t.name == name).build()
        assert not any(n.startswith("checked at") for n in kernel.notes), kernel.notes
        assert "N_CTX" in kernel.params
        [alpha] = [b for b in kernel.buffers if b.name == "alpha_smem"]
        assert not alpha.scalar and [int(d.value) for d in alpha.shape] == [2]
        rows = {tuple(int(i.value) for i in r.index) for op in kernel.ops()
                for r in op.writes if r.alloc.name == "alpha_smem"}
        assert rows == {(0,), (1,)}, rows


@gluon.jit
def clc_scheduled(desc, out, n, SHAPE: gl.constexpr):
    """The tutorials' CLC scheduler: work while the last request cancelled a launch. SHAPE
    gives loops the frontend must not read as one: an exit refined by a bound (0 is the
    tutorial's), the loop inside a counted loop (1), a request issued every other tile (2)."""
    response = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    phase = 0
    for _ in range(n if SHAPE == 1 else 1):
        has_work = gl.to_tensor(True)
        tile = gl.program_id(0)
        while has_work:
            if SHAPE == 2:
                if phase == 0:
                    clc.try_cancel(response, bar)
            else:
                clc.try_cancel(response, bar)
            mbarrier.expect(bar, 16)
            gl.store(out + tile, tile)
            mbarrier.wait(bar, phase)
            result = clc.load_result(response)
            has_work = result.is_canceled()
            if SHAPE == 3:
                has_work = has_work & (tile < n)
            tile = result.program_id(0)
            phase ^= 1


def test_a_loop_on_cluster_launch_control_runs_clc_tiles_in_every_partition():
    """The request and its response are read (16 bytes on the barrier, the response buffer
    written asynchronously); the loop whose exit is the response runs `clc_tiles` (>= 1)
    iterations, the request and the read inside it."""
    kernel = load(Launch(clc_scheduled, args=dict(desc=DESC, out="*i32", n=4, SHAPE=0)))
    assert not [op for op in kernel.ops() if op.kind == "unmodeled"]
    [loop] = [s for s in walk(kernel.body) if isinstance(s, Loop)]
    assert same(loop.trip, Var("clc_tiles")) and kernel.params["clc_tiles"].default == 3
    assert any(same(a, Var("clc_tiles") >= 1) for a in kernel.assumptions)
    assert {op.kind for op in loop.body if isinstance(op, Op)} >= {"tma_load", "read"}
    assert verdict_of(kernel).verdict == "verified"


@pytest.mark.parametrize("shape", [1, 2, 3])
def test_a_loop_on_cluster_launch_control_the_partitions_may_leave_apart_is_bp190(shape):
    """Inside a counted loop (a run per outer iteration), a request not issued in every
    iteration, an exit that is not exactly the response's: BP190 at the `while`, never
    verified (the request skipped every other tile also leaves an expect without its bytes, but
    its counterexample steps past the `while` left unread, so it is no finding: `unknown`)."""
    kernel = load(Launch(clc_scheduled, args=dict(desc=DESC, out="*i32", n=4, SHAPE=shape)))
    lines = {op.loc.line for op in kernel.ops() if op.kind == "unmodeled"}
    assert line_of(clc_scheduled, "while has_work") in lines
    assert verdict_of(kernel).verdict == "unknown"


@gluon.jit
def one_cta_layout(a_desc):
    a_s = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], bar, a_s)
    mbarrier.wait(bar, 0)


def test_a_launch_the_verifier_rejects_is_an_input_error_at_the_kernels_line(capfd):
    """Two CTAs with a descriptor laid out for one: MLIR's verifier prints its error and Triton
    raises a bare RuntimeError; the error says what the verifier said, at the user's line."""
    with pytest.raises(ModelError) as err:
        load(Launch(one_cta_layout, args=dict(a_desc=DESC), num_ctas=2))
    assert "CTAs per CGA" in str(err.value) and "num_ctas=2" in (err.value.hint or "")
    assert err.value.loc.line == line_of(one_cta_layout, "a_s = ")
    assert "error:" not in capfd.readouterr().err          # said once, by the report


@gluon.jit
def counted_while(desc, n, STEP: gl.constexpr, SKIP_ODD: gl.constexpr):
    """A ring walked by a Python `while` over a counter (`t += STEP`, or a step that depends on
    the tile)."""
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_type.shape, desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    t = 0
    while t < n:
        k = t // STEP
        mbarrier.expect(bars.index(k % 2), desc.block_type.nbytes)
        tma.async_load(desc, [0, t * 64], bars.index(k % 2), bufs.index(k % 2))
        mbarrier.wait(bars.index(k % 2), (k // 2) & 1)
        if SKIP_ODD and t % 2 == 1:
            t += 2 * STEP
        else:
            t += STEP


def test_a_while_over_a_counter_is_the_loop_it_counts():
    """`while t < n: ...; t += c` is a loop of ceil(n / c) trips over `t = c * j`; a counter
    advanced by a step that depends on the tile has no trip count: BP190 at the `while`."""
    kernel = load(Launch(counted_while, args=dict(desc=DESC, n=7, STEP=2, SKIP_ODD=False)))
    loops = [s for s in walk(kernel.body) if isinstance(s, Loop)]
    assert len(loops) == 1 and not [op for op in kernel.ops() if op.kind == "unmodeled"]
    assert verdict_of(kernel).verdict == "verified"
    trips = {n: replay_trip(loops[0].trip, n) for n in (0, 1, 6, 7)}
    assert trips == {0: 0, 1: 1, 6: 3, 7: 4}, trips
    kernel = load(Launch(counted_while, args=dict(desc=DESC, n=7, STEP=1, SKIP_ODD=True)))
    unmodeled = [op for op in kernel.ops() if op.kind == "unmodeled"]
    assert [op.name.split(":")[0] for op in unmodeled] == ["scf.while"]
    assert unmodeled[0].loc.line == line_of(counted_while, "while t < n")
    assert "not advanced by a constant" in unmodeled[0].name


@gluon.jit
def grid_strided_while(desc, n, STEP_FROM_DATA: gl.constexpr):
    """A persistent `while` over tiles: each program takes every num_programs-th tile."""
    buf = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    tile = gl.program_id(0)
    phase = 0
    while tile < n:
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [0, tile * 64], bar, buf)
        mbarrier.wait(bar, phase)
        phase ^= 1
        if STEP_FROM_DATA:
            tile += tile % 3 + 1
        else:
            tile += gl.num_programs(0)


def test_a_while_over_the_grid_is_the_loop_it_counts():
    """`tile = program_id; while tile < n: ...; tile += num_programs` (the compiler leaves the
    grid query inside the loop): the step is the launch's program count, positive by the
    launch's assumptions, so the loop is counted as its `range` twin is; a step the loop
    computes from its own counter still has no trip count (BP190 at the `while`)."""
    kernel = load(Launch(grid_strided_while, args=dict(desc=DESC, n=5, STEP_FROM_DATA=False),
                         grid=(2,)))
    assert not [op for op in kernel.ops() if op.kind == "unmodeled"]
    assert verdict_of(kernel).verdict == "verified"
    kernel = load(Launch(grid_strided_while, args=dict(desc=DESC, n=5, STEP_FROM_DATA=True),
                         grid=(2,)))
    unmodeled = [op for op in kernel.ops() if op.kind == "unmodeled"]
    assert [op.name.split(":")[0] for op in unmodeled] == ["scf.while"]
    assert unmodeled[0].loc.line == line_of(grid_strided_while, "while tile < n")


def replay_trip(trip, n: int) -> int:
    from barrierproof.model.expr import substitute
    from barrierproof.model.ir import Const, free_vars
    return substitute(trip, {v: Const(n) for v in free_vars(trip)}).value


@gluon.jit
def split_tile(a_desc):
    a_s = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout.multicta(2))
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], bar, a_s)
    mbarrier.wait(bar, 0)


def test_a_launch_that_ends_tritons_compiler_is_an_input_error():
    """A CGA layout whose CTA basis lies outside the tile stops Triton's C++ passes with an
    LLVM fatal error (abort): the compilation runs in a fork, so that is an input error saying
    what LLVM printed, and the checking process goes on."""
    layout = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16, cga_layout=[[32, 0]])
    with pytest.raises(ModelError, match="killed by SIGABRT.*surjective") as err:
        load(Launch(split_tile, args=dict(a_desc=tensor_desc("fp16", [64, 64], layout)),
                    num_ctas=2))
    assert "cga_layout" in err.value.hint
    assert load(Launch(counters, args=dict(desc=DESC, n=2, STAGES=2))).name == "counters"


def test_the_persistent_matmuls_barrier_rules_are_proved_for_every_shape_and_program_count():
    """Its K ring flattens (nested.py: Triton's phase as the xor of two bits) and its tile count,
    a static schedule's share of the tile grid, is a parameter of its own (opaque_counts.py);
    its races are proved through the per-tile projections (races_nested.py: the K ring with
    the K loop's barriers, the TMEM accumulator and the epilogue's staging buffer with the
    per-tile ones). About 20 s."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    (target,) = resolve(PERSISTENT + "::persistent")
    found = prove_kernel(target.build(), source=target.ref)
    assert found.verdict == "proved", found.coverage
    assert found.coverage.startswith("proved for all a_desc_shape_1, c_desc_shape_0, "
                                     "c_desc_shape_1, num_programs_x, pid_x"), found.coverage
    assert "race-free (BP200/BP201)" in found.coverage
    assert any("races on acc_bufs, c_smem judged in the projection on the per-tile barriers"
               in n for n in found.notes), found.notes
