"""Mosaic GPU kernels written for barrierproof's tests in the style of JAX's own
(jax.experimental.pallas.ops.gpu): warp-specialized pipelines, two consumer warpgroups releasing
one producer, and a bulk-store epilogue. Each function launches one kernel; EXPECT is the verdict
derived by hand from the hardware rules (SEMANTICS.md) before checking."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS, COLS = 128, 64
HALF = ROWS // 2

EXPECT = {
    "ws_three_stage_epilogue": "verified",
    "ws_epilogue_slot_reused_early": "violation:BP200",
    "two_consumer_ring": "verified",
    "consumer_waits_next_slot": "violation:BP200",
    "consumer_skips_last_release": "violation:BP100",
    "two_consumer_ring_any_length": "verified",
    "any_length_skips_last_release": "violation:BP100",
    "ws_epilogue_exits_in_flight": "violation:BP105",
    "ws_manual_release_before_read": "violation:BP200",
    "ws_manual_release_skipped_last": "violation:BP100",
    "two_operand_loads_one_barrier": "verified",
    "two_operand_loads_counted_once": "violation:BP121",
    "one_full_barrier_seen": "verified",
}


# --- 1/2: emit_pipeline_warp_specialized, 3 stages, a two-tile store epilogue per warpgroup ----

def _ws_pipeline(steps, out_slots, store_wait, final_wait=True):
    """A TMA warpgroup streams `steps` tiles through 3 buffers; two compute warpgroups add
    their half of each tile into an SMEM accumulator, then store it in two epilogue tiles of
    HALF/2 rows through `out_slots` staging buffers, waiting with wait_smem_to_gmem(store_wait)
    before refilling one (as JAX's Hopper matmul does with two slots and a wait of 1)."""
    epi = HALF // 2

    def body(x_gmem, o_gmem, acc, out_smem):
        wg = jax.lax.axis_index("wg")
        mine = pl.ds(wg * HALF, HALF)

        def compute_context(eval_pipeline):
            acc[mine] = jnp.zeros((HALF, COLS), jnp.float32)
            eval_pipeline(())
            for e in range(HALF // epi):
                slot = e % out_slots
                plgpu.wait_smem_to_gmem(store_wait, wait_read_only=True)
                out_smem[wg, slot] = acc[pl.ds(wg * HALF + e * epi, epi)]
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(out_smem.at[wg, slot],
                                        o_gmem.at[pl.ds(wg * HALF + e * epi, epi)])
            if final_wait:
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)

        def step(_, x_smem, carry):
            acc[mine] += x_smem[mine]
            return carry

        pipeline = plgpu.emit_pipeline_warp_specialized(
            step, grid=(steps,), memory_registers=40, max_concurrent_steps=3,
            num_compute_wgs=2, wg_axis="wg", compute_context=compute_context,
            in_specs=[plgpu.BlockSpec((ROWS, COLS), lambda i: (i, 0))])
        pipeline(x_gmem)

    scratch = [plgpu.SMEM((ROWS, COLS), jnp.float32),
               plgpu.SMEM((2, out_slots, epi, COLS), jnp.float32)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
                          num_threads=3, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.ones((steps * ROWS, COLS), jnp.float32))


def ws_three_stage_epilogue():
    """Two staging slots and a wait of 1: the store that last read a slot is retired before
    the slot is overwritten."""
    return _ws_pipeline(steps=5, out_slots=2, store_wait=1)


def ws_epilogue_slot_reused_early():
    """One staging slot but still a wait of 1: the second epilogue tile overwrites the slot
    while the first bulk store may still be reading it."""
    return _ws_pipeline(steps=5, out_slots=1, store_wait=1)


def ws_epilogue_exits_in_flight():
    """Two slots, but no wait_smem_to_gmem(0) after the last store: the compute warpgroups may
    exit while the second epilogue tile's bulk store still reads its staging slot."""
    return _ws_pipeline(steps=5, out_slots=2, store_wait=1, final_wait=False)


def _ws_manual(steps, release_first_wg=None, skip_last_wg=None):
    """emit_pipeline_warp_specialized with manual consumed barriers (4 stages): each compute
    warpgroup releases the input slot itself once it has read its half."""
    def body(x_gmem, o_gmem):
        wg = jax.lax.axis_index("wg")
        mine = pl.ds(wg * HALF, HALF)

        def step(idx, x_smem, consumed):
            (i,) = idx
            release = plgpu.barrier_arrive
            if skip_last_wg is not None:
                def release(b):
                    @pl.when((wg != skip_last_wg) | (i < steps - 1))
                    def _():
                        plgpu.barrier_arrive(b)
            if release_first_wg is None:
                o_gmem[mine] = x_smem[mine]
                release(consumed)
            else:
                @pl.when(wg == release_first_wg)
                def _():
                    release(consumed)
                o_gmem[mine] = x_smem[mine]

                @pl.when(wg != release_first_wg)
                def _():
                    release(consumed)

        pipeline = plgpu.emit_pipeline_warp_specialized(
            step, grid=(steps,), memory_registers=40, max_concurrent_steps=4,
            num_compute_wgs=2, wg_axis="wg", manual_consumed_barriers=True,
            in_specs=[plgpu.BlockSpec((ROWS, COLS), lambda i: (i, 0))])
        pipeline(x_gmem)

    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
                          num_threads=3, thread_name="wg")
    return kernel(jnp.ones((steps * ROWS, COLS), jnp.float32))


def ws_manual_release_before_read():
    """Warpgroup 1 releases the slot before reading its half: the memory warpgroup's refill of
    that slot (4 steps later) may land while it reads."""
    return _ws_manual(6, release_first_wg=1)


def ws_manual_release_skipped_last():
    """Warpgroup 0 skips its release in the last step: the memory warpgroup's final wait on
    every consumed barrier never returns."""
    return _ws_manual(6, skip_last_wg=0)


# --- 3/4/5: one TMA producer, two consumers releasing each slot together (num_arrivals=2) ------

SLOTS = 3


def _two_consumers(steps, wrong_slot_wg=None, skip_last_release_wg=None):
    def body(x_gmem, o_gmem, ring, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 2)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS

                @pl.when(i >= SLOTS)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(i * ROWS, ROWS)], ring.at[slot],
                                        full.at[slot])

            # drain: every slot's last release must be observed before exit
            for j in range(min(steps, SLOTS)):
                plgpu.barrier_wait(empty.at[(steps - 1 - j) % SLOTS])

        @pl.when(wg < 2)
        def _consumer():
            mine = pl.ds(wg * HALF, HALF)

            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS
                waited = slot
                if wrong_slot_wg is not None:
                    waited = jnp.where(wg == wrong_slot_wg, (i + 1) % SLOTS, slot)
                plgpu.barrier_wait(full.at[waited])
                o_gmem[mine] = ring[slot, mine]
                if skip_last_release_wg is None:
                    plgpu.barrier_arrive(empty.at[slot])
                else:
                    @pl.when((wg != skip_last_release_wg) | (i < steps - 1))
                    def _():
                        plgpu.barrier_arrive(empty.at[slot])

    scratch = [plgpu.SMEM((SLOTS, ROWS, COLS), jnp.float32),
               plgpu.Barrier(num_barriers=SLOTS),
               plgpu.Barrier(num_arrivals=2, num_barriers=SLOTS)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
                          num_threads=3, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.ones((steps * ROWS, COLS), jnp.float32))


def two_consumer_ring():
    """3 slots, 5 steps; both consumers release each slot, the producer drains the last 3."""
    return _two_consumers(5)


def consumer_waits_next_slot():
    """Consumer 1 waits the `full` barrier of the next slot but reads the current one: it can
    read slot i while slot i's copy is still landing."""
    return _two_consumers(5, wrong_slot_wg=1)


def consumer_skips_last_release():
    """Consumer 0 forgets its release of the last step: that slot's `empty` gets one of its two
    arrivals and the producer's drain waits forever."""
    return _two_consumers(5, skip_last_release_wg=0)


def _two_consumers_any_length(skip_last_release):
    """The same ring with its step count read from memory: a parameter (default 5) that both
    roles loop over, and a drain guarded per slot for short runs."""
    def body(n_ref, x_gmem, o_gmem, ring, full, empty):
        wg = jax.lax.axis_index("wg")
        n = n_ref[0]

        @pl.when(wg == 2)
        def _producer():
            @pl.loop(0, n)
            def _(i):
                slot = i % SLOTS

                @pl.when(i >= SLOTS)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(0, ROWS)], ring.at[slot], full.at[slot])

            for j in range(SLOTS):
                @pl.when(n > j)
                def _():
                    plgpu.barrier_wait(empty.at[(n - 1 - j) % SLOTS])

        @pl.when(wg < 2)
        def _consumer():
            mine = pl.ds(wg * HALF, HALF)

            @pl.loop(0, n)
            def _(i):
                slot = i % SLOTS
                plgpu.barrier_wait(full.at[slot])
                o_gmem[mine] = ring[slot, mine]

                @pl.when(jnp.logical_not(skip_last_release & (wg == 0) & (i == n - 1)))
                def _():
                    plgpu.barrier_arrive(empty.at[slot])

    scratch = [plgpu.SMEM((SLOTS, ROWS, COLS), jnp.float32),
               plgpu.Barrier(num_barriers=SLOTS),
               plgpu.Barrier(num_arrivals=2, num_barriers=SLOTS)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
                          num_threads=3, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.array([5], jnp.int32), jnp.ones((ROWS, COLS), jnp.float32))


def two_consumer_ring_any_length():
    return _two_consumers_any_length(False)


def any_length_skips_last_release():
    return _two_consumers_any_length(True)


# --- two TMA loads (an A and a B tile) arriving on one `full` barrier per slot ------------------

def _two_operands(full_arrivals, steps=4):
    """As in a matmul ring, the producer loads an A and a B tile into each slot; both copies
    arrive on that slot's `full`, so it must count two arrivals."""
    def body(a_gmem, b_gmem, o_gmem, a_ring, b_ring, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % 2

                @pl.when(i >= 2)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                rows = pl.ds(i * HALF, HALF)
                plgpu.copy_gmem_to_smem(a_gmem.at[rows], a_ring.at[slot], full.at[slot])
                plgpu.copy_gmem_to_smem(b_gmem.at[rows], b_ring.at[slot], full.at[slot])
            for j in range(2):
                plgpu.barrier_wait(empty.at[(steps - 1 - j) % 2])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % 2
                plgpu.barrier_wait(full.at[slot])
                o_gmem[...] = a_ring[slot] + b_ring[slot]
                plgpu.barrier_arrive(empty.at[slot])

    scratch = [plgpu.SMEM((2, HALF, COLS), jnp.float32), plgpu.SMEM((2, HALF, COLS), jnp.float32),
               plgpu.Barrier(num_arrivals=full_arrivals, num_barriers=2),
               plgpu.Barrier(num_barriers=2)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((HALF, COLS), jnp.float32),
                          num_threads=2, thread_name="wg", scratch_types=scratch)
    x = jnp.ones((steps * HALF, COLS), jnp.float32)
    return kernel(x, x)


def two_operand_loads_one_barrier():
    return _two_operands(2)


def two_operand_loads_counted_once():
    """num_arrivals=1: the B copy's arrive.expect_tx comes while the A copy's phase has no
    arrival left but bytes outstanding (undefined on the hardware); once A has landed, A alone
    completes a phase and B another before the consumer waits, and it reads B while it lands."""
    return _two_operands(1)


# --- one `full` barrier for two buffers: the next copy is in flight while the last is read ------

def one_full_barrier_seen(steps=4):
    """A single `full` barrier serves both buffers: the producer issues copy i, waits for it to
    land and for the consumer's `seen` (so the consumer never falls a phase behind), then issues
    copy i + 1 into the other buffer while the consumer still reads buffer i % 2. Race-free on
    the hardware: the copy in flight writes the other buffer (each copy has its own in-flight
    counter, model/compile.py `_slot`, so the landed one's buffer is no longer counted as
    written)."""
    def body(x_gmem, o_gmem, ring, full, seen, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % 2
                @pl.when(i >= 2)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(i * 64, 64)], ring.at[slot], full)
                plgpu.barrier_wait(full)
                plgpu.barrier_wait(seen)
            for j in range(2):
                plgpu.barrier_wait(empty.at[(steps - 1 - j) % 2])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % 2
                plgpu.barrier_wait(full)
                plgpu.barrier_arrive(seen)
                o_gmem[...] = ring[slot]
                plgpu.barrier_arrive(empty.at[slot])

    scratch = [plgpu.SMEM((2, 64, 64), jnp.float32), plgpu.Barrier(), plgpu.Barrier(),
               plgpu.Barrier(num_barriers=2)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((64, 64), jnp.float32),
                          num_threads=2, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.ones((steps * 64, 64), jnp.float32))
