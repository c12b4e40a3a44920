"""A counterexample that steps past synchronization the model does not read (BP190) is no
finding: that operation may be what orders the accesses or completes the wait, so the verdict
is `unknown` (checker/check.py). One that passes none is a violation as any other. And a race,
judged on the stored representative of a symmetric state, is shown on the schedule that
reaches that representative (the explorer renames its agents), so it replays."""

from __future__ import annotations

from barrierproof.checker.check import check_kernel
from barrierproof import protocol


@protocol
def hidden_handoff(k):
    """Thread 0 writes, both meet on a barrier the model does not read, thread 1 reads: the
    race the explorer sees passes the unread meeting."""
    k.threads(2, name="wg")
    buf = k.SMEM(name="buf")
    with k.when(k.thread == 0):
        k.write(buf)
    k.unmodeled("bar.sync in PTX")      # one op for both: one program, one symmetry class
    with k.when(k.thread == 1):
        k.read(buf)


@protocol
def race_before_the_unread(k):
    """The same accesses before the unread op: the race needs no step past it."""
    k.threads(2, name="wg")
    buf = k.SMEM(name="buf")
    with k.when(k.thread == 0):
        k.write(buf)
        k.unmodeled("bar.sync in PTX")
    with k.otherwise():
        k.read(buf)
        k.unmodeled("bar.sync in PTX")


def test_a_counterexample_through_an_unread_barrier_is_unknown():
    v = check_kernel(hidden_handoff.build())
    assert v.verdict == "unknown", v.label
    assert [d.code for d in v.diagnostics] == ["BP190"]
    assert any("steps past synchronization the model does not read" in n for n in v.notes)


def test_a_counterexample_before_the_unread_barrier_is_a_violation():
    v = check_kernel(race_before_the_unread.build())
    assert v.verdict == "violation" and v.diagnostics[0].code == "BP200", v.label
    assert "BP190" in {d.code for d in v.diagnostics}


def test_the_race_of_a_representative_replays_under_every_core():
    """Both threads run one instruction (the unread op), so they are one symmetry class; the
    race of the stored representative needs thread 1 (the reader) to move, not thread 0."""
    from barrierproof.checker.engines.explore import explore
    from barrierproof.model.interpreter import replay
    from barrierproof.model.semantics import compile_systems
    kernel = hidden_handoff.build()
    [system] = compile_systems(kernel, kernel.param_values({}), True)
    for core in (None, "python"):
        result = explore(system, ignore=frozenset({"BP190"}), core=core)
        assert result.status == "violation"
        run = replay(system, result.actions, frozenset({"BP190"}))
        assert run.violation is not None and run.violation.code == "BP200", (core, run.outcome)
