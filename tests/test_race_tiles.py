"""Races of a persistent kernel judged through one tile (checker/symbolic/races_tiles.py): the
ring slots, whose every access ends before its thread's last arrival in the tile, in one tile;
the staging slots stored across tiles along their thread's program. A slot read after its
release, or a WGMMA retired after it, leaves the reduction unused, and the explorer's race
stands."""

import pytest

from barrierproof import Limits, Options, protocol
from barrierproof.checker.check import check_kernel
from barrierproof.checker.engine_settings import ProveSettings
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.budget import Budget
from barrierproof.checker.symbolic.prove import prove_races
from barrierproof.checker.symbolic.races_tiles import _cut, prove_races_by_tile

FAST = Options(Limits(timeout=30))
STAGES = 2


def _persistent(bug=None):
    """JAX's Hopper matmul in small: thread 1 loads a ring of 2 slots (a prologue of two loads,
    a steady state, a drain of the last two releases), thread 0 reads each slot (a WGMMA
    retired at once) and releases it, then stores its tile from its staging slot."""
    @protocol(symbolic=("tiles", "steps"))
    def persistent(k, tiles=2, steps=3):
        k.threads(2, name="wg")
        k.assume(tiles >= 0, steps >= STAGES)
        full = k.Barrier(num_arrivals=1, num_barriers=STAGES)
        empty = k.Barrier(num_arrivals=1, num_barriers=STAGES)
        ring = k.SMEM(slots=STAGES)
        out = k.SMEM(slots=1)
        with k.loop(tiles):
            with k.when(k.thread == 1):
                with k.loop(STAGES) as p:
                    k.copy_gmem_to_smem(full.at[p], dst=ring.at[p])
                with k.loop(steps - STAGES) as i:
                    k.barrier_wait(empty.at[i % STAGES])
                    k.copy_gmem_to_smem(full.at[i % STAGES], dst=ring.at[i % STAGES])
                with k.loop(STAGES) as j:
                    k.barrier_wait(empty.at[(steps - STAGES + j) % STAGES])
            with k.otherwise():
                with k.loop(steps) as i:
                    k.barrier_wait(full.at[i % STAGES])
                    k.wgmma(a=ring.at[(i + (bug == "wrong_slot")) % STAGES])
                    if bug != "late_retire":
                        k.wgmma_wait(0)
                    k.barrier_arrive(empty.at[i % STAGES])
                    if bug == "late_retire":
                        k.wgmma_wait(0)
                if bug == "read_after_release":
                    k.read(ring.at[0])
                k.wait_smem_to_gmem(0)
                k.write(out.at[k.thread])
                k.copy_smem_to_gmem(out.at[k.thread])
        k.wait_smem_to_gmem(0)
    return persistent.build()


def test_ring_and_staging_slots_proved_through_one_tile():
    kernel = _persistent()
    proof = prove_kernel(kernel, options=FAST)
    assert proof.verdict == "proved", proof.coverage
    assert _cut(kernel, ["tiles", "steps"], {}) is not None
    assert any("races_tiles.py" in n for n in proof.notes + [proof.coverage]), proof.notes
    for tiles in (1, 2):
        for steps in (2, 3):
            assert check_kernel(kernel, {"tiles": tiles, "steps": steps}).verdict == "verified"


@pytest.mark.parametrize("bug", ["late_retire", "read_after_release", "wrong_slot"])
def test_racy_twins_refuted(bug):
    """A WGMMA retired after its release, or a slot read after its last release, outlives the
    tile: the reduction is refused. Reading the slot being loaded stays within the tile: the
    reduction applies, and its one tile is not proved."""
    kernel = _persistent(bug)
    applies = _cut(kernel, ["tiles", "steps"], {}) is not None
    assert applies == (bug == "wrong_slot")
    if applies:
        tile = prove_races_by_tile(kernel, ["tiles", "steps"], {},
                                   lambda k, s, f: prove_races(k, s, f, Budget(30)))
        assert tile.status == "unknown" and "BP200" in tile.reason, tile.reason
    found = check_kernel(kernel, {"tiles": 2, "steps": 2})
    assert found.verdict == "violation" and found.codes == ["BP200"], found.label
    proof = prove_kernel(kernel, options=FAST)
    assert proof.verdict == "violation" and proof.codes == ["BP200"], proof.coverage


def _explorer(kernel, values):
    found = check_kernel(kernel, values, FAST)
    return found.verdict == "verified", found.label


def test_tile_count_alone_symbolic_tile_explored():
    """The tile count the only symbolic parameter (steps fixed): one tile has nothing symbolic
    left, so the explorer judges its races, and the kernel is proved for every tile count."""
    kernel = _persistent()
    assert _cut(kernel, ["tiles"], {"steps": 3}) is None       # no explorer: not cut
    proof = prove_kernel(kernel, {"steps": 3}, FAST, settings=ProveSettings(symbolic=("tiles",)))
    assert proof.verdict == "proved", proof.coverage
    assert any("one tile by the explorer at {'steps': 3}" in n
               for n in proof.notes + [proof.coverage]), proof.notes
    for tiles in (0, 1, 2, 3):
        assert check_kernel(kernel, {"tiles": tiles, "steps": 3}).verdict == "verified"


def test_tile_count_alone_symbolic_racy_tile_not_proved():
    """The racy twin whose reduction applies: the explorer's race in the one tile proves
    nothing (the kernel is left to be judged whole), and `prove` finds the race on the
    kernel."""
    kernel = _persistent("wrong_slot")
    assert _explorer(kernel, {"tiles": 1, "steps": 3})[0] is False
    tile = prove_races_by_tile(kernel, ["tiles"], {"steps": 3},
                               lambda k, s, f: prove_races(k, s, f, Budget(30)), _explorer)
    assert tile is None
    proof = prove_kernel(kernel, {"steps": 3}, FAST, settings=ProveSettings(symbolic=("tiles",)))
    assert proof.verdict == "violation" and proof.codes == ["BP200"], proof.coverage
