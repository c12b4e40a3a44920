"""Prover coverage of barriers the kernel initialises itself (`explicit_init=True`): the init
prologue (one thread initialises every instance, fences, then every thread passes one
syncthreads()) is recognised statically and dropped, and the rest is proved on barriers that
start initialised (checker/symbolic/init_prefix.py). Every other shape stays unproved."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.init_prefix import publish_inits
from barrierproof.checker.symbolic.prove import points, prove_kernel
from barrierproof.checker.symbolic.terms import Unsupported
from barrierproof.loader import resolve
from barrierproof.model.dsl import protocol

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def example(name):
    return resolve(os.path.join(EXAMPLES, "patterns", "mbarrier_init.py") + "::" + name)[0].build()


def test_the_cutlass_init_prologue_is_proved_for_every_ring_size():
    k = example("tma_ring_init_fenced_and_synced")
    v = prove_kernel(k)
    assert v.verdict == "proved", v.coverage
    assert any("published by the syncthreads()" in n for n in v.notes), v.notes


def test_the_rest_after_the_sync_is_the_same_protocol_on_initialised_barriers():
    k = example("tma_ring_init_fenced_and_synced")
    symbolic = ["stages", "steps"]
    rest, note = publish_inits(k, symbolic, {})
    assert note and not any(b.explicit_init for b in rest.barriers)
    assert not any(op.kind in ("mbarrier_init", "fence_mbarrier_init", "bar_sync")
                   for op in rest.ops())
    for values in points(k, symbolic, {}, 4):
        a, b = check_kernel(k, values), check_kernel(rest, values)
        assert a.verdict == b.verdict == "verified", (values, a.label, b.label)


@pytest.mark.parametrize("name", ["tma_ring_init_without_sync", "tma_ring_init_without_fence"])
def test_init_bugs_are_refuted_at_their_smallest_values(name):
    v = prove_kernel(example(name))
    assert v.verdict == "violation" and v.codes[0] == "BP147", (v.label, v.coverage)
    assert (v.params["stages"], v.params["steps"]) == (1, 1)
    assert any("outside the supported fragment" in n for n in v.notes), v.notes


def _ring(k, stages, steps, *, inits, init_thread_count=1, twice=False):
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=stages, explicit_init=True)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread < init_thread_count):
        with k.loop(inits, name="s") as s:
            k.mbarrier_init(full.at[s])
        if twice:
            k.mbarrier_init(full.at[0])
        k.fence_mbarrier_init()
    k.syncthreads()
    with k.when(k.thread == 0):
        with k.loop(steps, name="i") as i:
            k.wait_parity(empty.at[i % stages], phase=i // stages - 1)
            k.copy_gmem_to_smem(full.at[i % stages], bytes=4096)
    with k.otherwise():
        with k.loop(steps, name="i") as i:
            k.wait_parity(full.at[i % stages], phase=i // stages)
            k.arrive(empty.at[i % stages])


@protocol(expect="violation:BP147", symbolic=("stages", "steps"))
def last_slot_not_initialised(k, stages=2, steps=3):
    _ring(k, stages, steps, inits=stages - 1)


@protocol(expect="error:input", symbolic=("stages", "steps"))
def initialised_by_either_thread(k, stages=2, steps=3):
    """Two threads initialise every slot: a re-init, an input error of the model."""
    _ring(k, stages, steps, inits=stages, init_thread_count=2)


@protocol(expect="error:input", symbolic=("stages", "steps"))
def first_slot_initialised_twice(k, stages=2, steps=3):
    """A re-init, an input error of the model: never rewritten as initialised once."""
    _ring(k, stages, steps, inits=stages, twice=True)


def test_an_init_loop_that_misses_a_barrier_is_refuted():
    v = prove_kernel(last_slot_not_initialised.build())
    assert v.verdict == "violation" and v.codes[0] == "BP147", (v.label, v.coverage)
    assert (v.params["stages"], v.params["steps"]) == (1, 1)


@pytest.mark.parametrize("proto,why", [
    (last_slot_not_initialised, "does not run once per barrier"),
    (initialised_by_either_thread, "exactly one thread"),
    (first_slot_initialised_twice, "initialised by 2 mbarrier_init"),
])
def test_other_init_shapes_are_outside_the_fragment(proto, why):
    k = proto.build()
    with pytest.raises(Unsupported, match=why):
        publish_inits(k, ["stages", "steps"], {})
    if proto is not last_slot_not_initialised:
        v = prove_kernel(k)
        assert v.verdict != "proved" and why in v.coverage, (v.label, v.coverage)


def test_class_systems_of_the_rest_cover_its_semantics():
    """The program the prover proves (the rest on initialised barriers): every reachable state
    of model/semantics.py, projected on a class, is reached by its class system."""
    from crosscheck import simulation_gaps
    from barrierproof.checker.symbolic.fragment import Fragment
    from barrierproof.checker.symbolic.order import TauRun, TauSearch, tau_static_ok
    from barrierproof.checker.symbolic.prove import tau_points
    from barrierproof.model.semantics import compile_systems
    symbolic = ["stages", "steps"]
    rest, _ = publish_inits(example("tma_ring_init_fenced_and_synced"), symbolic, {})
    frag = Fragment(rest, symbolic, {})
    frag.build_roles()
    frag.build_classes()
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in tau_points(rest, symbolic, {}, frag)
            for system in compile_systems(rest, values, races=False)]
    tau = next(t for t in search.candidates() if tau_static_ok(frag, search, t) and
               (search.apply(t) or True) and all(run.check(search) is None for run in runs))
    assert tau is not None
    systems = frag.build_systems()
    for values in points(rest, symbolic, {}, 3):
        gaps = simulation_gaps(frag, systems, values)
        assert not gaps, (values, gaps[:1])
