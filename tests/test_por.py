"""Partial-order reduction by persistent sets (checker/engines/por.py): the same verdict,
violation code and counterexample length as the search without it, on every example and on
random protocols with warp regions, tcgen05 issues and unmodelled synchronization (steps that
touch nothing shared, each a persistent set of its own). Memory, hardware barriers and
clusters: tests/test_por_memory.py."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barrierproof.checker.engines.explore import explore
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import (BarrierAlloc, BarrierRef, Const, Kernel, Op, Var, WarpRegion,
                                   When)
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems

from test_examples import TARGETS


def _same_search(system):
    with_por = explore(system)
    without = explore(system, partial_order=False)
    full = explore(system, reduction=False)
    assert with_por.status == without.status == full.status
    if full.status == "violation":
        assert with_por.violation.code == full.violation.code
        assert len(with_por.actions) == len(full.actions)         # still shortest
        run = replay(system, with_por.actions, witness=with_por.witness)
        assert run.violation is not None and run.violation.code == with_por.violation.code
    else:
        assert with_por.states <= without.states
    return with_por, without


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_examples_keep_their_verdicts(target):
    try:
        systems = compile_systems(target.build())
    except ModelError:     # input errors: covered by test_examples
        return
    for system in systems:
        _same_search(system)


OP_KINDS = ["barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
            "tcgen05_commit_arrive", "wait_parity", "unmodeled"]


@st.composite
def local_step_protocols(draw):
    bars = tuple(BarrierAlloc(f"b{i}", Const(draw(st.integers(1, 2))),
                              (Const(draw(st.integers(1, 2))),), orders_tensor_core=True,
                              scalar=False) for i in range(draw(st.integers(1, 2))))

    def op():
        kind = draw(st.sampled_from(OP_KINDS))
        alloc = draw(st.sampled_from(bars))
        ref = BarrierRef(alloc, (Const(draw(st.integers(0, alloc.shape[0].value - 1))),))
        if kind == "unmodeled":
            return Op("unmodeled", name="fence")
        if kind == "tcgen05_mma" and draw(st.booleans()):
            ref = None          # an MMA without a barrier: a purely local issue
        return Op(kind, ref, bytes=Const(draw(st.sampled_from([0, 64]))),
                  parity=Const(draw(st.integers(0, 1))))

    def role():
        body = tuple(op() for _ in range(draw(st.integers(1, 3))))
        if draw(st.booleans()):
            body = (WarpRegion("w", body),) + tuple(op() for _ in range(draw(st.integers(0, 1))))
        return body

    body = (When(Var("t") == 0, role(), role()),)
    return Kernel("random_local", body, bars, num_threads=Const(draw(st.integers(1, 2))),
                  thread_axis="t", num_warps=draw(st.integers(2, 3)), warp_axis="w")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(local_step_protocols())
def test_random_protocols_keep_their_verdicts(kernel):
    try:
        system = System(kernel)
    except ModelError:     # the generated protocol is rejected as input
        return
    _same_search(system)


def test_local_steps_are_reduced():
    # four warps that each only enter a warp region: their entries interleave freely without
    # the reduction, and are taken in one order with it
    kernel = Kernel("fork_only", (WarpRegion("w", (Op("unmodeled", name="fence"),)),),
                    num_threads=Const(2), thread_axis="t", num_warps=4, warp_axis="w")
    system = System(kernel)
    with_por, without = _same_search(system)
    assert with_por.status == "verified"
    assert with_por.states * 4 < without.states
