"""Two `gl.warp_specialize` regions one after the other (model/gluon/control.py): the second
region's workers are threads of their own that start once the first region has joined, and
the default partition runs both regions' default code in order."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("triton")

from barrierproof.checker.check import check_kernel  # noqa: E402
from barrierproof.loader import import_file  # noqa: E402
from barrierproof.model import primitives as K  # noqa: E402
from barrierproof.model.gluon import load  # noqa: E402
from barrierproof.model.ir import iter_ops  # noqa: E402

from conftest import ROOT  # noqa: E402

DATA = import_file(os.path.join(ROOT, "tests", "data", "unseen_gluon7.py"))


def _threads(kernel):
    return [when.then for when in kernel.body]


def test_a_second_region_starts_after_the_first_joins():
    kernel = load(DATA.two_regions_ok)
    default, first, second = _threads(kernel)
    names = {b.name: int(b.num_arrivals.value) for b in kernel.barriers}
    # the first region's worker arrives on its join; the second's waits for its start
    assert names["warp_specialize_end"] == 1 and names["warp_specialize_start2"] == 1
    kinds = [(op.kind, op.barrier.alloc.name) for op in iter_ops(default)
             if op.barrier is not None and op.barrier.alloc.name.startswith("warp_spec")]
    assert kinds == [(K.WAIT_PARITY, "warp_specialize_end"),
                     (K.ARRIVE, "warp_specialize_start2")]
    first_ops, second_ops = list(iter_ops(first)), list(iter_ops(second))
    assert first_ops[-1].kind == K.ARRIVE and first_ops[-1].barrier.alloc.name == \
        "warp_specialize_end"
    assert second_ops[0].kind == K.WAIT_PARITY and second_ops[0].barrier.alloc.name == \
        "warp_specialize_start2"
    assert check_kernel(kernel).matches("verified")


def test_phases_carry_across_regions():
    """The second region's loader and consumer see the phases the first left: counting from 0
    again is a violation, found, not a BP190."""
    v = check_kernel(load(DATA.two_regions_restart))
    assert v.matches("violation:BP105"), v.label
    assert not [d for d in v.diagnostics if d.code == "BP190"]
