"""A deadlock at a bare parity wait that another schedule passes earlier is the parity aliasing
it follows from (model/parity.py, docs/parity.md): BP101 with the deadlock as the trace and the
early return as the other schedule, both replayed on the interpreter and on the reference. A
deadlock at a wait that returns on no schedule stays BP100."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import explore
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model import reference
from barrierproof.model.semantics import System


def _example(ref):
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    path, name = ref.split("::")
    (target,) = resolve(os.path.join(EXAMPLES, path) + "::" + name)
    return target.build()


# the broken protocols whose shortest violation is a deadlock past an early return
ALIASED = [
    "patterns/parity_skipping.py::parity_from_the_loop_index",        # tilelang#2927
    "patterns/parity_skipping.py::phase_flipped_one_step_early",      # cutlass#2404
    "patterns/parity_skipping.py::alternate_k_blocks_odd_stages_shortcut",
    "patterns/parity_skipping.py::pingpong_bare_parity_without_order_barrier",
    "cutlass.py::ring_parity_on_single_slot",                         # tilelang#3087
]


@pytest.mark.parametrize("ref", ALIASED)
def test_a_deadlock_past_an_early_return_is_reported_as_the_aliasing(ref):
    kernel = _example(ref)
    v = check_kernel(kernel, None, Options())
    assert v.label == "violation:BP101", v.label
    text = v.diagnostics[0].message
    assert "returns after completion" in text and "on another schedule" in text, text
    assert "has already completed" in text and "never comes (deadlock)" in text, text
    # both schedules were replayed (check_kernel raises otherwise); the trace ends stuck and
    # the other schedule with the wait's step
    assert v.trace is not None and v.trace.witness is not None
    assert v.trace.witness["steps"][-1]["text"].startswith("wait_parity(")
    # the unreduced search and the independent reference agree on the code and the length
    system = System(kernel)
    reduced, full = explore(system), explore(system, reduction=False)
    dfs = explore(system, order="dfs")
    assert reduced.violation.code == full.violation.code == dfs.violation.code == "BP101"
    assert len(reduced.actions) == len(full.actions) == len(dfs.actions)
    assert reference.explore(kernel, max_states=50_000).finding.code == "BP101"


def test_a_wait_that_returns_on_no_schedule_stays_a_deadlock():
    kernel = _example("patterns/parity_skipping.py::producer_acquire_wrong_initial_parity")
    v = check_kernel(kernel, None, Options())
    assert v.label == "violation:BP100" and v.trace.witness is None
    assert reference.explore(kernel, max_states=50_000).finding.code == "BP100"


def test_ignoring_bp101_keeps_the_deadlock():
    kernel = _example("patterns/parity_skipping.py::parity_from_the_loop_index")
    v = check_kernel(kernel, None, Options(ignore=frozenset({"BP101"})))
    assert v.label == "violation:BP100", v.label


def test_alternate_k_blocks_name_the_stride_that_keeps_prove_from_an_order():
    """On 3 slots the consumers' stride 2 does not divide the ring: the stride rewrite
    (stride_split.py) strip-mines the loops to whole laps, a case per residue of k_blocks
    modulo 6. On 5 slots that needs k_blocks modulo 10, past its 8 residues: it refuses, and
    the sentence an `unknown` carries names both loops and the phase terms the ring classes
    lack (the full proof is not run here: minutes)."""
    from barrierproof.checker.symbolic.stride_split import stride_cases, stride_mismatch
    k = _example("patterns/parity_skipping.py::alternate_k_blocks_in_turn")
    cases, why = stride_cases(k, ["k_blocks"], {"stages": 3})
    assert why is None and len(cases) == 6, why
    cases, why = stride_cases(k, ["k_blocks"], {"stages": 5})
    assert cases is None and "do not divide the 5 slots" in why and "modulo 10" in why, why
    text = stride_mismatch(k, {"stages": 5})
    assert "steps through `empty` 1 slot(s) per iteration" in text, text
    assert "not by a stride" in text and "(((2 * j) + wg) % stages)" in text
