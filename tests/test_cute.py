"""The CuTe DSL frontend: kernels compiled on the CPU (cute.compile, stopped after the MLIR is
built), read per warp into the IR, and checked. Every example in examples/cute/ gets its
declared verdict; counterexamples replay on the interpreter and point at the CuTe source."""

import os
import re

import pytest

pytest.importorskip("cutlass.cute")

from barrierproof.checker.check import check_kernel                      # noqa: E402
from barrierproof.loader import import_file, resolve, targets_in_module  # noqa: E402
from barrierproof.model.cute.interpreter import Warp                     # noqa: E402
from barrierproof.model.cute.tree import Block, KernelTree, Node         # noqa: E402
from barrierproof.model.interpreter import replay                       # noqa: E402
from barrierproof.model.ir import Loc, When, iter_ops                    # noqa: E402
from barrierproof.model.semantics import System                         # noqa: E402

from conftest import EXAMPLES                                           # noqa: E402

FILES = [os.path.join(EXAMPLES, "cute", f)
         for f in ("pipeline_tma.py", "mbarrier_ring.py", "named_barrier.py",
                   "async_pipeline.py", "umma_persistent.py", "hopper_wgmma.py",
                   "attention_fwd.py", "mainloop_every_k.py", "persistent_every_tile.py",
                   "cp_async_pipeline.py", "ring_reads.py", "wgmma_ring.py",
                   "umma_ring.py", "ts_twins.py")]
TARGETS = [t for f in FILES for t in targets_in_module(f, import_file(f))]
# Kernels written in the style of CUTLASS's CuTe DSL examples and pipelines after the frontend
# was built, with field bugs (tests/cute_unseen/): the frontend was not shaped on them.
UNSEEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cute_unseen")
UNSEEN_FILES = sorted(os.path.join(UNSEEN_DIR, f) for f in os.listdir(UNSEEN_DIR)
                      if f.endswith(".py"))
UNSEEN = [t for f in UNSEEN_FILES for t in targets_in_module(f, import_file(f))]


def _kernel(target):
    """The target's kernel: compiled once per process (about a second each), model/built.py."""
    return target.build()


def _target(name):
    return next(t for t in TARGETS if t.name == name)


def _unrolled(body, params=None):
    """Every operation of a body with its loops unrolled (the CuTe frontend rolls a loop back
    when its iterations differ only in ring slots and parities), at the parameter values
    `params` (K set at run time)."""
    from barrierproof.model.ir import Loop, evaluate
    for stmt in body:
        if isinstance(stmt, Loop):
            for _ in range(evaluate(stmt.trip, dict(params or {}))):
                yield from _unrolled(stmt.body, params)
        elif isinstance(stmt, When):
            yield from _unrolled(stmt.then, params)
            yield from _unrolled(stmt.orelse, params)
        else:
            yield stmt


def _unrolled_at(body, env):
    """(op, the loop variables' values) of every operation of a body at the parameter values
    `env`, its loops unrolled."""
    from barrierproof.model.ir import Loop, evaluate
    for stmt in body:
        if isinstance(stmt, Loop):
            for v in range(evaluate(stmt.trip, env)):
                yield from _unrolled_at(stmt.body, {**env, stmt.var: v})
        elif isinstance(stmt, When):
            yield from _unrolled_at(stmt.then, env)
            yield from _unrolled_at(stmt.orelse, env)
        else:
            yield stmt, env


def _slots_at(refs, env) -> list[str]:
    from barrierproof.model.ir import evaluate
    return [f"{r.alloc.name}[{', '.join(str(evaluate(i, env)) for i in r.index)}]" for r in refs]


def _source_line(loc: Loc) -> str:
    with open(loc.file, encoding="utf-8") as f:
        return f.read().splitlines()[loc.line - 1]


def test_the_loader_finds_the_cute_kernels_of_a_file():
    for path in FILES:
        found = resolve(os.path.relpath(path))
        module = import_file(path)
        assert [t.name for t in found] == list(module.EXPECT)
        assert {t.kind for t in found} == {"cute"}


def test_pipeline_mainloop_translation():
    kernel = _kernel(_target("mainloop"))
    assert kernel.source == "cute" and kernel.thread_axis == "warp" and kernel.num_warps == 1
    assert repr(kernel.num_threads) == "5"                  # 160 threads: 5 warps, 1 agent each
    # PipelineTmaAsync's barrier array, named after its struct field: full barriers (1
    # arrival: the producer's arrive.expect_tx) then empty barriers (one per consumer warp)
    counts = [(b.name, repr(b.num_arrivals), repr(b.shape[0]), b.explicit_init)
              for b in kernel.barriers]
    # initialised, fenced and published by the create's __syncthreads before any use: the
    # kernel is checked from there with initialised barriers
    assert counts == [("pipeline_bars", "1", "2", False), ("pipeline_bars_2", "4", "2", False)]
    assert not any(op.kind in ("mbarrier_init", "fence_mbarrier_init") for op in kernel.ops())
    assert any("published by a block-wide barrier" in n for n in kernel.notes)
    assert list(kernel.params) == ["k_tiles"]               # K from A's shape, at run time
    ops = list(_unrolled(kernel.body, {"k_tiles": 4}))
    tma = [op for op in ops if op.kind == "tma_load"]
    expect_tx = [op for op in ops if op.kind == "arrive_expect_tx"]
    assert len(tma) == len(expect_tx) == 4                  # one per K tile, from one lane
    assert {repr(op.bytes) for op in tma + expect_tx} == {str(64 * 64 * 2)}
    assert "cute.copy(" in _source_line(tma[0].loc)
    assert "producer_acquire" in _source_line(expect_tx[0].loc)
    releases = [op for op in ops if op.kind == "arrive"]
    # lane 0 of each consumer warp signals: one arrival per warp and stage
    assert releases and {repr(op.count) for op in releases} == {"1"}
    assert all("consumer_release" in _source_line(op.loc) for op in releases)
    roles = [s for s in kernel.body if isinstance(s, When)]
    assert roles, "warps with different programs are roles on the warp index"


def test_a_umma_consumer_releases_with_tcgen05_commits():
    kernel = _kernel(_target("mainloop_umma"))
    commits = [op for op in _unrolled(kernel.body, {"k_tiles": 4})
               if op.kind == "tcgen05_commit_arrive"]
    assert len(commits) == 4                                 # one per K tile, elected lane
    assert all(op.barrier.alloc.orders_tensor_core for op in commits)
    assert all("consumer_release" in _source_line(op.loc) for op in commits)
    assert not any(op.kind == "arrive" for op in kernel.ops())


def test_an_arrive_by_a_whole_warp_counts_its_32_lanes():
    kernel = _kernel(_target("ring"))
    arrives = {(op.barrier.alloc.name, repr(op.count)) for op in kernel.ops()
               if op.kind == "arrive"}
    assert arrives == {("full", "1"), ("empty", "32")}      # elect_one vs every lane
    assert {repr(b.num_arrivals) for b in kernel.barriers if b.name == "empty"} == {"32"}


def test_pipeline_async_arrives_from_every_thread_of_its_groups():
    kernel = _kernel(_target("async_pipeline"))
    arrives = {(op.barrier.alloc.name, repr(op.count)) for op in kernel.ops()
               if op.kind == "arrive"}
    counts = {b.name: repr(b.num_arrivals) for b in kernel.barriers}
    assert counts == {"bars_0": "32", "bars_2": "64"}
    assert arrives == {("bars_0", "32"), ("bars_2", "32")}    # each of 2 warps: 32 lanes


@pytest.mark.parametrize("target", TARGETS + UNSEEN, ids=lambda t: t.name)
def test_expected_verdict_and_replayed_counterexample(target):
    kernel = _kernel(target)
    verdict = check_kernel(kernel, source=target.ref)
    assert verdict.matches(target.expect), (verdict.label, [d.one_line()
                                                           for d in verdict.diagnostics])
    for d in verdict.diagnostics:                            # on the user's CuTe lines
        assert d.location and d.location.startswith(os.path.relpath(target.path)), d.location
    if verdict.verdict == "violation" and verdict.trace is not None:
        trace = verdict.trace
        run = replay(System(kernel, trace.params, trace.grid_position), trace.actions,
                     witness=trace.witness_actions)    # parity aliasing: the other schedule
        assert run.violation is not None and run.violation.code == verdict.codes[0]
        # every step a warp takes is at a CuTe line (a BP147 at the start has no steps)
        located = [s.location for s in trace.steps if s.agent_kind in ("thread", "warp")]
        assert bool(located) == bool(trace.steps)
        assert all(loc and loc.startswith(os.path.relpath(target.path)) for loc in located)


def test_the_unseen_kernels_cover_their_bugs():
    """Each unseen file has a correct kernel and bugs of several kinds, all with verdicts."""
    assert len(UNSEEN_FILES) >= 4
    for path in UNSEEN_FILES:
        expected = import_file(path).EXPECT
        assert any(v == "verified" for v in expected.values()), path
        assert sum(v.startswith("violation:") for v in expected.values()) >= 2, path
    codes = {t.expect.split(":")[1] for t in UNSEEN if t.expect.startswith("violation:")}
    assert {"BP100", "BP121", "BP130", "BP142", "BP147"} <= codes


def test_a_named_barrier_is_bar_sync_with_its_id_and_thread_count():
    kernel = _kernel(_target("handoff"))
    syncs = {(op.kind, repr(op.bar_id), repr(op.count)) for op in kernel.ops()
             if op.kind == "bar_sync"}
    assert syncs == {("bar_sync", "1", "64")}
    assert repr(kernel.num_threads) == "4"


def test_check_on_the_command_line(capsys):
    from barrierproof.cli import main
    path = os.path.relpath(FILES[1])
    assert main(["check", f"{path}::ring", "--no-cache"]) == 0
    assert main(["check", f"{path}::ring_empty_counts_one_arrival", "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "BP121" in out and f"{path}:" in out


def test_a_trip_count_from_a_runtime_argument_is_a_parameter():
    """`for i in cutlass.range(steps)` with `steps: cutlass.Int32`: the kernel read at several
    values of steps and joined; the loops run `steps` times, slots and parities in i."""
    from barrierproof.model.ir import Loop
    target = _target("ring_trip_count_at_run_time")
    kernel = _kernel(target)
    assert list(kernel.params) == ["steps"] and kernel.params["steps"].symbolic
    loops = [s for s in kernel.body[0].then if isinstance(s, Loop)] + \
        [s for s in kernel.body[0].orelse[0].then if isinstance(s, Loop)]
    assert [repr(loop.trip) for loop in loops] == ["steps", "steps"]
    waits = [op for op in iter_ops(loops) if op.kind == "wait_parity"]
    assert {repr(op.barrier.index[0]) for op in waits} == {"(i0 % 2)"}
    assert {repr(op.parity) for op in waits} == {"(((i0 // 2) + 1) % 2)", "((i0 // 2) % 2)"}
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    assert check_kernel(kernel, source=target.ref).verdict == "verified"


def test_prove_answers_for_every_runtime_trip_count():
    """`prove` quantifies over the runtime argument: proved for every steps >= 1 on the
    correct ring and for every K on a TMA mainloop with the producer's tail; on the mainloop
    whose consumers never flip their phase it finds the smallest breaking K (the first K that
    laps the three stages) and replays it."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    from barrierproof.model.ir import Loop
    target = _target("ring_trip_count_at_run_time")
    proved = prove_kernel(_kernel(target), source=target.ref)
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all steps" in proved.coverage and "steps >= 1" in proved.coverage
    gemm = _target("runtime_k")
    kernel = _kernel(gemm)
    # the producer_tail after K iterations: one wait per stage, from the slot K reached
    [tail] = [s for s in kernel.body[0].orelse[0].then if isinstance(s, Loop) and s.var == "j0"]
    [wait] = tail.body
    assert repr(wait.barrier.index[0]) == "((j0 + k_tiles) % 3)"
    assert repr(wait.parity) == "((((j0 + k_tiles) // 3) + 1) % 2)"
    every_k = prove_kernel(kernel, source=gemm.ref)
    assert every_k.verdict == "proved", (every_k.label, every_k.notes)
    assert "for all k_tiles" in every_k.coverage
    stuck = _target("runtime_k_consumer_phase_stuck")
    refuted = prove_kernel(_kernel(stuck), source=stuck.ref)
    assert refuted.verdict == "violation" and refuted.codes[0] == "BP101"
    assert any("smallest breaking values found: k_tiles=4" in n for n in refuted.notes)


def _arrive_at(slot: int, line: int):
    from barrierproof.model.ir import BarrierRef, Const, Op
    return Op("arrive", BarrierRef(_PEEL_BARS, (Const(slot),)), loc=Loc("k.py", line, "k"))


def _peel_bars():
    from barrierproof.model.ir import BarrierAlloc, Const
    return BarrierAlloc("bars", Const(1), (Const(2),), scalar=False)


_PEEL_BARS = _peel_bars()


def test_a_loop_whose_first_iteration_differs_rolls_after_a_prologue():
    """A consumer that releases the previous stage releases nothing in its first iteration:
    that iteration is kept as it is and the rest rolls, its variable counting from the first
    rolled iteration. A shorter run of the same family takes the peel the longest run found
    (PEELS), so every run has the same shape; without the hint a run of one iteration rolls
    whole."""
    from barrierproof.model.cute.roll import PEELS, roll
    from barrierproof.model.ir import Loop

    def run(n):     # iteration t: arrive on slot t % 2 (its wait), then on (t - 1) % 2 if t > 0
        return [(_arrive_at(t % 2, 3),) + ((_arrive_at((t - 1) % 2, 4),) if t else ())
                for t in range(n)]
    first, loop = roll(run(5), "i0", Loc("k.py", 2, "k"))
    assert repr(first.barrier.index[0]) == "0"
    assert isinstance(loop, Loop) and repr(loop.trip) == "4"
    assert [repr(op.barrier.index[0]) for op in loop.body] == ["((i0 + 1) % 2)", "(i0 % 2)"]
    # a run of one iteration: one loop alone, unless the family's longest run peeled it
    [whole] = roll(run(1), "i0", None, site="for")
    assert isinstance(whole, Loop) and repr(whole.trip) == "1"
    token = PEELS.set({})
    try:
        long = roll(run(6), "i0", None, site="for")
        short = roll(run(1), "i0", None, site="for")
    finally:
        PEELS.reset(token)
    assert [type(s).__name__ for s in long] == [type(s).__name__ for s in short] == \
        ["Op", "Loop"]
    assert repr(short[1].trip) == "0" and repr(long[1].trip) == "5"


@pytest.mark.slow
def test_a_consumer_releasing_the_previous_stage_is_read_for_every_k():
    """hopper_wgmma: K from A's shape at run time and a consumer warpgroup that releases the
    stage before the one it waited for (one WGMMA group in flight): its first wait is a
    prologue, the loop of the other k_tiles - 1 steps joins over every run, and the release of
    the last stage after the loop is on the slot K reached. `check` at several K agrees with
    the explorer; `prove` proves it for every K (barriers and races: four consumer warps each
    holding a stage, docs/frontends.md) and refutes both twins at the smallest K. About 25 s."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    target = _target("wgmma_mainloop")
    kernel = _kernel(target)
    assert list(kernel.params) == ["k_tiles"] and kernel.params["k_tiles"].symbolic
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    consumer = kernel.body[0].then
    first, loop, last = consumer
    assert first.kind == "wait_parity" and repr(first.barrier.index[0]) == "0"
    assert repr(loop.trip) == "(k_tiles - 1)"
    assert [(op.kind, repr(op.barrier.index[0])) for op in loop.body] == [
        ("wait_parity", "((i0 + 1) % 2)"), ("arrive", "(i0 % 2)")]
    assert last.kind == "arrive" and repr(last.barrier.index[0]) == "((k_tiles + 1) % 2)"
    for k_tiles in (1, 2, 5):
        assert check_kernel(kernel, {"k_tiles": k_tiles}, source=target.ref).verdict == \
            "verified", k_tiles
    proved = prove_kernel(kernel, source=target.ref)
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all k_tiles" in proved.coverage and "race-free" in proved.coverage
    for name, code in (("last_stage_never_released", "BP100"), ("expect_tx_of_a_only", "BP105")):
        twin = _target(name)
        refuted = prove_kernel(_kernel(twin), source=twin.ref)
        assert refuted.verdict == "violation" and refuted.codes[0] == code, name
        assert any("smallest breaking values found: k_tiles=1" in n for n in refuted.notes)


def test_prove_answers_for_every_k_on_the_blackwell_ring():
    """umma_ring with K from A's shape: the MMA warp's tcgen05 commits release each stage, so
    the ring is proved for every K (barriers and races); the twin that commits before its
    MMAs is refuted at the smallest K. About 5 s."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    target = _target("umma_ring")
    kernel = _kernel(target)
    assert list(kernel.params) == ["k_tiles"]
    proved = prove_kernel(kernel, source=target.ref)
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all k_tiles" in proved.coverage and "race-free" in proved.coverage
    twin = _target("umma_ring_released_before_the_mma")
    refuted = prove_kernel(_kernel(twin), source=twin.ref)
    assert refuted.verdict == "violation"
    assert any("smallest breaking values found: k_tiles=1" in n for n in refuted.notes)
    # the explorer's first finding at that K (the MMA still reading at exit, before the race
    # a second stage shows)
    assert refuted.codes[0] == check_kernel(_kernel(twin), {"k_tiles": 1}).codes[0]


def test_an_unseen_gemm_with_k_at_run_time_and_a_named_barrier_epilogue():
    """tests/cute_unseen/tma_epilogue.py with K from A's shape: the consumers' K loop from 1
    (`range(1, k_tiles)`) joins with its first step before it, the explorer verifies it at
    several K, and `prove` refutes the twin whose transaction counts A's tile only at the
    smallest K. About 6 s."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    target = next(t for t in UNSEEN if t.name == "gemm_epilogue")
    kernel = _kernel(target)
    assert list(kernel.params) == ["k_tiles"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    assert {repr(lp.trip) for lp in _loops(kernel.body) if lp.var == "i0"} == \
        {"k_tiles", "(k_tiles - 1)"}
    for k_tiles in (1, 2, 4):
        assert check_kernel(kernel, {"k_tiles": k_tiles}, source=target.ref).verdict == \
            "verified", k_tiles
    twin = next(t for t in UNSEEN if t.name == "gemm_epilogue_tx_of_a_only")
    refuted = prove_kernel(_kernel(twin), source=twin.ref)
    assert refuted.verdict == "violation" and refuted.codes[0] == "BP105"
    assert any("smallest breaking values found: k_tiles=1" in n for n in refuted.notes)


def _runtime_loop_tree(branch_on_argument: bool):
    """`for i in range(n): arrive(bar)` with n the kernel's first argument (an i32), then
    `if n > 16: arrive(bar)` or an unconditional arrive."""
    zero = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 0})
    one = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 1})
    sixteen = _op("arith.constant", results=(4,), types=("i32",), attrs={"value": 16})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    init = _op("nvvm.mbarrier.init", operands=(3, 2))
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=9)
    loop = _op("scf.for", operands=(1, 50, 2), regions=((Block((5,), (arrive,)),),), line=8)
    large = _op("arith.cmpi", operands=(50 if branch_on_argument else 2, 4), results=(6,),
                types=("i1",), attrs={"predicate": 4})
    late = _op("nvvm.mbarrier.arrive", operands=(3,), line=11)
    branch = _op("scf.if", operands=(6,), regions=((Block((), (late,)),),), line=10)
    return KernelTree("k", "k", Block((50,), (zero, one, sixteen, alloca, init, loop, large,
                                               branch)), ("i32",), (32, 1, 1), None,
                      (1, 1, 1), Loc("k.py", 1, "k"))


def test_a_k_from_a_tensor_extent_set_at_run_time_is_a_parameter():
    """`k_tiles = cute.size(gA, mode=[2])` of a tensor whose K extent is symbolic: the runs
    bind that size, and the parameter is named after the Python variable. The pipeline's
    full and empty barriers share one array of four: slots `b + i % 2`."""
    target = next(t for t in UNSEEN if t.name == "dynamic_k")
    kernel = _kernel(target)
    from barrierproof.checker.symbolic.prove import prove_kernel
    assert list(kernel.params) == ["k_tiles"] and kernel.params["k_tiles"].symbolic
    assert any("size of a tensor mode set at run time" in n for n in kernel.notes)
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    # one array of four walked as two rings (`b + i % 2`, b = 0 or 2): split into two arrays
    assert {(b.name, repr(b.shape[0])) for b in kernel.barriers} == {("bars", "2"),
                                                                     ("bars_2", "2")}
    slots = {(op.barrier.alloc.name, repr(op.barrier.index[0])) for op in kernel.ops()
             if op.kind == "wait_parity"}
    assert {("bars", "(i0 % 2)"), ("bars_2", "(i0 % 2)"),
            ("bars_2", "((j0 + k_tiles) % 2)")} <= slots, slots
    assert check_kernel(kernel, source=target.ref).verdict == "verified"
    every_k = prove_kernel(kernel, source=target.ref)           # about 3 s
    assert every_k.verdict == "proved", (every_k.label, every_k.notes)
    assert "for all k_tiles" in every_k.coverage


def test_a_consumer_taking_two_stages_an_iteration_rolls_with_a_strided_slot():
    """tests/cute_unseen/relay_pairs.py::pairs: the consumer waits on stages `(2*p) % 4` and
    `(2*p + 1) % 4` each iteration; its loop rolls into one IR loop of `pairs` iterations (the
    slot `b + (a*t + c) % m` with stride a = 2, the parity at that stride), so the runs at every
    `pairs` join and the trip count is a parameter, not BP190."""
    from barrierproof.model.cute.roll import _fit_parity, _fit_slot
    from barrierproof.model.ir import Var, evaluate
    t = Var("t")
    slot, c, m, a = _fit_slot([0, 1, 2, 3], [5, 7, 5, 7], t, 8)    # the empty half of 2*4
    assert (c, m, a) == (1, 4, 2) and repr(slot) == "((((t * 2) + 1) % 4) + 4)"
    parity = _fit_parity([0, 1, 2, 3], [0, 0, 1, 1], t, m, c, a)
    assert [evaluate(parity, {"t": x}) for x in range(6)] == [0, 0, 1, 1, 0, 0]
    target = next(t for t in UNSEEN if t.name == "pairs")
    kernel = _kernel(target)
    assert list(kernel.params) == ["pairs"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    waits = [repr(op.barrier.index[0]) for lp in _loops(kernel.body)
             if repr(lp.trip) == "pairs" for op in lp.body if op.kind == "wait_parity"]
    assert waits == ["((i0 * 2) % 4)", "(((i0 * 2) + 1) % 4)"], waits


def _searched_slot(ts, ys, ring):
    """The ring-slot fit by enumeration, every (m, a, b, c) in the fit's order of preference:
    the reference model/cute/roll.py's solved fit must agree with."""
    for m in (m for m in range(1, ring + 1) if ring % m == 0):
        for a in range(1, max(m, 2)):
            pairs = [(b, c) for b in range(ring - m + 1) for c in range(m)]
            for b, c in pairs if a == 1 else sorted(pairs, key=lambda p: (p[0] % m, p)):
                if all(b + (a * x + c) % m == y for x, y in zip(ts, ys)):
                    return b, c, m, a
    return None


def test_the_solved_ring_slot_fit_is_the_enumerations_first_fit():
    """Exhaustive over rings of 1..8 slots, three or four iterations (consecutive or every
    other one) and every slot sequence: the same (b, c, m, a) or the same None. (The fit is
    solved because a buffer's element ring, thousands of slots, made the search cubic.)"""
    from itertools import product

    from barrierproof.model.cute.roll import _fit_slot
    from barrierproof.model.ir import Var, evaluate
    t = Var("t")
    for ring in range(1, 9):
        for ts in ([0, 1, 2], [0, 2, 4], [1, 2, 3, 4]):
            for ys in product(range(ring), repeat=len(ts)):
                want = _searched_slot(ts, ys, ring)
                got = _fit_slot(ts, list(ys), t, ring)
                if want is None:
                    assert got is None, (ring, ts, ys, got)
                    continue
                expr, c, m, a = got
                b = evaluate(expr, {"t": 0}) - (c % m if m > 1 else 0)
                assert (b, c, m, a) == want, (ring, ts, ys, got, want)


def test_a_tile_schedulers_tile_count_is_a_parameter():
    """StaticPersistentTileScheduler's `while work.is_valid_tile` over C's runtime M: each
    role's tile loop runs `tiles` times, the K loop inside walks the ring from 2*t (two K steps
    a tile), and the joined kernel is checked against the explorer at several tile counts; the
    twin that never advances its accumulator fails at each of them."""
    target = _target("persistent_tiles")
    kernel = _kernel(target)
    assert list(kernel.params) == ["tiles"] and kernel.params["tiles"].symbolic
    assert [repr(a) for a in kernel.assumptions] == ["(tiles >= 1)"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    tile_loops = [lp for lp in _loops(kernel.body) if lp.var == "i0"]
    assert len(tile_loops) == 3 and {repr(lp.trip) for lp in tile_loops} == {"tiles"}
    k_slots = {repr(op.barrier.index[0]) for lp in _loops(kernel.body) if lp.var == "i1"
               for op in lp.body if op.kind == "wait_parity"}
    assert k_slots == {"(((i0 * 2) + i1) % 2)"}, k_slots
    stuck = _kernel(_target("persistent_tiles_acc_never_advanced"))
    for tiles in (1, 2, 3, 5):
        assert check_kernel(kernel, {"tiles": tiles}, source=target.ref).verdict == "verified"
        found = check_kernel(stuck, {"tiles": tiles}).verdict
        assert found == ("verified" if tiles == 1 else "violation"), (tiles, found)


def _loops(body):
    from barrierproof.model.ir import Loop
    for s in body:
        if isinstance(s, Loop):
            yield s
            yield from _loops(s.body)
        elif isinstance(s, When):
            yield from _loops(s.then)
            yield from _loops(s.orelse)


def test_a_tile_count_and_k_at_run_time_are_nested_loops_over_two_parameters():
    """Tiles from the scheduler and K from A's runtime extent: the kernel read at a grid of
    both and joined (model/cute/counts.py). The K loop runs `k_tiles` times inside the tile
    loop's `tiles`, its ring slots run on across tiles (`i0 * k_tiles + i1`), the producer's
    tail starts where both loops left the ring; check explores a few points of the grid and
    the twin whose consumer restarts its K ring per tile breaks from the second tile on."""
    target = _target("persistent_tiles_and_k")
    kernel = _kernel(target)
    assert list(kernel.params) == ["tiles", "k_tiles"]
    assert all(p.symbolic for p in kernel.params.values())
    assert [repr(a) for a in kernel.assumptions] == ["(tiles >= 1)", "(k_tiles >= 1)"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    loops = list(_loops(kernel.body))
    assert {repr(lp.trip) for lp in loops if lp.var == "i0"} == {"tiles"}
    k_loops = [lp for lp in loops if lp.var == "i1"]
    assert len(k_loops) == 2 and {repr(lp.trip) for lp in k_loops} == {"k_tiles"}
    slots = {repr(op.barrier.index[0]) for lp in k_loops for op in lp.body}
    assert slots == {"(((i0 * k_tiles) + i1) % 2)"}, slots
    [tail] = [lp for lp in loops if lp.var == "j0"]
    [wait] = tail.body
    assert repr(wait.barrier.index[0]) == "(((tiles * k_tiles) + j0) % 2)"
    assert repr(wait.parity) == "(((((tiles * k_tiles) + j0) // 2) + 1) % 2)"
    twin = _target("persistent_tiles_and_k_ab_state_per_tile")
    restarted = _kernel(twin)
    assert list(restarted.params) == ["tiles", "k_tiles"]
    for tiles, k_tiles in ((1, 1), (1, 3), (2, 1), (3, 2)):
        values = {"tiles": tiles, "k_tiles": k_tiles}
        assert check_kernel(kernel, values, source=target.ref).verdict == "verified", values
        found = check_kernel(restarted, values).verdict
        assert found == ("verified" if tiles == 1 else "violation"), (values, found)


def test_prove_answers_for_every_tile_count_and_k():
    """The K ring of the persistent GEMM with both counts at run time (the accumulator ring's
    operations left out: pertile.py proves that projection apart, in minutes; see
    docs/frontends.md) is proved for every tiles and k_tiles: nested.py makes the nest one loop
    over tiles * k_tiles positions. The twin that restarts its K ring per tile is refuted at the
    smallest breaking values, and the nest's rewrite names why it has no proof. About 25 s."""
    from barrierproof.checker.check import Options
    from barrierproof.checker.symbolic.prove import prove_kernel
    from barrierproof.model.ir import map_ops
    target = _target("persistent_tiles_and_k")
    kernel = _kernel(target)
    acc = {b.name for b in kernel.barriers if b.name.startswith("acc_bars")}
    assert acc == {"acc_bars", "acc_bars_2"}
    k_ring = kernel.replace(
        body=map_ops(kernel.body, lambda op: () if op.barrier is not None and
                     op.barrier.alloc.name in acc else op),
        barriers=tuple(b for b in kernel.barriers if b.name not in acc))
    # its TMA copies write the ring's stages: the race proof reads the nest as one loop too
    with_races = prove_kernel(k_ring, source=target.ref)
    assert with_races.verdict == "proved", (with_races.label, with_races.coverage)
    assert "race-free (BP200/BP201)" in with_races.coverage
    proved = prove_kernel(k_ring, source=target.ref,
                          options=Options(ignore=frozenset({"BP200", "BP201"})))
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all tiles, k_tiles" in proved.coverage
    assert any("one loop over tiles_x_k_tiles = tiles*k_tiles positions" in n
               for n in proved.notes)
    twin = _target("persistent_tiles_and_k_ab_state_per_tile")
    refuted = prove_kernel(_kernel(twin), source=twin.ref)
    assert refuted.verdict == "violation" and refuted.codes[0] == "BP101"
    assert any("smallest breaking values found: tiles=2, k_tiles=1" in n for n in refuted.notes)
    # with the race rules ignored no short search precedes the proof: the nest's rewrite runs
    # and names why it has no proof before the search after it refutes
    barriers_only = prove_kernel(_kernel(twin), source=twin.ref,
                                 options=Options(ignore=frozenset({"BP200", "BP201"})))
    assert barriers_only.verdict == "violation" and barriers_only.codes[0] == "BP101"
    assert any("not a function of the running position" in n for n in barriers_only.notes)


def _nest_tree(depth: int, branch_on: int | None = None):
    """`n = 0; for i0 in range(arg0): for i1 in range(arg1): ...: arrive(bar); wait(bar,
    parity n); n += 1` over `depth` i32 kernel arguments (a state carried through every
    level), then `if arg<branch_on> > 1: arrive(bar)` when asked."""
    zero = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 0})
    one = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 1})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    init = _op("nvvm.mbarrier.init", operands=(3, 2))
    state = 100 + depth                     # the count each level receives
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=9)
    wait = _op("nvvm.mbarrier.try_wait.parity", operands=(3, state), line=10)
    advance = _op("arith.addi", operands=(state, 2), results=(200,), types=("i32",), line=11)
    body = (arrive, wait, advance, _op("scf.yield", operands=(200,)))
    for level in reversed(range(depth)):
        loop = _op("scf.for", operands=(1, 50 + level, 2, 1 if level == 0 else 100 + level),
                   results=(300 + level,), types=("i32",), line=8 - level,
                   regions=((Block((60 + level, 101 + level), body),),))
        body = (loop,) if level == 0 else (loop, _op("scf.yield", operands=(300 + level,)))
    tail = ()
    if branch_on is not None:
        test = _op("arith.cmpi", operands=(50 + branch_on, 2), results=(7,), types=("i1",),
                   attrs={"predicate": 4})
        late = _op("nvvm.mbarrier.arrive", operands=(3,), line=13)
        tail = (test, _op("scf.if", operands=(7,), regions=((Block((), (late,)),),), line=12))
    args = tuple(50 + level for level in range(depth))
    return KernelTree("k", "k", Block(args, (zero, one, alloca, init) + body + tail),
                      ("i32",) * depth, (32, 1, 1), None, (1, 1, 1), Loc("k.py", 1, "k"))


def test_nested_loops_over_runtime_arguments_of_any_depth():
    """Three loops, each over a kernel argument, with one state advanced across all of them:
    each argument is a parameter (found level by level), each loop runs its argument's count,
    and the parity is the running count `i0*arg1*arg2 + i1*arg2 + i2` modulo 2 at every point
    of a grid the fit did not see. A branch on one argument around synchronization leaves the
    loops BP190, with the reason in a note."""
    from barrierproof.model.cute.translate import kernel_ir
    from barrierproof.model.ir import evaluate
    kernel = kernel_ir(_nest_tree(3))
    assert list(kernel.params) == ["arg0", "arg1", "arg2"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    loops = list(_loops(kernel.body))
    assert [(lp.var, repr(lp.trip)) for lp in loops] == \
        [("i0", "arg0"), ("i1", "arg1"), ("i2", "arg2")]
    [wait] = [op for op in loops[-1].body if op.kind == "wait_parity"]
    for a0, a1, a2 in ((2, 4, 5), (4, 3, 3), (5, 2, 7)):
        for i0 in range(a0):
            for i1 in range(a1):
                for i2 in range(a2):
                    env = {"arg1": a1, "arg2": a2, "i0": i0, "i1": i1, "i2": i2}
                    assert evaluate(wait.parity, env) == (i0 * a1 * a2 + i1 * a2 + i2) % 2
    guarded = kernel_ir(_nest_tree(2, branch_on=1))
    assert not guarded.params and any(op.kind == "unmodeled" for op in guarded.ops())
    assert any("a branch around synchronization depends on one of them" in n
               for n in guarded.notes)


def test_a_loop_from_one_to_a_runtime_count_is_a_parameter():
    """`for k in range(1, n)` (a consumer that peeled its first K step): at n = 1 the loop runs
    no iteration, which says nothing of its body; the trip count is joined over every run
    (`arg0 - 1`), the body over the runs that iterate."""
    from barrierproof.model.cute.translate import kernel_ir
    zero = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 0})
    one = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 1})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    init = _op("nvvm.mbarrier.init", operands=(3, 2))
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=9)
    loop = _op("scf.for", operands=(2, 50, 2), regions=((Block((5,), (arrive,)),),), line=8)
    tree = KernelTree("k", "k", Block((50,), (zero, one, alloca, init, loop)), ("i32",),
                      (32, 1, 1), None, (1, 1, 1), Loc("k.py", 1, "k"))
    kernel = kernel_ir(tree)
    assert list(kernel.params) == ["arg0"]
    assert [repr(lp.trip) for lp in _loops(kernel.body)] == ["(arg0 - 1)"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())


def test_a_field_with_no_running_count_form_does_not_join():
    """counts.py reads a multilinear form off a cube of points and checks it at every point:
    `(n * t + 1) % 4` is found; a slot `(n * n) % 3` has no such form and is refused."""
    from barrierproof.model.cute.counts import NoJoin, Scope, join_grid, multilinear
    from barrierproof.model.ir import BarrierAlloc, BarrierRef, Const, Op
    assert multilinear([({"n": v, "t": t}, (v * t + 1) % 4) for v in range(1, 6)
                        for t in range(4)], ["n", "t"], modulus=4) == {("n", "t"): 1, (): 1}
    bars = BarrierAlloc("bars", Const(1), (Const(3),))
    runs = [(Op("wait_parity", BarrierRef(bars, (Const((v * v) % 3),)), parity=Const(0),
                loc=Loc("k.py", 7, "k")),) for v in (1, 2, 3, 5)]
    with pytest.raises(NoJoin, match=r"wait_parity \(line 7\): a ring slot or parity"):
        join_grid(runs, Scope([{"n": v} for v in (1, 2, 3, 5)], ["n"]))


def test_a_runtime_trip_count_is_a_parameter_only_if_no_branch_depends_on_it():
    """Runs at 1..12 cannot stand for `n > 16`: a branch around synchronization on the
    argument leaves the loop BP190; the same kernel without it gets the parameter."""
    from barrierproof.model.cute.translate import kernel_ir
    plain = kernel_ir(_runtime_loop_tree(branch_on_argument=False))
    assert list(plain.params) == ["arg0"] and not any(op.kind == "unmodeled"
                                                      for op in plain.ops())
    guarded = kernel_ir(_runtime_loop_tree(branch_on_argument=True))
    assert not guarded.params
    assert any(op.kind == "unmodeled" and "kernel argument 0" in op.name
               for op in guarded.ops())


def test_a_trip_count_from_data_is_still_bp190_at_the_loop():
    """A loop bound no kernel argument gives (here a value defined outside the kernel) is not
    guessed: BP190 at the loop."""
    zero = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 0})
    one = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 1})
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=9)
    loop = _op("scf.for", operands=(1, 99, 2), regions=((Block((5,), (arrive,)),),), line=8)
    events = Warp(_tree(zero, one, loop), 0, {}).run()
    assert [e.kind for e in events] == ["unmodeled"]
    assert "scf.for with a trip count from a value defined outside" in events[0].name
    assert events[0].loc.line == 8
def _tree(*ops):
    return KernelTree("k", "k", Block((), tuple(ops)), (), (64, 1, 1), None, (1, 1, 1),
                      Loc("k.py", 1, "k"))


def _op(name, operands=(), results=(), types=(), attrs=None, regions=(), line=2):
    return Node(name, tuple(operands), tuple(results), tuple(types), ("",) * len(operands),
                attrs or {}, tuple(regions), Loc("k.py", line, "k"))


@pytest.mark.parametrize("tried, plain", [("ring_consumer_tries_first", "ring"),
                                          ("mainloop_peeking", "mainloop")])
def test_try_wait_then_wait_on_the_same_phase_is_one_wait(tried, plain):
    """The kernel that tries first runs the same instructions as the one that waits, at every
    size tried (the peeking mainloop's loop is read with its last iteration peeled, so the two
    IRs differ in shape, not in what they run)."""
    from barrierproof.model.semantics import compile_systems

    def programs(kernel, point):
        return [[[(i.op, i.target, i.amount, i.aux) for i in program]
                 for program in system.programs] for system in compile_systems(kernel, point)]
    tried, plain = _kernel(_target(tried)), _kernel(_target(plain))
    assert not any(op.kind == "unmodeled" for op in tried.ops())
    assert list(tried.params) == list(plain.params)
    points = [{name: v for name in tried.params} for v in (1, 2, 3, 5)] if tried.params else [None]
    for point in points:
        assert programs(tried, point) == programs(plain, point), point


def _tested_branch(then_ops, else_ops=()):
    """`if try_wait(bar, 0) == 0: then_ops else: else_ops` on an initialised barrier."""
    const = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 1})
    zero = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 0})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    init = _op("nvvm.mbarrier.init", operands=(3, 1))
    test = _op("nvvm.mbarrier.wait.parity", operands=(3, 2), results=(4,), types=("i1",))
    failed = _op("arith.cmpi", operands=(4, 2), results=(5,), types=("i1",),
                 attrs={"predicate": 0})
    branch = _op("scf.if", operands=(5,), line=8,
                 regions=((Block((), tuple(then_ops)),), (Block((), tuple(else_ops)),)))
    return Warp(_tree(const, zero, alloca, init, test, failed, branch), 0, {}).run()


def test_any_other_use_of_a_try_wait_answer_is_bp190():
    wait = _op("nvvm.mbarrier.try_wait.parity", operands=(3, 2, 2), line=9)
    other_parity = _op("nvvm.mbarrier.try_wait.parity", operands=(3, 1, 1), line=9)
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=9)
    assert [e.kind for e in _tested_branch([wait])] == ["mbarrier_init", "wait_parity"]
    for then, orelse in (([other_parity], ()), ([arrive], ()), ((), [wait])):
        events = _tested_branch(then, orelse)
        assert [e.kind for e in events] == ["mbarrier_init", "unmodeled"], (then, orelse)
        assert events[-1].loc.line == 8


def test_an_unknown_synchronizing_op_is_kept_with_its_name_and_line():
    tree = _tree(_op("nvvm.mbarrier.try_wait.parity.timelimit", line=7))
    events = Warp(tree, 0, {}).run()
    assert [(e.kind, e.name, e.loc.line) for e in events] == [
        ("unmodeled", "nvvm.mbarrier.try_wait.parity.timelimit", 7)]


def test_a_branch_on_data_around_synchronization_is_bp190_not_a_guess():
    arrive = _op("nvvm.mbarrier.arrive", operands=(1,), line=9)
    branch = _op("scf.if", operands=(99,), regions=((Block((), (arrive,)),),), line=8)
    events = Warp(_tree(branch), 0, {}).run()
    assert len(events) == 1 and events[0].kind == "unmodeled" and events[0].loc.line == 8
    assert events[0].name.startswith("scf.if on ")


def test_a_cluster_of_several_blocks_is_bp190_at_the_kernel():
    from barrierproof.model.cute.translate import kernel_ir
    tree = _tree()
    tree.cluster_dim = (2, 1, 1)
    kernel = kernel_ir(tree)
    [op] = [op for op in kernel.ops() if op.kind == "unmodeled"]
    assert "cluster of 2 blocks" in op.name and op.loc == tree.loc


BROKEN = """
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {"broken": "verified"}


@cute.kernel
def broken_kernel():
    cute.arch.mbarrier_init(undefined_name, 1)


@cute.jit
def host(a: cute.Tensor):
    broken_kernel().launch(grid=[1, 1, 1], block=[32, 1, 1])


def broken():
    return cute.compile(host, make_fake_compact_tensor(cutlass.Float32, (32,)))
"""


def test_a_kernel_that_does_not_compile_is_a_one_line_error_at_its_line(tmp_path):
    from barrierproof.model.ir import ModelError
    path = tmp_path / "broken_kernels.py"
    path.write_text(BROKEN)
    [target] = resolve(str(path))
    with pytest.raises(ModelError) as err:
        target.build()
    with pytest.raises(ModelError) as again:    # an error is not kept: compiled again, alike
        target.build()
    assert str(again.value) == str(err.value)
    assert "compiling the CuTe DSL kernel failed" in err.value.message
    assert "undefined_name" in err.value.message and "\n" not in str(err.value)
    assert err.value.loc.file.endswith("broken_kernels.py") and err.value.loc.line == 11


MALFORMED = """
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor

EXPECT = {"needs_k": "verified", "raises": "verified", "int_for_tensor": "verified",
          "returns_the_host": "verified"}


@cute.kernel
def sync_kernel():
    cute.arch.barrier()


@cute.jit
def host(a: cute.Tensor):
    sync_kernel().launch(grid=[1, 1, 1], block=[32, 1, 1])


def needs_k(k_tiles):
    return cute.compile(host, make_fake_compact_tensor(cutlass.Float32, (32,)))


def raises():
    raise RuntimeError("no GPU here")


def int_for_tensor():
    return cute.compile(host, 3)


def returns_the_host():
    return host
"""


def test_malformed_targets_are_one_line_input_errors_at_their_line(tmp_path):
    """A target that takes arguments, raises before compiling, passes a Python int for a
    cute.Tensor, or compiles nothing: each an input error saying what and where (exit 3 from
    the CLI), never a traceback."""
    from barrierproof.model.ir import ModelError
    path = tmp_path / "malformed_kernels.py"
    path.write_text(MALFORMED)
    targets = {t.name: t for t in resolve(str(path))}
    lines = MALFORMED.splitlines()

    def line_of(text: str) -> int:
        return next(i for i, t in enumerate(lines, 1) if text in t)
    for name, line, what, hint in (
            ("needs_k", line_of("def needs_k"), "takes arguments (k_tiles)", "zero-argument"),
            ("raises", line_of("raise RuntimeError"),
             "the target raised: RuntimeError: no GPU here", "make_fake"),
            ("int_for_tensor", line_of("cute.compile(host, 3)"),
             "compiling the CuTe DSL kernel failed: DSLUserCodeError", "make_fake_compact_tensor"),
            ("returns_the_host", line_of("def returns_the_host"), "compiled no CuTe DSL kernel",
             "cute.compile")):
        with pytest.raises(ModelError) as err:
            targets[name].build()
        assert what in err.value.message and "\n" not in str(err.value), (name, err.value)
        assert hint in err.value.hint, (name, err.value.hint)
        assert err.value.loc.file.endswith("malformed_kernels.py"), name
        assert err.value.loc.line == line, (name, err.value.loc)


def test_a_kernel_too_long_to_unroll_is_an_input_error(monkeypatch):
    from barrierproof.model.cute import interpreter
    from barrierproof.model.cute.translate import kernel_ir
    from barrierproof.model.ir import ModelError
    monkeypatch.setattr(interpreter, "MAX_EVENTS", 3)
    fence = _op("nvvm.fence.mbarrier.init", line=5)
    with pytest.raises(ModelError, match="more than 3 synchronizing operations") as err:
        kernel_ir(_tree(*[fence] * 4))
    assert err.value.loc.line == 5 and "smaller size" in err.value.hint


def test_compile_time_per_kernel_is_measured_and_small():
    for target in TARGETS:
        kernel = _kernel(target)
        note = next(n for n in kernel.notes if n.startswith("CuTe DSL: traced"))
        seconds = float(re.search(r"in ([\d.]+) s", note).group(1))
        # the first build's time: a later build of the same kernel in this process is the
        # first one's result (model/built.py), so the note, not this call, says what it cost
        assert 0 < seconds < 20, (target.ref, seconds)


def _grid_tree(grid, *ops, cluster=(1, 1, 1)):
    return KernelTree("k", "k", Block((), tuple(ops)), (), (32, 1, 1), grid, cluster,
                      Loc("k.py", 1, "k"))


def _leader_branch(*then):
    """`if bidx == 0: then`, with the barrier the ops in `then` use (operand 3)."""
    one = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 1})
    zero = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 0})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    init = _op("nvvm.mbarrier.init", operands=(3, 1))
    bidx = _op("nvvm.read.ptx.sreg.ctaid.x", results=(4,), types=("i32",))
    leader = _op("arith.cmpi", operands=(4, 2), results=(5,), types=("i1",),
                 attrs={"predicate": 0})
    branch = _op("scf.if", operands=(5,), line=8, regions=((Block((), tuple(then)),),))
    return (one, zero, alloca, init, bidx, leader, branch)


def test_a_branch_on_the_block_index_is_a_grid_axis_when_the_grid_is_small():
    from barrierproof.model.cute.translate import kernel_ir
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=9)
    kernel = kernel_ir(_grid_tree((3, 1, 1), *_leader_branch(arrive)))
    assert [(a, repr(n)) for a, n in kernel.grid] == [("block", "3")]
    [when] = [s for s in kernel.body if isinstance(s, When)]
    assert [op.kind for op in iter_ops(when.then)] == ["mbarrier_init", "arrive"]
    assert [op.kind for op in iter_ops(when.orelse)] == ["mbarrier_init"]
    # a grid too large to enumerate leaves the index unknown: BP190 at the branch
    large = kernel_ir(_grid_tree((64, 1, 1), *_leader_branch(arrive)))
    [cut] = [op for op in large.ops() if op.kind == "unmodeled"]
    assert "block index" in cut.name and "64 blocks" in cut.name and cut.loc.line == 8
    assert not large.grid


def test_the_persistent_tile_loop_is_read_per_block():
    kernel = _kernel(_target("persistent"))
    assert [(a, repr(n)) for a, n in kernel.grid] == [("block", "2")]
    [per_block] = [s for s in kernel.body if isinstance(s, When)]
    assert "block" in repr(per_block.cond)
    # block b walks tiles b, b + 2, ... below the tile count: ceil((tiles - b) / 2) of them
    for tiles in (1, 2, 3, 4, 7):
        loads = [sum(op.kind == "tma_load"
                     for op in _unrolled(side, {"num_tiles": tiles, "k_tiles": 2}))
                 for side in (per_block.then, per_block.orelse)]
        assert loads == [2 * ((tiles + 1) // 2), 2 * (tiles // 2)], tiles
    assert not any(op.kind == "unmodeled" for op in kernel.ops())


def test_ops_that_only_look_like_synchronization_are_not_bp190():
    from barrierproof.model.cute.handlers import synchronizes
    for name in ("cute.select", "cf.assert", "cute_nvgpu.arch.sm100.alloc_tmem",
                 "cute_nvgpu.arch.sm100.retrieve_tmem_ptr", "nvvm.wgmma.wait.group.sync.aligned"):
        assert not synchronizes(_op(name)), name
    for name in ("nvvm.mbarrier.try_wait.parity.timelimit", "nvvm.barrier.cta.red",
                 "nvvm.cp.async.mbarrier.arrive"):
        assert synchronizes(_op(name)), name


def test_cp_async_arrive_noinc_is_one_asynchronous_arrival_per_thread():
    """cp.async.mbarrier.arrive.noinc from every lane of a warp: 32 asynchronous arrivals
    (PipelineCpAsync's producer_commit rolls them into one loop); without .noinc the
    pending-count increment at issue is not modelled: BP190 at its line."""
    one = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 32})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    init = _op("nvvm.mbarrier.init", operands=(3, 2))
    noinc = _op("nvvm.cp.async.mbarrier.arrive", operands=(3,), attrs={"noinc": True}, line=5)
    plain = _op("nvvm.cp.async.mbarrier.arrive", operands=(3,), line=6)
    events = Warp(_tree(one, alloca, init, noinc, plain), 0, {}).run()
    assert [e.kind for e in events].count("cp_async_arrive") == 32
    [cut] = [e for e in events if e.kind == "unmodeled"]
    assert "without .noinc" in cut.name and cut.loc.line == 6
    kernel = _kernel(_target("cp_async_ring"))
    commits = [s for s in iter_ops(kernel.body) if s.kind == "cp_async_arrive"]
    assert commits and not any(op.kind == "unmodeled" for op in kernel.ops())
    assert {repr(b.num_arrivals) for b in kernel.barriers} == {"32"}


def test_named_barriers_without_a_count_and_unaligned():
    const = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 1})
    count = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 64})
    whole = _op("nvvm.barrier", operands=(1,), attrs={"operandSegmentSizes":
                                                      "array<i32: 1, 0>"})
    unaligned = _op("nvvm.barrier.cta.sync", operands=(1, 2), attrs={"aligned": False})
    arrive = _op("nvvm.barrier.cta.arrive", operands=(1, 2), attrs={"aligned": True})
    legacy = _op("nvvm.barrier.arrive", operands=(1, 2))     # barrierId, numberOfThreads
    events = Warp(_tree(const, count, whole, unaligned, arrive, legacy), 0, {}).run()
    assert [(e.kind, e.bar_id, e.count, e.aligned) for e in events] == [
        ("bar_sync", 1, 64, True), ("bar_sync", 1, 64, False), ("bar_arrive", 1, 64, True),
        ("bar_arrive", 1, 64, True)]


def test_a_peer_address_is_the_block_itself_only_without_clusters():
    from barrierproof.model.cute.translate import kernel_ir
    rank = _op("arith.constant", results=(6,), types=("i32",), attrs={"value": 0})
    peer = _op("nvvm.mapa", operands=(3, 6), results=(7,), types=("!llvm.ptr<7>",))
    arrive = Node("nvvm.mbarrier.arrive", (7,), (), (), ("!llvm.ptr<7>",), {}, (),
                  Loc("k.py", 9, "k"))
    local = kernel_ir(_grid_tree((1, 1, 1), *_leader_branch(rank, peer, arrive)))
    assert [op.kind for op in local.ops()] == ["mbarrier_init", "arrive"]
    other = _op("arith.constant", results=(6,), types=("i32",), attrs={"value": 1})
    remote = kernel_ir(_grid_tree((1, 1, 1), *_leader_branch(other, peer, arrive)))
    [cut] = [op for op in remote.ops() if op.kind == "unmodeled"]
    assert "rank 1" in cut.name and cut.loc.line == 9
    # in a cluster of two, every warp keeps only what was not read: unknown, never a finding
    clustered = kernel_ir(_grid_tree((1, 1, 1), *_leader_branch(rank, peer, arrive),
                                     cluster=(2, 1, 1)))
    assert {op.kind for op in clustered.ops()} == {"unmodeled"}


def test_static_cute_tuples_and_scheduler_arithmetic():
    from barrierproof.model.cute.handlers import static_value
    assert static_value('!cute.int_tuple<"(2,1,1)">') == (2, 1, 1)
    assert static_value('!cute.shape<"128">') == 128
    assert static_value('!cute.int_tuple<"?">') is None
    assert static_value('!cute.shape<"((64,128),1)">') is None      # nested: not a number
    seven = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 7})
    three = _op("arith.constant", results=(2,), types=("i32",), attrs={"value": 3})
    div = _op("cute.fast_divmod.create_divisor", operands=(2,), results=(3,),
              types=("!cute.fast_divmod_divisor<32>",))
    qr = _op("cute.fast_divmod.compute", operands=(1, 3), results=(4, 5), types=("i32", "i32"))
    size = _op("cute.size", results=(6,), types=('!cute.int_tuple<"2">',))
    warp = Warp(_tree(seven, three, div, qr, size), 0, {})
    warp.run()
    assert (warp.env[4], warp.env[5], warp.env[6]) == (2, 1, 2)


def test_barriers_are_named_after_their_struct_fields():
    kernel = _kernel(_target("attention"))
    names = {b.name: (repr(b.num_arrivals), repr(b.shape[0])) for b in kernel.barriers}
    # kv_bars: 2 full (the TMA's expect_tx) and 2 empty (a tcgen05.commit), one arrival each;
    # s_bars: full (a commit) then empty (32 threads); p_bars: full and empty, 32 threads
    # each. The empty barrier of s_bars and the full one of p_bars count alike but are
    # separate fields.
    assert names == {"kv_bars": ("1", "4"), "s_bars": ("1", "1"), "s_bars_1": ("32", "1"),
                     "p_bars": ("32", "2")}


def _set_up(fenced: bool):
    """Warp 0 initialises a barrier (then fences it, or not), both warps __syncthreads, then
    arrive on it; a fence.proxy.async follows (as before a TMA store)."""
    one = _op("arith.constant", results=(1,), types=("i32",), attrs={"value": 2})
    alloca = _op("cute.memref.alloca", results=(3,), types=('!cute.memref<i64, smem, "1:1">',))
    warp = _op("nvvm.read.ptx.sreg.tid.x", results=(4,), types=("i32",))
    first = _op("arith.cmpi", operands=(4, 5), results=(6,), types=("i1",),
                attrs={"predicate": 2})
    width = _op("arith.constant", results=(5,), types=("i32",), attrs={"value": 32})
    init = [_op("nvvm.mbarrier.init", operands=(3, 1), line=3)]
    if fenced:
        init.append(_op("nvvm.fence.mbarrier.init", line=4))
    branch = _op("scf.if", operands=(6,), regions=((Block((), tuple(init)),),), line=3)
    sync = _op("nvvm.barrier0", line=5)
    elect = _op("nvvm.elect.sync", results=(7,), types=("i1",), line=6)
    arrive = _op("nvvm.mbarrier.arrive", operands=(3,), line=7)
    once = _op("scf.if", operands=(7,), regions=((Block((), (arrive,)),),), line=6)
    fence = _op("nvvm.fence.proxy", attrs={"kind": "#nvvm.proxy_kind<async.shared>"}, line=8)
    return KernelTree("k", "k", Block((), (one, alloca, warp, width, first, branch, sync, elect,
                                           once, fence)), (), (64, 1, 1), None, (1, 1, 1),
                      Loc("k.py", 1, "k"))


def test_a_published_set_up_starts_the_check_with_initialised_barriers():
    from barrierproof.model.cute.translate import kernel_ir
    published = kernel_ir(_set_up(fenced=True))
    assert [b.explicit_init for b in published.barriers] == [False]
    assert [op.kind for op in published.ops()] == ["arrive"]      # no set-up, no fences
    verdict = check_kernel(published)                  # the reductions are on: no traceback
    assert verdict.verdict == "verified", verdict.label
    unfenced = kernel_ir(_set_up(fenced=False))        # init visibility left to the checker
    assert [b.explicit_init for b in unfenced.barriers] == [True]
    assert "mbarrier_init" in [op.kind for op in unfenced.ops()]
    # an arrive is a generic-proxy access, which the __syncthreads alone publishes to
    assert check_kernel(unfenced).verdict == "verified"


# -- shared-memory data (model/cute/smem.py): regions, races, accesses in flight at exit -------
def _mem(kernel):
    """Every memory effect of a kernel, as (kind, reads, writes) texts, loops rolled."""
    return [(op.kind, [repr(r) for r in op.reads], [repr(w) for w in op.writes])
            for op in kernel.ops() if op.reads or op.writes or op.kind.startswith("wait_")
            or op.kind == "wgmma_wait"]


def test_a_tma_ring_read_by_simt_consumers_has_stage_regions():
    """The ring is cut where the accesses start and end: each consumer warp's rows of a stage
    (32 rows of 128 B) are one slot, a stage two; the slots walk the ring in the rolled loops
    on both sides, so a warp's read and the producer's copy meet only in the same stage."""
    kernel = _kernel(_target("ring_reads"))
    assert {(b.name, repr(b.shape[0])) for b in kernel.buffers} == {("ring", "4"), ("sC", "2")}
    effects = _mem(kernel)
    assert ("tma_load", [], ["ring[ds(((i0 % 2) * 2), 2)]"]) in effects
    assert ("read", ["ring[((i0 % 2) * 2)]"], []) in effects          # warp 0's rows
    assert ("read", ["ring[(((i0 % 2) * 2) + 1)]"], []) in effects    # warp 1's rows
    assert ("write", [], ["sC[0]"]) in effects and ("write", [], ["sC[1]"]) in effects
    assert ("copy_smem_to_gmem", ["sC[ds(0, 2)]"], []) in effects
    assert any(op.kind == "wait_smem_to_gmem" and repr(op.count) == "0" for op in kernel.ops())
    reads = [op for op in kernel.ops() if op.kind == "read"]
    assert all("autovec_copy" in _source_line(op.loc) for op in reads)
    assert not any("not read" in n or "whole buffer" in n for n in kernel.notes)


@pytest.mark.parametrize("name, code, lines", [
    ("ring_reads_released_before_read", "BP200", ("cute.copy(", "cute.autovec_copy(")),
    ("ring_reads_refill_without_acquire", "BP200", ("cute.copy(", "cute.autovec_copy(")),
    ("wgmma_ring_releases_the_stage_in_flight", "BP200", ("cute.copy(", "cute.gemm(")),
    ("umma_ring_released_before_the_mma", "BP200", ("cute.copy(", "cute.gemm(")),
    ("ring_reads_store_not_drained", "BP105", ("cute.copy(tma_c",)),
    ("wgmma_ring_exits_with_wgmmas_in_flight", "BP105", ("cute.gemm(",))])
def test_a_race_or_an_access_in_flight_at_exit_names_the_users_lines(name, code, lines):
    verdict = check_kernel(_kernel(_target(name)))
    assert verdict.codes[0] == code
    [d] = [d for d in verdict.diagnostics if d.code == code]
    at = [d.location] + [r["location"] for r in d.related]
    texts = []
    for where in at:
        path, line = where.rsplit(":", 2)[:2] if where.count(":") >= 2 else where.split(":")
        texts.append(_source_line(Loc(path, int(line))))
    for line in lines:
        assert any(line in t for t in texts), (line, texts)


def test_wgmma_operands_are_read_until_the_wait_that_retires_their_group():
    """The four K-block WGMMAs of a stage, issued back to back, are one access of the stage of
    A and of B (their commit group); wait_group(1) retires all but the newest group."""
    kernel = _kernel(_target("wgmma_ring"))
    consumer = kernel.body[0].then                     # warp 0..3: the warpgroup
    issued = [(op.kind, _slots_at(op.reads, at), repr(op.count))
              for op, at in _unrolled_at(consumer, {"k_tiles": 4})
              if op.kind in ("wgmma", "wgmma_wait")]
    stage = [["sA[0]", "sB[0]"], ["sA[1]", "sB[1]"]]
    assert issued == [x for k in range(4) for x in (("wgmma", stage[k % 2], "1"),
                                                    ("wgmma_wait", [], "1"))] + \
        [("wgmma_wait", [], "0")]
    assert all("cute.gemm(" in _source_line(op.loc) for op in kernel.ops() if op.kind == "wgmma")


def test_tcgen05_mma_operands_are_read_until_the_commit_after_them():
    """A Blackwell MMA warp's K-block MMAs of a stage are one tcgen05 queue entry reading the
    stage of A and B; the stage's release is a tcgen05.commit after them, so the correct ring's
    producer refills a stage only after they complete, and releasing first is a race."""
    kernel = _kernel(_target("umma_ring"))
    ops = [op for op, _ in _unrolled_at(kernel.body, {"k_tiles": 4})
           if op.kind in ("tcgen05_mma", "tcgen05_commit_arrive")]
    assert [op.kind for op in ops] == ["tcgen05_mma", "tcgen05_commit_arrive"] * 4
    # one rolled loop of the K tiles: the stage walks the ring with the loop variable
    assert {tuple(repr(r) for r in op.reads) for op in ops[::2]} == \
        {("sA[(i0 % 2)]", "sB[(i0 % 2)]")}
    assert all(op.barrier is None and "cute.gemm(" in _source_line(op.loc) for op in ops[::2])
    verdict = check_kernel(_kernel(_target("umma_ring_released_before_the_mma")))
    assert verdict.codes[0] == "BP200"
    # the MMAs' accumulator is read by no other access: no race on tensor memory to check
    assert any("no race on it to check" in n for n in kernel.notes)


def _typed(name, operands=(), results=(), types=(), operand_types=(), attrs=None, line=2,
           regions=()):
    return Node(name, tuple(operands), tuple(results), tuple(types), tuple(operand_types),
                attrs or {}, tuple(regions), Loc("k.py", line, "k"))


_SMEM = '!cute.memref<f16, smem, align<128>, "(64,64,2):(64,1,4096)">'
_STAGE = '!cute.memref<f16, smem, align<128>, "(64,64):(64,1)">'
_ROW = '!cute.memref<f16, smem, align<128>, "(64):(1)">'
_RMEM = '!cute.memref<f16, rmem, align<32>, "(64):(1)">'


def _ring_ops(*tail):
    alloca = _typed("cute.memref.alloca", results=(1,),
                    types=('!cute.memref<i8, smem, align<128>, "16384:1">',))
    recast = _typed("cute.recast_iter", (1,), (2,), ("!cute.ptr<f16, smem, align<128>>",))
    view = _typed("cute.make_view", (2,), (3,), (_SMEM,))
    return (alloca, recast, view) + tail


def test_a_slice_by_thread_and_stage_is_the_union_of_the_lanes_rows():
    """`sA[(tidx, None, 1)]` read by warp 1 of a (64, 64, 2) fp16 ring: rows 32..63 of stage 1,
    bytes 8192 + 4096 .. 16384; an element load is one element per lane: the first element of
    each of rows 32..63, 32 separate 2-byte ranges (not the range between them)."""
    from barrierproof.model.cute.interpreter import Warp as W
    tid = _typed("nvvm.read.ptx.sreg.tid.x", results=(4,), types=("i32",))
    coord = _typed("cute.make_coord", (4,), (5,), ('!cute.coord<"(?,_,1)">',))
    row = _typed("cute.slice", (3, 5), (6,), (_ROW,), (_SMEM, '!cute.coord<"(?,_,1)">'))
    reg = _typed("cute.memref.alloca", results=(7,), types=(_RMEM,))
    atom = _typed("cute.make_atom", results=(8,), types=("!cute_nvgpu.atom.universal_copy<f16>",))
    copy = _typed("cute.copy", (8, 6, 7), (), (), ("!cute_nvgpu.atom.universal_copy<f16>",
                                                  _ROW, _RMEM), line=7)
    zero = _typed("arith.constant", results=(9,), types=("i32",), attrs={"value": 0})
    c2 = _typed("cute.make_coord", (4, 9), (10,), ('!cute.coord<"(?,?,0)">',))
    load = _typed("cute.memref.load", (3, 10), (11,), ("f16",), (_SMEM, "coord"), line=8)
    events = W(_tree(*_ring_ops(tid, coord, row, reg, atom, copy, zero, c2, load)), 1,
               {}).run()
    reads = [(e.loc.line, e.reads) for e in events if e.kind == "read"]
    assert reads == [(7, (("smem0", 8192 + 32 * 128, 16384),)),
                     (8, tuple(("smem0", r * 128, r * 128 + 2) for r in range(32, 64)))]


def test_a_view_not_followed_is_the_whole_buffer_and_said():
    """An op that makes a shared-memory tensor the frontend has no row for (and that may not
    start where its source does) covers the whole buffer; an op that passes shared-memory data
    to something unread (an ldmatrix, a raw load) is named in the notes."""
    from barrierproof.model.cute.interpreter import Warp as W
    odd = _typed("cute.local_partition", (3,), (4,), (_STAGE,), (_SMEM,))
    load = _typed("cute.memref.load_vec", (4,), (5,), ("vector<4096xf16>",), (_STAGE,), line=5)
    unread = _typed("nvvm.ldmatrix", (3,), (6,), ("i32",), (_SMEM,), line=6)
    async_copy = _typed("cute.copy", (9, 0, 3), (), (), (
        "!cute_nvgpu.atom.simt_async_copy<f16, 128 b>", "gmem", _SMEM), line=7)
    warp = W(_tree(*_ring_ops(odd, load, unread, async_copy)), 0, {})
    events = warp.run()
    # a cp.async copy is no longer dropped with a note: here BP190 at its line
    assert [(e.kind, e.loc.line) for e in events if e.loc.line == 7] == [("unmodeled", 7)]
    assert "cp.async copy" in next(e.name for e in events if e.loc.line == 7)
    notes = " | ".join(what for _, what in warp.memory_notes)
    assert "cute.local_partition" in notes and "whole buffer" in notes
    assert "`nvvm.ldmatrix` uses `smem0`" in notes and "not checked" in notes


def test_bulk_wait_groups_are_read_only_where_stores_and_groups_agree():
    """wait_group(0) retires every store; wait_group(n > 0) counts groups, which the model can
    count as stores only when each group holds one; a store not committed before the wait is
    not waited for: both BP190 at the wait."""
    from barrierproof.model.cute.interpreter import Warp as W
    stored = '!cute.memref<f16, smem, align<128>, "(64,64):(64,1)">'
    atom = _typed("cute_nvgpu.atom.make_exec_tma", results=(9,),
                  types=("!cute_nvgpu.atom.tma_store<f16>",))
    half = _typed("cute.make_view", (2,), (4,), (stored,))

    def store(line):
        return _typed("cute.copy", (9, 4, 0), (), (), ("!cute_nvgpu.atom.tma_store<f16>",
                                                       stored, "gmem"), line=line)
    commit = _typed("nvvm.cp.async.bulk.commit.group")

    def wait(n, line):
        return _typed("nvvm.cp.async.bulk.wait_group", attrs={"group": n}, line=line)
    ops = _ring_ops(atom, half, store(3), store(4), commit, wait(1, 5), store(6), wait(0, 7),
                    commit, wait(0, 8))
    events = W(_tree(*ops), 0, {}).run()
    assert [(e.kind, e.loc.line) for e in events] == [
        ("copy_smem_to_gmem", 3), ("copy_smem_to_gmem", 4), ("unmodeled", 5),
        ("copy_smem_to_gmem", 6), ("unmodeled", 7), ("wait_smem_to_gmem", 8)]
    assert events[0].reads == (("smem0", 0, 8192),)


def test_cute_layouts_index_coordinates_and_widen_swizzled_partial_blocks():
    from barrierproof.model.cute.layouts import crd2idx, cosize, layout_of, swizzle_block
    shape, stride = layout_of('!cute.memref<f16, smem, S<3,4,3>, "((64,16),1,4,(1,2)):'
                              '((64,1),0,16,(0,4096))">')
    assert cosize(shape, stride) == 8192
    assert crd2idx(("_", "_", 2, 1), shape, stride) == 2 * 16 + 4096
    assert crd2idx((5, 0, 0, 1), shape, stride) == 5 * 64 + 4096     # colexicographic mode
    assert layout_of('!cute.memref<f16, gmem, "(?,64):(64,1)">') is None
    assert layout_of('!cute.memref<f16, smem, "(4,8):(-8,1)">') is None     # not from its start
    assert swizzle_block("S<3,4,3>") == 1024 and swizzle_block("no swizzle") == 1
    from barrierproof.model.cute.interpreter import Warp as W
    swizzled = '!cute.memref<f16, smem, align<128>, S<3,4,3>, "(64,64,2):(64,1,4096)">'
    ops = (_ring_ops()[0], _typed("cute.recast_iter", (1,), (2,), ("!cute.ptr<f16, smem>",)),
           _typed("cute.make_view", (2,), (3,), (swizzled,)),
           _typed("arith.constant", results=(4,), types=("i32",), attrs={"value": 9}),
           _typed("arith.constant", results=(5,), types=("i32",), attrs={"value": 0}),
           _typed("cute.make_coord", (4, 5), (6,), ('!cute.coord<"(?,?,1)">',)),
           _typed("cute.memref.load", (3, 6), (7,), ("f16",), (swizzled, "coord")))
    events = W(_tree(*ops), 0, {}).run()
    # element (9, 0) of stage 1 is byte 8192 + 1152: the 1024-byte block it lies in is read
    assert [e.reads for e in events if e.kind == "read"] == [(("smem0", 9216, 10240),)]


def test_accesses_under_a_branch_on_data_count_as_made_and_said():
    """A branch on data around shared-memory accesses only (no synchronization): both sides'
    accesses count as made (coarser, never missing a race), and the notes say so; a whole
    tensor's load() reads its every element."""
    from barrierproof.model.cute.interpreter import Warp as W
    flag = _typed("llvm.load", results=(20,), types=("i1",))
    stage = _typed("cute.make_view", (2,), (4,), (_STAGE,))
    read = _typed("cute.memref.load_vec", (4,), (5,), ("vector<4096xf16>",), (_STAGE,),
                  line=5)
    write = _typed("cute.memref.store_vec", (5, 4), (), (), ("vector<4096xf16>", _STAGE),
                   line=6)
    branch = _typed("scf.if", (20,), regions=((Block((), (read,)),), (Block((), (write,)),)))
    warp = W(_tree(*_ring_ops(flag, stage, branch)), 0, {})
    events = warp.run()
    assert [(e.kind, e.loc.line, e.reads + e.writes) for e in events] == [
        ("read", 5, (("smem0", 0, 8192),)), ("write", 6, (("smem0", 0, 8192),))]
    assert any("branch on data" in what for _, what in warp.memory_notes)


def test_a_pipeline_created_on_the_line_that_names_its_storage_field(tmp_path):
    """`create(barrier_storage=storage.bars.data_ptr(), ...)` on one line: the pipeline's own
    offsets to each of its barriers carry that line too, and only the lowest address is where
    the field starts (every barrier used to be named after the field, and the kernel failed)."""
    src = open(os.path.join(EXAMPLES, "cute", "persistent_every_tile.py")).read()
    one_line = src.replace("create(\n        barrier_storage=", "create(barrier_storage=")
    assert one_line.count("create(barrier_storage=storage.") == 2
    path = tmp_path / "persistent_every_tile.py"
    path.write_text(one_line)
    target = next(t for t in resolve(str(path)) if t.name == "persistent_tiles")
    kernel = target.build()
    names = [b.name for b in kernel.barriers]
    assert len(names) == len(set(names))
    assert {b.name for b in _kernel(_target("persistent_tiles")).barriers} == set(names)
    assert check_kernel(kernel).verdict == "verified"
