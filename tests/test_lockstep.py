"""Lockstep clusters with a decrementing semaphore wait are modelled as blocks of their own
(semantics.lockstep_blocks); where that does not apply, the wait stays unmodelled (BP190)."""

from barrierproof.checker.check import check_kernel
from barrierproof.model.dsl import protocol
from barrierproof.checker.engines.explore import explore
from barrierproof.model.semantics import LOCKSTEP_LIMIT, System


def _takers(k, copies, decrement=True, cluster_sync=False):
    k.threads(1, name="wg")
    sem = k.Semaphore(copies=copies)
    k.semaphore_signal(sem)
    k.semaphore_wait(sem, 2, decrement=decrement)
    if cluster_sync:
        k.cluster_sync()


@protocol
def two_take_two(k, copies=2):
    """Each of the clusters signals once; the first waiter takes both signals."""
    _takers(k, copies)


@protocol
def two_read_two(k, copies=2):
    _takers(k, copies, decrement=False)


@protocol
def two_take_two_then_cluster_sync(k, copies=2):
    _takers(k, copies, cluster_sync=True)


def test_decrementing_waits_model_each_lockstep_cluster():
    system = System(two_take_two.build())
    assert system.lockstep == 2 and len(system.blocks) == 2
    # each cluster signals once (not twice: its signal no longer stands for the other's)
    verdict = check_kernel(two_take_two.build())
    assert verdict.label == "violation:BP100"


def test_monotone_waits_keep_one_cluster_standing_for_all():
    system = System(two_read_two.build())
    assert system.lockstep == 1 and len(system.blocks) == 1
    assert check_kernel(two_read_two.build()).label == "verified"


def test_beyond_the_limit_or_with_a_cluster_barrier_the_wait_stays_unmodelled():
    too_many = check_kernel(two_take_two.build(), {"copies": LOCKSTEP_LIMIT + 1})
    assert "BP190" in too_many.codes and too_many.verdict != "verified"
    spanned = check_kernel(two_take_two_then_cluster_sync.build())
    assert "BP190" in spanned.codes and spanned.verdict != "verified"


@protocol
def signals_two(k):
    k.threads(1, name="wg")
    a = k.Semaphore(name="a")
    b = k.Semaphore(name="b")
    k.semaphore_signal_parallel(a, (b, 2))


def test_parallel_signals_to_different_semaphores_land_in_either_order():
    system = System(signals_two.build())
    (issue, landed) = system.programs[0]
    slot_a, slot_b = issue.aux
    after_issue, _ = system.step(system.initial_state(), 0)
    assert not system.enabled(after_issue, 0)          # the thread waits for both to land
    b_first, _ = system.step(after_issue, system.n_agents + slot_b)
    assert [system.barrier(b_first, i)[0] for i in (0, 1)] == [0, 2]
    a_then, _ = system.step(b_first, system.n_agents + slot_a)
    assert system.enabled(a_then, 0)
    assert explore(system).status == "verified"
