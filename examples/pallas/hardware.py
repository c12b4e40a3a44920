"""Warps, clusters, multicast TMA, tcgen05 and semaphores.

JAX's GPU interpreter (0.10.2) cannot run WarpMesh, ClusterBarrier, TMEM or semaphores (it
reports `unsupported`); barrierproof checks them alone. It does run multicast copies (as plain
local copies, so a missing source shows as a hang), and a tcgen05 arrival on a barrier without
orders_tensor_core is rejected by JAX while tracing, which barrierproof reports as BP110 at the
kernel's line."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

TILE = 128

EXPECT = {
    "warp_handoff": "verified",
    "leader_warp_overruns": "violation:BP101",
    "cluster_rendezvous": "verified",
    "cluster_barrier_one_block": "violation:BP100",
    "multicast_copy": "verified",
    "multicast_copy_one_source": "violation:BP130",
    "tcgen05_commit": "verified",
    "tcgen05_commit_plain_barrier": "violation:BP110",
    "semaphore_handoff": "verified",
    "semaphore_handoff_waits_for_two": "violation:BP100",
    "leader_tracked_barrier": "verified",
    "leader_tracked_barrier_peer_waits": "violation:BP100",
    "store_into_peer": "verified",
    "store_into_peer_nobody_waits": "violation:BP146",
    "test_after_go": "verified",
    "test_then_wait": "violation:BP100",
    "parallel_signals": "verified",
    "parallel_signals_waits_for_three": "violation:BP100",
    "parallel_signals_to_two_semaphores": "verified",
    "parallel_signals_to_two_semaphores_one_short": "violation:BP100",
}

INTERPRETER = {
    "warp_handoff": "unsupported",
    "leader_warp_overruns": "unsupported",
    "cluster_rendezvous": "unsupported",
    "cluster_barrier_one_block": "unsupported",
    "multicast_copy": "completed",
    "multicast_copy_one_source": "hung",
    "tcgen05_commit": "unsupported",
    "tcgen05_commit_plain_barrier": "raised",
    "semaphore_handoff": "unsupported",
    "semaphore_handoff_waits_for_two": "unsupported",
    "leader_tracked_barrier": "unsupported",
    "leader_tracked_barrier_peer_waits": "unsupported",
    "store_into_peer": "unsupported",
    "store_into_peer_nobody_waits": "unsupported",
    "test_after_go": "unsupported",
    "test_then_wait": "unsupported",
    "parallel_signals": "unsupported",
    "parallel_signals_waits_for_three": "unsupported",
    "parallel_signals_to_two_semaphores": "unsupported",
    "parallel_signals_to_two_semaphores_one_short": "unsupported",
}

ROUNDS = 2


def _warps(leader_waits: bool):
    """Warp 0 of the warpgroup publishes a value per round to warps 1..3."""
    scratch = [plgpu.Barrier(num_arrivals=1), plgpu.Barrier(num_arrivals=3)]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), scratch_types=scratch)
    def kernel(x_ref, o_ref, ready, ack):
        @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
        def _per_warp():
            warp = jax.lax.axis_index("warp")

            @pl.when(warp == 0)
            def _leader():
                @pl.loop(0, ROUNDS)
                def _(r):
                    plgpu.barrier_arrive(ready)
                    if leader_waits:
                        plgpu.barrier_wait(ack)

            @pl.when(warp > 0)
            def _followers():
                @pl.loop(0, ROUNDS)
                def _(r):
                    plgpu.barrier_wait(ready)
                    if leader_waits:
                        plgpu.barrier_arrive(ack)

    return kernel(jnp.zeros(TILE, jnp.float32))


def _barrier_test(then_wait: bool):
    """Warp 0 completes `ready`, then `go`; warp 1 tests `ready` with plgpu.barrier_test (a
    non-blocking wait that observes the completion when it has happened)."""
    scratch = [plgpu.Barrier(num_arrivals=1), plgpu.Barrier(num_arrivals=1)]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), scratch_types=scratch)
    def kernel(x_ref, o_ref, ready, go):
        @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
        def _per_warp():
            warp = jax.lax.axis_index("warp")

            @pl.when(warp == 0)
            def _producer():
                plgpu.barrier_arrive(ready)
                plgpu.barrier_arrive(go)

            @pl.when(warp == 1)
            def _consumer():
                if then_wait:
                    plgpu.barrier_test(ready)       # the answer is ignored
                    plgpu.barrier_wait(ready)
                    plgpu.barrier_wait(go)
                else:
                    plgpu.barrier_wait(go)
                    plgpu.barrier_test(ready)       # sure to succeed after `go`

    return kernel(jnp.zeros(TILE, jnp.float32))


def test_after_go():
    return _barrier_test(then_wait=False)


def test_then_wait():
    """The ignored test may already observe `ready`'s completion; the barrier_wait after it
    then waits for a second one that never comes."""
    return _barrier_test(then_wait=True)


def warp_handoff():
    return _warps(leader_waits=True)


def leader_warp_overruns():
    """The leader warp arrives for round 1 without waiting for the followers' acks: the
    barrier completes again under warps still waiting for round 0."""
    return _warps(leader_waits=False)


def _cluster(all_blocks_arrive: bool):
    """Both blocks of a cluster of 2 arrive on a ClusterBarrier and wait for each other."""
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((2, TILE), jnp.float32),
                  cluster=(2,), cluster_names=("x",),
                  scratch_types=[plgpu.ClusterBarrier(collective_axes=("x",))])
    def kernel(x_ref, o_ref, met):
        block = jax.lax.axis_index("x")
        if all_blocks_arrive:
            plgpu.barrier_arrive(met)
        else:
            @pl.when(block == 0)
            def _():
                plgpu.barrier_arrive(met)
        plgpu.barrier_wait(met)
        o_ref[block] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def cluster_rendezvous():
    return _cluster(all_blocks_arrive=True)


def cluster_barrier_one_block():
    """Only block 0 executes the cluster barrier's arrive: both blocks wait forever."""
    return _cluster(all_blocks_arrive=False)


def _leader_tracked(peer_waits: bool):
    """Both blocks of a cluster of 2 arrive on a leader-tracked ClusterBarrier: every arrival
    reaches block 0's instance only, so only block 0 may wait on it."""
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((2, TILE), jnp.float32),
                  cluster=(2,), cluster_names=("x",),
                  scratch_types=[plgpu.ClusterBarrier(collective_axes=("x",),
                                                      leader_tracked=True)])
    def kernel(x_ref, o_ref, ready):
        block = jax.lax.axis_index("x")
        plgpu.barrier_arrive(ready)
        if peer_waits:
            plgpu.barrier_wait(ready)
        else:
            @pl.when(block == 0)
            def _():
                plgpu.barrier_wait(ready)
        o_ref[block] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def leader_tracked_barrier():
    return _leader_tracked(peer_waits=False)


def leader_tracked_barrier_peer_waits():
    """Block 1 waits on its own instance of the leader-tracked barrier, which no arrival
    reaches."""
    return _leader_tracked(peer_waits=True)


def _store_into_peer(peer_waits: bool):
    """Block 0 stores a tile from registers into block 1's shared memory (st.async); block 1's
    barrier gets the expect_tx and the bytes."""
    scratch = [plgpu.SMEM((TILE,), jnp.float32), plgpu.Barrier(), plgpu.Barrier()]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((2, TILE), jnp.float32),
                  cluster=(2,), cluster_names=("x",), scratch_types=scratch)
    def kernel(x_ref, o_ref, buf, landed, own):
        block = jax.lax.axis_index("x")

        @pl.when(block == 0)
        def _():
            plgpu.async_store_smem(x_ref[...], buf, landed, cluster_idx=1, cluster_dim="x")

        @pl.when(block == 1)
        def _():
            plgpu.barrier_arrive(own)       # some work of its own first
            plgpu.barrier_wait(own)
            if peer_waits:
                plgpu.barrier_wait(landed)
        o_ref[block] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def store_into_peer():
    return _store_into_peer(peer_waits=True)


def store_into_peer_nobody_waits():
    """Block 1 never waits for the store into its shared memory and exits while it may still
    be in flight."""
    return _store_into_peer(peer_waits=False)


def _multicast(all_sources: bool):
    """Each block of the cluster issues its share of a multicast TMA copy; every block's
    barrier receives the bytes of every share."""
    scratch = [plgpu.SMEM((TILE, TILE), jnp.float16), plgpu.Barrier()]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((2, TILE, TILE), jnp.float16),
                  cluster=(2,), cluster_names=("x",), scratch_types=scratch)
    def kernel(x_ref, o_ref, smem, loaded):
        block = jax.lax.axis_index("x")
        if all_sources:
            plgpu.copy_gmem_to_smem(x_ref, smem, loaded, collective_axes="x")
        else:
            @pl.when(block == 0)
            def _():
                plgpu.copy_gmem_to_smem(x_ref, smem, loaded, collective_axes="x")
        plgpu.barrier_wait(loaded)
        o_ref[block] = smem[...]

    return kernel(jnp.zeros((TILE, TILE), jnp.float16))


def multicast_copy():
    return _multicast(all_sources=True)


def multicast_copy_one_source():
    """Only block 0 issues the multicast: its barrier expects the whole tile but receives only
    block 0's share, so its tx-count never returns to zero; block 1's barrier receives bytes it
    never expected and no arrival at all."""
    return _multicast(all_sources=False)


def _tcgen05(orders_tensor_core: bool):
    """One MMA into tensor memory, then a commit that arrives when it completes."""
    transforms = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
    scratch = [
        plgpu.SMEM((TILE, 64), jnp.float16, transforms=transforms),
        plgpu.SMEM((64, TILE), jnp.float16, transforms=transforms),
        plgpu.TMEM((TILE, TILE), jnp.float32),
        plgpu.Barrier(orders_tensor_core=orders_tensor_core),
    ]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), scratch_types=scratch)
    def kernel(x_ref, o_ref, a_smem, b_smem, acc_tmem, mma_done):
        plgpu.tcgen05_mma(acc_tmem, a_smem, b_smem, accumulate=False)
        plgpu.tcgen05_commit_arrive(mma_done)
        plgpu.barrier_wait(mma_done)
        o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def tcgen05_commit():
    return _tcgen05(orders_tensor_core=True)


def tcgen05_commit_plain_barrier():
    """tcgen05_commit_arrive on a Barrier declared without orders_tensor_core=True."""
    return _tcgen05(orders_tensor_core=False)


def _semaphore_handoff(value: int):
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SemaphoreType.REGULAR(())])
    def kernel(x_ref, o_ref, sem):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            pl.semaphore_signal(sem)

        @pl.when(wg == 1)
        def _():
            pl.semaphore_wait(sem, value)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def semaphore_handoff():
    """A hand-off through a semaphore: warpgroup 0 signals, warpgroup 1 waits for 1."""
    return _semaphore_handoff(1)


def semaphore_handoff_waits_for_two():
    """The waiter asks for 2 signals; only one ever comes: a hang."""
    return _semaphore_handoff(2)


def _parallel_signals(value: int):
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SemaphoreType.REGULAR(())])
    def kernel(x_ref, o_ref, sem):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.semaphore_signal_parallel(plgpu.SemaphoreSignal(sem, device_id=None, inc=1),
                                            plgpu.SemaphoreSignal(sem, device_id=None, inc=1))

        @pl.when(wg == 1)
        def _():
            pl.semaphore_wait(sem, value)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def parallel_signals():
    """Two unordered signals of one semaphore (semaphore_signal_parallel); the waiter waits
    for both."""
    return _parallel_signals(2)


def parallel_signals_waits_for_three():
    """The waiter asks for three signals; two come: a hang."""
    return _parallel_signals(3)


def _parallel_signals_two(value: int):
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SemaphoreType.REGULAR(()),
                                                   plgpu.SemaphoreType.REGULAR(())])
    def kernel(x_ref, o_ref, sent, ready):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.semaphore_signal_parallel(plgpu.SemaphoreSignal(sent, device_id=None, inc=1),
                                            plgpu.SemaphoreSignal(ready, device_id=None, inc=1))

        @pl.when(wg == 1)
        def _():
            pl.semaphore_wait(ready, 1)
            pl.semaphore_wait(sent, value)
            o_ref[...] = x_ref[...]

    return kernel(jnp.zeros(TILE, jnp.float32))


def parallel_signals_to_two_semaphores():
    """Signals to two semaphores in no guaranteed order (semaphore_signal_parallel); the waiter
    waits for `ready`, then for `sent`, whichever landed first."""
    return _parallel_signals_two(1)


def parallel_signals_to_two_semaphores_one_short():
    """The waiter asks for two `sent` signals; one comes: a hang."""
    return _parallel_signals_two(2)
