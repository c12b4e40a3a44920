"""Mosaic GPU Pallas kernels a new user wrote in the style of JAX's shipped kernels
(jax.experimental.pallas.ops.gpu) and of its Mosaic GPU tests: a TMA-store epilogue, a cluster
exchange through a ClusterBarrier, a warp-level handoff inside `core_map` over a `WarpMesh`, a
Blackwell tcgen05 MMA handed to an epilogue warpgroup, and `emit_pipeline_warp_specialized`
with manual consumed barriers, `emit_pipeline` with a carry, a 2x2 cluster barrier, a hand-written
ring drained at the end, `emit_pipeline_warp_specialized` with an output, a tcgen05 ring whose
MMAs release their slots; each correct and with the bug people report. Checked by
tests/test_unseen_frontends.py against EXPECT (decided from the hardware rules before running;
where the code is not the obvious one, the kernel's docstring says why)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from barrierproof import sizes

EXPECT = {
    "store_epilogue": "verified",
    "store_epilogue_reuses_buffer_early": "violation:BP200",
    "store_epilogue_exits_before_store": "violation:BP105",
    # the missing proxy fence is outside the model: BP190 at the TMA store, never `verified`
    "store_epilogue_without_commit_smem": "unknown",
    "cluster_exchange": "verified",
    "cluster_exchange_counts_one_thread": "violation:BP101",
    "warp_handoff": "verified",
    "warp_handoff_counts_every_warp": "violation:BP100",
    "mma_to_epilogue": "verified",
    "mma_barrier_without_tensor_core_order": "violation:BP110",
    "ws_dot_both_release": "verified",
    "ws_dot_one_forgets_y": "violation:BP100",
    "rowsum_pipeline": "verified",
    "rowsum_pipeline_exits_before_store": "violation:BP105",
    "grid_cluster": "verified",
    "grid_cluster_second_row_silent": "violation:BP100",
    "handrolled_ring_drained": "verified",
    "handrolled_ring_without_drain": "violation:BP103",
    "ws_scale": "verified",
    "umma_ring": "verified",
    "umma_ring_thread_releases": "violation:BP200",
    "umma_ring_no_drain": "violation:BP103",
    "warps_fill_then_group_reads": "verified",
    "warps_fill_reading_a_neighbour": "violation:BP200",
}

F32 = jnp.float32
F16 = jnp.float16
ROWS, COLS = 64, 128


# -- 1. one warpgroup: load a tile per step, scale it, store it back through one staging buffer

def _store_epilogue(tiles, wait_before_reuse=True, final_wait=True, commit=True):
    def body(x_gmem, o_gmem, in_smem, out_smem, loaded):
        @pl.loop(0, tiles)
        def _(t):
            rows = pl.ds(t * ROWS, ROWS)
            plgpu.copy_gmem_to_smem(x_gmem.at[rows], in_smem, loaded)
            plgpu.barrier_wait(loaded)
            if wait_before_reuse:
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)   # last tile's store read it
            out_smem[...] = in_smem[...] * 2
            if commit:
                plgpu.commit_smem()                           # the TMA must see the stores
            plgpu.copy_smem_to_gmem(out_smem, o_gmem.at[rows])

        if final_wait:
            plgpu.wait_smem_to_gmem(0)

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((tiles * ROWS, COLS), F32),
        scratch_types=[plgpu.SMEM((ROWS, COLS), F32), plgpu.SMEM((ROWS, COLS), F32),
                       plgpu.Barrier(num_arrivals=1)])
    return kernel(jnp.zeros((tiles * ROWS, COLS), F32))


@sizes(tiles=("tiles", 1))
def store_epilogue(tiles=3):
    return _store_epilogue(tiles)


@sizes(tiles=("tiles", 1))
def store_epilogue_reuses_buffer_early(tiles=3):
    """No wait_smem_to_gmem before the next tile's result is written into `out_smem`: the
    previous tile's TMA store may still be reading it."""
    return _store_epilogue(tiles, wait_before_reuse=False)


def store_epilogue_without_commit_smem(tiles=3):
    """No commit_smem between the threads' stores to `out_smem` and the TMA store that reads
    it: the async proxy may read the buffer before the stores are visible to it."""
    return _store_epilogue(tiles, commit=False)


def store_epilogue_exits_before_store(tiles=3):
    """The final wait_smem_to_gmem(0) is missing: the last store still reads `out_smem` when
    the block exits (Mosaic GPU adds no wait at the end of a kernel)."""
    return _store_epilogue(tiles, final_wait=False)


# -- 2. a cluster of two blocks exchange a "ready" signal through a ClusterBarrier --------------

def _cluster_exchange(num_arrivals):
    def body(x_gmem, o_gmem, ready):
        # every thread of both blocks arrives once; the barrier's phase in each block
        # completes when num_arrivals arrivals *per block of the cluster* are in
        plgpu.barrier_arrive(ready)
        plgpu.barrier_wait(ready)
        o_gmem[...] = x_gmem[...]

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((COLS,), F32), num_threads=2, thread_name="wg",
        cluster=(2,), cluster_names=("x",),
        scratch_types=[plgpu.ClusterBarrier(collective_axes=("x",), num_arrivals=num_arrivals)])
    return kernel(jnp.zeros((COLS,), F32))


def cluster_exchange():
    """Two warpgroups in each of two blocks: num_arrivals=2 counts both warpgroups."""
    return _cluster_exchange(2)


def cluster_exchange_counts_one_thread():
    """num_arrivals=1 with two arriving warpgroups per block: each instance receives 4
    arrivals for a count of 2, so it completes twice while a slow warpgroup has not observed
    the first completion (BP101, not a hang)."""
    return _cluster_exchange(1)


# -- 3. inside one warpgroup, warp 0 fills a buffer and hands it to warps 1..3 ----------------

def _warp_handoff(num_arrivals):
    def body(x_gmem, o_gmem, buf, ready):
        @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
        def _per_warp():
            warp = jax.lax.axis_index("warp")

            @pl.when(warp == 0)
            def _():
                plgpu.barrier_arrive(ready)

            @pl.when(warp > 0)
            def _():
                plgpu.barrier_wait(ready)

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((COLS,), F32),
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        scratch_types=[plgpu.SMEM((COLS,), F32), plgpu.Barrier(num_arrivals=num_arrivals)])
    return kernel(jnp.zeros((COLS,), F32))


def warp_handoff():
    return _warp_handoff(1)


def warp_handoff_counts_every_warp():
    """num_arrivals=4 (the warps of the warpgroup) while only warp 0 arrives: the waiters hang."""
    return _warp_handoff(4)


# -- 4. Blackwell: a TMA warp loads A and B, the MMA warp issues tcgen05_mma, the epilogue
#       warpgroup waits for the MMA and reads the accumulator from tensor memory -------------

def _mma_to_epilogue(orders_tensor_core):
    tm, tn, tk = 128, 128, 64

    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, out_smem,
             loaded, mma_done):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
            def _per_warp():
                warp = jax.lax.axis_index("warp")

                @pl.when(warp == 0)
                def _tma():
                    plgpu.copy_gmem_to_smem(a_gmem, a_smem, loaded)
                    plgpu.copy_gmem_to_smem(b_gmem, b_smem, loaded)

                @pl.when(warp == 1)
                def _mma():
                    plgpu.barrier_wait(loaded)
                    plgpu.tcgen05_mma(acc_tmem, a_smem, b_smem, mma_done, accumulate=False)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(mma_done)
            out_smem[...] = plgpu.async_load_tmem(acc_tmem).astype(jnp.float16)
            plgpu.wait_load_tmem()
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem)
            plgpu.wait_smem_to_gmem(0)

    f16 = jnp.float16
    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((tm, tn), f16), num_threads=2, thread_name="wg",
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        scratch_types=[
            plgpu.SMEM((tm, tk), f16, transforms=_transforms(tk)),
            plgpu.SMEM((tk, tn), f16, transforms=_transforms(tn)),
            plgpu.TMEM((tm, tn), F32),
            plgpu.SMEM((tm, tn), f16),
            plgpu.Barrier(num_arrivals=2),
            plgpu.Barrier(num_arrivals=1, orders_tensor_core=orders_tensor_core),
        ])
    return kernel(jnp.zeros((tm, tk), f16), jnp.zeros((tk, tn), f16))


def _transforms(minor):
    swizzle = plgpu.find_swizzle(minor * 16)
    return (plgpu.TilingTransform((8, swizzle // 2)), plgpu.SwizzleTransform(swizzle))


def mma_to_epilogue():
    return _mma_to_epilogue(True)


def mma_barrier_without_tensor_core_order():
    """The MMA's completion barrier lacks orders_tensor_core=True: a wait on it does not order
    the epilogue's tcgen05.ld after the MMA."""
    return _mma_to_epilogue(False)


# -- 5. emit_pipeline_warp_specialized: two inputs, each with its own consumed barrier
#       (manual_consumed_barriers), three stages, a dot-product row sum carried in registers
#       by two compute warpgroups; each must release both inputs' slots every step --------------

def _ws_dot(steps, forgets_y=False):
    def body(x_gmem, y_gmem, o_gmem, out_smem):
        wg = jax.lax.axis_index("wg")
        rows = pl.ds(wg * (ROWS // 2), ROWS // 2)

        def compute_context(run):
            total = run(jnp.zeros((ROWS // 2, COLS), F32))
            out_smem[rows] = total
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem.at[rows], o_gmem.at[rows])
            plgpu.wait_smem_to_gmem(0)

        def step(_, x_smem, y_smem, x_done, y_done, total):
            total = total + x_smem[rows] * y_smem[rows]
            plgpu.barrier_arrive(x_done)
            if forgets_y:
                @pl.when(wg == 0)               # only warpgroup 0 gives y's slot back
                def _():
                    plgpu.barrier_arrive(y_done)
            else:
                plgpu.barrier_arrive(y_done)
            return total

        spec = plgpu.BlockSpec((ROWS, COLS), lambda i: (i, 0))
        plgpu.emit_pipeline_warp_specialized(
            step, grid=(steps,), memory_registers=40, max_concurrent_steps=3,
            num_compute_wgs=2, wg_axis="wg", manual_consumed_barriers=True,
            compute_context=compute_context, in_specs=[spec, spec])(x_gmem, y_gmem)

    dot = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32), num_threads=3,
                       thread_name="wg", scratch_types=[plgpu.SMEM((ROWS, COLS), F32)])
    data = jnp.ones((steps * ROWS, COLS), F32)
    return dot(data, data)


@sizes(steps=("steps", 1))
def ws_dot_both_release(steps=4):
    return _ws_dot(steps)


@sizes(steps=("steps", 1))
def ws_dot_one_forgets_y(steps=4):
    """Warpgroup 1 releases x's slot but not y's: y's consumed barrier counts both compute
    warpgroups, so once its three slots are used the memory thread waits forever."""
    return _ws_dot(steps, forgets_y=True)


# -- 6. emit_pipeline with a carry: a row sum over K steps, stored through a TMA epilogue -----

def _rowsum(steps, final_wait=True):
    def body(x_gmem, o_gmem, out_smem):
        def step(_, x_smem, acc):
            return acc + x_smem[...]

        acc = plgpu.emit_pipeline(
            step, grid=(steps,), max_concurrent_steps=2,
            in_specs=[plgpu.BlockSpec((ROWS, COLS), lambda k: (0, k))],
            init_carry=jnp.zeros((ROWS, COLS), F32))(x_gmem)
        out_smem[...] = acc
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(out_smem, o_gmem)
        if final_wait:
            plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32)])
    return k(jnp.zeros((ROWS, steps * COLS), F32))


def rowsum_pipeline(steps=3):
    return _rowsum(steps)


def rowsum_pipeline_exits_before_store(steps=3):
    """The carry's TMA store is still reading `out_smem` when the block exits."""
    return _rowsum(steps, final_wait=False)


# -- 7. a 2x2 cluster meeting on one ClusterBarrier over both axes, two rounds: each instance
#       counts its own block and its neighbour along each axis (3 arrivals) -----------------

def _grid_cluster(rounds, second_row_arrives=True):
    def body(x_gmem, o_gmem, met):
        y = jax.lax.axis_index("y")

        @pl.loop(0, rounds)
        def _(r):
            if second_row_arrives:
                plgpu.barrier_arrive(met)
            else:
                @pl.when(y == 0)
                def _():
                    plgpu.barrier_arrive(met)
            plgpu.barrier_wait(met)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((COLS,), F32),
                     cluster=(2, 2), cluster_names=("x", "y"),
                     scratch_types=[plgpu.ClusterBarrier(collective_axes=("x", "y"))])
    return k(jnp.zeros((COLS,), F32))


def grid_cluster(rounds=2):
    return _grid_cluster(rounds)


def grid_cluster_second_row_silent(rounds=2):
    """Only the blocks with y == 0 arrive, yet all wait: every instance misses the arrivals
    of the second row, so every block hangs (BP100)."""
    return _grid_cluster(rounds, second_row_arrives=False)


# -- 8. a two-slot TMA ring written by hand between two warpgroups; under Pallas's rule that
#       completions equal waits, the producer drains the last releases ------------------------

def _handrolled(steps, slots, drain=True, slot_of=None):
    def body(x_gmem, o_gmem, bufs, out_smem, filled, consumed):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                s = i % slots

                @pl.when(i >= slots)
                def _():
                    plgpu.barrier_wait(consumed.at[s])
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(i * ROWS, ROWS)], bufs.at[s],
                                        filled.at[s])
            if drain:
                # the last `slots` releases must be observed too (completions == waits)
                for j in range(slots):
                    plgpu.barrier_wait(consumed.at[(steps + j) % slots])

        @pl.when(wg == 1)
        def _consumer():
            def step(i, acc):
                s = i % slots
                plgpu.barrier_wait(filled.at[s])
                acc = acc + bufs[s]
                plgpu.barrier_arrive(consumed.at[s])
                return acc

            acc = jax.lax.fori_loop(0, steps, step, jnp.zeros((ROWS, COLS), F32))
            out_smem[...] = acc
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem)
            plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     num_threads=2, thread_name="wg",
                     scratch_types=[plgpu.SMEM((slots, ROWS, COLS), F32),
                                    plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.Barrier(num_barriers=slots),
                                    plgpu.Barrier(num_barriers=slots)])
    return k(jnp.zeros((steps * ROWS, COLS), F32))


def handrolled_ring_drained(steps=4):
    return _handrolled(steps, 2)


def handrolled_ring_without_drain(steps=4):
    """No drain: the consumer's last two releases are never awaited by the producer, which
    exits with completions it has not observed (BP103; the hardware would not hang)."""
    return _handrolled(steps, 2, drain=False)


# -- 9. emit_pipeline_warp_specialized with an output spec: the pipeline stores each step ------

def _ws_scale(steps):
    def body(x_gmem, o_gmem):
        def step(_, x_smem, o_smem):
            o_smem[...] = x_smem[...] * 2

        spec = plgpu.BlockSpec((ROWS, COLS), lambda i: (i, 0))
        plgpu.emit_pipeline_warp_specialized(
            step, grid=(steps,), memory_registers=40, max_concurrent_steps=2,
            num_compute_wgs=1, wg_axis="wg", in_specs=[spec], out_specs=[spec])(x_gmem, o_gmem)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((steps * ROWS, COLS), F32),
                     num_threads=2, thread_name="wg")
    return k(jnp.zeros((steps * ROWS, COLS), F32))


def ws_scale(steps=3):
    return _ws_scale(steps)


# -- 10. Blackwell: a TMA warp fills a two-slot ring, each tcgen05_mma releases its slot through
#        its completion barrier, the epilogue warpgroup waits for the final commit ----------

def _umma_ring(ksteps, slots=2, mma_releases=True, drain=True):
    tm, tn, tk = 128, 128, 64

    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, out_smem,
             loaded, consumed, mma_done):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
            def _per_warp():
                warp = jax.lax.axis_index("warp")

                @pl.when(warp == 0)
                def _tma():
                    @pl.loop(0, ksteps)
                    def _(k):
                        s = k % slots

                        @pl.when(k >= slots)
                        def _():
                            plgpu.barrier_wait(consumed.at[s])
                        plgpu.copy_gmem_to_smem(a_gmem.at[:, pl.ds(k * tk, tk)], a_smem.at[s],
                                                loaded.at[s])
                        plgpu.copy_gmem_to_smem(b_gmem.at[pl.ds(k * tk, tk)], b_smem.at[s],
                                                loaded.at[s])
                    if drain:
                        for j in range(slots):
                            plgpu.barrier_wait(consumed.at[(ksteps + j) % slots])

                @pl.when(warp == 1)
                def _mma():
                    @pl.loop(0, ksteps)
                    def _(k):
                        s = k % slots
                        plgpu.barrier_wait(loaded.at[s])
                        if mma_releases:
                            plgpu.tcgen05_mma(acc_tmem, a_smem.at[s], b_smem.at[s],
                                              consumed.at[s], accumulate=k > 0)
                        else:
                            plgpu.tcgen05_mma(acc_tmem, a_smem.at[s], b_smem.at[s],
                                              accumulate=k > 0)
                            plgpu.barrier_arrive(consumed.at[s])
                    plgpu.tcgen05_commit_arrive(mma_done)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(mma_done)
            out_smem[...] = plgpu.async_load_tmem(acc_tmem).astype(F16)
            plgpu.wait_load_tmem()
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem)
            plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((tm, tn), F16), num_threads=2, thread_name="wg",
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        scratch_types=[
            plgpu.SMEM((slots, tm, tk), F16, transforms=_transforms(tk)),
            plgpu.SMEM((slots, tk, tn), F16, transforms=_transforms(tn)),
            plgpu.TMEM((tm, tn), F32),
            plgpu.SMEM((tm, tn), F16),
            plgpu.Barrier(num_arrivals=2, num_barriers=slots),
            plgpu.Barrier(num_arrivals=1, num_barriers=slots, orders_tensor_core=True),
            plgpu.Barrier(num_arrivals=1, orders_tensor_core=True),
        ])
    return k(jnp.zeros((tm, ksteps * tk), F16), jnp.zeros((ksteps * tk, tn), F16))


def umma_ring(ksteps=4):
    return _umma_ring(ksteps)


def umma_ring_thread_releases(ksteps=4):
    """The MMA warp arrives on `consumed` itself right after issuing the MMA: the TMA refills
    the slot the MMA may still read (BP200)."""
    return _umma_ring(ksteps, mma_releases=False)


def umma_ring_no_drain(ksteps=4):
    """The TMA warp does not wait for the last MMAs' releases (BP103)."""
    return _umma_ring(ksteps, drain=False)


# -- each warp fills its row of a buffer inside core_map; the warpgroup reads all of it after
#    the region (the join orders every warp's stores before it) -------------------------------

def _warps_fill(neighbour):
    def body(x_gmem, o_gmem, buf):
        @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
        def _per_warp():
            warp = jax.lax.axis_index("warp")
            if neighbour:
                buf[warp] = buf[(warp + 1) % 4] + 1.0
            else:
                buf[warp] = jnp.full((32,), 1.0, F32)

        o_gmem[...] = buf[...]

    kernel = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((4, 32), F32),
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        scratch_types=[plgpu.SMEM((4, 32), F32)])
    return kernel(jnp.zeros((4, 32), F32))


def warps_fill_then_group_reads():
    return _warps_fill(False)


def warps_fill_reading_a_neighbour():
    """Each warp reads the next warp's row inside the region, with no barrier between that
    warp's store and the read."""
    return _warps_fill(True)
