"""Persistent kernels proved for every tile count through one tile (checker/symbolic/tiles.py),
re-checked by the explorer on a grid of small sizes, and the kernels the reduction must refuse."""

import itertools
import json
import os
from types import SimpleNamespace

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.tiles import leaves, tile_loop, why_not
from barrierproof.cli import main
from barrierproof.loader import resolve
from barrierproof.model.ir import without_memory
from barrierproof.model.pallas import import_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERSISTENT = os.path.join(ROOT, "examples", "persistent.py")
SIZES = os.path.join(ROOT, "examples", "pallas", "sizes.py")


def _prove(capsys, target, *extra):
    code = main(["prove", target, "--format", "json", "--no-cache", *extra])
    (report,) = json.loads(capsys.readouterr().out)
    return code, report


def _kernel(path, name):
    (target,) = resolve(f"{path}::{name}")
    return target.build()


@pytest.mark.parametrize("name, steps", [
    ("persistent_ring", range(2, 6)),
    # two blocks sharing B through a multicast copy: the tiles of the pair are separated
    # (conditions 5-7 of tiles.py), and one tile of the pair is proved
    pytest.param("persistent_multicast_pair", range(2, 5), marks=pytest.mark.slow),
])
def test_a_persistent_kernel_is_proved_for_every_tile_count_and_the_explorer_agrees(
        capsys, name, steps):
    # within --timeout 60 of counted work (not timed): the pair's ring class is asked one
    # transition of each mirror pair of its two blocks (symmetry.py)
    code, report = _prove(capsys, f"{PERSISTENT}::{name}", "--timeout", "60")
    assert (code, report["verdict"]) == (0, "proved"), report
    assert "all tiles, steps with (tiles >= 0) and (steps >= 2)" in report["coverage"]
    assert any(n.startswith("per tile (tiles)") for n in report["notes"])
    kernel = _kernel(PERSISTENT, name)
    for tiles in range(0, 4):
        for k_steps in steps:
            found = check_kernel(kernel, {"tiles": tiles, "steps": k_steps})
            assert found.verdict == "verified", (tiles, k_steps, found.label)


@pytest.mark.parametrize("name", ["persistent_ring_skips_last_release"])
def test_a_release_skipped_at_the_k_boundary_gives_the_smallest_breaking_sizes(capsys, name):
    code, report = _prove(capsys, f"{PERSISTENT}::{name}", "--timeout", "30")
    assert code == 1 and report["verdict"] == "violation"
    assert report["params"] == {"tiles": 1, "steps": 2}
    assert report["diagnostics"][0]["code"] == "BP100"
    notes = " | ".join(report["notes"])
    assert "smallest breaking values found: tiles=1, steps=2" in notes
    assert "replayed on the interpreter" in notes


@protocol(symbolic=("tiles", "steps"))
def pair_skips_last_release(k, tiles=1, steps=2):
    """The pair's consumers skip the release of each tile's last step: both producers' drains
    wait for it forever. Kept out of examples/ (TLC checks every example's spec, and this one's
    two-block state space takes it minutes)."""
    import_file(PERSISTENT)._pair(k, tiles, steps, release_last=False)


def test_the_pair_skipping_a_release_gives_the_smallest_breaking_sizes():
    v = prove_kernel(pair_skips_last_release.build(), options=Options(Limits(timeout=30)))
    assert (v.verdict, v.params, v.codes[:1]) == ("violation", {"tiles": 1, "steps": 2},
                                                   ["BP100"]), v.coverage
    notes = " | ".join(v.notes)
    assert "smallest breaking values found: tiles=1, steps=2" in notes
    assert "replayed on the interpreter" in notes


def test_tiles_not_separated_by_waits_are_not_reduced_to_one(capsys):
    """One tile of signal_per_tile is clean; two overrun the barrier. The reduction refuses
    it (thread 1's tile does not end with an arrival thread 0 waits for), so the one clean
    tile is never taken for a proof, and the smallest breaking tile count is found."""
    kernel = _kernel(PERSISTENT, "signal_per_tile")
    assert check_kernel(kernel, {"tiles": 1}).verdict == "verified"
    assert check_kernel(kernel, {"tiles": 2}).label == "violation:BP101"
    loop = tile_loop(kernel.body, "tiles")
    assert "does not end its tile with a barrier_arrive" in why_not(kernel, loop, {}, [])
    code, report = _prove(capsys, f"{PERSISTENT}::signal_per_tile", "--timeout", "20")
    assert (code, report["verdict"], report["params"]) == (1, "violation", {"tiles": 2})
    assert report["diagnostics"][0]["code"] == "BP101"


def test_two_threads_starting_a_tile_without_waiting_are_refused(tmp_path, capsys):
    """An exchange where each thread arrives first, then waits for the other: one tile is
    clean, but no single thread's end orders the tile, and with two tiles a fast thread's
    next arrival overruns the slow one."""
    src = tmp_path / "exchange.py"
    src.write_text(
        "from barrierproof import protocol\n"
        "@protocol(expect='violation:BP101', symbolic=('tiles',))\n"
        "def exchange(k, tiles=2):\n"
        "    k.threads(2, name='wg')\n"
        "    k.assume(tiles >= 0)\n"
        "    a = k.Barrier(num_arrivals=1)\n"
        "    b = k.Barrier(num_arrivals=1)\n"
        "    with k.loop(tiles):\n"
        "        with k.when(k.thread == 0):\n"
        "            k.barrier_arrive(a)\n"
        "            k.barrier_wait(b)\n"
        "        with k.otherwise():\n"
        "            k.barrier_arrive(b)\n"
        "            k.barrier_wait(a)\n")
    kernel = _kernel(str(src), "exchange")
    assert check_kernel(kernel, {"tiles": 1}).verdict == "verified"
    why = why_not(kernel, tile_loop(kernel.body, "tiles"), {}, [])
    assert why is not None and "2 threads start a tile without waiting" in why
    code, report = _prove(capsys, f"{src}::exchange", "--timeout", "20")
    assert (code, report["verdict"], report["params"]) == (1, "violation", {"tiles": 2})
    assert report["diagnostics"][0]["code"] == "BP101"


PAIR = """from barrierproof import protocol
@protocol(expect="verified", symbolic=("tiles", "steps"))
def pair(k, tiles=2, steps=3):
    k.cluster(x={blocks})
    k.threads(3, name="wg")
    k.assume(tiles >= 0, steps >= 2)
    full = k.Barrier(num_arrivals=2, num_barriers=2)
    empty = {empty}
    with k.loop(tiles):
        with k.when(k.thread == 2):
            with k.loop(2) as p:
                k.copy_gmem_to_smem(full.at[p], bytes=16384)
                k.copy_gmem_to_smem(full.at[p], bytes=32768, collective_axes={axes})
            with k.loop(steps - 2) as i:
                k.barrier_wait(empty.at[i % 2])
                k.copy_gmem_to_smem(full.at[i % 2], bytes=16384)
                k.copy_gmem_to_smem(full.at[i % 2], bytes=32768, collective_axes={axes})
            with k.loop(2) as j:
                k.barrier_wait(empty.at[(steps - 2 + j) % 2])
        with k.otherwise():
            with k.loop(steps) as i:
                k.barrier_wait(full.at[i % 2])
                k.barrier_arrive(empty.at[i % 2])
"""
CLUSTER_EMPTY = 'k.ClusterBarrier(collective_axes="x", num_arrivals=2, num_barriers=2)'


@pytest.mark.parametrize("variant, shape, why", [
    # each block's loads are its own: a block may start its next tile while the other
    # block's producer still drains this one (right here only because of how the counts work
    # out, which the conditions do not look at)
    ("local loads", dict(blocks=2, empty=CLUSTER_EMPTY, axes="None"),
     "does not need the other block's share of a multicast copy"),
    # slots released to the own block's producer only: its end says nothing of the other block
    ("local release", dict(blocks=2, empty="k.Barrier(num_arrivals=2, num_barriers=2)",
                           axes='"x"'), "does not reach the other block's closer"),
    ("four blocks", dict(blocks=4, empty=CLUSTER_EMPTY, axes='"x"'), "a cluster of 4 blocks"),
])
def test_pair_tiles_are_not_reduced_to_one_when_a_condition_fails(tmp_path, variant, shape, why):
    """The pair's conditions refuse these (each deadlock-free at the sizes the explorer
    checks for the pairs: the refusal costs a proof, never soundness), and `prove` then does
    not claim every tile count through one tile."""
    src = tmp_path / "pair.py"
    src.write_text(PAIR.format(**shape))
    kernel = _kernel(str(src), "pair")
    found = why_not(kernel, tile_loop(kernel.body, "tiles"), {}, ["steps"])
    assert found is not None and why in found, found
    if shape["blocks"] == 2:
        for tiles in (1, 2):
            assert check_kernel(kernel, {"tiles": tiles, "steps": 3}).verdict == "verified"
        options = Options(Limits(timeout=10, max_states=20000))
        verdict = prove_kernel(kernel, {}, options, str(src), SimpleNamespace(symbolic=[]))
        assert verdict.verdict != "proved", verdict.coverage
        assert "the tiles of `tiles` are not shown separated" in verdict.coverage, \
            verdict.coverage


STAGED = """from barrierproof import protocol
@protocol(expect="verified", symbolic=("tiles", "stages", "extra"))
def staged(k, tiles=2, stages=2, extra=2):
    k.threads(2, name="wg")
    k.assume(tiles >= 0, stages >= 2, extra >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.loop(tiles):
        with k.when(k.thread == 1):
            with k.loop(stages) as p:
                k.copy_gmem_to_smem(full.at[p], bytes=512)
            with k.loop(extra) as i:
                k.barrier_wait(empty.at[i % stages])
                k.copy_gmem_to_smem(full.at[i % stages], bytes=512)
            with k.loop(stages) as j:
                k.barrier_wait(empty.at[(j + extra) % stages])
        with k.otherwise():
            with k.loop({consumed}) as i:
                k.barrier_wait(full.at[i % stages])
                k.barrier_arrive(empty.at[i % stages])
"""


@pytest.mark.parametrize("consumed, why", [
    ("stages + extra", None),
    # the consumers take only `extra` steps: with extra < stages some slot's load is never
    # waited on (BP103), which no witness iteration of their loop covers for every size
    ("extra", "no thread waits on every instance of `full`"),
])
def test_tiles_of_a_ring_of_symbolic_size_are_separated_at_a_symbolic_slot(tmp_path, consumed,
                                                                           why):
    """Condition 2's 'every instance a copy arrives on is waited on', for a ring of `stages`
    slots: checked at a symbolic slot 0 <= x < stages (the consumers' iteration x takes it)."""
    src = tmp_path / "staged.py"
    src.write_text(STAGED.format(consumed=consumed))
    kernel = _kernel(str(src), "staged")
    found = why_not(kernel, tile_loop(kernel.body, "tiles"), {}, ["stages", "extra"])
    assert (found is None) if why is None else (found is not None and why in found), found
    if why is None:
        for tiles in (1, 2):
            for stages, extra in ((2, 1), (3, 1), (2, 3)):
                values = {"tiles": tiles, "stages": stages, "extra": extra}
                assert check_kernel(kernel, values).verdict == "verified", values
    else:
        found = check_kernel(kernel, {"tiles": 1, "stages": 3, "extra": 1})
        assert found.verdict == "violation", found.label


@pytest.mark.slow
@pytest.mark.parametrize("name, grid", [
    ("hopper_matmul_any_k", {"k_steps": range(1, 5)}),
    # a cluster of two blocks along M (B multicast to both): its tiles are separated as a
    # pair's, and one tile of the pair is proved
    ("hopper_matmul_cluster_any_k", {"k_steps": range(1, 4)}),
    # the stage count a size too: a ring of `stages` slots, its prologue joined with the
    # steady state (fuse.py) and every slot's load shown waited on at a symbolic slot
    ("hopper_matmul_any_stages", {"extra_steps": range(1, 3), "stages": range(2, 4)}),
])
def test_jax_hopper_matmul_is_proved_for_every_k_and_tile_count(capsys, name, grid):
    """JAX's Hopper matmul (examples/pallas/sizes.py): proved for every K (and stage count) and
    every number of tiles, and its family's IR verified by the explorer on a grid of small
    sizes."""
    # the tile count is quantified over only when asked: no parameter becomes symbolic unasked
    sizes = list(grid)
    asked = [a for n in sizes + ["tiles"] for a in ("--symbolic", n)]
    code, report = _prove(capsys, f"{SIZES}::{name}", "--ignore", "BP200,BP201",
                          "--timeout", "200", *asked)
    assert (code, report["verdict"]) == (0, "proved"), report
    assert f"all {', '.join(sizes)}, tiles with" in report["coverage"], report["coverage"]
    assert any(n.startswith("per tile (tiles)") for n in report["notes"])
    (target,) = resolve(f"{SIZES}::{name}")
    family = without_memory(target.build_family())
    for body, conds in leaves(family.body, sizes + ["tiles"]):
        assert tile_loop(body, "tiles") is not None
    for tiles in (0, 1, 2):
        for values in itertools.product(*grid.values()):
            at = {"tiles": tiles, **dict(zip(sizes, values))}
            found = check_kernel(family, at)
            assert found.verdict == "verified", (at, found.label)


def test_a_ring_of_two_concrete_slots_is_proved_at_one_representative_slot(capsys):
    """The Pallas ring with two concrete slots (`i % 2`): analysed as a ring of 2 at one slot
    (its four barriers' invariants did not close in ten minutes); test_family.py checks that
    the explorer verifies it for 1..6 steps."""
    code, report = _prove(capsys, f"{SIZES}::guarded_ring_any_steps", "--ignore", "BP200,BP201",
                          "--timeout", "60")
    assert (code, report["verdict"]) == (0, "proved"), report
    assert "1 barrier class(es) (ring of 2" in report["coverage"]


def test_a_ring_position_that_may_be_negative_is_outside_the_fragment():
    """Laps are counted from slot position 0: a loop over `(i - 1) % S` starting at i = 0
    would lose its first iteration in the ring class, so the prover refuses it rather than
    prove a program with an iteration missing (the explorer checks it at given sizes)."""
    from barrierproof.checker.symbolic.prove import prove
    from barrierproof.model import dsl

    @dsl.protocol(expect="verified", symbolic=("stages", "steps"))
    def lagging_handshake(k, stages=2, steps=3):
        k.threads(2, name="wg")
        k.assume(stages >= 1, steps >= 1)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages)
        with k.when(k.thread == 1):
            with k.loop(steps) as i:
                k.barrier_arrive(full.at[(i - 1) % stages])
                k.barrier_wait(empty.at[(i - 1) % stages])
        with k.otherwise():
            with k.loop(steps) as i:
                k.barrier_wait(full.at[(i - 1) % stages])
                k.barrier_arrive(empty.at[(i - 1) % stages])

    kernel = lagging_handshake.build()
    proof = prove(kernel, ["stages", "steps"], {}, timeout=30)
    assert proof.status == "unknown" and "may be negative" in proof.reason, proof.reason
    for stages in (1, 2, 3):
        for steps in (1, 2, 4):
            assert check_kernel(kernel, {"stages": stages, "steps": steps}).verdict == \
                "verified"


def test_a_fixed_tile_count_is_proved_through_one_tile_and_stays_fixed(capsys):
    """The tile count not asked symbolic stays at its value (2) in the verdict; the tiles are
    still separated (conditions checked for every tile count, 2 among them), so one tile is
    proved for every K, and the explorer agrees at two tiles."""
    code, report = _prove(capsys, f"{PERSISTENT}::persistent_ring", "--symbolic", "steps",
                          "--timeout", "60")
    assert (code, report["verdict"], report["params"]) == (0, "proved", {"tiles": 2}), report
    assert "proved for all steps with" in report["coverage"]
    assert any(n.startswith("per tile (tiles = 2, not symbolic)") for n in report["notes"])
    kernel = _kernel(PERSISTENT, "persistent_ring")
    for k_steps in range(2, 6):
        assert check_kernel(kernel, {"tiles": 2, "steps": k_steps}).verdict == "verified"


LAST_SIGNAL_UNACKED = """from barrierproof import protocol
@protocol(expect="violation:BP101", symbolic=("steps",))
def last_signal_unacked(k, tiles=2, steps=2):
    k.threads(2, name="wg")
    k.assume(tiles >= 0, steps >= 2)
    ready = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.loop(tiles):
        with k.when(k.thread == 0):
            with k.loop(steps - 1):
                k.barrier_arrive(ready)
                k.barrier_wait(ack)
            k.barrier_arrive(ready)
        with k.otherwise():
            with k.loop(steps - 1):
                k.barrier_wait(ready)
                k.barrier_arrive(ack)
            k.barrier_wait(ready)
"""


def test_a_fixed_tile_count_whose_tiles_are_not_separated_is_not_reduced(tmp_path, capsys):
    """One tile of this hand-off is clean for every K, but its last signal is not acknowledged,
    so the next tile's first signal overruns it: with the tile count fixed at 2 the one-tile
    proof is refused (the waiting thread does not end its tile with an arrival) and the whole
    kernel is refuted at the smallest K."""
    src = tmp_path / "unacked.py"
    src.write_text(LAST_SIGNAL_UNACKED)
    kernel = _kernel(str(src), "last_signal_unacked")
    for k_steps in (2, 3, 4):
        assert check_kernel(kernel, {"tiles": 1, "steps": k_steps}).verdict == "verified"
    assert "does not end its tile with a barrier_arrive" in why_not(
        kernel, tile_loop(kernel.body, "tiles"), {}, ["steps"])
    code, report = _prove(capsys, f"{src}::last_signal_unacked", "--timeout", "20")
    assert (code, report["verdict"]) == (1, "violation"), report
    assert report["params"] == {"tiles": 2, "steps": 2}
    assert report["diagnostics"][0]["code"] == "BP101"
    assert not any(n.startswith("per tile") for n in report["notes"])


@pytest.mark.slow
def test_jax_hopper_matmul_at_its_fixed_tile_count_is_proved_for_every_stage_count(capsys):
    """Not asked symbolic, the tile count stays at 2 in the verdict (examples/pallas/sizes.py's
    PROVE), and the proof goes through one tile (about 20 s: eleven traces and the proof)."""
    name = "hopper_matmul_any_stages"
    code, report = _prove(capsys, f"{SIZES}::{name}", "--ignore", "BP200,BP201",
                          "--timeout", "120")
    expected = import_file(SIZES).PROVE[name]
    assert report["verdict"] == expected == "proved", report
    assert (code, report["params"]) == (0, {"tiles": 2})
    assert "proved for all extra_steps, stages with" in report["coverage"]
    assert any(n.startswith("per tile (tiles = 2, not symbolic)") for n in report["notes"])
