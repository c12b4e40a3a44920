"""Every bundled DSL example gets the verdict it declares, with and without reduction, and every
counterexample replays on the interpreter to the same diagnostic."""

import glob
import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.loader import import_file, targets_in_module
from barrierproof.model.interpreter import replay
from barrierproof.model.semantics import System

from conftest import EXAMPLES

# DSL examples, in examples/ and its subdirectories; Pallas and CuTe DSL kernels have their own
# tests (judged on the path below examples/: a checkout may itself live under "pallas")
FILES = sorted(f for f in glob.glob(os.path.join(EXAMPLES, "**", "*.py"), recursive=True)
               if os.path.relpath(f, EXAMPLES).split(os.sep)[0] not in ("pallas", "cute")
               and not os.path.basename(f).startswith("_"))
TARGETS = [t for f in FILES for t in targets_in_module(f, import_file(f)) if t.kind == "dsl"]


def test_there_are_enough_examples():
    assert len(TARGETS) >= 15
    assert all(t.expect for t in TARGETS), [t.ref for t in TARGETS if not t.expect]
    codes = {t.expect.split(":")[1] for t in TARGETS if ":" in t.expect}
    # at least one buggy variant per diagnostic code the explorer and static checks produce
    assert {"BP100", "BP101", "BP102", "BP103", "BP104", "BP105", "BP110", "BP111", "BP112",
            "BP120", "BP121", "BP130"} <= codes
    assert sum(t.expect == "verified" for t in TARGETS) >= 6


@pytest.mark.parametrize("reduction", [True, False], ids=["reduced", "full"])
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_expected_verdict(target, reduction):
    kernel = target.build()
    verdict = check_kernel(kernel, options=Options(reduction=reduction), source=target.ref)
    assert verdict.matches(target.expect), (verdict.label, verdict.diagnostics)
    if verdict.verdict == "violation" and verdict.coverage != "found statically, before exploration":
        trace = verdict.trace
        assert trace is not None and trace.violation["code"] == verdict.codes[0]
        system = System(kernel, trace.params, trace.grid_position)
        run = replay(system, trace.actions, witness=trace.witness_actions)
        assert run.violation is not None and run.violation.code == verdict.codes[0]


@pytest.mark.parametrize("target", [t for t in TARGETS if t.expect.startswith("violation")],
                         ids=lambda t: t.name)
def test_counterexamples_are_equally_short_with_and_without_reduction(target):
    kernel = target.build()
    # breadth first: the states it explores to the violation's level shrink with the reductions
    # (depth first, they depend on the order successors are taken in)
    reduced = check_kernel(kernel, options=Options(reduction=True, order="bfs"))
    full = check_kernel(kernel, options=Options(reduction=False, order="bfs"))
    if reduced.trace is None:
        return
    assert len(reduced.trace.steps) == len(full.trace.steps)
    assert reduced.states <= full.states
    deep = check_kernel(kernel, options=Options(reduction=True, order="dfs"))
    assert len(deep.trace.steps) == len(full.trace.steps) and deep.codes == full.codes


@pytest.mark.parametrize("target", [t for t in TARGETS if t.expect.startswith("violation")],
                         ids=lambda t: t.name)
def test_ignoring_the_first_violation_goes_on_to_the_next_finding(target):
    """An ignored code is passed over by the search and by the replay of the next trace."""
    kernel = target.build()
    code = target.expect.split(":")[1]
    verdict = check_kernel(kernel, options=Options(ignore=frozenset({code})))
    assert code not in verdict.codes
    if verdict.trace is not None:
        run = replay(System(kernel, verdict.trace.params, verdict.trace.grid_position),
                     verdict.trace.actions, frozenset({code}), verdict.trace.witness_actions)
        assert run.violation.code == verdict.codes[0]
