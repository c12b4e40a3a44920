"""Kernels that declare their shape family, for `barrierproof prove` over every size.

`@sizes(steps=("steps", 1))` says the argument `steps` may be any positive multiple of 1:
`prove` traces the function at several sizes, joins the traces into one IR whose trip counts
are expressions of `steps` (model/pallas/family.py) and proves it, or finds the smallest
breaking size and replays it by tracing the kernel again there. `check` traces the defaults.

EXPECT is what `check` says at the defaults; PROVE what `prove --ignore BP200,BP201` says for
every size (the barrier rules: races are not in the symbolic model).
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas.ops.gpu import attention_mgpu as attention
from jax.experimental.pallas.ops.gpu import blackwell_matmul_mgpu as blackwell
from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hopper

from barrierproof import sizes
from ring import SLOTS, _pipeline, ring as _ring

EXPECT = {
    "ring_any_steps": "verified",
    "guarded_ring_any_steps": "verified",
    "ring_any_size": "verified",
    "hopper_matmul_any_stages": "verified",
    "hopper_matmul_any_k": "verified",
    "hopper_matmul_cluster_any_k": "verified",
    "attention_forward_any_kv": "violation:BP103",
    "blackwell_matmul_any_k": "violation:BP103",
}

PROVE = {
    # the drain loop `pl.loop(steps - SLOTS, steps)` waits for a release of slot 1 that never
    # comes when steps == 1
    "ring_any_steps": "violation:BP100",
    # the family is the DSL ring's shape (hopper_ring.py::tma_ring with stages=2, one consumer),
    # its two concrete slots analysed at one representative slot
    "guarded_ring_any_steps": "proved",
    # the same ring with the slot count a size too: a ring of symbolic size, proved
    "ring_any_size": "proved",
    # joined over every K and every tile count: one tile proved (the tiles are separated by the
    # producer's drain), see docs/prove.md
    "hopper_matmul_any_k": "proved",
    # a pair of blocks: a block's consumers start a tile only when both producers have (their
    # first slot needs the other block's half of B), so one tile of the pair is proved
    # (tiles.py, conditions 5-7), its two slots as a ring of 2 at one representative slot
    "hopper_matmul_cluster_any_k": "proved",
    # stages a size too: the tile count stays fixed (2, not asked symbolic), and the kernel's
    # waits separate its tiles for every tile count, 2 among them, so one tile is proved
    # (tiles.py; `--symbolic tiles` too proves every tile count, tests/test_tiles.py)
    "hopper_matmul_any_stages": "proved",
    # the BP103 findings of jax_kernels.py, back at the smallest size (docs/prove.md)
    "attention_forward_any_kv": "violation:BP103",
    "blackwell_matmul_any_k": "violation:BP103",
}


@sizes(steps=("steps", 1))
def ring_any_steps(steps=4):
    """ring.py's double-buffered ring, whose drain assumes at least two steps."""
    return _ring(steps)


@sizes(steps=("steps", 1))
def guarded_ring_any_steps(steps=4):
    """The same ring with a drain of min(steps, SLOTS) iterations: right for every step count."""
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                @pl.when(i >= SLOTS)
                def _():
                    plgpu.barrier_wait(empty.at[i % SLOTS])
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[i % SLOTS], full.at[i % SLOTS])

            @pl.loop(max(steps - SLOTS, 0), steps)
            def _drain(i):
                plgpu.barrier_wait(empty.at[i % SLOTS])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % SLOTS])
                o_ref[i] = smem[i % SLOTS]
                plgpu.barrier_arrive(empty.at[i % SLOTS])

    return _pipeline(steps, body)


def _ring_any_slots(steps, slots):
    def body(x_ref, o_ref, smem, full, empty):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 1)
        def _producer():
            @pl.loop(0, steps)
            def _(i):
                @pl.when(i >= slots)
                def _():
                    plgpu.barrier_wait(empty.at[i % slots])
                plgpu.copy_gmem_to_smem(x_ref.at[i], smem.at[i % slots], full.at[i % slots])

            @pl.loop(max(steps - slots, 0), steps)
            def _drain(i):
                plgpu.barrier_wait(empty.at[i % slots])

        @pl.when(wg == 0)
        def _consumer():
            @pl.loop(0, steps)
            def _(i):
                plgpu.barrier_wait(full.at[i % slots])
                o_ref[i] = smem[i % slots]
                plgpu.barrier_arrive(empty.at[i % slots])

    return _pipeline(steps, body, slots=slots)


@sizes(steps=("steps", 1), slots=("slots", 1))
def ring_any_size(steps=4, slots=2):
    """The guarded ring for every step count and every number of slots (at least 2: one slot
    folds `i % slots` to 0, another program)."""
    if slots < 2:
        raise ValueError(f"{slots=}: a ring needs at least 2 slots")
    return _ring_any_slots(steps, slots)


@sizes(k_steps=("k", 64))
def hopper_matmul_any_k(k=256):
    """JAX's warp-specialized Hopper matmul (2 stages, 64-wide K tiles) for every K."""
    cfg = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2)
    return hopper.matmul(jnp.zeros((512, k), jnp.float16), jnp.zeros((k, 512), jnp.float16),
                         None, cfg)


@sizes(extra_steps=("extra_steps", 1), stages=("stages", 1))
def hopper_matmul_any_stages(extra_steps=2, stages=2):
    """The Hopper matmul for every stage count and every K of more K steps than stages
    (K = 64 * (stages + extra_steps)): one parameterised pipeline, no clamped stage count."""
    if stages < 2:
        raise ValueError(f"{stages=}: a pipeline of one stage is not this family")
    k = 64 * (stages + extra_steps)
    cfg = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=stages)
    return hopper.matmul(jnp.zeros((512, k), jnp.float16), jnp.zeros((k, 512), jnp.float16),
                         None, cfg)


@sizes(k_steps=("k", 64))
def hopper_matmul_cluster_any_k(k=256):
    """The same with a cluster of 2 along M (B tiles multicast to both blocks), for every K."""
    cfg = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2,
                              cluster_dimension=hopper.MatmulDimension.M)
    return hopper.matmul(jnp.zeros((512, k), jnp.float16), jnp.zeros((k, 512), jnp.float16),
                         None, cfg)


@sizes(kv_steps=("kv_seq", 64))
def attention_forward_any_kv(kv_seq=256):
    """JAX's FlashAttention-3 style forward (64-wide KV blocks, 2 stages) for every KV length."""
    cfg = attention.TuningConfig(block_q=64, block_kv=64, max_concurrent_steps=2)
    q = jnp.zeros((1, 256, 2, 64), jnp.float16)
    kv = jnp.zeros((1, kv_seq, 2, 64), jnp.float16)
    return attention.attention(q, kv, kv, cfg)


@sizes(k_steps=("k", 64))
def blackwell_matmul_any_k(k=256):
    """JAX's tcgen05 matmul with dynamic scheduling (1 CTA per MMA) for every K."""
    cfg = blackwell.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2,
                                 collective=False)
    return blackwell.matmul_kernel(jnp.zeros((512, k), jnp.float16),
                                   jnp.zeros((k, 512), jnp.float16), cfg)
