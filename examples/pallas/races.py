"""A Pallas TMA ring whose barriers never hang, with and without a shared-memory race.

The consumer (warpgroup 0) reads slot `i % SLOTS` of the ring and releases it on `empty[slot]`;
the producer (warpgroup 1) refills a slot once it is released. Releasing before reading lets the
next copy land under the read: BP200, with the copy's and the load's lines from the jaxpr.

The epilogue pair stores a tile from shared memory with a TMA store: the store reads its source
until `wait_smem_to_gmem`, and Mosaic GPU adds no wait at the kernel's end, so leaving it out
lets the kernel exit while the store still reads memory the block gives up (BP105).
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

TILE = 128
SLOTS = 2

EXPECT = {
    "ring_read_then_release": "verified",
    "ring_release_then_read": "violation:BP200",
    "epilogue_store_waited": "verified",
    "epilogue_exits_with_store_in_flight": "violation:BP105",
}


def _ring(steps, release_first):
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS

                @pl.when(i >= SLOTS)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[slot], full.at[slot])

            @pl.loop(steps - SLOTS, steps)
            def _drain(i):
                plgpu.barrier_wait(empty.at[i % SLOTS])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS
                plgpu.barrier_wait(full.at[slot])
                if release_first:
                    plgpu.barrier_arrive(empty.at[slot])
                    o_ref[i] = smem[slot] + 1
                else:
                    o_ref[i] = smem[slot] + 1
                    plgpu.barrier_arrive(empty.at[slot])

    scratch = [plgpu.SMEM((SLOTS, TILE), jnp.float32), plgpu.Barrier(num_barriers=SLOTS),
               plgpu.Barrier(num_barriers=SLOTS)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((steps, TILE), jnp.float32),
                          num_threads=2, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.zeros((steps, TILE), jnp.float32))


def ring_read_then_release(steps=4):
    """Read the slot, then release it: race-free."""
    return _ring(steps, release_first=False)


def ring_release_then_read(steps=4):
    """Release the slot, then read it: the producer's next copy into it may land mid-read."""
    return _ring(steps, release_first=True)


def _epilogue(wait):
    def body(o_gmem, out_smem):
        out_smem[...] = jnp.ones((TILE, TILE), jnp.float32)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(out_smem, o_gmem)
        if wait:
            plgpu.wait_smem_to_gmem(0)

    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((TILE, TILE), jnp.float32),
                          scratch_types=[plgpu.SMEM((TILE, TILE), jnp.float32)])
    return kernel()


def epilogue_store_waited():
    """The store's read of the tile is waited for before the kernel ends."""
    return _epilogue(wait=True)


def epilogue_exits_with_store_in_flight():
    """No wait after the store: the kernel may exit while the TMA store still reads the tile."""
    return _epilogue(wait=False)
