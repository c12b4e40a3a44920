"""JAX's own Mosaic GPU kernels (jax.experimental.pallas.ops.gpu), traced on this CPU-only machine
at representative configurations: each gets the verdict examples/pallas/jax_kernels.py declares,
with diagnostics that point into the kernel's source."""

import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.model import pallas
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import iter_ops
from barrierproof.model.semantics import compile_systems

from conftest import EXAMPLES

MODULE = pallas.import_file(os.path.join(EXAMPLES, "pallas", "jax_kernels.py"))
FAST = sorted(MODULE.EXPECT)




def _load(name):
    return pallas.load(getattr(MODULE, name), name=name)


def _source_of(loc):
    return loc.file.startswith("jax/experimental/pallas/ops/gpu/") \
        or loc.file.endswith("jax_kernels.py")


@pytest.mark.parametrize("name", FAST)
def test_shipped_kernel_verdict(name):
    for kernel in _load(name):          # a function may launch several kernels
        verdict = check_kernel(kernel, source=f"jax_kernels.py::{name}")
        assert verdict.label == MODULE.EXPECT[name], [d.one_line() for d in verdict.diagnostics]
        for op in iter_ops(kernel.body):    # every op points at a line of the shipped kernel
            assert _source_of(op.loc), (op.describe(), op.loc)
        if verdict.verdict == "violation":
            assert verdict.trace is not None and verdict.trace.steps


def test_attention_backward_launches_two_kernels():
    kernels = _load("attention_backward")
    assert [k.name for k in kernels] == ["attention_backward", "attention_backward#2.anonymous"]
    for k in kernels:
        assert all(o.loc.file.endswith("attention_mgpu.py") for o in iter_ops(k.body))


def test_blackwell_ragged_dot_2cta():
    (kernel,) = _load("blackwell_ragged_dot")
    assert [(a, n.value) for a, n in kernel.cluster] == [("x", 2)]
    kinds = {o.kind for o in iter_ops(kernel.body)}
    # leader-tracked partitioned TMA becomes expect_tx on block 0 + loads that land there
    assert {"arrive_expect_tx", "tma_load", "tcgen05_mma", "tcgen05_commit_arrive"} <= kinds
    verdict = check_kernel(kernel)
    assert verdict.label == MODULE.SLOW["blackwell_ragged_dot"]
    (diag,) = verdict.diagnostics
    assert "consumed_barrier" in diag.message or "store_done_barrier" in diag.message


def test_blackwell_matmul_collective_traces_and_explores():
    """The 2-CTA matmul takes minutes exhaustively (README table); here: its structure, a
    breadth-first search that finds no violation in its first 20000 states, and the depth-first
    search (the default) that meets one within them, replayed, not claimed shortest."""
    (kernel,) = _load("blackwell_matmul_collective")
    names = {b.name: b for b in kernel.barriers}
    assert names["store_done_barrier"].cluster
    assert names["consumed_barrier"].orders_tensor_core
    commits = [o for o in iter_ops(kernel.body) if o.kind == "tcgen05_commit_arrive"]
    assert commits and commits[0].collective_axes == ("x",)
    verdict = check_kernel(kernel, options=Options(Limits(max_states=20_000), order="bfs"))
    assert verdict.verdict == "bounded", verdict.label
    deep = check_kernel(kernel, options=Options(Limits(max_states=20_000)))
    assert deep.label == MODULE.SLOW["blackwell_matmul_collective"]   # replayed by check_kernel
    assert deep.coverage.startswith("counterexample: ") and "found depth first" in deep.coverage
    (diag,) = deep.diagnostics
    assert "store_done_barrier" in diag.message


@pytest.mark.slow
def test_blackwell_matmul_collective_has_the_bp103_finding_of_the_1cta_kernel():
    """One tile per block: partial-order reduction finds the BP103 in seconds; the search that
    confirms it shortest may stop at the limit (then the coverage says so), the finding stands
    and is replayed on the interpreter (check_kernel raises otherwise)."""
    (kernel,) = _load("blackwell_matmul_collective")
    params, expect = MODULE.ONE_TILE_PER_BLOCK
    verdict = check_kernel(kernel, params, Options(Limits(timeout=60)))
    assert verdict.label == expect
    (diag,) = verdict.diagnostics
    assert "consumed_barrier" in diag.message or "store_done_barrier" in diag.message


def test_attention_forward_finding_is_explained_by_its_trace():
    """The memory warpgroup never waits for the last completions of the `consumed` barriers:
    the counterexample ends with the compute warpgroups' final arrivals on them."""
    (kernel,) = _load("attention_forward")
    verdict = check_kernel(kernel)
    (diag,) = verdict.diagnostics
    assert diag.code == "BP103" and "wg2" in diag.message
    assert "attention_mgpu.py" in diag.location
    last = verdict.trace.steps[-1]
    assert last.agent in ("wg0", "wg1") and "barrier_arrive(args_2_" in last.text
    ignoring = check_kernel(kernel, options=Options(ignore=frozenset({"BP103"})))
    assert ignoring.verdict in ("verified", "bounded")


def test_dynamic_scheduling_loop_becomes_a_stated_parameter():
    (kernel,) = _load("blackwell_matmul")
    (param,) = kernel.params.values()
    assert param.default == pallas.DEFAULT_TRIPS
    assert any(param.name in n and "blackwell_matmul_mgpu.py" in n for n in kernel.notes)
    kinds = [o.kind for o in iter_ops(kernel.body)]
    assert "try_cluster_cancel" in kinds and "tcgen05_commit_arrive" in kinds
    # the findings do not depend on how many tiles a block claims: BP103, and behind it the
    # last epilogue store left reading shared memory at the exit (BP105); nothing else is wrong
    for tiles in (1, 2):
        assert check_kernel(kernel, {param.name: tiles}).label == "violation:BP103"
        behind = check_kernel(kernel, {param.name: tiles}, Options(ignore=frozenset({"BP103"})))
        assert behind.label == "violation:BP105", behind.label
        assert "wg1 exits with its TMA store" in behind.diagnostics[0].message
        assert check_kernel(kernel, {param.name: tiles},
                            Options(ignore=frozenset({"BP103", "BP105"}))).verdict == "verified"


def _bump_semaphore_waits(body):
    """The kernel with every semaphore_wait asking for one signal more."""
    import dataclasses
    from barrierproof.model.ir import Loop, Op, WarpRegion, When
    out = []
    for s in body:
        if isinstance(s, Op) and s.kind == "semaphore_wait":
            s = dataclasses.replace(s, count=s.count + 1)
        elif isinstance(s, Loop):
            s = Loop(s.var, s.trip, _bump_semaphore_waits(s.body), s.loc)
        elif isinstance(s, When):
            s = When(s.cond, _bump_semaphore_waits(s.then), _bump_semaphore_waits(s.orelse),
                     s.loc)
        elif isinstance(s, WarpRegion):
            s = WarpRegion(s.axis, _bump_semaphore_waits(s.body), s.loc)
        out.append(s)
    return tuple(out)


def test_collective_matmul_is_verified_with_its_semaphore():
    import dataclasses
    (kernel,) = _load("collective_matmul")
    assert ("x", 2) in [(a, n.value) for a, n in kernel.grid]     # the shard_map's devices
    kinds = [o.kind for o in iter_ops(kernel.body)]
    assert "unmodeled" not in kinds
    assert {"semaphore_signal", "semaphore_wait"} <= set(kinds)
    (sem,) = [b for b in kernel.barriers if b.semaphore]
    assert sem.copies.value == 132                  # every block of a device signals alike
    assert check_kernel(kernel).verdict == "verified"
    # the semaphore is not decoration: a wait for one signal more than the grid sends hangs
    hungry = dataclasses.replace(kernel, body=_bump_semaphore_waits(kernel.body))
    assert check_kernel(hungry).label == "violation:BP100"


def test_an_interrupted_depth_first_search_reports_the_violation_in_hand():
    """Ctrl-C while branch and bound shortens a violation: the violation found stands (replayed
    here), and says why it may not be shortest."""
    (kernel,) = _load("blackwell_matmul_collective")
    system = compile_systems(kernel)[0]

    def progress(report):
        if report["seconds"] > 1.0:
            raise KeyboardInterrupt

    r = explore(system, progress=progress, order="dfs")
    assert r.status == "violation" and r.reason.endswith("stopped (interrupted)"), r.reason
    run = replay(system, r.actions)
    assert run.violation is not None and run.violation.code == r.violation.code


def test_a_target_traced_again_sees_the_sizes_it_reads_now():
    """jax caches a zero-argument function's trace by the function; a target whose size is a
    module global, changed between two loads, must be traced at the new size."""
    from barrierproof.model.ir import Loop, walk
    saved = MODULE.K
    try:
        trips = []
        for k in (256, 1024):
            MODULE.K = k
            (kernel,) = pallas.load(MODULE.hopper_matmul, name="hopper_matmul")
            trips.append([str(l.trip) for l in walk(kernel.body) if isinstance(l, Loop)])
    finally:
        MODULE.K = saved
    assert "4" in trips[0] and "16" not in trips[0]
    assert "16" in trips[1] and "4" not in trips[1]
