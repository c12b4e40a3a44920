"""`prove` on protocols of the field it had never seen (examples/prove_field.py): the verdict on
each, and that it never contradicts the explorer.

- a `proved` protocol is `verified` by the explorer on a grid of small values;
- a refutation names values at which the explorer finds the same diagnostic, and its trace
  replays on the interpreter;
- an `unknown` names what stopped it.
Budgets are kept small (the verdicts below hold with them on a loaded 2-core machine); the
bench (bench/prove_coverage.py) measures the same protocols with the full budget.
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import pytest
import z3

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.budget import Budget, z3_limits
from barrierproof.checker.symbolic.chc import check_certificate, prove_class
from barrierproof.checker.symbolic.cluster_sync import alternates, lower_cluster_sync
from barrierproof.checker.symbolic.prove import points, prove_kernel
from barrierproof.checker.symbolic.terms import Unsupported
from barrierproof.loader import import_file, targets_in_module
from barrierproof.model.dsl import protocol
from barrierproof.model.interpreter import replay
from barrierproof.model.semantics import System

from conftest import EXAMPLES

FIELD = os.path.join(EXAMPLES, "prove_field.py")
TARGETS = {t.name: t for t in targets_in_module(FIELD, import_file(FIELD))}
TIMEOUT = 20.0

# The correct protocols bench/prove_coverage.py proves with its budget (bench/SYMBOLIC.md);
# each is verified by the explorer on a grid of small values here, and the fastest are proved
# here too, within TIMEOUT.
BENCH_PROVED = ["elected_lane_handoff_per_warp", "pingpong_predicated_wait",
                "single_stage_async_dot", "umma_pipeline_without_producer_tail",
                "fa3_round_robin_tokens", "arrive_drop_early_exit", "persistent_ceil_tiles",
                "split_k_cluster_synchronized", "mbarrier_handoff_then_syncthreads",
                "named_barriers_nested_tile_k", "umma_2cta_synchronized_exit",
                "multicast_ring_cluster_consumers"]
PROVED = ["arrive_drop_early_exit", "split_k_cluster_synchronized",
          "named_barriers_nested_tile_k", "umma_2cta_synchronized_exit"]
# (every correct protocol here is proved: none is left outside the method)


@functools.lru_cache(maxsize=None)
def proved(name: str, timeout: float = TIMEOUT):
    kernel = TARGETS[name].build()
    return prove_kernel(kernel, {}, Options(Limits(timeout=timeout)), name,
                        SimpleNamespace(symbolic=[]))


def test_every_protocol_has_its_declared_verdict_and_a_twin():
    correct = [n for n, t in TARGETS.items() if t.expect == "verified"]
    buggy = [n for n, t in TARGETS.items() if t.expect.startswith("violation")]
    assert len(correct) == 12 and len(buggy) == 12
    for name, target in TARGETS.items():
        kernel = target.build()
        assert any(p.symbolic for p in kernel.params.values()), name
        assert check_kernel(kernel).matches(target.expect), name


@pytest.mark.parametrize("name", PROVED)
def test_proved(name):
    v = proved(name)
    assert v.verdict == "proved", (v.label, v.coverage)
    assert any(n.startswith("cross-checked by the explorer") for n in v.notes), v.notes


@pytest.mark.parametrize("name", BENCH_PROVED)
def test_a_proved_protocol_is_verified_by_the_explorer_on_a_grid(name):
    assert set(PROVED) <= set(BENCH_PROVED) and TARGETS[name].expect == "verified"
    kernel = TARGETS[name].build()
    symbolic = [p.name for p in kernel.params.values() if p.symbolic]
    fixed = {n: p.default for n, p in kernel.params.items() if not p.symbolic}
    for values in points(kernel, symbolic, fixed, 4):
        assert check_kernel(kernel, values).verdict == "verified", values


@pytest.mark.parametrize("name", ["early_exit_arrives_without_drop",
                                  "umma_2cta_full_counts_one_half",
                                  "split_k_cluster_sync_in_the_reducer_only",
                                  "nested_named_consumer_one_k_step_short"])
def test_a_refutation_is_the_explorers_and_replays(name):
    v = proved(name, timeout=5.0)
    assert v.verdict == "violation", v.label
    kernel = TARGETS[name].build()
    again = check_kernel(kernel, v.params)
    assert again.verdict == "violation" and again.codes[0] == v.codes[0]
    run = replay(System(kernel, v.trace.params, v.trace.grid_position), v.trace.actions)
    assert run.violation is not None and run.violation.code == v.codes[0]
    assert TARGETS[name].expect.startswith("violation:")


def test_no_parameter_becomes_symbolic_unasked():
    """A persistent loop's tile count that tiles.py could prove stays fixed unless declared;
    the verdict says how to ask."""
    from barrierproof.loader import resolve
    kernel = resolve(os.path.join(EXAMPLES, "persistent.py") + "::persistent_ring")[0].build()
    kernel = kernel.replace(params={n: p.__class__(p.name, p.default, n == "steps")
                                    for n, p in kernel.params.items()})
    v = prove_kernel(kernel, {}, Options(Limits(timeout=1.0)), "persistent_ring",
                     SimpleNamespace(symbolic=[]))
    assert v.params.get("tiles") == kernel.params["tiles"].default, v.params
    assert "all steps with" in v.coverage and "all tiles" not in v.coverage, v.coverage
    assert any("--symbolic tiles" in n for n in v.notes), v.notes


# -- the cluster barrier in arrive-wait pairs (checker/symbolic/cluster_sync.py) ------------------

@protocol()
def _arrive_twice(k):
    k.threads(2, name="wg")
    k.cluster_arrive()
    k.cluster_arrive()
    k.cluster_wait()


@protocol()
def _sync_in_a_warp(k):
    k.threads(1, name="wg")
    with k.warp_region():
        k.cluster_sync()


def test_cluster_barrier_lowered_only_in_pairs():
    for bad in (_arrive_twice, _sync_in_a_warp):
        kernel = bad.build()
        assert alternates(kernel) is not None
        with pytest.raises(Unsupported):
            lower_cluster_sync(kernel)
    kernel = TARGETS["split_k_cluster_synchronized"].build()
    lowered = lower_cluster_sync(kernel)
    assert not any(op.kind.startswith("cluster_") for op in lowered.ops())
    # the rewrite keeps the explorer's verdict on a grid
    for tiles in range(4):
        a = check_kernel(kernel, {"tiles": tiles})
        b = check_kernel(lowered, {"tiles": tiles})
        assert a.verdict == b.verdict == "verified", (tiles, a.label, b.label)
    twin = TARGETS["split_k_cluster_sync_in_the_reducer_only"].build()
    for tiles in range(3):
        a = check_kernel(twin, {"tiles": tiles})
        b = check_kernel(lower_cluster_sync(twin), {"tiles": tiles})
        assert a.verdict == b.verdict == "violation", (tiles, a.label, b.label)


# -- Spacer's invariants count only once plain Z3 re-checks them (checker/symbolic/chc.py) -------

def _counter_system():
    """n frozen (a parameter), x counts from 0 to n; reaching x > n is the error."""
    n, x = z3.Int("n"), z3.Int("x")
    return SimpleNamespace(vars=[n, x], init_head=[n, z3.IntVal(0)], init_body=n >= 0,
                           steps=[("count", x < n, [n, x + 1])], bad=[("past n", x > n)],
                           sane=[], system=SimpleNamespace(frozen=[n]))


def test_a_certificate_is_checked_for_all_three_obligations():
    enc = _counter_system()
    n, x = enc.vars
    assert check_certificate(enc, z3.And(x >= 0, x <= n), 10) is None
    assert check_certificate(enc, x >= 1, 10) == "fails initiation"
    assert check_certificate(enc, x == 0, 10) == "fails consecution on `count`"
    assert check_certificate(enc, x >= 0, 10) == "fails safety on `past n`"
    # no work left to decide it: undecided, not failing
    with z3_limits(Budget(1e-6)):
        assert check_certificate(enc, z3.And(x >= 0, x <= n), 10) == \
            "leaves initiation undecided (max. resource limit exceeded)"


def test_spacer_proves_the_counter_and_its_answer_is_rechecked():
    enc = _counter_system()
    found = prove_class(enc, [], timeout=20)
    assert found.status == "proved", found.reason
    assert check_certificate(enc, found.invariant, 10) is None
    broken = SimpleNamespace(**{**vars(enc), "steps": [("count", enc.vars[1] <= enc.vars[0],
                                                         [enc.vars[0], enc.vars[1] + 1])]})
    assert prove_class(broken, [], timeout=20).status == "failed"


def test_named_barriers_join_the_mbarriers_in_one_partition():
    """A sync that orders a hand-off is seen by the mbarriers' class system only when both
    are in one class: the partition prove tries after the others."""
    from barrierproof.checker.symbolic.hw import is_named_barrier, lower_named_barriers
    from barrierproof.checker.symbolic.prove import _partition
    kernel = lower_named_barriers(TARGETS["mbarrier_handoff_then_syncthreads"].build(), {})
    apart = _partition(kernel, ["steps"], {}, False, False)
    joint = _partition(kernel, ["steps"], {}, False, False, join_named=True)
    assert len(apart.build_classes()) == 2
    (cls,) = joint.build_classes()
    assert any(is_named_barrier(a) for a in cls.allocs) and \
        not all(is_named_barrier(a) for a in cls.allocs)
    # nothing to join where there are no named barriers
    plain = TARGETS["arrive_drop_early_exit"].build()
    assert _partition(plain, ["steps"], {}, False, False, join_named=True) is None
