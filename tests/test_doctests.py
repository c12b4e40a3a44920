"""The runnable examples in docstrings run."""

import doctest
import importlib

import pytest

MODULES = ["barrierproof.model.ir", "barrierproof.model.expr", "barrierproof.model.dsl",
           "barrierproof.model.interpreter", "barrierproof.model.pallas.loops",
           "barrierproof.model.pallas.primitives", "barrierproof.model.pallas.antiunify",
           "barrierproof.checker.engines.explore", "barrierproof.checker.check",
           "barrierproof.checker.report.text", "barrierproof.checker.report.safe",
           "barrierproof.checker.report.views", "barrierproof.schema",
           "barrierproof.check_cmd", "barrierproof.checker.repair.source",
           "barrierproof.checker.repair.search", "barrierproof.model.reference",
           "barrierproof.model.steps", "barrierproof.checker.engines.tla",
           "barrierproof.checker.engines.tla_state", "barrierproof.checker.engines.tlc",
           "barrierproof.checker.rules", "barrierproof.loader", "barrierproof.outputs",
           "barrierproof.suppress", "barrierproof.checker.report.github",
           "barrierproof.checker.repair.spelling", "barrierproof.api"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_the_docstrings_sample_protocols_have_their_declared_verdicts():
    from barrierproof.checker.check import check_kernel
    from barrierproof.model import samples

    for sample in (samples.handoff, samples.lost_arrival):
        assert check_kernel(sample.build()).label == sample.expect
