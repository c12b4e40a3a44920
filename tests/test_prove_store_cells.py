"""TMA stores from staging slots each warpgroup owns, kept in flight past later instructions:
proved along the issuing thread's program when no other agent touches the slots
(checker/symbolic/own_copies.py `own_cells`), refuted at the smallest values otherwise, the
explorer agreeing both ways."""

from barrierproof import protocol
from barrierproof import Limits, Options
from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.prove import prove_kernel

FAST = Options(Limits(timeout=30))


def _staging(wait_first=True, slot="own", final_wait=True):
    """Two warpgroups, each storing its tile from its own slot of `out` (`out.at[wg]`) and
    waiting for the previous store only when it rewrites the slot (one store in flight past
    the write and the other warpgroup's work, as JAX's matmul epilogues do)."""
    @protocol(symbolic=("tiles",))
    def staging(k, tiles=3):
        k.threads(2, name="wg")
        k.assume(tiles >= 0)
        out = k.SMEM(slots=2)
        mine = out.at[k.thread] if slot == "own" else out.at[0]
        with k.loop(tiles):
            if wait_first:
                k.wait_smem_to_gmem(0)          # the previous tile's store read the slot
            k.write(mine)
            k.copy_smem_to_gmem(mine)
        if final_wait:
            k.wait_smem_to_gmem(0)
    return staging.build()


def _k_loop_then_store(wait_first=True):
    """Two warpgroups read their operands for `steps` K steps per tile, then store their tile
    from their staging slots; the wait for the previous store comes after the next tile's K
    loop (JAX's Hopper matmul), so the store stays in flight across a loop of symbolic length."""
    @protocol(symbolic=("steps",))
    def k_loop_store(k, steps=2, tiles=2):
        k.threads(2, name="wg")
        k.assume(steps >= 1)
        operands = k.SMEM(slots=1)
        out = k.SMEM(slots=2)
        with k.loop(tiles):
            with k.loop(steps):
                k.read(operands)
            if wait_first:
                k.wait_smem_to_gmem(0)
            k.write(out.at[k.thread])
            k.copy_smem_to_gmem(out.at[k.thread])
        k.wait_smem_to_gmem(0)
    return k_loop_store.build()


def _agree(kernel, param, grid=(0, 1, 2, 3)):
    proof = prove_kernel(kernel, options=FAST)
    if proof.verdict == "proved":
        for n in grid:
            assert check_kernel(kernel, {param: n}).verdict == "verified", n
    return proof


def test_own_staging_slots_are_proved_for_every_tile_count():
    proof = _agree(_staging(), "tiles")
    assert proof.verdict == "proved", proof.coverage
    assert "race-free" in proof.coverage


def test_store_not_waited_before_the_rewrite_is_refuted_at_two_tiles():
    kernel = _staging(wait_first=False)
    proof = prove_kernel(kernel, options=FAST)
    assert proof.verdict == "violation" and proof.codes == ["BP200"], proof.coverage
    assert proof.params["tiles"] == 2                   # one store alone races nothing
    again = check_kernel(kernel, {"tiles": 2})
    assert again.verdict == "violation" and again.codes == ["BP200"]
    assert check_kernel(kernel, {"tiles": 1}).verdict == "verified"


def test_a_slot_both_warpgroups_store_from_is_refuted_at_one_tile():
    kernel = _staging(slot="shared")
    proof = prove_kernel(kernel, options=FAST)
    assert proof.verdict == "violation" and proof.codes == ["BP200"], proof.coverage
    assert proof.params["tiles"] == 1
    assert check_kernel(kernel, {"tiles": 1}).codes == ["BP200"]


def test_store_in_flight_across_a_k_loop_is_proved_for_every_k():
    proof = _agree(_k_loop_then_store(), "steps", grid=(1, 2, 3))
    assert proof.verdict == "proved", proof.coverage


def test_store_in_flight_across_a_k_loop_without_its_wait_is_refuted():
    kernel = _k_loop_then_store(wait_first=False)
    proof = prove_kernel(kernel, options=FAST)
    assert proof.verdict == "violation" and proof.codes == ["BP200"], proof.coverage
    assert proof.params["steps"] == 1
    assert check_kernel(kernel, {"steps": 1}).codes == ["BP200"]


def test_each_block_of_a_cluster_stores_from_its_own_copy_of_the_slot():
    """The same slot index in two blocks is two blocks' memory: proved, the explorer agreeing."""
    @protocol(symbolic=("tiles",))
    def per_block(k, tiles=2):
        k.cluster(x=2)
        k.threads(1, name="wg")
        k.assume(tiles >= 0)
        out = k.SMEM(slots=1)
        with k.loop(tiles):
            k.wait_smem_to_gmem(0)
            k.write(out.at[0])
            k.copy_smem_to_gmem(out.at[0])
        k.wait_smem_to_gmem(0)
    proof = _agree(per_block.build(), "tiles")
    assert proof.verdict == "proved", proof.coverage
