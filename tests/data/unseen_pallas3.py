"""Third set of Mosaic GPU Pallas kernels in the style of JAX's shipped GPU kernels: a Hopper
warp-specialized matmul whose WGMMAs keep one group in flight (`wgmma_wait(1)`) and so hold each
input slot one step longer (`BlockSpec(delay_release=1)`), as the collective matmul does; a
Blackwell matmul over a persistent loop with a double-buffered TMEM accumulator that the
epilogue warpgroup reads asynchronously (`async_load_tmem` / `wait_load_tmem`) before handing
the slot back to the MMA warp; a persistent `nd_loop` over the grid with a TMA-store
epilogue; a tile read with `plgpu.load` (the explicit-layout load) after its TMA copy; and
one warpgroup's `emit_pipeline` of WGMMAs, each slot held one step longer. Each correct and with a bug of the kind the field reports. Checked by
tests/test_unseen_frontends.py against EXPECT (decided from the hardware rules before running;
where the code is not the obvious one, the kernel's docstring says why)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {
    "wgmma_delayed_release": "verified",
    "wgmma_released_in_flight": "violation:BP200",
    "tmem_slots_released_after_load": "verified",
    "tmem_slots_released_before_load_done": "violation:BP201",
    "nd_loop_store_epilogue": "verified",
    "nd_loop_store_epilogue_no_wait": "violation:BP200",
    "explicit_load_after_wait": "verified",
    "explicit_load_before_wait": "violation:BP200",
    "pipeline_wgmma_delayed_release": "verified",
    "pipeline_wgmma_released_in_flight": "violation:BP200",
}

F16, F32 = jnp.float16, jnp.float32
TM, TN, TK = 64, 64, 64


def _transforms(minor):
    swizzle = plgpu.find_swizzle(minor * 16)
    return (plgpu.TilingTransform((8, swizzle // 2)), plgpu.SwizzleTransform(swizzle))


# -- 1. Hopper: one compute warpgroup issues a WGMMA per K step and waits for all but the newest;
#       the pipeline's memory warpgroup may refill a slot only once the WGMMA reading it is done

def _wgmma_ws(k_steps, delay):
    def body(a_gmem, b_gmem, o_gmem, out_smem):
        def compute_context(run):
            def scope(acc_ref):
                run(acc_ref)
                out_smem[...] = acc_ref[...].astype(F16)     # reading it waits for every WGMMA
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(out_smem, o_gmem)
                plgpu.wait_smem_to_gmem(0)
            pl.run_scoped(scope, plgpu.ACC((TM, TN), F32))

        def step(_, a_smem, b_smem, acc_ref):
            plgpu.wgmma(acc_ref, a_smem, b_smem)
            plgpu.wgmma_wait(1)              # the previous step's WGMMA is done, this one runs
            return acc_ref

        plgpu.emit_pipeline_warp_specialized(
            step, grid=(k_steps,), memory_registers=40, max_concurrent_steps=2,
            num_compute_wgs=1, wg_axis="wg", compute_context=compute_context,
            in_specs=[plgpu.BlockSpec((TM, TK), lambda k: (0, k), transforms=_transforms(TK),
                                      delay_release=delay),
                      plgpu.BlockSpec((TK, TN), lambda k: (k, 0), transforms=_transforms(TN),
                                      delay_release=delay)])(a_gmem, b_gmem)

    mm = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((TM, TN), F16), num_threads=2,
                      thread_name="wg",
                      scratch_types=[plgpu.SMEM((TM, TN), F16, transforms=_transforms(TN))])
    return mm(jnp.zeros((TM, k_steps * TK), F16), jnp.zeros((k_steps * TK, TN), F16))


def wgmma_delayed_release(k_steps=4):
    return _wgmma_ws(k_steps, 1)


def wgmma_released_in_flight(k_steps=4):
    """delay_release=0 with wgmma_wait(1): the slot is handed back at the end of the step while
    that step's WGMMA still reads it, and the memory warpgroup's next load overwrites it."""
    return _wgmma_ws(k_steps, 0)


# -- 2. Blackwell: the MMA warp writes tile t into TMEM slot t % 2; the epilogue warpgroup loads
#       the slot into registers and gives it back through `store_done` ----------------------

def _tmem_slots(tiles, release_early):
    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, out_smem,
             loaded, mma_done, store_done):
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

                    @pl.loop(0, tiles)
                    def _(t):
                        slot = t % 2

                        @pl.when(t >= 2)
                        def _():
                            plgpu.barrier_wait(store_done.at[slot])
                        plgpu.tcgen05_mma(acc_tmem.at[:, pl.ds(slot * TN, TN)], a_smem, b_smem,
                                          mma_done.at[slot], accumulate=False)
                    for j in range(2):       # observe the epilogue's last two releases
                        plgpu.barrier_wait(store_done.at[(tiles + j) % 2])

        @pl.when(wg == 1)
        def _():
            @pl.loop(0, tiles)
            def _(t):
                slot = t % 2
                plgpu.barrier_wait(mma_done.at[slot])
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                out_smem[...] = plgpu.async_load_tmem(
                    acc_tmem.at[:, pl.ds(slot * TN, TN)]).astype(F16)
                if release_early:
                    plgpu.barrier_arrive(store_done.at[slot])
                    plgpu.wait_load_tmem()
                else:
                    plgpu.wait_load_tmem()
                    plgpu.barrier_arrive(store_done.at[slot])
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(out_smem, o_gmem.at[pl.ds(t * TM, TM)])
            plgpu.wait_smem_to_gmem(0)

    mm = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((tiles * TM, TN), F16), num_threads=2,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        scratch_types=[
            plgpu.SMEM((128, TK), F16, transforms=_transforms(TK)),
            plgpu.SMEM((TK, TN), F16, transforms=_transforms(TN)),
            plgpu.TMEM((128, 2 * TN), F32),
            plgpu.SMEM((128, TN), F16),
            plgpu.Barrier(num_arrivals=2),
            plgpu.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True),
            plgpu.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True),
        ])
    return mm(jnp.zeros((128, TK), F16), jnp.zeros((TK, TN), F16))


def tmem_slots_released_after_load(tiles=4):
    return _tmem_slots(tiles, False)


def tmem_slots_released_before_load_done(tiles=4):
    """store_done is arrived on before wait_load_tmem: the tensor-memory load of tile t may
    still read the slot when the MMA of tile t + 2 overwrites it."""
    return _tmem_slots(tiles, True)


# -- 3. a persistent loop over the grid (`plgpu.nd_loop`): each step loads its tile, scales it
#       and stores it through one staging buffer ---------------------------------------------

def _nd_loop(tiles, wait_store):
    def body(x_gmem, o_gmem, in_smem, out_smem, loaded):
        @plgpu.nd_loop((tiles,), collective_axes="sm")
        def _(info: plgpu.NDLoopInfo):
            (t,) = info.index
            rows = pl.ds(t * ROWS, ROWS)
            plgpu.copy_gmem_to_smem(x_gmem.at[rows], in_smem, loaded)
            plgpu.barrier_wait(loaded)
            if wait_store:
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)
            out_smem[...] = in_smem[...] * 2
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem.at[rows])

        plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((tiles * ROWS, COLS), F32),
                     grid=(2,), grid_names=("sm",),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.Barrier(num_arrivals=1)])
    return k(jnp.zeros((tiles * ROWS, COLS), F32))


ROWS, COLS = 64, 128


def nd_loop_store_epilogue(tiles=6):
    return _nd_loop(tiles, True)


def nd_loop_store_epilogue_no_wait(tiles=6):
    """No wait_smem_to_gmem before `out_smem` is written again: the previous step's store may
    still be reading it."""
    return _nd_loop(tiles, False)


# -- 4. `plgpu.load` (a load with an explicit layout) reads the tile a TMA copy brought in ------

def _explicit_load(wait_first):
    def body(x_gmem, o_gmem, buf, out_smem, loaded):
        plgpu.copy_gmem_to_smem(x_gmem, buf, loaded)
        if wait_first:
            plgpu.barrier_wait(loaded)
        x = plgpu.load(buf, ())
        if not wait_first:
            plgpu.barrier_wait(loaded)
        out_smem[...] = x * 2
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(out_smem, o_gmem)
        plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32), plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.Barrier(num_arrivals=1)])
    return k(jnp.zeros((ROWS, COLS), F32))


def explicit_load_after_wait():
    return _explicit_load(True)


def explicit_load_before_wait():
    """The tile is loaded into registers before the copy's barrier is waited on."""
    return _explicit_load(False)


# -- 5. one warpgroup, `emit_pipeline`: the WGMMA of step k may still run during step k + 1, so
#       its slot is refilled one step later (`delay_release=1`) --------------------------------

def _pipeline_wgmma(k_steps, delay):
    def body(a_gmem, b_gmem, o_gmem, out_smem):
        def scope(acc_ref):
            def step(_, a_smem, b_smem):
                plgpu.wgmma(acc_ref, a_smem, b_smem)
                plgpu.wgmma_wait(1)

            plgpu.emit_pipeline(
                step, grid=(k_steps,), max_concurrent_steps=2,
                in_specs=[plgpu.BlockSpec((TM, TK), lambda k: (0, k), transforms=_transforms(TK),
                                          delay_release=delay),
                          plgpu.BlockSpec((TK, TN), lambda k: (k, 0), transforms=_transforms(TN),
                                          delay_release=delay)])(a_gmem, b_gmem)
            out_smem[...] = acc_ref[...].astype(F16)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(out_smem, o_gmem)
            plgpu.wait_smem_to_gmem(0)

        pl.run_scoped(scope, plgpu.ACC((TM, TN), F32))

    mm = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((TM, TN), F16),
                      scratch_types=[plgpu.SMEM((TM, TN), F16, transforms=_transforms(TN))])
    return mm(jnp.zeros((TM, k_steps * TK), F16), jnp.zeros((k_steps * TK, TN), F16))


def pipeline_wgmma_delayed_release(k_steps=4):
    return _pipeline_wgmma(k_steps, 1)


def pipeline_wgmma_released_in_flight(k_steps=4):
    """delay_release=0 with wgmma_wait(1): the pipeline refills the slot of step k right after
    the step, while its WGMMA may still read it."""
    return _pipeline_wgmma(k_steps, 0)
