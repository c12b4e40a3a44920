"""Unit tests of each step rule of model/semantics.py, on tiny hand-built systems."""

import pytest

from barrierproof.model.dsl import protocol
from barrierproof.model.interpreter import ReplayError, replay
from barrierproof.model.semantics import System
from barrierproof.checker.engines.explore import explore


def system(fn, **params):
    return System(protocol(fn).build(), params)


def handoff(signal, observe=(("barrier_wait",),), num_arrivals=1):
    """Two threads and one barrier: thread 0 runs the `signal` ops, thread 1 the `observe` ops,
    each op written as (builder method, *arguments after the barrier)."""
    def p(k):
        k.threads(2)
        bar = k.Barrier(num_arrivals=num_arrivals)
        with k.when(k.thread == 0):
            for name, *args in signal:
                getattr(k, name)(bar, *args)
        with k.otherwise():
            for name, *args in observe:
                getattr(k, name)(bar, *args)
    return p


def names(sys_, actions):
    return [sys_.action_name(a)[0] for a in actions]


def test_phase_completes_when_all_arrivals_are_in():
    def p(k):
        k.threads(3)
        bar = k.Barrier(num_arrivals=2)
        with k.when(k.thread < 2):
            k.barrier_arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)
    s = system(p)
    run = replay(s, [0])
    assert s.barrier(run.final, 0) == (0, 1, 0, 2)          # one of two arrivals
    assert not s.enabled(run.final, 2)                      # the waiter is blocked
    run = replay(s, [0, 1])
    assert s.barrier(run.final, 0) == (1, 2, 0, 2)          # completed, count restored
    assert run.events[-1] == [(0, 1)]
    assert replay(s, [0, 1, 2]).outcome == "terminated"


def test_tx_bytes_hold_the_phase_open_and_may_go_negative():
    # bytes may land before expect_tx
    s = system(handoff([("tma_load", 512), ("arrive_expect_tx", 512)]))
    tma = s.n_agents                         # the only in-flight slot
    run = replay(s, [0, tma])
    assert s.barrier(run.final, 0) == (0, 1, -512, 1)       # landed first: tx negative
    run = replay(s, [0, tma, 0])
    assert s.barrier(run.final, 0)[0] == 1                  # arrive + tx back to 0 completes
    assert replay(s, [0, tma, 0, 1]).outcome == "terminated"


def test_arrival_with_bytes_outstanding_does_not_complete():
    s = system(handoff([("copy_gmem_to_smem", 1024)]))
    run = replay(s, [0])
    assert s.barrier(run.final, 0) == (0, 0, 1024, 1)
    assert not s.enabled(run.final, 1)
    with pytest.raises(ReplayError):
        replay(s, [0, 1])
    assert replay(s, [0, s.n_agents, 1]).outcome == "terminated"


def test_wait_parity_aliases_two_phases_ahead():
    """try_wait.parity(P) passes iff the current parity differs from P: two completions later
    it is blocked again, one completion later it passes."""
    s = system(handoff([("arrive",), ("arrive",)], [("wait_parity", 0)]))
    assert s.enabled(replay(s, [0]).final, 1)               # phase 1: parity 1 != 0
    run = replay(s, [0, 0])
    assert s.barrier(run.final, 0)[0] == 2
    assert not s.enabled(run.final, 1)                      # phase 2 aliases phase 0


def test_phase_overrun_is_reported_at_the_completion():
    s = system(handoff([("barrier_arrive",)] * 2, [("barrier_wait",)] * 2))
    # The waiter sits at its first wait: completion 2 overruns it.
    run = replay(s, [0, 0])
    assert run.outcome == "violation" and run.violation.code == "BP101"
    # Observing completion 1 first makes completion 2 legal.
    assert replay(s, [0, 1, 0, 1]).outcome == "terminated"


def test_late_join_is_reported_when_the_thread_reaches_its_first_wait():
    def p(k):
        k.threads(2)
        data = k.Barrier()
        go = k.Barrier()
        with k.when(k.thread == 0):
            k.barrier_arrive(data)
            k.barrier_arrive(data)
            k.barrier_arrive(go)
        with k.otherwise():
            k.barrier_wait(go)
            k.barrier_wait(data)
    s = system(p)
    run = replay(s, [0, 0, 0, 1])
    assert run.violation.code == "BP102"


def test_cluster_barrier_fans_out_along_collective_axes():
    def p(k):
        k.cluster(x=2, y=2)
        k.threads(1)
        bar = k.ClusterBarrier(collective_axes=("x", "y"), num_arrivals=1)
        with k.when((k.block("x") == 0) & (k.block("y") == 0)):
            k.barrier_arrive(bar)
    s = system(p)
    # Expected arrivals: num_arrivals * (1 + (2-1) + (2-1)) = 3 in every block.
    assert [inst.expected for inst in s.instances] == [3, 3, 3, 3]
    # The other blocks have nothing to do and exit at once: the arrival reaches into their
    # shared memory (BP146), which this test of the fan-out passes over.
    run = replay(s, [0], frozenset({"BP146"}))
    arrived = {s.instances[i].block: s.barrier(run.final, i)[3] - s.barrier(run.final, i)[1]
               for i in range(4)}
    # Own block and the blocks differing along exactly one axis; not the diagonal block.
    assert arrived == {(0, 0): 1, (0, 1): 1, (1, 0): 1, (1, 1): 0}


def test_commit_arrives_only_after_every_earlier_tcgen05_op():
    def p(k):
        k.threads(1)
        mma = k.Barrier(num_arrivals=1, orders_tensor_core=True)
        done = k.Barrier(num_arrivals=1, orders_tensor_core=True)
        k.tcgen05_mma(barrier=mma)
        k.tcgen05_commit_arrive(done)
        k.barrier_wait(done)
        k.barrier_wait(mma)
    s = system(p)
    queue = s.n_agents + len(s.slots)
    run = replay(s, [0, 0])
    assert len(run.final[s.queue_pos[0]]) == 2
    run = replay(s, [0, 0, queue])                        # the MMA completes first
    assert s.barrier(run.final, 0)[0] == 1 and s.barrier(run.final, 1)[0] == 0
    run = replay(s, [0, 0, queue, queue, 0, 0])
    assert run.outcome == "terminated"


def test_deadlock_is_not_termination():
    def p(k):
        k.threads(2)
        bar = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            k.barrier_wait(bar)
    result = explore(system(p))
    assert result.status == "violation" and result.violation.code == "BP100"

    assert explore(system(handoff([("barrier_arrive",)]))).status == "verified"


def test_tx_imbalance_is_classified():
    result = explore(system(handoff([("arrive_expect_tx", 2048), ("tma_load", 1024)])))
    assert result.violation.code == "BP130"
    assert "tx-count" in result.violation.message


def test_exit_checks():
    def in_flight(k):
        k.threads(1)
        bar = k.Barrier(num_arrivals=1)
        k.copy_gmem_to_smem(bar, bytes=64)
    assert explore(system(in_flight)).violation.code == "BP105"

    unobserved = handoff([("barrier_arrive",)] * 2)
    # Either the overrun or the missed last completion, whichever comes first.
    assert explore(system(unobserved)).violation.code in ("BP101", "BP103")


def test_arrive_drop_lowers_later_phases():
    def p(k):
        k.threads(2)
        bar = k.Barrier(num_arrivals=2)
        with k.when(k.thread == 0):
            k.arrive_drop(bar)                   # leaves for good
        with k.otherwise():
            k.barrier_arrive(bar)
            k.barrier_wait(bar)
            k.barrier_arrive(bar)                # alone now: completes phase 2 by itself
            k.barrier_wait(bar)
    assert explore(system(p)).status == "verified"


def test_warp_region_forks_and_joins():
    def p(k):
        k.threads(1)
        k.warps(4)
        bar = k.Barrier(num_arrivals=4)
        with k.warp_region():
            k.barrier_arrive(bar)
        k.barrier_wait(bar)
    s = system(p)
    assert len(s.agents) == 4
    assert explore(s).status == "verified"


def test_fast_successors_equal_the_reference_rule_on_every_reachable_state():
    """`successors` is unrolled for speed; it must equal stepping every enabled action."""
    import glob
    import os
    from barrierproof.loader import import_file, targets_in_module
    from conftest import EXAMPLES
    checked = 0
    for f in sorted(glob.glob(os.path.join(EXAMPLES, "*.py"))):
        for target in targets_in_module(f, import_file(f)):
            if target.kind != "dsl":
                continue
            s = System(target.build())
            if s.findings:
                continue
            frontier, seen = [s.initial_state()], set()
            while frontier and len(seen) < 3000:
                state = frontier.pop()
                if state in seen:
                    continue
                seen.add(state)
                fast = s.successors(state)
                reference = [(a, *s.step(state, a)) for a in range(s.n_actions)
                             if s.enabled(state, a)]
                assert [(a, n, v and v.code) for a, n, v in fast] == \
                    [(a, n, v and v.code) for a, n, v in reference]
                frontier += [n for _, n, v in fast if v is None]
                checked += 1
    assert checked > 1000


def test_thread_index_used_before_the_thread_axis_is_named():
    def p(k):
        bar = k.Barrier()
        with k.when(k.thread == 0):
            k.barrier_arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)
        k.threads(2, name="wg")
    assert explore(system(p)).status == "verified"


def test_locations_point_at_the_users_lines():
    import os
    s = System(protocol(_located).build())
    files = {os.path.basename(src.loc.file) for src in s.sources}
    assert files == {"test_semantics.py"}, files


def _located(k):
    k.threads(1)
    k.warps(2)
    bar = k.Barrier(num_arrivals=2)
    with k.warp_region():
        with k.loop(1):
            with k.when(k.warp >= 0):
                k.barrier_arrive(bar)
    k.barrier_wait(bar)


def test_an_exited_thread_is_not_overrun_but_misses_completions_at_exit():
    """A consumer that arrive_drops itself out and exits cannot alias a parity: the completions
    it misses are reported at exit (BP103), not as a phase overrun."""
    def p(k, steps=3):
        k.threads(3)
        full = k.Barrier(num_arrivals=1)
        empty = k.Barrier(num_arrivals=2)
        with k.when(k.thread == 2):
            with k.loop(steps):
                k.barrier_arrive(full)
                k.barrier_wait(empty)
        with k.when(k.thread == 0):
            with k.loop(steps):
                k.barrier_wait(full)
                k.barrier_arrive(empty)
        with k.when(k.thread == 1):
            k.barrier_wait(full)
            k.arrive_drop(empty)
    assert explore(system(p)).violation.code == "BP103"


def test_remote_arrive_reaches_exactly_one_instance():
    def p(k):
        k.cluster(x=2, y=2)
        k.threads(1)
        bar = k.ClusterBarrier(collective_axes=("x", "y"), num_arrivals=1)
        with k.when((k.block("x") == 0) & (k.block("y") == 0)):
            k.arrive(bar.on(1, 1))
    s = system(p)
    # The other blocks have nothing to do and exit at once: the arrival reaches into their
    # shared memory (BP146), which this test of the fan-out passes over.
    run = replay(s, [0], frozenset({"BP146"}))
    arrived = {s.instances[i].block: s.barrier(run.final, i)[3] - s.barrier(run.final, i)[1]
               for i in range(4)}
    assert arrived == {(0, 0): 0, (0, 1): 0, (1, 0): 0, (1, 1): 1}
