"""The prover's fragment, widened: loops of c * X iterations strip-mined to align with a loop of
X, a plain tcgen05_mma covered by a commit later in its own loop iteration, and cluster
protocols whose static order is found among the orders of whole iterations per block.

Each rewrite must be the same program (the explorer gives the same verdict and state count on
it), and each order found must pass the tau-ordered run of model/semantics.py."""

from __future__ import annotations

import os

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic import prove as P
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.checker.symbolic.order import TauRun, TauSearch, _round_robin, tau_static_ok
from barrierproof.checker.symbolic.unroll import (split_ring_arrays, strip_mine_loops,
                                                  unroll_fixed_loops)
from barrierproof.loader import resolve
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import Loop, walk
from barrierproof.model.semantics import compile_systems

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def kernel(ref):
    path, _, name = ref.partition("::")
    return resolve(os.path.join(EXAMPLES, path) + "::" + name)[0].build()


def fixed_of(k, symbolic):
    return {n: v for n, v in k.param_values().items() if n not in symbolic}


UMMA = "patterns/blackwell_persistent.py::umma_persistent_gemm"


def test_a_loop_of_c_times_x_iterations_is_strip_mined_into_the_same_program():
    k = kernel(UMMA)
    mined = strip_mine_loops(k, fixed_of(k, ["tiles"]))
    assert mined is not k
    trips = sorted(repr(s.trip) for s in walk(mined.body) if isinstance(s, Loop))
    assert "(tiles * ksteps)" not in trips and trips.count("tiles") >= 3, trips
    for tiles in range(0, 4):
        a = check_kernel(k, {"tiles": tiles}, Options(Limits(max_states=200_000)))
        b = check_kernel(mined, {"tiles": tiles}, Options(Limits(max_states=200_000)))
        assert (a.verdict, a.states) == (b.verdict, b.states), tiles


def test_nothing_is_strip_mined_when_the_factor_is_symbolic_or_no_loop_runs_x_times():
    k = kernel(UMMA)
    assert strip_mine_loops(k, fixed_of(k, ["tiles", "ksteps"])) is k
    ring = kernel("hopper_ring.py::tma_ring")
    assert strip_mine_loops(ring, fixed_of(ring, ["stages", "consumers", "steps"])) is ring


def _fragment(k, symbolic):
    fixed = fixed_of(k, symbolic)
    k = split_ring_arrays(unroll_fixed_loops(strip_mine_loops(k, fixed), fixed), fixed)
    frag = Fragment(k, symbolic, fixed)
    frag.build_roles()
    frag.build_classes()
    return k, fixed, frag


def _first_order(k, symbolic, fixed, frag, budget):
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in P._tau_points(k, symbolic, fixed, frag)
            for system in compile_systems(k, values, races=False)]
    tried = 0
    for tau in search.candidates():
        if not tau_static_ok(frag, search, tau):
            continue
        search.apply(tau)
        tried += 1
        if all(run.check(search) is None for run in runs):
            return tau, tried
        if tried >= budget:
            return None, tried
    return None, tried


def test_a_plain_mma_committed_later_in_its_iteration_is_in_the_fragment():
    k, fixed, frag = _fragment(kernel(UMMA), ["tiles"])
    assert frag.roles          # no "not followed by an unconditional tcgen05_commit_arrive"
    tau, tried = _first_order(k, ["tiles"], fixed, frag, 150)
    assert tau is not None, tried


def test_a_plain_mma_never_committed_is_still_outside_the_fragment():
    from barrierproof.model.dsl import protocol
    from barrierproof.checker.symbolic.terms import Unsupported
    import pytest

    @protocol(symbolic=("steps",))
    def uncommitted(k, steps=2):
        k.threads(1)
        bar = k.Barrier(num_arrivals=1, orders_tensor_core=True)
        with k.loop(steps):
            k.tcgen05_mma()
            with k.when(steps > 3):
                k.tcgen05_commit_arrive(bar)
        k.barrier_wait(bar)

    with pytest.raises(Unsupported, match="not followed by an unconditional"):
        _fragment(uncommitted.build(), ["steps"])


def test_a_cluster_reduction_gets_a_static_order_within_the_budget():
    """split-K: contributors' whole iterations before the reducer's; the node orders are taken
    in turn, so the right one is reached within the 150 candidates a 300 s budget allows."""
    k, fixed, frag = _fragment(kernel("patterns/split_k.py::split_k_dsmem"), ["tiles"])
    tau, tried = _first_order(k, ["tiles"], fixed, frag, 150)
    assert tau is not None, tried


def test_round_robin_takes_every_stream_in_turn():
    assert list(_round_robin([iter("ab"), iter(""), iter("xyz")])) == list("axbyz")


# -- a rotated loop: the peeled first wait joined with the loop, the release one slot behind ----

def _lag_consumer(k, steps, first_stage):
    k.threads(1, name="wg")
    k.assume(steps >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    k.wait_parity(full.at[first_stage], 0)
    with k.loop(steps - 1) as t:
        k.wait_parity(full.at[(t + 1) % 2], ((t + 1) // 2) % 2)
        k.arrive(empty.at[t % 2])


@protocol(symbolic=("steps",))
def lagged(k, steps=3):
    _lag_consumer(k, steps, first_stage=0)


@protocol(symbolic=("steps",))
def lagged_other_first(k, steps=3):
    _lag_consumer(k, steps, first_stage=1)


def test_a_peeled_first_wait_is_rotated_into_its_loop():
    from barrierproof.checker.symbolic.fuse import fuse_peeled_loops
    k = lagged.build()
    fused, n = fuse_peeled_loops(k, ["steps"], {})
    assert n == 1
    loops = [s for s in walk(fused.body) if isinstance(s, Loop)]
    assert len(loops) == 1 and repr(loops[0].trip) == "steps", loops
    for steps in range(1, 5):
        a = check_kernel(k, {"steps": steps}, Options(Limits(max_states=50_000)))
        b = check_kernel(fused, {"steps": steps}, Options(Limits(max_states=50_000)))
        assert (a.label, a.states) == (b.label, b.states), steps


def test_a_peeled_wait_on_another_slot_is_not_rotated():
    from barrierproof.checker.symbolic.fuse import fuse_peeled_loops
    k = lagged_other_first.build()
    assert fuse_peeled_loops(k, ["steps"], {})[1] == 0
