"""The Z3 prover (checker/symbolic*.py) against explicit exploration and model/semantics.py.

- every symbolic example is proved, and no point of a grid of small parameter values fails under
  the explicit explorer;
- every class abstraction reaches the projection of every concrete reachable state
  (model/semantics.py) at small parameter values: the over-approximation the proofs rest on;
- parameter-dependent bugs come back as violations with the smallest breaking values, which fail
  explicitly while every smaller point passes;
- a proof is never claimed outside the fragment or when Z3 runs out of time.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from types import SimpleNamespace

import pytest
import z3

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import points, prove, prove_kernel
from crosscheck import simulation_gaps
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.checker.symbolic.order import TauRun, TauSearch, tau_static_ok
from barrierproof.checker.symbolic.terms import Unsupported
from barrierproof.checker.symbolic.unroll import split_ring_arrays, unroll_fixed_loops
from barrierproof.checker.symbolic.invariants import (Compiler, _independent_rows,
                                                      _Span, nullspace_primitive)
from barrierproof.cli import main
from barrierproof.loader import resolve
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import Loop, iter_ops, walk
from barrierproof.model.semantics import compile_systems

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


@functools.lru_cache(maxsize=None)
def kernel(ref: str):
    path, _, name = ref.partition("::")
    return resolve(os.path.join(EXAMPLES, path) + "::" + name)[0].build()


@functools.lru_cache(maxsize=None)
def verdict(ref: str, symbolic: tuple[str, ...] = ()):
    k = kernel(ref)
    args = SimpleNamespace(symbolic=list(symbolic))
    return prove_kernel(k, {}, Options(), ref, args)


def grid(**ranges) -> list[dict]:
    names = list(ranges)
    return [dict(zip(names, combo)) for combo in itertools.product(*ranges.values())]


# Symbolic examples that must be proved, with the grid the explicit explorer checks.
PROVED = {
    "hopper_ring.py::tma_ring": grid(stages=[1, 2, 3], consumers=[1, 2], steps=range(0, 6)),
    "hopper_ring.py::tma_ring_single_step": grid(stages=[1, 2, 3], consumers=[1, 2],
                                                 steps=range(0, 4)),
    "hopper_ring.py::prefetch_ring": grid(stages=[1, 2, 3], consumers=[1, 2, 3], steps=range(1, 7)),
    "attention.py::pingpong_schedule": grid(steps=range(0, 9)),
    "attention.py::schedule_barrier": grid(steps=range(0, 9)),
    "blackwell.py::tma_mma_epilogue": grid(stages=[1, 2, 3], steps=range(1, 6)),
    "cutlass.py::pipeline_tma_async": grid(stages=[1, 2, 3], consumers=[1, 2],
                                           steps=range(0, 6)),
    "cluster.py::cluster_exchange": grid(steps=range(0, 7)),
    "patterns/hopper_ws.py::hopper_ws_matmul": grid(stages=[1, 2, 3], steps=range(0, 6)),
    "patterns/blackwell_persistent.py::clc_scheduler": grid(tiles=range(0, 8)),
    "patterns/cutlass_pipelines.py::pipeline_async": grid(stages=[1, 2, 3], consumers=[1, 2],
                                                          steps=range(0, 6)),
    # order[depth, groups]: one ring of `depth` barriers per group, the loop over groups unrolled
    "patterns/ordered_sequence.py::ordered_sequence_2wg": grid(depth=[1, 2, 3], turns=range(0, 7)),
    "patterns/ordered_sequence.py::ordered_sequence_3wg": grid(depth=[1, 2, 3], turns=range(0, 6)),
    # parity waits leave the last completions unobserved at exit (no BP103 for them)
    "patterns/ordered_sequence.py::ordered_sequence_2wg_as_in_cutlass": grid(
        depth=[1, 2, 3], turns=range(0, 7)),
    # a rotated loop (fuse.py) whose release lags its wait by one slot (program.py op_offsets)
    "patterns/cutlass_pipelines.py::mainloop_release_lag": grid(stages=[2, 3, 4],
                                                                steps=range(1, 8)),
    # a test loop polls until full
    "patterns/polling.py::poll_until_full": grid(steps=range(0, 8)),
    "patterns/cluster_stores.py::exchange_through_peer_smem": grid(steps=range(1, 7)),
    # per-tile accumulator hand-off beside the K loop: two projections (pertile.py)
    "patterns/blackwell_persistent.py::umma_persistent_gemm": grid(tiles=range(0, 4),
                                                                   ksteps=range(1, 4)),
    # the v ring's counts past the producer's loop (encode.py: k after a loop is its bound)
    "patterns/flash_attention.py::fa3_forward_pingpong": grid(stages=[1, 2, 3],
                                                              blocks=range(1, 6)),
    # proved case by case on the sign of tiles (signs.py): k == tiles after the loop at >= 0
    "patterns/split_k.py::split_k_dsmem": grid(tiles=range(0, 7)),
    # plain tcgen05_mma: its slot released by one commit, its accumulator by another (races.py:
    # queued_plan, in the hand-off classes)
    "races.py::tcgen05_pipeline": grid(tiles_n=range(0, 7)),
    # a multicast into both blocks' slots, released through a cluster barrier: one
    # representative slot of the concrete ring, its tiles with it (races.py)
    "races.py::multicast_ring_cluster_release": grid(steps=range(2, 9)),
}


@pytest.mark.parametrize("ref", sorted(PROVED))
def test_symbolic_example_is_proved(ref):
    v = verdict(ref)
    assert v.verdict == "proved", (v.verdict, v.coverage, v.notes)
    assert v.engine == "symbolic"
    assert "proved for all" in v.coverage


def test_the_proof_docs_prove_md_shows_is_what_prove_finds():
    """docs/prove.md's transcript of `prove examples/hopper_ring.py::tma_ring`: the same classes
    and facts (the seconds are the machine's)."""
    shown = "examples/hopper_ring.py::tma_ring: proved ("
    with open(os.path.join(EXAMPLES, "..", "docs", "prove.md")) as f:
        line = next(x for x in f if x.startswith(shown))
    seconds = re.compile(r"\d+\.\ds")
    got = verdict("hopper_ring.py::tma_ring").coverage
    assert seconds.sub("Ns", line.strip()[len(shown):-1]) == seconds.sub("Ns", got), got


@pytest.mark.parametrize("ref", sorted(PROVED))
def test_proof_agrees_with_explicit_grid(ref):
    assert verdict(ref).verdict == "proved"
    k = kernel(ref)
    failing = []
    for values in PROVED[ref]:
        if not all(a for a in [_holds(k, values)]):
            continue
        got = check_kernel(k, values, Options(Limits(max_states=200_000)))
        if got.verdict != "verified":
            failing.append((values, got.label))
    assert not failing, failing


def _holds(k, values) -> bool:
    from barrierproof.model.ir import evaluate
    full = k.param_values(values)
    return all(evaluate(a, full) for a in k.assumptions)


def _fragment(ref):
    """The fragment of a proved example with its static order chosen as `prove` does."""
    from barrierproof.checker.symbolic import prove as S
    from barrierproof.checker.symbolic.fuse import fuse_peeled_loops
    k = kernel(ref)
    sym = [p.name for p in k.params.values() if p.symbolic]
    fixed = {n: v for n, v in k.param_values().items() if n not in sym}
    k, _ = fuse_peeled_loops(k, sym, fixed)        # the program prove() builds the fragment of
    frag = Fragment(k, sym, fixed)
    frag.build_roles()
    frag.build_classes()
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in S.tau_points(k, sym, fixed, frag)
            for system in compile_systems(k, values)]
    from barrierproof.checker.symbolic.guided import guided_candidates
    for tau in itertools.chain(guided_candidates(search, runs), search.candidates()):
        if tau_static_ok(frag, search, tau):
            search.apply(tau)
            if all(run.check(search) is None for run in runs):
                return frag, sym, fixed, frag.build_systems()
    raise AssertionError("no static order")


SIMULATED = {
    "hopper_ring.py::tma_ring": 2,
    "hopper_ring.py::prefetch_ring": 3,
    "attention.py::pingpong_schedule": 4,
    "attention.py::schedule_barrier": 3,
    "blackwell.py::tma_mma_epilogue": 2,
    "cutlass.py::pipeline_tma_async": 2,
    "cluster.py::cluster_exchange": 3,
    "patterns/cutlass_pipelines.py::mainloop_release_lag": 4,
}


@pytest.mark.parametrize("ref", sorted(SIMULATED))
def test_abstraction_covers_semantics(ref):
    """Every reachable state of model/semantics.py, projected on a barrier class, is reached by
    that class's counter system at the same parameter values."""
    frag, sym, fixed, systems = _fragment(ref)
    for values in points(kernel(ref), sym, fixed, SIMULATED[ref]):
        gaps = simulation_gaps(frag, systems, values)
        assert not gaps, (values, gaps[:1])


# Parameter-dependent bugs: the verdict and the smallest breaking values.
BUGS = {
    "symbolic_bugs.py::drain_every_stage": ("BP100", dict(stages=1, consumers=1, steps=0)),
    "symbolic_bugs.py::empty_counts_two_consumers": ("BP100", dict(stages=1, consumers=1,
                                                                   steps=1)),
    "symbolic_bugs.py::reuse_one_iteration_late": ("BP121", dict(stages=1, consumers=1,
                                                                 steps=2)),
    "symbolic_bugs.py::pingpong_even_handback": ("BP103", dict(steps=1)),
    "symbolic_bugs.py::schedule_barrier_odd_tail": ("BP100", dict(steps=1)),
    "symbolic_bugs.py::release_skipped_when_steps_mod_stages_is_1": (
        "BP100", dict(stages=2, consumers=1, steps=1)),
    "symbolic_bugs.py::reuse_assumes_double_buffering": ("BP121", dict(stages=1, consumers=1,
                                                                      steps=2)),
    "symbolic_bugs.py::tcgen05_commit_only_even_steps": ("BP100", dict(stages=1, steps=1)),
    "symbolic_bugs.py::parity_handoff_half_finished": ("BP104", dict(turns=1)),
    "patterns/cutlass_pipelines.py::mainloop_release_lag_single_stage": (
        "BP100", dict(stages=1, steps=2)),
    "patterns/cutlass_pipelines.py::mainloop_release_lag_trip_count_one": (
        "BP100", dict(stages=2, steps=1)),
}


@pytest.mark.parametrize("ref", sorted(BUGS))
def test_smallest_breaking_values(ref):
    code, smallest = BUGS[ref]
    v = verdict(ref)
    assert v.verdict == "violation" and code in v.codes, (v.label, v.coverage)
    assert {n: v.params[n] for n in smallest} == smallest
    assert v.trace is not None and any("smallest breaking values" in n for n in v.notes)
    # the values fail explicitly, and every smaller point passes
    k = kernel(ref)
    assert check_kernel(k, smallest).verdict == "violation"
    sym = list(smallest)
    fixed = {n: x for n, x in k.param_values().items() if n not in sym}
    for values in points(k, sym, fixed, 4):
        if sum(values[n] for n in sym) >= sum(smallest.values()):
            break
        assert check_kernel(k, values).verdict == "verified", values


@pytest.mark.parametrize("ref", [
    "hopper_ring.py::ring_without_drain", "hopper_ring.py::consumer_lapped_by_producer",
    "hopper_ring.py::empty_count_too_small", "hopper_ring.py::empty_count_too_large",
    "hopper_ring.py::roles_disagree_on_trip_count", "hopper_ring.py::early_exit_skips_wait",
    "cutlass.py::expect_tx_larger_than_copy", "cutlass.py::parity_not_toggled",
    "attention.py::pingpong_missing_final_wait", "attention.py::surplus_arrivals",
    "handoff.py::arrivals_without_waiter", "blackwell.py::exit_with_mma_in_flight",
])
def test_buggy_examples_are_never_proved(ref):
    k = kernel(ref)
    v = verdict(ref, tuple(k.params))
    assert v.verdict == "violation", (v.verdict, v.coverage)
    # (at the smallest breaking values another rule may break first than at the defaults)
    again = check_kernel(k, v.params)
    assert again.verdict == "violation" and again.codes[0] == v.codes[0]


# ----------------------------------------------------------------------------------------------
# Honest verdicts
# ----------------------------------------------------------------------------------------------

def nested(k, steps, inner, per_step=False):
    k.threads(2)
    k.assume(steps >= 0)
    data = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=2)
    with k.loop(steps):
        with k.loop(inner):
            with k.when(k.thread == 0):
                k.barrier_arrive(data)
                k.barrier_wait(ack)
            with k.otherwise():
                k.barrier_wait(data)
                k.barrier_arrive(ack)
        if per_step:
            k.barrier_arrive(done)
            k.barrier_wait(done)


@protocol(symbolic=("steps", "inner"))
def nested_loops(k, steps=2, inner=2):
    """Both trip counts symbolic, and a sync of both threads after each inner loop: the inner
    loop cannot be unrolled, nor the two loops made one (checker/symbolic/nested.py)."""
    k.assume(inner >= 0)
    nested(k, steps, inner, per_step=True)


@protocol(symbolic=("steps",))
def nested_concrete_inner(k, steps=2):
    """An inner loop of 2 iterations: unrolled, then inside the fragment."""
    nested(k, steps, 2)


def test_outside_the_fragment_is_unknown_not_proved():
    v = prove_kernel(nested_loops.build())
    assert v.verdict == "unknown"
    assert "nested loops" in v.coverage and "no violation" in v.coverage
    assert "operations beside its inner loop" in v.coverage


def test_a_nested_loop_of_concrete_trip_count_is_unrolled_and_proved():
    k = nested_concrete_inner.build()
    v = prove_kernel(k)
    assert v.verdict == "proved", v.coverage
    for steps in range(0, 6):
        assert check_kernel(k, dict(steps=steps)).verdict == "verified"
    unrolled = unroll_fixed_loops(k, {})
    loops = [s for s in walk(unrolled.body) if isinstance(s, Loop)]
    assert len(loops) == 1 and not any(isinstance(s, Loop) for s in walk(loops[0].body))
    # the unrolled body runs the same operations: 2 x (arrive, wait) per role and step
    assert sum(1 for _ in iter_ops(loops[0].body)) == 2 * sum(1 for _ in iter_ops(
        next(s for s in walk(k.body) if isinstance(s, Loop)).body))


def test_an_array_with_one_symbolic_dimension_is_split_into_rings():
    k = kernel("patterns/ordered_sequence.py::ordered_sequence_2wg")
    fixed = {}
    rings = split_ring_arrays(unroll_fixed_loops(k, fixed), fixed)
    assert [a.name for a in rings.barriers] == ["order[:, 0]", "order[:, 1]"]
    assert all(len(a.shape) == 1 for a in rings.barriers)
    for values in (dict(depth=1, turns=3), dict(depth=2, turns=4), dict(depth=3, turns=2)):
        # the same program: the same verdict and the same number of states
        a, b = check_kernel(k, values), check_kernel(rings, values)
        assert a.verdict == b.verdict == "verified" and a.states == b.states


def test_a_static_order_exists_for_a_cluster_with_a_cluster_wide_exit_barrier():
    """split_k: the reducer's release loop over the contributor blocks is unrolled, and every
    block arrives on the cluster-wide exit barrier before any block waits on it."""
    from barrierproof.checker.symbolic import prove as S
    k = kernel("patterns/split_k.py::split_k_dsmem")
    fixed = {"splits": 3}
    k = split_ring_arrays(unroll_fixed_loops(k, fixed), fixed)
    frag = Fragment(k, ["tiles"], fixed)
    frag.build_roles()
    frag.build_classes()
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in S.tau_points(k, ["tiles"], fixed, frag)
            for system in compile_systems(k, values)]
    assert len({tuple(sorted(v.items())) for v in (r.values for r in runs)}) >= 3
    for tau in search.candidates():
        if tau_static_ok(frag, search, tau):
            search.apply(tau)
            if all(run.check(search) is None for run in runs):
                break
    else:
        raise AssertionError("no static order passes every wait")


def test_time_limit_is_unknown_not_proved():
    k = kernel("hopper_ring.py::tma_ring")
    proof = prove(k, ["stages", "consumers", "steps"], {}, timeout=0.5)
    assert proof.status != "proved"


@protocol(symbolic=("n",))
def lopsided(k, n=2):
    """Correct for every n: one thread waits n times on a barrier the other arrives on n times,
    with an acknowledgement each time."""
    k.threads(2)
    k.assume(n >= 0)
    data = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.loop(n):
        with k.when(k.thread == 0):
            k.barrier_arrive(data)
            k.barrier_wait(ack)
        with k.otherwise():
            k.barrier_wait(data)
            k.barrier_arrive(ack)


def test_check_engine_symbolic_without_symbolic_argument():
    """`check --engine symbolic` passes args without `.symbolic`: the declared ones are used."""
    v = prove_kernel(lopsided.build(), {}, Options(), None, SimpleNamespace())
    assert v.verdict == "proved", v.coverage


def test_cli_prove_exit_codes(tmp_path, capsys):
    ring = os.path.join(EXAMPLES, "attention.py")
    assert main(["prove", f"{ring}::schedule_barrier", "-q"]) == 0
    bugs = os.path.join(EXAMPLES, "symbolic_bugs.py")
    assert main(["prove", f"{bugs}::schedule_barrier_odd_tail", "-q"]) == 1
    out = capsys.readouterr().out
    assert "smallest breaking values found: steps=1" in out
    assert main(["check", "--engine", "symbolic", f"{ring}::schedule_barrier", "-q"]) == 0
    # A proof satisfies a declared `verified`: the CI gate `prove --expect` passes on it.
    assert main(["prove", "--expect", f"{ring}::schedule_barrier",
                 f"{bugs}::schedule_barrier_odd_tail", "-q"]) == 0
    assert "2/2 as expected" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------
# Pieces
# ----------------------------------------------------------------------------------------------

def test_threshold_facts_hold_for_every_small_value():
    """The facts stated about U(x) = #{k >= 0 : s + k*S < x} are true (brute force)."""
    def U(x, s, S):
        return sum(1 for k in range(0, 64) if s + k * S < x)
    for S in range(1, 5):
        for s in range(S):
            for x in range(-3, 12):
                u = U(x, s, S)
                assert u == max(0, -((s - x) // S))
                assert (u >= 1) == (x > s)
                for y in range(-3, 12):
                    w = U(y, s, S)
                    if y >= x:
                        assert w >= u
                    for m in (1, 2):
                        if x >= 0 and y - x <= m * S:
                            assert w - u <= m
                        if x >= 0 and y - x >= m * S:
                            assert w - u >= m


def test_nullspace_finds_linear_relations():
    rows = [(1, a, b, 2 * a + 3 * b + 1) for a in range(4) for b in range(3)]
    basis = nullspace_primitive(rows, 4)
    assert len(basis) == 1
    vec = basis[0]
    assert all(sum(c * x for c, x in zip(vec, row)) == 0 for row in rows)
    assert len(_independent_rows(rows)) == 3


def test_integer_nullspace_and_span_against_numpy_ranks():
    """An oracle that shares no code with invariants.py: every basis vector is orthogonal to
    every row (exact integers), primitive, and the basis has numpy's dimension of the null
    space; the incremental span test answers as numpy's rank does."""
    import math
    import random
    import numpy as np

    def rank(vectors, ncols):
        return int(np.linalg.matrix_rank(np.array(vectors, dtype=float).reshape(-1, ncols))) \
            if vectors else 0

    rng = random.Random(7)
    for _ in range(500):
        ncols = rng.randint(1, 8)
        base = [[rng.randint(-3, 3) for _ in range(ncols)] for _ in range(rng.randint(1, 4))]
        rows = [tuple(sum(c * b[j] for c, b in zip(cs, base)) for j in range(ncols))
                for cs in ([rng.randint(-2, 2) for _ in base] for _ in range(rng.randint(0, 9)))]
        basis = nullspace_primitive(rows, ncols)
        assert all(sum(c * x for c, x in zip(vec, row)) == 0 for vec in basis for row in rows)
        assert all(math.gcd(*vec) == 1 for vec in basis)
        assert len(basis) == ncols - rank(list(rows), ncols) == rank(basis, ncols)
        span, listed = _Span(rows), [list(r) for r in rows]
        for vec in basis + [list(r) for r in rows[:2]]:
            new = rank(listed + [vec], ncols) > rank(listed, ncols)
            assert span.add(vec) == new
            if new:
                listed.append(vec)


def test_many_rows_give_the_null_space_of_eliminating_them_all(monkeypatch):
    """Past _SPAN_CHECK_ROWS rows the span comes from a few rows checked against every row at
    once: the same null space as eliminating every row (and numpy's dimension), including rows
    of rank a few that add a direction only far down the table."""
    import random
    import numpy as np
    from barrierproof.checker.symbolic import invariants

    rng = random.Random(3)
    for _ in range(12):
        ncols = rng.randint(3, 40)
        base = [[rng.randint(-3, 3) for _ in range(ncols)] for _ in range(rng.randint(1, ncols))]
        rows = [tuple(sum(c * b[j] for c, b in zip(cs, base[:-1])) for j in range(ncols))
                for cs in ([rng.randint(-2, 2) for _ in base] for _ in range(1500))]
        rows.append(tuple(base[-1]))            # the last direction, in the last row only
        many = nullspace_primitive(rows, ncols)
        with monkeypatch.context() as m:
            m.setattr(invariants, "_SPAN_CHECK_ROWS", 10 ** 9)
            assert nullspace_primitive(rows, ncols) == many
        rank = int(np.linalg.matrix_rank(np.array(rows, dtype=float)))
        assert len(many) == ncols - rank
        assert all(sum(c * x for c, x in zip(vec, row)) == 0 for vec in many for row in rows)


def test_span_check_tests_each_row_about_once(monkeypatch):
    """Samples come in search order: the first rows are alike and new directions show up
    further down. The span check picks rows spread over the table and re-tests only the rows
    found outside the span, so its counted work is about two passes over the rows (not one
    pass per direction found), with the null space of eliminating every row."""
    import random
    from barrierproof.checker.symbolic import invariants, work
    from barrierproof.checker.symbolic.budget import FACT_CELLS_PER_UNIT

    rng = random.Random(5)
    ncols, rank, n = 30, 20, 20000
    base = [[rng.randint(-3, 3) for _ in range(ncols)] for _ in range(rank)]
    rows = []
    for i in range(n):
        known = 1 + i * rank // n           # the directions reached this far into the search
        cs = [rng.randint(-2, 2) for _ in range(known)]
        rows.append(tuple(sum(c * b[j] for c, b in zip(cs, base)) for j in range(ncols)))
    before = work.ticks()
    many = nullspace_primitive(rows, ncols)
    passes = (work.ticks() - before) / (n * ncols // FACT_CELLS_PER_UNIT)
    assert passes <= 3, passes      # the table read once, the rows tested about once
    with monkeypatch.context() as m:
        m.setattr(invariants, "_SPAN_CHECK_ROWS", 10 ** 9)
        assert nullspace_primitive(rows, ncols) == many
    assert len(many) == ncols - rank


def test_compiled_terms_agree_with_z3():
    x, y = z3.Ints("x y")
    terms = [x % 2, (x + 3) / 2, z3.If(x < y, x - y, 7 * y), (-x) % 3]
    comp = Compiler([x, y])
    for t in terms:
        fn = comp.function([t])
        for a in range(-4, 5):
            for b in range(-2, 3):
                want = z3.simplify(z3.substitute(t, (x, z3.IntVal(a)), (y, z3.IntVal(b))))
                assert fn((a, b))[0] == want.as_long(), (t, a, b)


def test_symbolic_thread_counts_form_roles():
    k = kernel("hopper_ring.py::tma_ring")
    frag = Fragment(k, ["stages", "consumers", "steps"], {})
    roles = frag.build_roles()
    assert [(r.single, str(z3.simplify(r.size))) for r in roles] == \
        [(False, "consumers"), (True, "1")]


def test_unsupported_ring_index():
    @protocol(symbolic=("stages", "steps"))
    def prefetch(k, stages=2, steps=3):
        k.threads(2)
        k.assume(stages >= 1, steps >= 0)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        with k.loop(steps) as i:
            with k.when(k.thread == 0):
                k.barrier_arrive(full.at[(2 * i) % stages])
            with k.otherwise():
                k.barrier_wait(full.at[(2 * i) % stages])
    frag = Fragment(prefetch.build(), ["stages", "steps"], {})
    frag.build_roles()
    with pytest.raises(Unsupported, match=r"moves 2 ring positions per iteration of i, not one"):
        frag.build_classes()
    v = prove_kernel(prefetch.build())
    assert v.verdict != "proved"
    assert any("outside the supported fragment" in n for n in [v.coverage or ""] + v.notes)


# ----------------------------------------------------------------------------------------------
# Regressions from an audit on unseen protocols
# ----------------------------------------------------------------------------------------------

@protocol(symbolic=("consumers", "steps"))
def leader_coded_apart(k, consumers=2, steps=2):
    """Consumer 0 has its own code path (`thread == 0`), the others `1 <= thread < consumers`."""
    k.threads(consumers + 1, name="wg")
    k.assume(consumers >= 1, steps >= 0)
    ready = k.Barrier(num_arrivals=1)
    with k.when(k.thread == consumers):
        with k.loop(steps):
            k.barrier_arrive(ready)
    with k.when((k.thread < consumers) & (k.thread >= 1)):
        with k.loop(steps):
            k.barrier_wait(ready)
    with k.when(k.thread == 0):
        with k.loop(steps):
            k.barrier_wait(ready)


def test_thread_ranges_are_ordered_by_provable_le():
    """`1` and `consumers` (consumers >= 1) are neither provably < nor >: sorting them with a
    strict comparison could put `consumers` first, giving an interval of negative size and
    overlapping roles (reported as a non-uniform condition); `thread >= 1` adds no point 2."""
    frag = Fragment(leader_coded_apart.build(), ["consumers", "steps"], {})
    c = z3.Int("consumers")
    got = frag.thread_intervals(c + 1)
    solver = frag.solver
    assert [solver.equal(lo, want) for (lo, _, _), want in zip(got, [0, 1, c])] == [True] * 3
    assert [single for _, _, single in got] == [True, False, True]
    assert all(solver.valid(size >= 0) for _, size, _ in got)
    # consumer 0 runs the same program as the others: one role, one counter
    assert [r.name for r in frag.build_roles()] == ["wg0+wg[1..+-1 + consumers]", "wgconsumers"]
    assert solver.equal(frag.roles[0].size, c)


def test_hull_facets():
    from barrierproof.checker.symbolic.invariants import hull_facets
    # two copies in flight on a phase that counts one arrival: fly + 2*pend <= 2
    assert (1, 2, 2) in hull_facets([(0, 1), (1, 0), (2, 0)])
    assert hull_facets([(0, 0), (1, 1), (3, 3)]) == []            # collinear: an equality
    pts = [(0, 0), (3, 1), (1, 4), (2, 2)]
    assert all(a * x + b * y <= c for a, b, c in hull_facets(pts) for x, y in pts)


@protocol(symbolic=("steps",))
def two_loads_per_phase(k, steps=3):
    """expect_tx for two loads, a load before it (tx negative for a while), then the arrival."""
    k.threads(2, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i >= 1):
                k.wait_parity(empty, (i - 1) % 2)
            k.tma_load(full, 2048)
            k.expect_tx(full, 4096)
            k.tma_load(full, 2048)
            k.barrier_arrive(full)
        with k.when(steps >= 1):
            k.wait_parity(empty, (steps - 1) % 2)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full, i % 2)
            k.barrier_arrive(empty)


def test_hull_candidates_hold_the_invariant_of_two_loads_per_phase():
    """Two loads in flight on one phase need `fly + 2*pend <= 2`-like facts where the producer
    waits; differences and bounds alone are not inductive (the proof used to fail). The hull
    templates propose them, and the candidates still hold on every sampled state."""
    from barrierproof.checker.symbolic import prove as S
    from barrierproof.checker.symbolic.encode import Encoder
    from barrierproof.checker.symbolic.invariants import Compiler, guess, sample
    k = two_loads_per_phase.build()
    frag = Fragment(k, ["steps"], {})
    frag.build_roles()
    frag.build_classes()
    search = TauSearch(frag)
    runs = [TauRun(frag, system, values) for values in S.tau_points(k, ["steps"], {}, frag)
            for system in compile_systems(k, values)]
    for tau in search.candidates():
        if tau_static_ok(frag, search, tau):
            search.apply(tau)
            if all(run.check(search) is None for run in runs):
                break
    (cls, system, _), = frag.build_systems()
    enc = Encoder(system).build()
    vals = [v for p in points(k, ["steps"], {}, 4) for v in frag.valuations(cls, system, p)]
    states = sample(enc, vals, limit=20000, budget=10).states
    plain = guess(enc, states, (), conditional_pairs=True)
    rich = guess(enc, states, (), conditional_pairs=True, hulls=True)
    extra = [c for c in rich if "*fly[" in c.text and "*pend[" in c.text and " + " in c.text
             and "<=" in c.text]
    assert len(rich) > len(plain) and extra
    comp = Compiler(enc.vars)
    assert all(comp.function([c.formula], "bool")(s) for c in extra for s in states)


@pytest.mark.parametrize("ref", ["attention.py::pingpong_schedule", "cluster.py::cluster_exchange",
                                 pytest.param("blackwell.py::tma_mma_epilogue",
                                              marks=pytest.mark.slow)])
def test_houdini_transition_by_transition_keeps_the_same_invariant(ref):
    """Houdini's answer is the largest inductive subset of the candidates: asking transition by
    transition (the default: per-transition solvers, re-asked only when their unsat core
    loses a candidate; and the fallback when the query over all transitions is undecided) must
    keep exactly the candidates the one query keeps, and prove the same system."""
    from barrierproof.checker.symbolic.encode import Encoder
    from barrierproof.checker.symbolic.houdini import houdini
    from barrierproof.checker.symbolic.invariants import guess, sample
    frag, sym, fixed, systems = _fragment(ref)
    k = kernel(ref)
    for cls, system, _ in systems:
        if not system.roles:
            continue
        enc = Encoder(system).build()
        vals = [v for p in points(k, sym, fixed, 3) for v in frag.valuations(cls, system, p)]
        cands = guess(enc, sample(enc, vals, limit=5000, budget=10).states, ())
        # generous wall-clock nets: the three must agree, not race the machine's load
        whole = houdini(enc, cands, timeout=600, consecution="whole")
        split = houdini(enc, cands, timeout=600, per_step=True)
        cored = houdini(enc, cands, timeout=600, symmetry=False)   # (test_prove_symmetry.py)
        assert whole.status == split.status == cored.status == "proved", (
            whole.reason, split.reason, cored.reason)
        assert sorted(c.text for c in whole.invariant) == sorted(c.text for c in split.invariant)
        assert sorted(c.text for c in whole.invariant) == sorted(c.text for c in cored.invariant)
        assert len(whole.invariant) < len(cands)     # Houdini had candidates to drop


@pytest.mark.parametrize("ref", ["attention.py::pingpong_schedule", "blackwell.py::tma_mma_epilogue"])
def test_guess_proposes_no_fact_its_condition_makes_true(ref):
    """Where a thread is fixes the indicators of its position (and of what it observed there):
    `pos == 5 => [pos == 1] == 0` holds by its condition alone, says nothing, and only weighs
    on every Houdini query. No conditional candidate is valid on its own; the conditional
    facts about other variables are still proposed, and the class is still proved."""
    from barrierproof.checker.symbolic.encode import Encoder
    from barrierproof.checker.symbolic.houdini import houdini
    from barrierproof.checker.symbolic.invariants import guess, sample
    frag, sym, fixed, systems = _fragment(ref)
    k = kernel(ref)
    conditional = 0
    for cls, system, _ in systems:
        if not system.roles:
            continue
        enc = Encoder(system).build()
        vals = [v for p in points(k, sym, fixed, 3) for v in frag.valuations(cls, system, p)]
        cands = guess(enc, sample(enc, vals, limit=5000, budget=10).states, ())
        for c in cands:
            if " => " in c.text and " == 0" in c.text:
                conditional += 1
                s = z3.Solver()
                s.add(z3.Not(c.formula))
                assert s.check() == z3.sat, c.text
        assert houdini(enc, cands, timeout=600).status == "proved"
    assert conditional


def test_houdini_reads_a_transitions_fixed_places_off_its_guard():
    """A hypothesis conditioned on a place the guard excludes is not assumed, a candidate
    conditioned on a place the successor cannot be at is not a goal: both hold there
    whatever they say (the invariant kept is the same: the test above)."""
    from barrierproof.checker.symbolic.houdini import (_condition_values, _excluded,
                                                          _fixed_values)
    pos, obs, x = z3.Ints("pos obs x")
    v = [pos, obs, x]
    guard = z3.And(pos == 3, x >= 1, 2 == obs)
    assert _fixed_values(guard, v) == {0: 3, 1: 2}
    at5 = _condition_values(z3.Implies(pos == 5, x <= 2), v)
    at3 = _condition_values(z3.Implies(z3.And(pos == 3, obs == 1), x <= 2), v)
    assert at5 == {0: 5} and at3 == {0: 3, 1: 1}
    assert _condition_values(x <= 2, v) == {} and _condition_values(
        z3.Implies(x >= 1, pos == 2), v) == {}
    assert _excluded(at5, {0: 3}) and _excluded(at3, {0: 3, 1: 2})
    assert not _excluded(at3, {0: 3}) and not _excluded({}, {0: 3})


def test_sign_cases_cover_every_value_and_skip_parameters_bounded_below():
    """signs.py: one case per sign of each parameter the assumptions let be negative, together
    every integer; a parameter the assumptions keep >= 0 splits nothing."""
    from barrierproof.checker.symbolic.counters import CounterSystem
    from barrierproof.checker.symbolic.signs import sign_cases
    n, m = z3.Int("n"), z3.Int("m")
    params = {"n": n, "m": m}

    def system(constraints):
        return CounterSystem("t", [n, m], constraints, [], [], [])
    assert sign_cases(system([n >= 0, m >= 1]), params, ["n", "m"]) == []
    cases = sign_cases(system([m >= -3]), params, ["n", "m"])
    assert [c.negative for c in cases] == [frozenset(), frozenset({"m"}), frozenset({"n"}),
                                           frozenset({"n", "m"})]
    s = z3.Solver()           # no value of (n, m) outside every case
    s.add(m >= -3, *[z3.Not(z3.And(c.system.constraints)) for c in cases])
    assert s.check() == z3.unsat
    # an empty case (n < 0 is excluded once m < 0) is left out
    cases = sign_cases(system([z3.Implies(m < 0, n >= 0)]), params, ["n", "m"])
    assert [c.negative for c in cases] == [frozenset(), frozenset({"m"}), frozenset({"n"})]


def test_a_second_sample_reuses_the_valuations_explored_to_the_end():
    """The large sample of a class takes the valuations the small one explored to the end as
    they are (the same states in the same order, no work counted), and explores the others."""
    from barrierproof.checker.symbolic.encode import Encoder
    from barrierproof.checker.symbolic.invariants import sample
    frag, sym, fixed, systems = _fragment("hopper_ring.py::tma_ring")
    k = kernel("hopper_ring.py::tma_ring")
    (cls, system, _), = [s for s in systems if s[1].roles][:1]
    enc = Encoder(system).build()
    vals = [v for p in points(k, sym, fixed, 2) for v in frag.valuations(cls, system, p)]
    more = [v for p in points(k, sym, fixed, 3) for v in frag.valuations(cls, system, p)]
    small = sample(enc, vals, limit=20000, budget=float("inf"))
    assert not small.truncated and len(small.complete) == len(vals) and small.units > 0
    again = sample(enc, vals, limit=60000, budget=float("inf"), known=small)
    assert again.units == 0 and again.states == small.states
    alone = sample(enc, more, limit=60000, budget=float("inf"))
    reused = sample(enc, more, limit=60000, budget=float("inf"), known=small)
    assert reused.states == alone.states and 0 < reused.units < alone.units
