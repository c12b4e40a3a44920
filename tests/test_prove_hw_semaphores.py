"""The prover on named barriers (checker/symbolic/hw.py) and semaphores (semaphores.py).

- the correct protocols of examples/hw_barriers.py and examples/patterns/semaphores.py whose
  trip count is symbolic are proved, and no point of a grid of small values fails under the
  explicit explorer (on the original program, with model/hw_barriers.py's rules);
- their buggy neighbours are never proved: the smallest breaking values come back, fail
  explicitly, and every smaller point passes;
- a sync arrival into a phase the thread did not see open is caught (the condition that makes
  barrier_wait mean bar.sync's wait);
- what the rewrites cannot carry stays `unknown` with the reason;
- hand-off pairs of concrete barriers are classes of their own (partition.py).
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.hw import lower_named_barriers
from crosscheck import simulation_gaps
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.checker.symbolic.order import TauRun, TauSearch, tau_static_ok
from barrierproof.checker.symbolic.prove import tau_points, points, prove, prove_kernel
from barrierproof.checker.symbolic.semaphores import lower_lockstep
from barrierproof.checker.symbolic.terms import Unsupported
from barrierproof.loader import resolve
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import evaluate
from barrierproof.model.semantics import compile_systems

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


@functools.lru_cache(maxsize=None)
def kernel(ref: str):
    path, _, name = ref.partition("::")
    return resolve(os.path.join(EXAMPLES, path) + "::" + name)[0].build()


@functools.lru_cache(maxsize=None)
def verdict(ref: str, symbolic: tuple[str, ...] = ()):
    args = SimpleNamespace(symbolic=list(symbolic))
    return prove_kernel(kernel(ref), {}, Options(Limits(timeout=300)), ref, args)


def _holds(k, values) -> bool:
    full = k.param_values(values)
    return all(evaluate(a, full) for a in k.assumptions)


def _grid_failures(k, name, top):
    failing = []
    for n in range(top + 1):
        values = {name: n}
        if not _holds(k, values):
            continue
        got = check_kernel(k, values, Options(Limits(max_states=200_000)))
        if got.verdict != "verified":
            failing.append((values, got.label))
    return failing


# Correct protocols with `steps` symbolic, and the largest `steps` of the explorer's grid.
PROVED = {
    "hw_barriers.py::fa3_pingpong": 5,
    "hw_barriers.py::named_barrier_arrive_and_wait": 8,
    "hw_barriers.py::syncthreads_uniform": 8,
    "patterns/semaphores.py::step_semaphore_in_lockstep": 6,
    "patterns/semaphores.py::step_semaphore_two_blocks": 5,
    "patterns/semaphores.py::step_semaphore_each_takes_its_own_signal": 4,
}


@pytest.mark.parametrize("ref", sorted(PROVED))
def test_correct_protocol_is_proved_and_the_explorer_agrees_on_a_grid(ref):
    v = verdict(ref)
    assert v.verdict == "proved", (v.verdict, v.coverage, v.notes)
    assert v.engine == "symbolic" and "proved for all steps" in v.coverage
    assert not _grid_failures(kernel(ref), "steps", PROVED[ref])


# Buggy neighbours, proved for every `steps` they would have to be: the smallest breaking value.
BUGGY = {
    "hw_barriers.py::fa3_pingpong_without_first_turn": ("BP100", 0),
    "hw_barriers.py::named_barrier_arrive_instead_of_sync": ("BP144", 2),
    "hw_barriers.py::fa3_pingpong_counts_disagree": ("BP142", 1),
    "patterns/semaphores.py::step_semaphore_waits_for_one_signal_too_many": ("BP100", 1),
    "patterns/semaphores.py::step_semaphore_decrements_in_lockstep": ("BP100", 1),
}


def _smallest_checked(k, code, steps, v):
    assert v.verdict == "violation" and code in v.codes, (v.label, v.coverage, v.notes)
    assert v.params["steps"] == steps
    assert v.trace is not None and any("smallest breaking values" in n for n in v.notes)
    assert check_kernel(k, {"steps": steps}).verdict == "violation"
    for n in range(steps):
        if _holds(k, {"steps": n}):
            assert check_kernel(k, {"steps": n}).verdict == "verified", n


@pytest.mark.parametrize("ref", sorted(BUGGY))
def test_buggy_neighbour_is_never_proved(ref):
    code, steps = BUGGY[ref]
    _smallest_checked(kernel(ref), code, steps, verdict(ref, ("steps",)))


# -- symbolic protocols broken at one trip count only ---------------------------------------------

@protocol(symbolic=("steps",))
def handoff_skips_the_fourth_sync(k, steps=2):
    """wg1 leaves out its barrier.sync in iteration 3: in the last iteration wg0 waits for
    128 threads more."""
    k.assume(steps >= 0)
    k.threads(2, name="wg")
    bar = k.named_barrier(1, 256)
    with k.loop(steps) as i:
        with k.when(k.thread == 0):
            bar.sync(aligned=False)
        with k.otherwise():
            with k.when(i != 3):
                bar.sync(aligned=False)


@protocol(symbolic=("steps",))
def one_block_skips_a_signal(k, steps=2):
    """Block 1 does not signal in step 2: everyone waits for its signal of that step."""
    k.assume(steps >= 0)
    k.cluster(x=2)
    k.threads(2, name="wg")
    sem = k.Semaphore()
    with k.loop(steps) as s:
        with k.when(k.thread == 0):
            with k.when((k.block("x") == 0) | (s != 2)):
                k.semaphore_signal(sem)
        k.semaphore_wait(sem, 2 * (s + 1), decrement=False)


@protocol(symbolic=("steps",))
def takes_two_signals_in_step_three(k, steps=2):
    """Decrementing waits, one thread takes two signals in step 3: the other then starves."""
    k.assume(steps >= 0)
    k.threads(2, name="wg")
    sem = k.Semaphore()
    with k.loop(steps) as i:
        k.semaphore_signal(sem)
        with k.when((k.thread == 0) & (i == 3)):
            k.semaphore_wait(sem, 2, decrement=True)
        with k.otherwise():
            k.semaphore_wait(sem, 1, decrement=True)


@pytest.mark.parametrize("proto, code, steps", [
    (handoff_skips_the_fourth_sync, "BP144", 4),
    (one_block_skips_a_signal, "BP100", 3),
    (takes_two_signals_in_step_three, "BP100", 4),
])
def test_a_protocol_broken_at_one_trip_count_gets_its_smallest_breaking_value(proto, code,
                                                                               steps):
    k = proto.build()
    _smallest_checked(k, code, steps, prove_kernel(k, {}, Options(Limits(timeout=120))))


def _warp_handoff(k, steps, waits):
    k.assume(steps >= 0)
    k.threads(1, name="wg")
    k.warps(4)
    ready = k.named_barrier(14, 64)        # warp 2 -> warp 3, then back on `done`
    done = k.named_barrier(15, 64)
    with k.warp_region():
        with k.loop(steps):
            with k.when(k.warp == 2):
                ready.arrive()
                if waits:
                    done.sync()
                else:
                    done.arrive()
            with k.when(k.warp == 3):
                ready.sync()
                done.arrive()


@protocol(symbolic=("steps",))
def warp_handoff_in_a_loop(k, steps=2):
    """Warps of one warpgroup (32 threads per arrival) hand off through two named barriers."""
    _warp_handoff(k, steps, waits=True)


@protocol(symbolic=("steps",))
def warp_handoff_runs_ahead(k, steps=2):
    """Warp 2 only arrives on `done`: its two arrivals on `ready` complete a phase alone."""
    _warp_handoff(k, steps, waits=False)


def test_named_barriers_of_warps_in_a_warp_region():
    k = warp_handoff_in_a_loop.build()
    v = prove_kernel(k, {}, Options(Limits(timeout=120)))
    assert v.verdict == "proved", (v.coverage, v.notes)
    assert not _grid_failures(k, "steps", 6)
    bad = warp_handoff_runs_ahead.build()
    found = prove_kernel(bad, {}, Options(Limits(timeout=120)))
    assert found.verdict == "violation"
    _smallest_checked(bad, found.codes[0], 2, found)


# -- the sync arrival condition ----------------------------------------------------------------------

@protocol(symbolic=("steps",))
def arrivals_complete_a_phase_without_the_syncing_thread(k, steps=1):
    """wg1 arrives twice on a 256-thread barrier: if both arrivals come first they complete
    phase 0 alone, and wg0's bar.sync waits in phase 1 for ever. As an mbarrier, wg0's
    barrier_wait would pass on completion 1: only the sync arrival check tells them apart."""
    k.assume(steps >= 1)
    k.threads(2, name="wg")
    bar = k.named_barrier(2, 256)
    with k.loop(steps):
        with k.when(k.thread == 0):
            bar.sync()
        with k.otherwise():
            bar.arrive()
            bar.arrive()


def test_a_sync_arriving_after_a_completion_it_did_not_see_is_not_proved():
    k = arrivals_complete_a_phase_without_the_syncing_thread.build()
    assert check_kernel(k, {"steps": 1}).verdict == "violation"
    proof = prove(k, ["steps"], {}, timeout=60)
    assert proof.status != "proved"
    assert "named_bar[2]" in proof.reason or "order" in proof.reason, proof.reason


# -- what stays outside ------------------------------------------------------------------------------

@protocol(symbolic=("steps",))
def two_aligned_sync_sites(k, steps=2):
    k.assume(steps >= 0)
    k.threads(2, name="wg")
    bar = k.named_barrier(3, 256)
    with k.loop(steps):
        with k.when(k.thread == 0):
            bar.sync()
        with k.otherwise():
            bar.sync()


@protocol(symbolic=("steps",))
def lane_split_sync(k, steps=2):
    k.assume(steps >= 0)
    k.threads(1, name="wg")
    k.warps(4)
    bar = k.named_barrier(4, 64)
    with k.loop(steps):
        with k.warp_region():
            with k.when(k.warp == 2):
                bar.arrive()
            with k.when(k.warp == 3):
                with k.when(k.lane < 16):
                    bar.sync()
                with k.otherwise():
                    bar.sync()


@protocol(symbolic=("steps",))
def parallel_signals(k, steps=2):
    k.assume(steps >= 0)
    k.threads(2, name="wg")
    a, b = k.Semaphore(name="a"), k.Semaphore(name="b")
    with k.loop(steps):
        with k.when(k.thread == 0):
            k.semaphore_signal_parallel(a, b)
        with k.otherwise():
            k.semaphore_wait(b, 1)
            k.semaphore_wait(a, 1)


@pytest.mark.parametrize("proto, why", [
    (two_aligned_sync_sites, "two aligned bar.sync"),
    (lane_split_sync, "lane"),
    (parallel_signals, "no guaranteed order"),
])
def test_what_the_rewrites_cannot_carry_is_unknown_with_the_reason(proto, why):
    proof = prove(proto.build(), ["steps"], {}, timeout=30)
    assert proof.status == "unknown" and why in proof.reason, proof.reason


def test_the_cluster_barrier_in_arrive_wait_pairs_is_proved_as_one_cluster_barrier():
    k = kernel("hw_barriers.py::cluster_teardown_with_cluster_sync")
    proof = prove(k, [], {}, timeout=30)
    assert proof.status == "proved", proof.reason
    assert check_kernel(k, {}).verdict == "verified"


@protocol
def _cluster_arrive_apart_from_its_wait(k, steps=1):
    k.cluster(x=2)
    k.threads(1, name="wg")
    done = k.Barrier(num_arrivals=1)
    with k.loop(steps):
        k.cluster_arrive()
        k.barrier_arrive(done)
        k.barrier_wait(done)
        k.cluster_wait()


def test_a_cluster_arrive_not_followed_by_its_wait_stays_outside_the_fragment():
    k = _cluster_arrive_apart_from_its_wait.build()
    assert check_kernel(k, {"steps": 2}).verdict == "verified"
    proof = prove(k, ["steps"], {}, timeout=30)
    assert proof.status == "unknown" and "is not one half of a cluster_arrive, cluster_wait pair" \
        in proof.reason, proof.reason


def test_the_rewrites_change_nothing_without_named_barriers_or_lockstep_takes():
    k = kernel("patterns/semaphores.py::step_semaphore_in_lockstep")
    assert lower_named_barriers(k, {"steps": 1}) is k
    assert lower_lockstep(k, {"steps": 1}) is k


def test_lockstep_copies_with_decrementing_waits_become_blocks():
    k = kernel("patterns/semaphores.py::step_semaphore_each_takes_its_own_signal")
    low = lower_lockstep(k, {"steps": 2})
    assert len(low.cluster) == 1 and evaluate(low.cluster[0][1], {}) == 2
    assert all(evaluate(a.copies, {}) == 1 for a in low.barriers if a.semaphore)
    # the explorer sees the same system either way
    for steps in range(3):
        assert check_kernel(low, {"steps": steps}).states == \
            check_kernel(k, {"steps": steps}).states


def test_named_barriers_become_mbarriers_counted_in_warps():
    k = kernel("hw_barriers.py::fa3_pingpong")
    low = lower_named_barriers(k, {"steps": 2})
    named = {a.name: evaluate(a.num_arrivals, {}) for a in low.barriers
             if a.name.startswith("named_bar[")}
    assert named == {"named_bar[1]": 8, "named_bar[2]": 8}     # 256 threads = 8 warps
    kinds = [op.kind for op in low.ops()]
    assert "bar_sync" not in kinds and "bar_arrive" not in kinds


# -- the class systems against model/semantics.py ----------------------------------------------------

def _lowered_fragment(ref, handoffs=False):
    """The fragment `prove` builds for an example, with the static order it chooses."""
    from barrierproof.checker.symbolic.partition import split_constant_arrays
    k = kernel(ref)
    sym = [p.name for p in k.params.values() if p.symbolic]
    fixed = {n: v for n, v in k.param_values().items() if n not in sym}
    k = lower_lockstep(lower_named_barriers(k, fixed), fixed)
    if handoffs:
        k = split_constant_arrays(k, fixed)
    frag = Fragment(k, sym, fixed)
    frag.handoff_classes = handoffs
    frag.build_roles()
    frag.build_classes()
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in tau_points(k, sym, fixed, frag)
            for system in compile_systems(k, values)]
    for tau in search.candidates():
        if tau_static_ok(frag, search, tau):
            search.apply(tau)
            if all(run.check(search) is None for run in runs):
                return k, frag, sym, fixed, frag.build_systems()
    raise AssertionError("no static order")


@pytest.mark.parametrize("ref, handoffs", [(r, False) for r in sorted(PROVED)] + [
    ("hw_barriers.py::fa3_pingpong", True)])
def test_class_systems_cover_the_semantics_of_the_rewritten_program(ref, handoffs):
    """Every reachable state of the rewritten program (model/semantics.py), projected on a
    class (named barriers, a semaphore's counter, a hand-off pair), is reached by that class's
    system."""
    k, frag, sym, fixed, systems = _lowered_fragment(ref, handoffs)
    assert frag.handoff_split == handoffs
    for values in points(k, sym, fixed, 2):
        gaps = simulation_gaps(frag, systems, values)
        assert not gaps, (values, gaps[:1])


def test_hand_off_pairs_of_a_two_slot_pipeline_are_classes_of_their_own():
    from barrierproof.checker.symbolic.partition import handoff_components, split_constant_arrays
    k = kernel("hw_barriers.py::fa3_pingpong")
    split = split_constant_arrays(lower_named_barriers(k, {}), {})
    names = [a.name for a in split.barriers]
    assert {"full[0]", "full[1]", "empty[0]", "empty[1]"} <= set(names)
    frag = Fragment(split, ["steps"], {})
    roles = frag.build_roles()
    comp = handoff_components(roles, ["full[0]", "full[1]", "empty[0]", "empty[1]"])
    assert comp["full[0]"] == comp["empty[0]"] != comp["full[1]"] == comp["empty[1]"]
    proof = prove(k, ["steps"], {}, timeout=120)
    assert proof.status == "proved", proof.reason
    assert sorted(c.name for c in proof.classes) == [
        "barriers (full[0], empty[0])", "barriers (full[1], empty[1])", "named barriers"]
