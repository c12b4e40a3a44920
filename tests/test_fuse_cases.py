"""Rewrites before a proof (checker/symbolic/fuse.py, cases.py): a peeled pipeline prologue joined
with its steady-state loop only when Z3 proves both run the same operations, and a top-level
branch on a parameter split into two proofs."""

from __future__ import annotations

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.cases import prove_by_cases, top_case
from barrierproof.checker.symbolic.fuse import fuse_peeled_loops
from barrierproof.checker.symbolic.prove import Proof
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import Loop, Var, When, walk


def _split(prologue_offset=0, prologue=2):
    @protocol(symbolic=("steps",))
    def split(k, steps=4):
        k.threads(2, name="wg")
        k.assume(steps >= prologue)
        full = k.Barrier(num_arrivals=1, num_barriers=2)
        empty = k.Barrier(num_arrivals=1, num_barriers=2)
        with k.when(k.thread == 1):
            with k.loop(prologue) as i:
                k.copy_gmem_to_smem(full.at[(i + prologue_offset) % 2], bytes=512)
            with k.loop(steps - prologue) as i:
                k.barrier_wait(empty.at[i % 2])
                k.copy_gmem_to_smem(full.at[i % 2], bytes=512)
            with k.loop(prologue) as j:
                k.barrier_wait(empty.at[(j + steps - prologue) % 2])
        with k.when(k.thread == 0):
            with k.loop(steps) as i:
                k.barrier_wait(full.at[i % 2])
                k.barrier_arrive(empty.at[i % 2])
    return split.build()


def _loops(kernel):
    return [s for s in walk(kernel.body) if isinstance(s, Loop)]


def test_prologue_and_steady_state_are_joined_into_one_guarded_loop():
    kernel = _split()
    fused, n = fuse_peeled_loops(kernel, ["steps"], {})
    assert n == 1
    assert len(_loops(fused)) == len(_loops(kernel)) - 1
    joined = _loops(fused)[0]
    assert repr(joined.trip) == "steps"
    assert isinstance(joined.body[0], When) and repr(joined.body[0].cond).endswith(">= 2)")
    for steps in range(2, 7):      # the same program: same verdict, same reachable states
        a, b = check_kernel(kernel, {"steps": steps}), check_kernel(fused, {"steps": steps})
        assert (a.label, a.states) == (b.label, b.states)


def test_loops_that_do_not_run_the_same_operations_stay_apart():
    # the prologue fills slot 1 first: not the steady state's slot at v - 2
    kernel = _split(prologue_offset=1)
    assert fuse_peeled_loops(kernel, ["steps"], {})[1] == 0
    # without steps >= 2 the steady state's trip count may be negative
    kernel = _split(prologue=2)
    kernel = kernel.replace(assumptions=(Var("steps") >= 1,))
    assert fuse_peeled_loops(kernel, ["steps"], {})[1] == 0


def test_a_ring_of_symbolic_size_keeps_its_slots_when_joined():
    """The prologue fills all `stages` slots, the steady state moved back by `stages` indexes
    `(v - stages) % stages`, folded to `v % stages` (a ring position counted from 0); the
    joined program is the same at every point of a grid."""
    @protocol(symbolic=("stages", "extra"))
    def ring(k, stages=2, extra=2):
        k.threads(2, name="wg")
        k.assume(stages >= 2, extra >= 1)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages)
        with k.when(k.thread == 1):
            with k.loop(stages) as i:
                k.copy_gmem_to_smem(full.at[i], bytes=512)
            with k.loop(extra) as i:
                k.barrier_wait(empty.at[i % stages])
                k.copy_gmem_to_smem(full.at[i % stages], bytes=512)
            with k.loop(stages) as j:
                k.barrier_wait(empty.at[(j + extra) % stages])
        with k.when(k.thread == 0):
            with k.loop(stages + extra) as i:
                k.barrier_wait(full.at[i % stages])
                k.barrier_arrive(empty.at[i % stages])

    kernel = ring.build()
    fused, n = fuse_peeled_loops(kernel, ["stages", "extra"], {})
    assert n == 1
    joined = _loops(fused)[0]
    waits = [repr(op.barrier.index[0]) for op in walk(joined.body)
             if getattr(op, "kind", None) == "barrier_wait"]
    assert waits == [f"({joined.var} % stages)"], waits
    for stages in (2, 3):
        for extra in (1, 2, 3):
            values = {"stages": stages, "extra": extra}
            a, b = check_kernel(kernel, values), check_kernel(fused, values)
            assert (a.label, a.states) == (b.label, b.states) == ("verified", a.states)


def _branchy():
    @protocol(symbolic=("n",))
    def branchy(k, n=3):
        k.threads(2, name="wg")
        k.assume(n >= 1)
        bar = k.Barrier(num_arrivals=1)
        with k.when(n == 1):
            with k.when(k.thread == 0):
                k.barrier_arrive(bar)
            with k.when(k.thread == 1):
                k.barrier_wait(bar)
        with k.otherwise():
            with k.when(k.thread == 0):
                with k.loop(n) as i:
                    k.barrier_arrive(bar)
            with k.when(k.thread == 1):
                with k.loop(n) as i:
                    k.barrier_wait(bar)
    return branchy.build()


def test_a_top_level_branch_on_a_parameter_is_two_cases():
    kernel = _branchy()
    n, v, at, rest = top_case(kernel, ["n"])
    assert (n, v) == ("n", 1)
    assert [repr(a) for a in rest.assumptions] == ["(n >= 2)"]
    calls = []

    def prove(k, symbolic, fixed, timeout):
        calls.append((k is rest or repr(k.assumptions), tuple(symbolic), dict(fixed)))
        return Proof("proved", 0.0)

    def check_at(k, values):
        calls.append(("explore", values))
        return check_kernel(k, values).verdict == "verified", "checked"

    proof = prove_by_cases(kernel, ["n"], {}, 10.0, prove, check_at)
    assert proof.status == "proved"
    assert calls[0] == ("explore", {"n": 1})
    assert calls[1][1] == ("n",)
    assert proof.cases and proof.cases[0].startswith("case n = 1: verified by the explorer")


def test_a_failing_case_is_no_proof():
    kernel = _branchy()
    proof = prove_by_cases(kernel, ["n"], {}, 10.0,
                           lambda *a: pytest.fail("the other case must not be tried"),
                           lambda k, values: (False, "violation:BP100"))
    assert proof.status == "failed" and "the case n = 1: violation:BP100" in proof.reason
