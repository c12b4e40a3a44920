"""A tcgen05 ring released by commits and never drained, closed by a last commit the epilogue
waits for (checker/symbolic/queue_tail.py): the last releases are landed at every exit because
the thread's tcgen05 queue completes in order, so `prove` proves it; a last commit that nobody
waits for, or one that is not the queue's last op, leaves the releases to the exit rules."""

from __future__ import annotations

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.queue_tail import tail
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.model.dsl import protocol

PROVE = Options(Limits(timeout=30))


def ring(epilogue_waits=True, tail_in_loop=False, tail_guarded=False):
    @protocol(symbolic=("steps",))
    def mma_ring(k, steps=3, stages=2):
        k.threads(3, name="wg")              # 0: MMA issuer, 1: TMA, 2: epilogue
        k.assume(steps >= 0)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
        acc = k.Barrier(num_arrivals=1, orders_tensor_core=True)
        with k.when(k.thread == 1):          # no drain of `empty` after the loop
            with k.loop(steps) as i:
                with k.when(i >= stages):
                    k.wait_parity(empty.at[i % stages], (i // stages - 1) % 2)
                k.copy_gmem_to_smem(full.at[i % stages], bytes=4096)
        with k.when(k.thread == 0):
            with k.loop(steps) as i:
                k.wait_parity(full.at[i % stages], (i // stages) % 2)
                k.tcgen05_mma()
                k.tcgen05_commit_arrive(empty.at[i % stages])
                if tail_in_loop:
                    with k.when(i == steps - 1):
                        k.tcgen05_commit_arrive(acc)
            if tail_guarded:
                with k.when(steps >= 1):
                    k.tcgen05_commit_arrive(acc)
            elif not tail_in_loop:
                k.tcgen05_commit_arrive(acc)
        with k.when(k.thread == 2):
            if epilogue_waits:
                with k.when(steps >= 1) if tail_guarded or tail_in_loop else k.when(steps >= 0):
                    k.wait_parity(acc, 0)
    return mma_ring


def explorer(kernel, steps):
    return check_kernel(kernel, {"steps": steps}).label


def test_a_ring_released_by_commits_is_proved_through_the_last_commit():
    kernel = ring().build()
    found = prove_kernel(kernel, {}, PROVE)
    assert found.verdict == "proved", found.coverage
    assert all(explorer(kernel, n) == "verified" for n in range(0, 6))


def test_the_tail_is_the_queue_s_last_unconditional_arrival():
    frag = Fragment(ring().build(), ["steps"], {"stages": 2})
    frag.build_roles()
    mma = next(r for r in frag.roles if any(
        b.op.kind == "tcgen05_mma" for item in r.items for b in item.ops))
    assert tail(mma).barrier.alloc.name == "acc"
    for variant in (ring(tail_in_loop=True), ring(tail_guarded=True)):
        frag = Fragment(variant.build(), ["steps"], {"stages": 2})
        frag.build_roles()
        assert all(tail(r) is None for r in frag.roles)


@pytest.mark.parametrize("variant", [
    pytest.param(dict(epilogue_waits=False), id="nobody_waits_for_the_last_commit"),
    pytest.param(dict(tail_guarded=True), id="last_commit_guarded", marks=pytest.mark.slow)])
def test_without_a_waited_tail_the_releases_stay_under_the_exit_rules(variant):
    kernel = ring(**variant).build()
    found = prove_kernel(kernel, {}, PROVE)
    assert found.verdict != "proved"
    if variant.get("epilogue_waits") is False:
        # the kernel may exit with the ring's last releases in flight: BP105 at every size
        assert found.verdict == "violation" and found.codes == ["BP105"]
        assert explorer(kernel, found.params["steps"]) == "violation:BP105"
