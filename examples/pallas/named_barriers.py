"""Named barriers in Pallas Mosaic GPU kernels.

Pallas has no named-barrier primitive: kernels (JAX's own GPU kernels among them) emit
`bar.sync id, n` / `bar.arrive id, n` as inline PTX through `plgpu.inline_mgpu`, and Mosaic GPU's
`warpgroup_barrier()` is `bar.sync warpgroup + 1, 128`. JAX's interpreter runs none of them (it
knows only `Barrier` and `ClusterBarrier`); barrierproof reads the PTX a helper emits and checks
the named barrier with its code and line. A Pallas thread is a warpgroup: 128 threads.
"""

import jax
import jax.numpy as jnp
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import llvm
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

TILE = 128
ROUNDS = 2

EXPECT = {
    "warpgroups_hand_off": "verified",
    "arriver_exits_early": "violation:BP144",
    "aligned_sync_from_two_branches": "violation:BP141",
    "unaligned_sync_from_two_branches": "verified",
}


def named_barrier(operation: str, barrier_id: int, num_threads: int):
    """`bar.<operation> id, n;` as inline PTX (the aligned forms)."""
    @plgpu.inline_mgpu()
    def bar(_):
        llvm.inline_asm(ir.Type.parse("!llvm.void"), [],
                        f"bar.{operation} {barrier_id}, {num_threads};", "",
                        has_side_effects=True)

    bar()


def unaligned_sync(barrier_id: int, num_threads: int):
    """`barrier.sync id, n;`: participants may reach it from different instructions."""
    @plgpu.inline_mgpu()
    def bar(_):
        llvm.inline_asm(ir.Type.parse("!llvm.void"), [],
                        f"barrier.sync {barrier_id}, {num_threads};", "",
                        has_side_effects=True)

    bar()


def _two_warpgroups(body):
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((TILE,), jnp.float32), num_threads=2,
                  thread_name="wg")
    def kernel(x_ref, o_ref):
        body(jax.lax.axis_index("wg"))

    return kernel(jnp.zeros(TILE, jnp.float32))


def _hand_off(producer_waits: bool):
    """wg0 fills a buffer and arrives on named barrier 1; wg1 syncs on it, reads, and arrives on
    named barrier 2 to free the buffer, on which wg0 syncs before refilling it."""
    def body(wg):
        @pl.when(wg == 0)
        def _producer():
            @pl.loop(0, ROUNDS)
            def _(r):
                named_barrier("arrive", 1, 256)
                named_barrier("sync" if producer_waits else "arrive", 2, 256)

        @pl.when(wg == 1)
        def _consumer():
            @pl.loop(0, ROUNDS)
            def _(r):
                named_barrier("sync", 1, 256)
                named_barrier("arrive", 2, 256)

    return _two_warpgroups(body)


def warpgroups_hand_off():
    return _hand_off(producer_waits=True)


def arriver_exits_early():
    """wg0 only arrives on the `freed` barrier: it runs ahead, its two arrivals complete a phase
    of barrier 1 alone, and it exits while wg1 waits there for it (vllm#26026's pattern)."""
    return _hand_off(producer_waits=False)


def _two_branches(aligned: bool):
    def sync():
        if aligned:
            named_barrier("sync", 2, 256)
        else:
            unaligned_sync(2, 256)

    def body(wg):
        @pl.when(wg == 0)
        def _role_a():
            sync()

        @pl.when(wg == 1)
        def _role_b():
            sync()

    return _two_warpgroups(body)


def aligned_sync_from_two_branches():
    """Each role has its own aligned `bar.sync 2, 256`: one phase, two instructions."""
    return _two_branches(aligned=True)


def unaligned_sync_from_two_branches():
    """The fix: `barrier.sync 2, 256`, which participants may reach from different branches."""
    return _two_branches(aligned=False)
