"""Hand-offs between Pallas threads (warpgroups) through plgpu.Barrier: correct and buggy.

Each function is a target: it builds its inputs and calls one `plgpu.kernel`. `EXPECT` is
barrierproof's verdict; `INTERPRETER` is what JAX's GPU interpret mode does with the kernel
(`barrierproof confirm`), which the tests compare.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

N = 128
F32 = jax.ShapeDtypeStruct((N,), jnp.float32)

EXPECT = {
    "handoff": "verified",
    "tma_then_handoff": "verified",
    "missing_arrival": "violation:BP100",
    "consumer_laps_producer": "violation:BP100",
    "surplus_arrivals": "violation:BP101",
    "extra_arriving_warpgroup": "violation:BP104",
    "missing_copy": "violation:BP100",
    "two_copies_one_arrival": "violation:BP121",
}

INTERPRETER = {
    "handoff": "completed",
    "tma_then_handoff": "completed",
    "missing_arrival": "hung",
    "consumer_laps_producer": "hung",
    "surplus_arrivals": "raised",
    # The interpreter never checks arrivals left pending at exit (SEMANTICS.md section 4).
    "extra_arriving_warpgroup": "completed",
    "missing_copy": "hung",
    "two_copies_one_arrival": "raised",
}


def _threads(n, scratch):
    return plgpu.kernel(out_type=F32, num_threads=n, thread_name="wg", scratch_types=scratch)


def handoff():
    """Warpgroup 0 writes, arrives; warpgroup 1 waits, then reads."""
    @_threads(2, [plgpu.Barrier(num_arrivals=1)])
    def kernel(x_ref, o_ref, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.barrier_arrive(ready)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(ready)
            o_ref[...] = x_ref[...] + 1

    return kernel(jnp.zeros(N, jnp.float32))


def tma_then_handoff():
    """A TMA copy lands in SMEM (its barrier completes), then the copying thread hands off."""
    @_threads(2, [plgpu.SMEM((N,), jnp.float32), plgpu.Barrier(), plgpu.Barrier()])
    def kernel(x_ref, o_ref, smem, loaded, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.copy_gmem_to_smem(x_ref, smem, loaded)
            plgpu.barrier_wait(loaded)
            plgpu.barrier_arrive(ready)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(ready)
            o_ref[...] = smem[...] * 2

    return kernel(jnp.zeros(N, jnp.float32))


def missing_arrival():
    """num_arrivals=2, but only one warpgroup arrives: the waiter never wakes."""
    @_threads(2, [plgpu.Barrier(num_arrivals=2)])
    def kernel(x_ref, o_ref, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.barrier_arrive(ready)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(ready)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(N, jnp.float32))


def consumer_laps_producer():
    """The consumer waits for two phases, the producer completes one."""
    @_threads(2, [plgpu.Barrier()])
    def kernel(x_ref, o_ref, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.barrier_arrive(ready)

        @pl.when(wg == 1)
        def _():
            @pl.loop(0, 2)
            def _(i):
                plgpu.barrier_wait(ready)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(N, jnp.float32))


def surplus_arrivals():
    """Two warpgroups arrive on a barrier that completes on one arrival: the second arrival
    completes a second phase before the waiter observed the first."""
    @_threads(3, [plgpu.Barrier(num_arrivals=1)])
    def kernel(x_ref, o_ref, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg < 2)
        def _():
            plgpu.barrier_arrive(ready)

        @pl.when(wg == 2)
        def _():
            plgpu.barrier_wait(ready)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(N, jnp.float32))


def extra_arriving_warpgroup():
    """num_arrivals=2 counts two producers, but three arrive: the third arrival opens a phase
    that never completes and is left pending when the kernel ends."""
    @_threads(4, [plgpu.Barrier(num_arrivals=2)])
    def kernel(x_ref, o_ref, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg < 3)
        def _():
            plgpu.barrier_arrive(ready)

        @pl.when(wg == 3)
        def _():
            plgpu.barrier_wait(ready)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(N, jnp.float32))


def missing_copy():
    """The barrier counts two TMA copies (A and B tiles) but only one is issued."""
    @_threads(1, [plgpu.SMEM((N,), jnp.float32), plgpu.SMEM((N,), jnp.float32),
                  plgpu.Barrier(num_arrivals=2)])
    def kernel(x_ref, o_ref, a_smem, b_smem, loaded):
        plgpu.copy_gmem_to_smem(x_ref, a_smem, loaded)
        plgpu.barrier_wait(loaded)
        o_ref[...] = a_smem[...]

    return kernel(jnp.zeros(N, jnp.float32))


def two_copies_one_arrival():
    """Two TMA copies arrive on a barrier that completes on one. The second copy's
    arrive.expect_tx lands in a phase that already has all its arrivals (its bytes are still in
    flight): the arrival count underflows, which the hardware leaves undefined. (JAX's
    interpreter lands copies at issue, so there it completes a second phase nobody observed.)"""
    @_threads(1, [plgpu.SMEM((N,), jnp.float32), plgpu.SMEM((N,), jnp.float32),
                  plgpu.Barrier(num_arrivals=1)])
    def kernel(x_ref, o_ref, a_smem, b_smem, loaded):
        plgpu.copy_gmem_to_smem(x_ref, a_smem, loaded)
        plgpu.copy_gmem_to_smem(x_ref, b_smem, loaded)
        plgpu.barrier_wait(loaded)
        o_ref[...] = a_smem[...] + b_smem[...]

    return kernel(jnp.zeros(N, jnp.float32))
