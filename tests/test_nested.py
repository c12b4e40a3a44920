"""Nested tiles x K-step loops proved through one loop over the running position
(checker/symbolic/nested.py): the rewrite checked against the explorer on a grid of (tiles, K),
the proofs re-checked on that grid, and the nests the rewrite must refuse, each named."""

import itertools
import json
import os

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.nested import flatten_nested
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.terms import Unsupported
from barrierproof.cli import main
from barrierproof.loader import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NESTED = os.path.join(ROOT, "examples", "persistent_nested.py")
SYMBOLIC = ["tiles", "ksteps"]


def _kernel(name):
    (target,) = resolve(f"{NESTED}::{name}")
    return target.build()


def _prove(capsys, target, *extra):
    code = main(["prove", target, "--format", "json", "--no-cache", *extra])
    (report,) = json.loads(capsys.readouterr().out)
    return code, report


def _outcome(verdict):
    """What two runs of the explorer must agree on: the verdict, its rules, the state count."""
    return verdict.verdict, tuple(verdict.codes), verdict.coverage.split(" distinct states")[0]


@pytest.mark.parametrize("name, per_block", [
    ("persistent_ring", lambda tiles: tiles),
    ("persistent_ring_two_stages", lambda tiles: tiles),
    # ceil(tiles / 2) tiles per block: the product of an expression and K
    ("persistent_ceil_tiles_ring", lambda tiles: (tiles + 1) // 2),
    # a producer loop over tiles * ksteps beside the consumers' nest
    ("flat_producer_nested_consumers", lambda tiles: tiles),
])
def test_the_flattened_program_is_the_nested_one_on_a_grid_of_tiles_and_k(name, per_block):
    """The explorer at (tiles, ksteps) and at P = (tiles per block) * ksteps: same verdict,
    same rules, same number of states (the positions are the (t, kk) pairs in order).
    25 grid points per kernel, about 2 s."""
    kernel = _kernel(name)
    flat = flatten_nested(kernel, SYMBOLIC, {"blocks": 2} if "ceil" in name else {})
    assert flat is not None and len(flat.symbolic) == 1
    (positions,) = flat.symbolic
    assert "tiles" not in flat.kernel.params and "ksteps" not in flat.kernel.params
    for tiles in range(0, 5):
        for ksteps in range(1, 6):
            nested = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
            one = check_kernel(flat.kernel, {positions: per_block(tiles) * ksteps})
            assert nested.verdict == "verified", (tiles, ksteps, nested.label)
            assert _outcome(one) == _outcome(nested), (tiles, ksteps)


@pytest.mark.parametrize("name", ["persistent_ceil_tiles_ring",
                                  "flat_producer_nested_consumers"])
def test_a_ceil_tile_count_and_a_flat_producer_are_proved_for_every_tile_count_and_k(
        capsys, name):
    """About 10 s each: the tile count ceil(tiles / blocks) at blocks = 2; a producer loop
    over tiles * ksteps beside the consumers' nest."""
    code, report = _prove(capsys, f"{NESTED}::{name}", "--timeout", "120")
    assert (code, report["verdict"]) == (0, "proved"), report
    kernel = _kernel(name)
    for tiles in range(0, 6):
        for ksteps in range(1, 4):
            found = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
            assert found.verdict == "verified", (tiles, ksteps, found.label)


def test_nested_persistent_ring_is_proved_for_every_tile_count_and_k_and_the_explorer_agrees(
        capsys):
    """About 25 s: the one-loop ring proved by the class machinery (ring of 2 slots)."""
    code, report = _prove(capsys, f"{NESTED}::persistent_ring_two_stages", "--timeout", "120")
    assert (code, report["verdict"]) == (0, "proved"), report
    assert "all tiles, ksteps with (tiles >= 0) and (ksteps >= 1)" in report["coverage"]
    assert any(n.startswith("nested loops: `loop t < tiles: loop kk < ksteps`")
               for n in report["notes"]), report["notes"]
    kernel = _kernel("persistent_ring_two_stages")
    for tiles in range(0, 4):
        for ksteps in range(1, 5):
            found = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
            assert found.verdict == "verified", (tiles, ksteps, found.label)


@pytest.mark.slow
def test_nested_persistent_ring_is_proved_for_every_stage_consumer_tile_count_and_k(capsys):
    """About 30 s: four symbolic parameters, a ring of `stages` slots."""
    code, report = _prove(capsys, f"{NESTED}::persistent_ring", "--timeout", "120")
    assert (code, report["verdict"]) == (0, "proved"), report
    kernel = _kernel("persistent_ring")
    for stages in (1, 2, 3):
        for tiles in range(0, 3):
            for ksteps in range(0, 4):
                found = check_kernel(kernel, {"stages": stages, "consumers": 1, "tiles": tiles,
                                              "ksteps": ksteps})
                assert found.verdict == "verified", (stages, tiles, ksteps, found.label)


@pytest.mark.parametrize("name, smallest, code, why", [
    # the consumers' slot and phase are read through kk alone
    ("consumer_phase_reset_per_tile", {"tiles": 2, "ksteps": 1}, "BP101",
     "is not a function of the running position"),
    # the acquire's guard reads kk alone
    ("producer_first_lap_every_tile", {"tiles": 2, "ksteps": 2}, "BP121",
     "is not a function of the running position"),
    # the two roles' inner loops run different counts
    ("consumer_one_k_step_short", {"tiles": 1, "ksteps": 1}, "BP100",
     "nested loops over different counts"),
    # floor(tiles / blocks) tiles against ceil(tiles / blocks)
    ("persistent_consumer_counts_floor", {"tiles": 1, "ksteps": 1}, "BP100",
     "nested loops over different counts"),
])
def test_buggy_twins_are_refused_by_the_rewrite_and_refuted_at_their_smallest_sizes(
        capsys, name, smallest, code, why):
    """Each refused with the construct named, then broken by the bounded search (< 5 s)."""
    with pytest.raises(Unsupported, match="nested loops"):
        flatten_nested(_kernel(name), SYMBOLIC)
    found, report = _prove(capsys, f"{NESTED}::{name}", "--timeout", "30")
    assert (found, report["verdict"]) == (1, "violation"), report
    assert {n: report["params"][n] for n in SYMBOLIC} == smallest
    assert report["diagnostics"][0]["code"] == code
    assert any(why in n for n in report["notes"]), report["notes"]


# -- nests the rewrite must refuse (each would change the program, or is not shown not to)

def _ring(k, tiles, ksteps, *, per_tile=False, third=False, t_alone=False, other=None):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                with k.when((t >= 1) if t_alone else (i >= 2)):
                    k.wait_parity(empty.at[i % 2], ((i // 2) % 2) ^ 1)
                k.arrive(full.at[i % 2])
            if per_tile:
                k.arrive(done)
    with k.otherwise():
        with k.loop(tiles if other is None else other) as t:
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                if third:
                    with k.loop(ksteps):
                        k.wait_parity(full.at[i % 2], (i // 2) % 2)
                else:
                    k.wait_parity(full.at[i % 2], (i // 2) % 2)
                k.arrive(empty.at[i % 2])


@pytest.mark.parametrize("knobs, why", [
    ({"per_tile": True}, "operations beside its inner loop"),
    ({"third": True}, "a third level of loops"),
    ({"t_alone": True}, "a branch on the tile or K-step index alone"),
    ({"other": "other"}, "nested loops over different counts"),
])
def test_nests_outside_the_rewrite_are_refused_with_their_construct(knobs, why):
    def build(k, tiles=2, ksteps=2, other=2):
        k.assume(tiles >= 0, ksteps >= 0, other >= 0)
        opts = dict(knobs)
        if opts.get("other") == "other":
            opts["other"] = other
        _ring(k, tiles, ksteps, **opts)
    kernel = protocol(symbolic=("tiles", "ksteps", "other"))(build).build()
    with pytest.raises(Unsupported, match=why):
        flatten_nested(kernel, ["tiles", "ksteps", "other"])


def test_counts_that_may_be_negative_flatten_from_zero_positions():
    """A parameter ranges over every integer the assumptions allow (signs.py). With T or K < 0
    the nest runs nothing, as at P = 0: where T and K are read only as the nest's counts, the
    flattened program over P >= 0 has every run of the nest (the explorer agrees on a grid,
    negative counts included)."""
    def build(k, tiles=2, ksteps=2):
        _ring(k, tiles, ksteps)
    kernel = protocol(symbolic=("tiles", "ksteps"))(build).build()
    flat = flatten_nested(kernel, SYMBOLIC)
    assert [repr(a) for a in flat.kernel.assumptions] == ["(tiles_x_ksteps >= 0)"]
    for tiles, ksteps in itertools.product(range(-2, 3), repeat=2):
        nested = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
        one = check_kernel(flat.kernel, {"tiles_x_ksteps": max(tiles, 0) * max(ksteps, 0)})
        assert nested.verdict == one.verdict == "verified", (tiles, ksteps)
        assert nested.states == one.states, (tiles, ksteps)


def test_a_count_that_may_be_negative_and_is_read_outside_the_nest_is_refused():
    """Outside the nest a negative T keeps its value, which P does not carry."""
    def build(k, tiles=2, ksteps=2):
        _ring(k, tiles, ksteps)
        with k.when(k.thread == 0):
            with k.when(tiles >= 5):
                k.arrive(k.Barrier(num_arrivals=1, name="late"))
    kernel = protocol(symbolic=("tiles", "ksteps"))(build).build()
    with pytest.raises(Unsupported, match="do not keep `tiles` >= 0 and it is read outside"):
        flatten_nested(kernel, SYMBOLIC)


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def named_handover_per_k_step(k, tiles=2, ksteps=2):
    """A tiles x K nest whose K steps hand a buffer over and back on hardware named barriers
    (bar.arrive / bar.sync with constant ids and counts), nothing beside the inner loop."""
    k.assume(tiles >= 0, ksteps >= 0)
    k.threads(2, name="wg")
    loaded = k.named_barrier(1, 256)
    freed = k.named_barrier(2, 256)
    with k.loop(tiles):
        with k.loop(ksteps):
            with k.when(k.thread == 0):
                loaded.arrive()
                freed.sync()
            with k.otherwise():
                loaded.sync()
                freed.arrive()


def test_named_barriers_are_carried_through_the_rewrite():
    """Hardware named barriers with constant ids go through the rewrite as they are (Z3 checks
    the rewritten counts; only an id that moves with the loops is refused): the flattened
    program is the nested one on a grid, and `prove` proves it for every tile count and K.
    (examples/prove_field.py::named_barriers_nested_tile_k stays outside: its per-tile sync
    that both roles join sits beside K loops inside role branches.) About 5 s."""
    kernel = named_handover_per_k_step.build()
    flat = flatten_nested(kernel, SYMBOLIC, {})
    assert flat is not None and len(flat.symbolic) == 1
    (positions,) = flat.symbolic
    for tiles in range(0, 4):
        for ksteps in range(0, 4):
            nested = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
            one = check_kernel(flat.kernel, {positions: tiles * ksteps})
            assert nested.verdict == "verified", (tiles, ksteps, nested.label)
            assert _outcome(one) == _outcome(nested), (tiles, ksteps)
    proof = prove_kernel(kernel, {}, Options(Limits(timeout=20.0)))
    assert proof.verdict == "proved", proof.coverage
    assert any(n.startswith("nested loops:") for n in proof.notes), proof.notes


def test_a_phase_split_into_the_bits_of_the_tile_base_and_the_k_step_is_flattened():
    """Triton's compiled carries spell the phase of position t*K + kk as the xor of the bit
    of the tile's base position and the bit of the K steps past it. On bits, a ^ b is
    (a + b) % 2, so Z3 proves it the running position's phase and the nest flattens (with xor
    uninterpreted it was refused); the explorer agrees on a grid."""
    def build(k, tiles=2, ksteps=2):
        k.assume(tiles >= 0, ksteps >= 0)
        k.threads(2, name="wg")
        full = k.Barrier(num_arrivals=1, num_barriers=2)
        empty = k.Barrier(num_arrivals=1, num_barriers=2)
        with k.when(k.thread == 0):
            with k.loop(tiles) as t:
                with k.loop(ksteps) as kk:
                    i = t * ksteps + kk
                    with k.when(i >= 2):
                        k.wait_parity(empty.at[i % 2], ((i // 2) % 2) ^ 1)
                    k.arrive(full.at[i % 2])
        with k.otherwise():
            with k.loop(tiles) as t:
                with k.loop(ksteps) as kk:
                    i = t * ksteps + kk
                    base = t * ksteps
                    k.wait_parity(full.at[i % 2],
                                  ((base // 2) % 2) ^ ((((base % 2) + kk) // 2) % 2))
                    k.arrive(empty.at[i % 2])
    kernel = protocol(symbolic=("tiles", "ksteps"))(build).build()
    flat = flatten_nested(kernel, SYMBOLIC)
    assert flat is not None and flat.symbolic == ["tiles_x_ksteps"]
    for tiles, ksteps in itertools.product(range(0, 4), range(1, 4)):
        nested = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
        one = check_kernel(flat.kernel, {"tiles_x_ksteps": tiles * ksteps})
        assert nested.verdict == one.verdict == "verified", (tiles, ksteps)
        assert nested.states == one.states, (tiles, ksteps)
