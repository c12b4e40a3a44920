"""The issue order of a tcgen05 queue in a class system (checker/symbolic/queue_order.py), and
the exact lap counts U(x) of a ring of concrete size (checker/symbolic/program.py).

An MMA warp that releases a two-slot ring by commits and drains by waiting for its last release
exits with nothing in flight: its queue lands in order, so the last release landing means every
earlier one has. A class system holding both slots counted each slot's commits apart and let the
second land first, so it reached an exit with the first release in flight (BP105) that the
explorer never finds. Each test here runs the class system's own sampler at small sizes, grid
checked against the explorer, and Z3 checks the construction facts the ghost adds."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import z3

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic import prove as prove_mod
from barrierproof.checker.symbolic import queue_order
from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.invariants import sample
from barrierproof.checker.symbolic.program import exact_threshold
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol

EXIT = "exit (BP103/BP104/BP105/BP130)"


def mma_ring(drain=True, extra_commit=False):
    """The CUTLASS / Gluon idiom: the producer's first wait on a fresh `empty` slot asks for
    phase -1 (passes at once), a tcgen05 commit releases the slot, the MMA warp drains by
    waiting for its last release (and commits once more after it: `extra_commit`)."""
    @protocol(symbolic=("steps",))
    def ring(k, steps=3, stages=2):
        k.threads(2, name="w")
        k.assume(steps >= 1)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
        with k.when(k.thread == 0):
            with k.loop(steps) as p:
                k.wait_parity(empty.at[p % stages], phase=p // stages - 1)
                k.copy_gmem_to_smem(full.at[p % stages], bytes=8192)
        with k.when(k.thread == 1):
            with k.loop(steps) as p:
                k.wait_parity(full.at[p % stages], phase=p // stages)
                k.tcgen05_commit_arrive(empty.at[p % stages])
            if drain:
                last = steps - 1
                k.wait_parity(empty.at[last % stages], phase=last // stages)
            if extra_commit:
                k.tcgen05_commit_arrive(empty.at[steps % stages])
    return ring


def class_systems(kernel, monkeypatch, any_order=False):
    """The class systems `prove` builds on the partition of every concrete barrier (both
    slots of each ring in one system), captured where the proof would start on them. With
    `any_order`, the first static order is taken unreplayed: it ranks the progress
    conditions only, and the exit rule these tests read does not depend on it."""
    captured = []
    if any_order:
        monkeypatch.setattr(prove_mod.TauRun, "check", lambda run, search: None)

    class Stop(Exception):
        pass

    def capture(frag, systems, *args, **kwargs):
        captured.append((frag, systems))
        raise Stop

    monkeypatch.setattr(prove_mod, "_prove_systems", capture)
    with pytest.raises(Stop):
        prove_mod._prove_fragment(kernel, ["steps"], {"stages": 2},
                                  prove_mod.Budget(60), 0.0, concrete_rings=False)
    return captured[0]


def errors_at(frag, systems, values):
    found = set()
    for cls, system, _ in systems:
        enc = Encoder(system).build()
        assert enc.check_sane(timeout=30) is None       # the ghost's facts, inductive (Z3)
        vals = [v for p in values for v in frag.valuations(cls, system, {"stages": 2, **p})]
        found |= set(sample(enc, vals, limit=20000, budget=float("inf")).errors)
    return found


def test_the_queue_order_is_kept_for_the_mma_warp(monkeypatch):
    frag, systems = class_systems(mma_ring().build(), monkeypatch)
    (_, system, _), = [s for s in systems if any(q.kind == "tcgen05" for q in s[1].slots)]
    owned = queue_order.queues(system)
    assert [system.roles[r].name for r in owned] == ["w1"] and len(owned[next(iter(owned))]) == 2


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_a_drained_ring_reaches_no_exit_violation(monkeypatch, steps):
    kernel = mma_ring().build()
    assert check_kernel(kernel, {"steps": steps}).verdict == "verified"
    frag, systems = class_systems(kernel, monkeypatch)
    assert EXIT not in errors_at(frag, systems, [{"steps": steps}])
    # each of the two keeps the exit clean on its own: the queue's order, and the slots the
    # loop tail's last release drains (queue_tail.py); without both the system reaches it
    undrained = [(c, dataclasses.replace(system, drained={}), b) for c, system, b in systems]
    assert EXIT not in errors_at(frag, undrained, [{"steps": steps}])
    monkeypatch.setattr(queue_order, "queues", lambda system: {})
    assert EXIT not in errors_at(frag, systems, [{"steps": steps}])
    if steps >= 2:
        assert EXIT in errors_at(frag, undrained, [{"steps": steps}])


def test_a_release_after_the_drain_still_reaches_the_exit_rule(monkeypatch):
    """Soundness on a grid: where the explorer finds the queue's newest op in flight at exit
    (BP105: a commit after the drain nobody waits for), the class system with the queue's
    order reaches the exit rule too. (Without any drain, or draining an earlier release, no
    static order lets every wait pass: `prove` finds those twins' BP105 by its bounded search,
    not on a class system.)"""
    kernel = mma_ring(extra_commit=True).build()
    frag, systems = class_systems(kernel, monkeypatch, any_order=True)
    for steps in (1, 2, 3):
        found = check_kernel(kernel, {"steps": steps}, Options(Limits(timeout=60)))
        assert found.verdict == "violation" and found.codes == ["BP105"]
        assert EXIT in errors_at(frag, systems, [{"steps": steps}])


def test_exact_lap_counts_of_a_concrete_ring():
    """U(x) = #{k >= 0 : s + k*S < x} is the only value the linear definition allows, for
    every ring size 1..4, slot and x in -3..15."""
    x, u, s = z3.Ints("x u s")
    for S in range(1, 5):
        for slot, xv in itertools.product(range(S), range(-3, 16)):
            count = sum(1 for k in range(20) if slot + k * S < xv)
            solver = z3.Solver()
            solver.add(x == xv, s == slot, *exact_threshold(x, u, s, z3.IntVal(S)))
            assert solver.check() == z3.sat and solver.model()[u].as_long() == count
            solver.add(u != count)
            assert solver.check() == z3.unsat


def _drain_example(name):
    import os
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    (target,) = resolve(os.path.join(EXAMPLES, "patterns", "tcgen05_drain.py") + "::" + name)
    return target.build()


@pytest.mark.parametrize("name", ["mma_ring_bare_parity", "mma_ring_stated_phase"])
def test_the_drained_mma_ring_is_proved_and_the_explorer_agrees(name):
    """examples/patterns/tcgen05_drain.py: proved for every steps >= 1 (about 25 s each on
    the reference machine: the ring class is proved case by case on the slot of the last
    release), and verified by the explorer at steps 1..8."""
    kernel = _drain_example(name)
    for steps in range(1, 9):
        assert check_kernel(kernel, {"steps": steps}).verdict == "verified"
    proof = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert proof.verdict == "proved", proof.coverage


@pytest.mark.parametrize("name, code", [("mma_ring_consumer_wrong_parity", "BP101"),
                                        ("mma_ring_producer_never_acquires", "BP121"),
                                        ("mma_ring_no_drain", "BP105")])
def test_the_broken_twins_are_refuted_as_the_explorer_says(name, code):
    kernel = _drain_example(name)
    found = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert found.verdict == "violation" and found.codes == [code]
    assert check_kernel(kernel, found.params).codes == [code]


def umma_gemm(epilogue_waits=True, tail_commit=True):
    """A persistent UMMA GEMM (TMA warp, MMA warp, epilogue warp; double-buffered TMEM
    accumulator), CUTLASS's producer-start-phase-1 bare parities, no assumption on the counts:
    the MMA warp's per-tile commit on `acc_full` closes its queue."""
    @protocol(symbolic=("tiles", "ksteps"))
    def gemm(k, tiles=2, ksteps=2, stages=2):
        k.threads(3, name="w")
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages, orders_tensor_core=True)
        acc_full = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
        acc_empty = k.Barrier(num_arrivals=1, num_barriers=2)
        with k.when(k.thread == 0):
            with k.loop(tiles) as t:
                with k.loop(ksteps) as kk:
                    p = t * ksteps + kk
                    k.wait_parity(empty.at[p % stages], (p // stages + 1) % 2)
                    k.copy_gmem_to_smem(full.at[p % stages], bytes=8192)
        with k.when(k.thread == 1):
            with k.loop(tiles) as t:
                if epilogue_waits:
                    k.wait_parity(acc_empty.at[t % 2], (t // 2 + 1) % 2)
                with k.loop(ksteps) as kk:
                    p = t * ksteps + kk
                    k.wait_parity(full.at[p % stages], (p // stages) % 2)
                    k.tcgen05_mma()
                    k.tcgen05_commit_arrive(empty.at[p % stages])
                if tail_commit:
                    k.tcgen05_commit_arrive(acc_full.at[t % 2])
                else:
                    k.arrive(acc_full.at[t % 2])
        if epilogue_waits:
            with k.when(k.thread == 2):
                with k.loop(tiles) as t:
                    k.wait_parity(acc_full.at[t % 2], (t // 2) % 2)
                    k.arrive(acc_empty.at[t % 2])
    return gemm


def test_the_per_tile_commit_closes_the_mma_queue_of_the_k_loop():
    from barrierproof.checker.symbolic.pertile import closing_tail
    assert len(closing_tail(umma_gemm().build())) == 2          # the MMA and its commit
    assert closing_tail(umma_gemm(tail_commit=False).build()) == frozenset()


def test_a_persistent_umma_gemm_is_proved_for_every_tile_and_k_count():
    """examples/patterns/tcgen05_drain.py::persistent_umma_gemm. About 30 s on the reference
    machine (two projections); the explorer agrees on a grid, negative counts included (a
    negative count runs no iteration)."""
    kernel = _drain_example("persistent_umma_gemm")
    for tiles, ksteps in itertools.product(range(-1, 4), range(-1, 3)):
        assert check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps}).verdict == "verified"
    proof = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert proof.verdict == "proved", proof.coverage


def test_an_accumulator_nobody_waits_for_is_not_proved():
    """No epilogue: nobody waits for `acc_full`, and the explorer finds the last commits in
    flight at exit (BP105); `prove` must not prove it, and its bounded search finds the same."""
    kernel = umma_gemm(epilogue_waits=False).build()
    assert check_kernel(kernel, {"tiles": 1, "ksteps": 1}).codes == ["BP105"]
    found = prove_kernel(kernel, options=Options(Limits(timeout=60)))
    assert found.verdict == "violation" and found.codes == ["BP105"]
