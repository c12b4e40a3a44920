"""Property tests over random protocols: counterexamples replay, reductions never change a
verdict, and random schedules never contradict an exhaustive verdict."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import explore
from barrierproof.model.interpreter import random_run, replay
from barrierproof.model.ir import BarrierAlloc, BarrierRef, Const, Kernel, Op, Var, When
from barrierproof.model.semantics import System

OP_KINDS = ["barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "arrive_expect_tx",
            "tma_load", "tcgen05_mma", "tcgen05_commit_arrive", "wait_parity"]


@st.composite
def protocols(draw):
    n_bars = draw(st.integers(1, 2))
    bars = tuple(
        BarrierAlloc(f"b{i}", Const(draw(st.integers(1, 2))), (Const(draw(st.integers(1, 2))),),
                     orders_tensor_core=draw(st.booleans()), scalar=False)
        for i in range(n_bars))

    parity_waited = {b.name for b in bars if draw(st.booleans())}

    def op(draw_kind):
        kind = draw_kind
        alloc = draw(st.sampled_from(bars))
        ref = BarrierRef(alloc, (Const(draw(st.integers(0, alloc.shape[0].value - 1))),))
        if kind in ("tcgen05_mma", "tcgen05_commit_arrive") and not alloc.orders_tensor_core:
            kind = "barrier_arrive"
        if kind in ("barrier_wait", "wait_parity"):
            # One wait kind per barrier: the semantics rejects a thread that mixes them.
            kind = "wait_parity" if alloc.name in parity_waited else "barrier_wait"
        return Op(kind, ref, bytes=Const(draw(st.sampled_from([0, 64, 128]))),
                  parity=Const(draw(st.integers(0, 1))))

    # Two role templates shared by 2-3 threads, so identical threads (symmetry) occur.
    roles = [tuple(op(draw(st.sampled_from(OP_KINDS))) for _ in range(draw(st.integers(1, 4))))
             for _ in range(2)]
    n_threads = draw(st.integers(2, 3))
    body = (When(Var("t") == 0, roles[0], roles[1]),)
    return Kernel("random", body, bars, num_threads=Const(n_threads), thread_axis="t")


SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(protocols())
def test_counterexamples_replay_and_reduction_keeps_verdicts(kernel):
    reduced = check_kernel(kernel, options=Options(reduction=True))
    full = check_kernel(kernel, options=Options(reduction=False))
    assert reduced.label == full.label
    # Breadth first, every level is finished before a verdict, and the reduced graph's states
    # at depth d are states of the full graph at depth <= d: never more states. (The default
    # depth-first search stops where its order finds the violation, so only its verdict and
    # its trace length are order-independent.)
    reduced_bfs = check_kernel(kernel, options=Options(reduction=True, order="bfs"))
    full_bfs = check_kernel(kernel, options=Options(reduction=False, order="bfs"))
    assert reduced_bfs.label == full_bfs.label == full.label
    assert reduced_bfs.states <= full_bfs.states
    if reduced.trace is not None:
        assert len(reduced.trace.steps) == len(full.trace.steps)     # both BFS-shortest
        for verdict in (reduced, full):
            run = replay(System(kernel), verdict.trace.actions,
                         witness=verdict.trace.witness_actions)
            assert run.violation.code == verdict.codes[0]


@SETTINGS
@given(protocols(), st.integers(0, 2**16))
def test_random_schedules_agree_with_exhaustive_search(kernel, seed):
    system = System(kernel)
    result = explore(system, reduction=False)
    run = random_run(system, seed)
    if result.status == "verified":
        assert run.outcome == "terminated", (run.outcome, run.violation)
    if run.outcome in ("violation", "deadlock"):
        assert result.status == "violation"
        # BFS finds the shortest: no random run reaches a violation sooner.
        assert len(result.actions) <= len(run.actions)
