"""Multi-buffered TMA pipelines between a producer and a consumer warpgroup: correct and buggy.

The producer (warpgroup 1) copies tile i into slot i % SLOTS and the copy arrives on `full[slot]`;
the consumer (warpgroup 0) waits on `full[slot]`, reads, and arrives on `empty[slot]`, on which the
producer waits before it reuses the slot. Pallas keeps one parity bit per thread and barrier, so
every completion of a barrier must be observed by every thread that waits on it.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

TILE = 128
SLOTS = 2

EXPECT = {
    "ring": "verified",
    "ring_without_drain": "violation:BP103",
    "producer_laps_consumer": "violation:BP121",
    "tail_iteration_skips_wait": "violation:BP101",
    "roles_disagree_on_trips": "violation:BP100",
    "trip_count_one": "violation:BP105",
    "trip_count_one_guarded": "verified",
    "single_slot_ring_index": "error:BP120",
    "consumer_races_free_running_producer": "violation:BP121",
}

INTERPRETER = {
    "ring": "completed",
    "ring_without_drain": "raised",
    "producer_laps_consumer": "raised",
    "tail_iteration_skips_wait": "raised",
    "roles_disagree_on_trips": "hung",
    # The copy into the unused slot lands at issue in the interpreter, and nobody ever waits on
    # that barrier: its end-of-kernel check skips threads that never waited (blind spot).
    "trip_count_one": "completed",
    "trip_count_one_guarded": "completed",
    "single_slot_ring_index": "raised",
    # Shows only when the producer runs ahead of the consumer: the free-running interpreter
    # raises in some runs only; under the counterexample's schedule (confirm --schedule) always.
    "consumer_races_free_running_producer": "schedule-dependent",
}


def _pipeline(steps, body, slots=SLOTS):
    scratch = [plgpu.SMEM((slots, TILE), jnp.float32), plgpu.Barrier(num_barriers=slots),
               plgpu.Barrier(num_barriers=slots)]
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((steps, TILE), jnp.float32),
                          num_threads=2, thread_name="wg", scratch_types=scratch)
    return kernel(jnp.zeros((steps, TILE), jnp.float32))


def ring(steps=4):
    """Double-buffered pipeline; the producer drains `empty` at the end so that every
    completion is observed (rule 2)."""
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
                o_ref[i] = smem[slot] + 1
                plgpu.barrier_arrive(empty.at[slot])

    return _pipeline(steps, body)


def ring_without_drain(steps=4):
    """The same ring without the drain: the last completions of `empty` are never observed by
    the producer, which waited on earlier ones (Pallas rule 2)."""
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

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS
                plgpu.barrier_wait(full.at[slot])
                o_ref[i] = smem[slot] + 1
                plgpu.barrier_arrive(empty.at[slot])

    return _pipeline(steps, body)


def producer_laps_consumer(steps=4):
    """No backpressure: the producer refills a slot without waiting on `empty`. Its third copy
    arrives on `full[0]` while the first may still be in flight (an arrival-count underflow,
    BP121); had it landed, `full[0]` would complete twice before the consumer observed it. (The
    consumer first waits for a `go` signal: the interpreter's schedule is deterministic.)"""
    def body(x_ref, o_ref, smem, full, go):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[i % SLOTS], full.at[i % SLOTS])
            plgpu.barrier_arrive(go.at[0])

        @pl.when(wg == 0)
        def _consumer():
            plgpu.barrier_wait(go.at[0])

            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % SLOTS])
                o_ref[i] = smem[i % SLOTS]

    return _pipeline(steps, body)


def consumer_races_free_running_producer(steps=4):
    """`producer_laps_consumer` without the `go` signal: nothing makes the producer wait for the
    consumer, but nothing makes it run ahead either. Whether the interpreter sees the lap depends
    on how its threads happen to run; the model finds the interleaving where the producer's third
    copy arrives on `full[0]` before the consumer observed the first completion."""
    def body(x_ref, o_ref, smem, full, unused):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[i % SLOTS], full.at[i % SLOTS])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % SLOTS])
                o_ref[i] = smem[i % SLOTS]

    return _pipeline(steps, body)


def tail_iteration_skips_wait(steps=4):
    """The consumer skips its wait on the last iteration (a tail that 'knows' the data is
    there). Without that wait it can release `empty[1]` a second time before the producer saw
    the first release (BP101); and the last completion of `full` is never observed, which is
    what the interpreter reports at exit."""
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

                @pl.when(i < steps - 1)
                def _():
                    plgpu.barrier_wait(full.at[slot])
                o_ref[i] = smem[slot] + 1
                plgpu.barrier_arrive(empty.at[slot])

    return _pipeline(steps, body)


def roles_disagree_on_trips(steps=4):
    """The consumer runs one iteration more than the producer feeds: it waits forever."""
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps - 1)
            def _(i):
                slot = i % SLOTS

                @pl.when(i >= SLOTS)
                def _():
                    plgpu.barrier_wait(empty.at[slot])
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[slot], full.at[slot])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                slot = i % SLOTS
                plgpu.barrier_wait(full.at[slot])
                o_ref[i] = smem[slot] + 1
                plgpu.barrier_arrive(empty.at[slot])

    return _pipeline(steps, body)


def trip_count_one(steps=1):
    """The prologue fills both slots unconditionally, but there is only one step: the second
    copy is never waited for, and may still be in flight when the kernel exits."""
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            for s in range(SLOTS):
                plgpu.copy_gmem_to_smem(x_ref.at[0], smem.at[s], full.at[s])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % SLOTS])
                o_ref[i] = smem[i % SLOTS]

    return _pipeline(steps, body)


def trip_count_one_guarded(steps=1):
    """The same prologue, guarded by the trip count."""
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            for s in range(SLOTS):
                @pl.when(s < steps)
                def _():
                    plgpu.copy_gmem_to_smem(x_ref.at[s % steps], smem.at[s], full.at[s])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % SLOTS])
                o_ref[i] = smem[i % SLOTS]

    return _pipeline(steps, body)


def single_slot_ring_index(steps=2):
    """A ring's slot arithmetic (`i % 2`) applied to a single-slot barrier: slot 1 does not
    exist."""
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                @pl.when(i >= 1)
                def _():
                    plgpu.barrier_wait(empty.at[0])
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[0], full.at[i % 2])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % 2])
                o_ref[i] = smem[0]
                plgpu.barrier_arrive(empty.at[0])

    return _pipeline(steps, body, slots=1)
