"""A drained software pipeline cut into whole laps of its ring (checker/symbolic/laps.py): the
cases cover every trip count, each symbolic case runs the program of the kernel at its values,
and a drain waiting on the wrong phase is not proved."""

import dataclasses
import os

import pytest

pytest.importorskip("triton")

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.symbolic.laps import lap_cases  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.expr import mk  # noqa: E402
from barrierproof.model.ir import Const, Op, When  # noqa: E402

from conftest import EXAMPLES  # noqa: E402

PIPELINED = os.path.join(EXAMPLES, "gluon", "tcgen05_pipeline.py")


def _pipelined():
    return resolve(f"{PIPELINED}::pipelined")[0].build()


def test_the_cases_cover_every_trip_count():
    cases, note = lap_cases(_pipelined(), ["K"], {})
    labels = [c.label for c in cases]
    # n <= 0 and 1..2S-1 for the explorer, one symbolic case per residue of the ring of 3
    assert labels[:6] == ["n <= 0"] + [f"n = {v}" for v in range(1, 6)]
    assert labels[6:] == [f"n = 3*laps + {b}, laps >= 2" for b in range(3)]
    assert all(c.symbolic == ["laps"] for c in cases[6:])
    assert "laps.py" in note


@pytest.mark.parametrize("laps", [2, 3])
def test_each_lap_case_is_the_kernel_at_its_trip_count(laps):
    """The cut program at laps = X explores the same states, with the same verdict, as the
    kernel at K = 64 * (3X + b): the rewrite changed no event (about 1 s)."""
    kernel = _pipelined()
    cases, _ = lap_cases(kernel, ["K"], {})
    for b, case in enumerate(cases[6:]):
        whole = check_kernel(kernel, {"K": 64 * (3 * laps + b)}, Options())
        cut = check_kernel(case.kernel, {"laps": laps}, Options())
        assert whole.verdict == "verified"
        assert (cut.verdict, cut.states) == (whole.verdict, whole.states)


def test_a_drain_on_the_wrong_phase_is_not_proved():
    """The last wait flipped to the phase before: the explorer's cases refute it, so the
    cut never proves it (the lap cases are tried before the usual course)."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    kernel = _pipelined()
    drain = kernel.body[-1]
    assert isinstance(drain, When) and isinstance(drain.then[0], Op)
    wait = drain.then[0]
    flipped = dataclasses.replace(wait, parity=mk("%", mk("+", wait.parity, Const(1)), Const(2)))
    bad = kernel.replace(body=kernel.body[:-1] + (dataclasses.replace(drain, then=(flipped,)),),
                         expect=None)
    found = prove_kernel(bad, options=Options(ignore=frozenset({"BP200", "BP201"})))
    assert found.verdict == "violation", found.coverage


def test_only_the_accumulator_leaves_the_race_proof():
    """The accumulator only the thread's tcgen05 MMAs write has one agent, its queue, so no
    race can involve it; the operand buffers, which TMA copies write, stay."""
    from barrierproof.checker.symbolic.laps import queue_only_buffers_dropped
    kernel = _pipelined()
    kept = queue_only_buffers_dropped(kernel)
    assert [b.name for b in kept.buffers] == ["a_bufs", "b_bufs"]
    assert [b.name for b in kernel.buffers] == ["a_bufs", "b_bufs", "acc"]
