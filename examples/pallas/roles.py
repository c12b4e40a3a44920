"""Roles, loops and helpers: early exits, data-dependent trip counts, carried slots, and
`plgpu.emit_pipeline`, which expands into the barrier operations barrierproof checks."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

TILE = 128

EXPECT = {
    "broadcast_rounds": "verified",
    "early_return_skips_wait": "violation:BP101",
    "carried_slot_ring": "verified",
    "data_dependent_trips": "verified",
    "emit_pipeline_sum": "verified",
}

INTERPRETER = {
    "broadcast_rounds": "completed",
    "early_return_skips_wait": "raised",
    "carried_slot_ring": "completed",
    "data_dependent_trips": "completed",
    "emit_pipeline_sum": "completed",
}

ROUNDS = 2


def _broadcast(skip_first_wait: bool):
    """Warpgroup 0 publishes a value per round; warpgroups 1 and 2 both read it and
    acknowledge. With `skip_first_wait`, warpgroup 2 takes an early exit in round 0."""
    scratch = [plgpu.Barrier(num_arrivals=1), plgpu.Barrier(num_arrivals=2)]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((3, TILE), jnp.float32), num_threads=3,
                  thread_name="wg", scratch_types=scratch)
    def kernel(x_ref, o_ref, ready, ack):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _publisher():
            @pl.loop(0, ROUNDS)
            def _(r):
                plgpu.barrier_arrive(ready)
                plgpu.barrier_wait(ack)

        @pl.when(wg > 0)
        def _readers():
            @pl.loop(0, ROUNDS)
            def _(r):
                if skip_first_wait:
                    @pl.when((wg == 1) | (r > 0))
                    def _():
                        plgpu.barrier_wait(ready)
                else:
                    plgpu.barrier_wait(ready)
                o_ref[wg] = x_ref[...] + r
                plgpu.barrier_arrive(ack)

    return kernel(jnp.zeros(TILE, jnp.float32))


def broadcast_rounds():
    return _broadcast(skip_first_wait=False)


def early_return_skips_wait():
    """Warpgroup 2 skips its wait in round 0 (an early-return path): the publisher completes
    `ready` again while warpgroup 2 never observed the first completion."""
    return _broadcast(skip_first_wait=True)


def carried_slot_ring(steps=4):
    """The slot is a loop carry, `slot = (slot + 1) % 2`, instead of `i % 2`."""
    scratch = [plgpu.SMEM((2, TILE), jnp.float32), plgpu.Barrier(num_barriers=2),
               plgpu.Barrier(num_barriers=2)]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((steps, TILE), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=scratch)
    def kernel(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            def step(i, slot):
                @pl.when(i >= 2)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[slot], full.at[slot])
                return (slot + 1) % 2
            slot = jax.lax.fori_loop(0, steps, step, 0)
            for _ in range(2):
                plgpu.barrier_wait(empty.at[slot])
                slot = (slot + 1) % 2

        @pl.when(wg == 0)
        def _consumer():
            def step(i, slot):
                plgpu.barrier_wait(full.at[slot])
                o_ref[i] = smem[slot] * 2
                plgpu.barrier_arrive(empty.at[slot])
                return 1 - slot
            jax.lax.fori_loop(0, steps, step, 0)

    return kernel(jnp.zeros((steps, TILE), jnp.float32))


def data_dependent_trips():
    """The number of tiles is read from memory: its trip count becomes a parameter (with a
    stated default) shared by both roles, which loop over the same value."""
    scratch = [plgpu.SMEM((TILE,), jnp.float32), plgpu.Barrier(), plgpu.Barrier()]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=scratch)
    def kernel(n_ref, x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")
        n = n_ref[0]

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, n)
            def _(i):
                @pl.when(i > 0)
                def _():
                    plgpu.barrier_wait(empty)
                plgpu.copy_gmem_to_smem(x_ref, smem, full)

            @pl.when(n > 0)
            def _():
                plgpu.barrier_wait(empty)

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, n)
            def _(i):
                plgpu.barrier_wait(full)
                o_ref[...] = smem[...] + 1
                plgpu.barrier_arrive(empty)

    return kernel(jnp.array([3], jnp.int32), jnp.zeros(TILE, jnp.float32))


def emit_pipeline_sum(steps=4):
    """`plgpu.emit_pipeline` double-buffers the input tiles with TMA copies and barriers."""
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((steps * TILE,), jnp.float32),
                  scratch_types=[])
    def kernel(x_ref, o_ref):
        def body(idx, x_smem):
            (i,) = idx
            o_ref[pl.ds(i * TILE, TILE)] = x_smem[...] + 1

        plgpu.emit_pipeline(
            body, grid=(steps,),
            in_specs=[plgpu.BlockSpec((TILE,), lambda i: (i,))],
            max_concurrent_steps=2,
        )(x_ref)

    return kernel(jnp.zeros(steps * TILE, jnp.float32))
