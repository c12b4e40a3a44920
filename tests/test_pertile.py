"""Tiles x K-step nests with per-tile operations (checker/symbolic/pertile.py): the accumulator
hand-off of a persistent GEMM's MMA role proved for every tile count and K, the explorer agreeing
on a grid; buggy twins not proved and refuted at their smallest sizes; nests whose split would
not be sound refused with the construct named."""

import json

import pytest

from barrierproof import minimum, protocol
from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.nested import PerTileOps, flatten_nested
from barrierproof.checker.symbolic.pertile import _classes, _project, split_per_tile
from barrierproof.checker.symbolic.prove import prove
from barrierproof.checker.symbolic.terms import Unsupported
from barrierproof.cli import main

SYMBOLIC = ("tiles", "ksteps")
BLACKWELL = "examples/patterns/blackwell_persistent.py"


def _gemm(k, tiles, ksteps, *, acc_parity_bug=False, first_release_missing=False,
          flat_producer=False):
    """TMA thread -> MMA thread through a 2-slot ring whose phases run on across tiles; the MMA
    thread acquires an accumulator of a double buffer per tile (wait acc_empty, parities
    stated) and hands it to the epilogue thread (arrive acc_full), which releases it."""
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    acc_full = k.Barrier(num_arrivals=1, num_barriers=2)
    acc_empty = k.Barrier(num_arrivals=1, num_barriers=2)
    steps = tiles * ksteps
    with k.when(k.thread == 0):                                     # TMA
        if flat_producer:
            with k.loop(steps) as i:
                k.wait_parity(empty.at[i % 2], ((i // 2) % 2) ^ 1)
                k.copy_gmem_to_smem(full.at[i % 2], bytes=1024)
        else:
            with k.loop(tiles) as t:
                with k.loop(ksteps) as kk:
                    i = t * ksteps + kk
                    k.wait_parity(empty.at[i % 2], ((i // 2) % 2) ^ 1)
                    k.copy_gmem_to_smem(full.at[i % 2], bytes=1024)
    with k.when(k.thread == 1):                                     # MMA
        with k.loop(tiles) as t:
            k.wait_parity(acc_empty.at[t % 2], ((t // 2) % 2) ^ 1)
            with k.loop(ksteps) as kk:
                i = t * ksteps + kk
                k.wait_parity(full.at[i % 2], (i // 2) % 2)
                k.arrive(empty.at[i % 2])
            k.arrive(acc_full.at[t % 2])
    with k.when(k.thread == 2):                                     # epilogue
        with k.loop(tiles) as t:
            k.wait_parity(acc_full.at[t % 2], (t % 2) if acc_parity_bug else ((t // 2) % 2))
            if first_release_missing:
                with k.when(t >= 1):
                    k.arrive(acc_empty.at[t % 2])
            else:
                k.arrive(acc_empty.at[t % 2])
        tail = minimum(tiles, 2)                                    # accumulators drained
        with k.loop(tail) as j:
            k.wait_parity(acc_empty.at[(tiles - tail + j) % 2], ((tiles - tail + j) // 2) % 2)


def _kernel(**knobs):
    def build(k, tiles=3, ksteps=2):
        k.assume(tiles >= 0, ksteps >= 1)
        _gemm(k, tiles, ksteps, **knobs)
    return protocol(symbolic=SYMBOLIC)(build).build()


@pytest.mark.parametrize("knobs", [{}, {"flat_producer": True}])
def test_per_tile_accumulator_hand_off_is_proved_and_the_explorer_agrees_on_a_grid(knobs):
    """Proved for every tiles >= 0, ksteps >= 1 (about 5 s), and verified by the explorer at
    every tiles <= 4, ksteps <= 4 (about 2 s)."""
    kernel = _kernel(**knobs)
    with pytest.raises(PerTileOps):
        flatten_nested(kernel, SYMBOLIC)
    proof = prove(kernel, SYMBOLIC, {}, timeout=60)
    assert proof.status == "proved", proof.reason
    assert proof.cases[0].startswith("per-tile operations: the barriers split into the K "
                                     "loop's (empty, full) and the per-tile ones (acc_empty, "
                                     "acc_full)"), proof.cases
    for tiles in range(0, 5):
        for ksteps in range(1, 5):
            found = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
            assert found.verdict == "verified", (tiles, ksteps, found.label)


@pytest.mark.parametrize("knobs, smallest, code", [
    # the epilogue waits on acc_full[t % 2] with the parity of t, not of t // 2
    ({"acc_parity_bug": True}, {"tiles": 2, "ksteps": 1}, "BP101"),
    # the epilogue never releases the first tile's accumulator: the drain waits forever
    ({"first_release_missing": True}, {"tiles": 1, "ksteps": 1}, "BP100"),
])
def test_buggy_twins_are_not_proved_and_are_refuted_at_their_smallest_sizes(
        knobs, smallest, code):
    """The per-tile projection is not proved (the split is sound only one way, so that is
    `unknown`), and the explorer breaks the kernel at the smallest sizes, nowhere below
    (about 3 s each)."""
    kernel = _kernel(**knobs)
    proof = prove(kernel, SYMBOLIC, {}, timeout=30)
    assert proof.status == "unknown"
    assert "the projection on the per-tile barriers is not proved" in proof.reason
    found = check_kernel(kernel, smallest)
    assert found.verdict == "violation" and found.codes[0] == code, found.label
    for tiles in range(0, smallest["tiles"] + 1):
        for ksteps in range(1, smallest["ksteps"] + 1):
            if (tiles, ksteps) < (smallest["tiles"], smallest["ksteps"]):
                below = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
                assert below.verdict == "verified", (tiles, ksteps, below.label)


def test_the_blackwell_persistent_gemm_is_proved_for_every_tile_count_and_k(capsys):
    """examples/patterns/blackwell_persistent.py's MMA warp waits acc_empty before each tile's
    K loop and commits acc_full after it; with ksteps symbolic too (about 8 s)."""
    code = main(["prove", f"{BLACKWELL}::umma_persistent_gemm", "--symbolic", "tiles",
                 "--symbolic", "ksteps", "--format", "json", "--no-cache", "--timeout", "60"])
    (report,) = json.loads(capsys.readouterr().out)
    assert (code, report["verdict"]) == (0, "proved"), report
    assert "all tiles, ksteps with" in report["coverage"]
    assert any(n.startswith("per-tile operations:") for n in report["notes"]), report["notes"]


# -- splits that would not be sound, each refused with its construct

def _crossed(k, tiles, ksteps, first, second):
    """`first` waits x per tile then arrives y per K step; `second` waits y per K step, then
    arrives x per tile: at one tile of one K step each projection runs clean, the kernel
    deadlocks."""
    k.assume(tiles >= 0, ksteps >= 1)
    x = k.Barrier(num_arrivals=1)
    y = k.Barrier(num_arrivals=1)
    with k.when(first):
        with k.loop(tiles) as t:
            k.wait_parity(x, t % 2)
            with k.loop(ksteps):
                k.arrive(y)
    with k.when(second):
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                k.wait_parity(y, (t * ksteps + kk) % 2)
            k.arrive(x)


def _crossed_threads(k, tiles=1, ksteps=1):
    k.threads(2, name="wg")
    _crossed(k, tiles, ksteps, k.thread == 0, k.thread == 1)


def _crossed_warps(k, tiles=1, ksteps=1):
    k.threads(1, name="wg")
    k.warps(4)
    with k.warp_region() as w:
        _crossed(k, tiles, ksteps, w == 3, w == 1)


@pytest.mark.parametrize("build", [_crossed_threads, _crossed_warps])
def test_two_agents_on_both_classes_are_refused_and_the_deadlock_is_found(build):
    kernel = protocol(symbolic=SYMBOLIC)(build).build()
    with pytest.raises(Unsupported, match="two agents"):
        split_per_tile(kernel)
    proof = prove(kernel, SYMBOLIC, {}, timeout=30)
    assert proof.status == "unknown" and "two agents" in proof.reason, proof.reason
    found = check_kernel(kernel, {"tiles": 1, "ksteps": 1})
    assert found.verdict == "violation" and found.codes[0] == "BP100", found.label
    inner, tile, rest = _classes(kernel)
    assert not rest
    for drop in (tile, inner):      # why the split needs one agent at most on both classes
        body = _project(kernel.body, lambda op, _: op.barrier.alloc.name in drop)
        projection = kernel.replace(body=body, barriers=tuple(
            x for x in kernel.barriers if x.name not in drop))
        alone = check_kernel(projection, {"tiles": 1, "ksteps": 1})
        assert alone.verdict == "verified", (sorted(drop), alone.label)


def test_a_per_tile_operation_on_a_k_loop_barrier_is_refused():
    def build(k, tiles=2, ksteps=2):
        k.assume(tiles >= 0, ksteps >= 1)
        k.threads(2, name="wg")
        full = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            with k.loop(tiles):
                with k.loop(ksteps):
                    k.arrive(full)
                k.arrive(full)
        with k.otherwise():
            with k.loop(tiles * ksteps + tiles) as i:
                k.wait_parity(full, i % 2)
    kernel = protocol(symbolic=SYMBOLIC)(build).build()
    with pytest.raises(Unsupported, match="on a barrier the inner loop uses too: `full`"):
        split_per_tile(kernel)
