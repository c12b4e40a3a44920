"""Gluon kernels written in the tutorials' style that the examples do not contain
(tests/gluon_kernels.py): each correct one is verified, each buggy twin found with its code,
its counterexample replayed on the interpreter and reported on the kernel's own lines."""

import os

import pytest

pytest.importorskip("triton")

from barrierproof.checker.check import check_kernel  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.interpreter import replay  # noqa: E402
from barrierproof.model.semantics import System  # noqa: E402

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gluon_kernels.py")
TARGETS = resolve(KERNELS)
SOURCE = open(KERNELS, encoding="utf-8").read().splitlines()


def test_every_launch_has_an_expected_verdict_and_both_kinds_occur():
    assert len(TARGETS) >= 22 and all(t.kind == "gluon" and t.expect for t in TARGETS)
    expects = [t.expect for t in TARGETS]
    assert sum(e == "verified" for e in expects) >= 6
    assert {"violation:BP100", "violation:BP200", "violation:BP201", "violation:BP130"} <= set(expects)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_verdict_counterexample_and_lines(target):
    kernel = target.build()
    # every synchronizing op of these kernels is read: none is left unmodelled
    assert not [op for op in kernel.ops() if op.kind == "unmodeled"]
    v = check_kernel(kernel, source=target.ref)
    assert v.matches(target.expect), (v.label, v.diagnostics)
    if v.verdict != "violation":
        return
    where, line = v.diagnostics[0].location.rsplit(":", 1)
    assert os.path.abspath(where) == KERNELS
    text = SOURCE[int(line) - 1]
    if v.codes[0] == "BP100":                          # a wait that never returns
        assert "mbarrier.wait" in text, text
    elif v.codes[0] == "BP200":                        # one of the two racing accesses
        assert any(w in text for w in ("tma.", "tcgen05", "warpgroup_mma", ".load(",
                                       ".store(", "clc.")), text
    if v.trace is not None:
        run = replay(System(kernel, v.trace.params, v.trace.grid_position), v.trace.actions,
                     witness=v.trace.witness_actions)
        assert run.violation is not None and run.violation.code == v.codes[0]


def test_the_command_line_output_is_free_of_tritons_noise():
    """No floating-point-fusion warning from compiling, no nanobind leak list at exit."""
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "barrierproof", "check",
                          KERNELS + "::mma_wrapper", "--no-cache"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "mma_wrapper: verified" in run.stdout, run.stdout + run.stderr
    assert "leaked" not in run.stderr and "FP_FUSION" not in run.stderr, run.stderr


def test_a_release_of_an_earlier_buffer_reads_as_a_ring_slot_under_its_predicate():
    """`c_empty.index((i - 1) % depth)` with `pred=i - 1 >= 0`: C remainder of a dividend that
    is negative only where the predicate is false, so the slot is the plain `(i - 1) % 2`."""
    from barrierproof.model.ir import When, walk
    kernel = next(t for t in TARGETS if t.name == "add").build()
    [release] = [s.then[0] for s in walk(kernel.body) if isinstance(s, When)
                 and s.then and getattr(s.then[0], "barrier", None) is not None
                 and s.then[0].barrier.alloc.name == "c_empty"]
    (index,) = release.barrier.index
    assert repr(index).endswith("- 1) % 2)") and "max" not in repr(index), index


def test_launch_assume_states_the_range_of_a_proof():
    import gluon_kernels as gk
    from dataclasses import replace
    from barrierproof.model.gluon import load
    from barrierproof.model.ir import ModelError
    kernel = load(replace(gk.mma_wrapper, assume=lambda K: K >= 64))
    assert [repr(a) for a in kernel.assumptions] == ["(K >= 64)"]
    with pytest.raises(ModelError, match="names N, not an integer argument"):
        load(replace(gk.mma_wrapper, assume=lambda N: N >= 1))


def test_an_arrival_still_queued_at_exit_is_named_in_the_report():
    """A pending-arrivals finding whose missing arrival is a commit nobody waited for says so."""
    kernel = next(t for t in TARGETS if t.name == "pingpong_no_producer_tail").build()
    v = check_kernel(kernel)
    assert v.codes[0] == "BP104"
    assert "still in flight: 1 tcgen05 arrival(s) queued by partition2" in v.diagnostics[0].message


def test_barriers_made_inside_tritons_library_take_the_users_names():
    """`full = mbarrier.allocate_mbarrier(batch=depth)`: Triton names it `bar`; reports say
    `full`, the name the kernel's own line gives it."""
    kernel = next(t for t in TARGETS if t.name == "pingpong_softmax").build()
    names = {b.name for b in kernel.barriers}
    assert {"full", "free"} <= names and not any(n.startswith("bar") for n in names), names


def test_an_mma_without_barriers_is_waited_at_once_with_its_operands_read():
    """Triton lowers `tcgen05_mma` without `mbarriers=` to the MMA, a commit on a barrier of its
    own and a wait: its operands are accesses (a slot still being loaded races with it), and
    the wait covers the thread's earlier tcgen05 ops (a tcgen05_copy into the accumulator)."""
    kernel = next(t for t in TARGETS if t.name == "one_partition").build()
    kinds = [op.kind for op in kernel.ops()]
    at = kinds.index("tcgen05_mma")
    assert kinds[at:at + 3] == ["tcgen05_mma", "tcgen05_commit_arrive", "barrier_wait"]
    mma = list(kernel.ops())[at]
    assert {r.alloc.name for r in mma.reads} == {"a_bufs", "b_bufs"}
    assert {r.alloc.name for r in mma.writes} == {"acc"}


def test_a_gather_completes_the_bytes_of_every_row_it_brings():
    """tile::gather4 into a [128, 64] fp16 buffer: 16 KiB on the barrier, not the descriptor's
    one-row block."""
    kernel = next(t for t in TARGETS if t.name == "gathered").build()
    [gather] = [op for op in kernel.ops() if op.kind == "tma_load"
                and op.writes and op.writes[0].alloc.name == "x_bufs"]
    assert gather.bytes.value == 128 * 64 * 2
