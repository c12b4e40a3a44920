"""The pre-Hopper copy path: `plgpu.copy_gmem_to_smem(src, dst)` without a barrier lowers to
cp.async, which only the issuing thread awaits (`plgpu.wait_gmem_to_smem(n)`: at most n of its
copies still in flight). No barrier hears of it, so it is a memory effect: reading or
overwriting a slot whose copy may still be landing is a race."""

from barrierproof import protocol


def _double_buffer(k, steps, keep):
    k.threads(1, name="wg")
    k.assume(steps >= 1)
    tile = k.SMEM(slots=2)
    k.cp_async(tile.at[0])
    with k.loop(steps, name="i") as i:
        with k.when(i + 1 < steps):
            k.cp_async(tile.at[(i + 1) % 2])
            k.wait_gmem_to_smem(keep)
        with k.otherwise():
            k.wait_gmem_to_smem(0)
        k.read(tile.at[i % 2])


@protocol(expect="verified", symbolic=("steps",))
def double_buffered_cp_async(k, steps=3):
    """Prefetch the next tile, then wait until at most that one copy is in flight: the tile
    about to be read has landed."""
    _double_buffer(k, steps, keep=1)


@protocol(expect="violation:BP200", symbolic=("steps",))
def wait_leaves_two_copies_in_flight(k, steps=3):
    """`wait_gmem_to_smem(2)` lets the copy of the tile about to be read still be landing."""
    _double_buffer(k, steps, keep=2)
