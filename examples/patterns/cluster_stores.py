"""Writes into a peer block's shared memory that complete a barrier there: `async_store_smem`
(st.async of registers into a block of the cluster, JAX's `plgpu.async_store_smem`) and
multicast TMA shares. The destination must still be alive when the bytes land: a block that
exits while a peer's delivery to it is in flight has its shared memory written after it is
gone (BP146)."""

from barrierproof import protocol


def _exchange(k, steps, acked: bool):
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 1)
    got = k.Barrier(num_arrivals=1)       # my buffer holds the peer's tile
    free = k.Barrier(num_arrivals=1)      # the peer has read the tile I stored into it
    peer = 1 - k.block("x")
    with k.loop(steps, name="i") as i:
        if acked:
            with k.when(i > 0):
                k.barrier_wait(free)
        k.async_store_smem(got.on(peer), bytes=1024)
        k.barrier_wait(got)
        if acked:
            with k.when(i < steps - 1):
                k.barrier_arrive(free.on(peer))


@protocol(expect="verified", symbolic=("steps",))
def exchange_through_peer_smem(k, steps=3):
    """Two blocks swap a tile every step with async_store_smem into each other's buffer; a
    block stores again only after the peer said (a remote arrive on `free`) that it read the
    last one, and the last step sends no acknowledgement into a block that may be gone."""
    _exchange(k, steps, acked=True)


@protocol(expect="violation:BP121")
def exchange_without_backpressure(k, steps=2):
    """No acknowledgement: a block stores its second tile into the peer while the peer's
    barrier is still open for the first one, which then receives two arrivals for its count
    of one (undefined behaviour on the hardware)."""
    _exchange(k, steps, acked=False)


def _multicast(k, peer_waits: bool):
    k.cluster(x=2)
    k.threads(1, name="wg")
    full = k.Barrier(num_arrivals=1)
    issued = k.Barrier(num_arrivals=1)
    with k.when(k.block("x") == 0):
        k.arrive_expect_tx(full, bytes=2048)
        k.tma_load(full, bytes=4096, collective_axes="x")
        k.arrive(issued.on(1))
        k.wait_parity(full, 0)
    with k.otherwise():
        k.wait_parity(issued, 0)
        k.arrive_expect_tx(full, bytes=2048)
        if peer_waits:
            k.wait_parity(full, 0)


@protocol(expect="violation:BP146")
def multicast_into_an_exited_block(k):
    """Block 0 multicasts a tile to both blocks, then tells block 1 it has issued it; block 1
    expects its share but never waits for it and exits, so the share can land in the shared
    memory of an exited block."""
    _multicast(k, peer_waits=False)


@protocol(expect="verified")
def multicast_waited_by_every_block(k):
    """The fix: every block waits for its share before it exits."""
    _multicast(k, peer_waits=True)
