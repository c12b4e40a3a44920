"""More Mosaic GPU Pallas kernels in the style of JAX's shipped GPU kernels: a K/V-style ring
read by two compute warpgroups (as attention_mgpu.py's consumers share a slot), a
single-warpgroup prefetch into two buffers, and a double-buffered TMA-store epilogue that lets
one store stay in flight; each correct and with a bug of the kind the field reports. Checked by
tests/test_unseen_frontends.py against EXPECT (decided from the hardware rules before running;
where the code is not the obvious one, the kernel's docstring says why)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {
    "kv_ring_both_release": "verified",
    "kv_ring_consumed_counts_one": "violation:BP101",
    "prefetch_two_buffers": "verified",
    "prefetch_reads_the_other_buffer": "violation:BP200",
    "store_two_buffers_one_in_flight": "verified",
    "store_two_buffers_two_in_flight": "violation:BP200",
}

F32 = jnp.float32
ROWS, COLS = 64, 128


# -- 1. a producer warpgroup fills a two-slot ring; both compute warpgroups read every slot ------

def _kv_ring(steps, consumed_arrivals):
    def body(x_gmem, o_gmem, bufs, out_smem, filled, consumed):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 2)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                s = i % 2

                @pl.when(i >= 2)
                def _():
                    plgpu.barrier_wait(consumed.at[s])
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(i * ROWS, ROWS)], bufs.at[s],
                                        filled.at[s])
            for j in range(2):               # observe the last two releases
                plgpu.barrier_wait(consumed.at[(steps + j) % 2])

        @pl.when(wg < 2)
        def _compute():
            def step(i, acc):
                s = i % 2
                plgpu.barrier_wait(filled.at[s])
                acc = acc + bufs[s]
                plgpu.barrier_arrive(consumed.at[s])
                return acc

            acc = jax.lax.fori_loop(0, steps, step, jnp.zeros((ROWS, COLS), F32))

            @pl.when(wg == 0)
            def _():
                out_smem[...] = acc
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(out_smem, o_gmem)
                plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     num_threads=3, thread_name="wg",
                     scratch_types=[plgpu.SMEM((2, ROWS, COLS), F32),
                                    plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.Barrier(num_barriers=2),
                                    plgpu.Barrier(num_arrivals=consumed_arrivals,
                                                  num_barriers=2)])
    return k(jnp.zeros((steps * ROWS, COLS), F32))


def kv_ring_both_release(steps=4):
    return _kv_ring(steps, 2)


def kv_ring_consumed_counts_one(steps=4):
    """`consumed` counts one arrival while both compute warpgroups arrive: each round completes
    it twice. The second release of round 0 completes phase 2 while the producer, which waits
    on the slot, has observed none: its parity wait would miss completion 1 (BP101, at that
    arrival); the refill under the second reader (BP200) takes two steps more."""
    return _kv_ring(steps, 1)


# -- 2. one warpgroup: tile t + 1 is requested into the other buffer before tile t is read ------

def _prefetch(steps, read_other):
    def body(x_gmem, o_gmem, bufs, out_smem, loaded):
        plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(0, ROWS)], bufs.at[0], loaded.at[0])

        def step(t, acc):
            @pl.when(t + 1 < steps)
            def _():
                nxt = (t + 1) % 2
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds((t + 1) * ROWS, ROWS)], bufs.at[nxt],
                                        loaded.at[nxt])
            plgpu.barrier_wait(loaded.at[t % 2])
            return acc + bufs[(t + 1) % 2 if read_other else t % 2]

        acc = jax.lax.fori_loop(0, steps, step, jnp.zeros((ROWS, COLS), F32))
        out_smem[...] = acc
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(out_smem, o_gmem)
        plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     scratch_types=[plgpu.SMEM((2, ROWS, COLS), F32),
                                    plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.Barrier(num_barriers=2)])
    return k(jnp.zeros((steps * ROWS, COLS), F32))


def prefetch_two_buffers(steps=4):
    return _prefetch(steps, False)


def prefetch_reads_the_other_buffer(steps=4):
    """The read takes the buffer the prefetch just started filling (slot index off by one)."""
    return _prefetch(steps, True)


# -- 3. a double-buffered store epilogue: the store of tile t - 1 may stay in flight ------------

def _store_two(tiles, in_flight):
    def body(x_gmem, o_gmem, in_smem, outs, loaded):
        @pl.loop(0, tiles)
        def _(t):
            rows = pl.ds(t * ROWS, ROWS)
            plgpu.copy_gmem_to_smem(x_gmem.at[rows], in_smem, loaded)
            plgpu.barrier_wait(loaded)
            # the store that read outs[t % 2] was issued two tiles ago: at most one newer
            # store may remain in flight
            plgpu.wait_smem_to_gmem(in_flight, wait_read_only=True)
            outs[t % 2] = in_smem[...] * 2
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(outs.at[t % 2], o_gmem.at[rows])

        plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((tiles * ROWS, COLS), F32),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.SMEM((2, ROWS, COLS), F32),
                                    plgpu.Barrier(num_arrivals=1)])
    return k(jnp.zeros((tiles * ROWS, COLS), F32))


def store_two_buffers_one_in_flight(tiles=4):
    return _store_two(tiles, 1)


def store_two_buffers_two_in_flight(tiles=4):
    """wait_smem_to_gmem(2) leaves the store of two tiles ago, which reads the same buffer,
    in flight while the new tile is written into it."""
    return _store_two(tiles, 2)
