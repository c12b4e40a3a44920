"""JAX's own Mosaic GPU kernels (jax.experimental.pallas.ops.gpu, jax 0.10.2) at representative
configurations, traced on the CPU and checked by barrierproof.

Each function builds abstract inputs and calls the shipped kernel; barrierproof traces it (the
frontend supplies the GPU facts the kernels ask for: 132 SMs, a CUDA runtime version) and never
runs it. `SLOW` lists configurations whose check takes from half a minute to minutes (2-CTA
Blackwell kernels); they are in the docs table and the tests, not in `EXPECT` (which
`barrierproof check examples/` runs).

Findings (docs/): three kernels leave the last completions of a "slot released"
barrier unobserved when the kernel exits (Pallas rule 2, BP103): attention forward (the memory
warpgroup never waits for the final `k_consumed`/`v_consumed` completions; causal: the compute
warpgroups never wait for the last K/V loads they skip), and the Blackwell matmul and ragged dot
(the TMA warp never waits for the last MMAs' `consumed_barrier` completions, the MMA warp for the
last `store_done_barrier` ones). Harmless on the hardware because nothing arrives on those
barriers afterwards, but JAX's interpreter rejects it ("did not observe all phases") and it
becomes an overrun as soon as the barriers are reused. With BP103 ignored they verify, except
the 2-CTA Blackwell matmul with 3 tiles per block: block 1's MMA warp waits on
`store_done_barrier` without anything making it keep up (BP101; docs/jax-kernels.md).
Everything else is verified, the collective matmul with its cross-device semaphore (a global
counter every block signals once per device step, modelled in lockstep: every cluster of the grid
signals and waits alike, and the waits do not decrement).

Races (BP200, memory effects extracted from the jaxpr): ragged_dot and transposed_ragged_dot run
`emit_pipeline` with `delay_release=1` and a body that issues a WGMMA without `wgmma_wait`; the
pipeline refills the slot of step i-1 right after issuing step i's WGMMA, and nothing the
program states retires step i-1's WGMMA (still reading that slot) before the copy. They rely on
what transposed_ragged_dot's own comment calls "the implicit wait of wgmma" (consecutive WGMMAs
on one accumulator), an ordering outside the PTX memory model barrierproof checks. With BP200
ignored they verify. Every other kernel is race-free as far as its accesses are extracted.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention_mgpu as attention
from jax.experimental.pallas.ops.gpu import blackwell_matmul_mgpu as blackwell
from jax.experimental.pallas.ops.gpu import blackwell_ragged_dot_mgpu as blackwell_ragged
from jax.experimental.pallas.ops.gpu import collective_matmul_mgpu as collective
from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hopper
from jax.experimental.pallas.ops.gpu import hopper_mixed_type_matmul_mgpu as hopper_mixed
from jax.experimental.pallas.ops.gpu import ragged_dot_mgpu as ragged
from jax.experimental.pallas.ops.gpu import transposed_ragged_dot_mgpu as transposed_ragged

# collective_matmul checks jax.device_count() against its mesh of 2 devices.
DEVICE_FACTS = {"core_count": 132, "device_count": 2}

EXPECT = {
    "hopper_matmul": "verified",
    "hopper_matmul_cluster": "verified",
    "hopper_mixed_type_matmul": "verified",
    "attention_forward": "violation:BP103",
    "attention_forward_causal": "violation:BP103",
    "attention_backward": "verified",       # two kernels (dQ, dK/dV): each verified
    # and behind it BP105: the store warpgroup's last wait_smem_to_gmem(1) leaves the last
    # epilogue store reading acc_smem at the exit (hopper_matmul ends with a wait(0); this not)
    "blackwell_matmul": "violation:BP103",
    "ragged_dot": "violation:BP200",            # WGMMA read vs the delayed-release refill
    "transposed_ragged_dot": "violation:BP200",
    "collective_matmul": "verified",
}
SLOW = {"blackwell_ragged_dot": "violation:BP103",     # about 40 s
        # 3 tiles per block (the default): a BP101 on `store_done_barrier` (docs), met depth
        # first within seconds; confirming it shortest takes minutes
        "blackwell_matmul_collective": "violation:BP101"}
# blackwell_matmul_collective with one tile per block: BP103 like the 1-CTA kernel (the TMA warp
# never waits for the last MMAs' `consumed_barrier` completions)
ONE_TILE_PER_BLOCK = ({"trips_blackwell_matmul_mgpu_107": 1}, "violation:BP103")

F16 = jnp.float16
M, K, N = 512, 256, 512


def _zeros(shape, dtype=F16):
    return jnp.zeros(shape, dtype)


def hopper_matmul():
    """Warp-specialized Hopper matmul: 2 consumer warpgroups, 1 TMA producer, 2 stages."""
    cfg = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2)
    return hopper.matmul(_zeros((M, K)), _zeros((K, N)), None, cfg)


def hopper_matmul_cluster():
    """The same with a cluster of 2 along M: B tiles are multicast to both blocks."""
    cfg = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2,
                              cluster_dimension=hopper.MatmulDimension.M)
    return hopper.matmul(_zeros((M, K)), _zeros((K, N)), None, cfg)


def hopper_mixed_type_matmul():
    """int8 x bf16 -> bf16 Hopper matmul."""
    cfg = hopper_mixed.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2)
    return hopper_mixed.mixed_matmul_kernel(_zeros((M, K), jnp.int8),
                                            _zeros((K, N), jnp.bfloat16),
                                            out_dtype=jnp.bfloat16, config=cfg)


def _attention_config(causal=False):
    return attention.TuningConfig(block_q=64, block_kv=64, max_concurrent_steps=2, causal=causal,
                                  block_q_dkv=64, block_kv_dkv=64, block_q_dq=64,
                                  block_kv_dq=64)


def _qkv():
    return _zeros((1, 256, 2, 64))


def attention_forward():
    """FlashAttention-3 style forward: 2 compute warpgroups, 1 memory warpgroup, 4 KV steps."""
    q = _qkv()
    return attention.attention(q, q, q, _attention_config())


def attention_forward_causal():
    q = _qkv()
    return attention.attention(q, q, q, _attention_config(causal=True))


def attention_backward():
    """The backward pass (non-causal; causal is not implemented upstream): a dQ kernel and a
    dK/dV kernel, each a warp-specialized emit_pipeline."""
    q = _qkv()
    lse = jnp.zeros((1, 2, 256), jnp.float32)
    return attention._attention_bwd(_attention_config(), False, (q, q, q, q, lse), q)


def blackwell_matmul():
    """tcgen05 matmul with dynamic (cluster-cancel) scheduling, 1 CTA per MMA."""
    cfg = blackwell.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2,
                                 collective=False)
    return blackwell.matmul_kernel(_zeros((M, K)), _zeros((K, N)), cfg)


def blackwell_matmul_collective():
    """2-CTA tcgen05 matmul: leader-tracked partitioned TMA, multicast commits."""
    cfg = blackwell.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2,
                                 collective=True)
    return blackwell.matmul_kernel(_zeros((M, 128)), _zeros((128, N)), cfg)


def blackwell_ragged_dot():
    """Blackwell grouped matmul (upstream only traces with collective=True)."""
    cfg = blackwell_ragged.TuningConfig(
        tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2, collective=True,
        grid_tile_width=1, grid_minor_dim=blackwell.MatmulDimension.N)
    return blackwell_ragged.ragged_dot_kernel(_zeros((M, K)), _zeros((4, K, N)),
                                              jnp.full((4,), M // 4, jnp.int32), cfg)


def ragged_dot():
    """Hopper grouped matmul over 4 groups."""
    return ragged.ragged_dot(_zeros((M, K)), _zeros((4, K, N)),
                             group_sizes=jnp.full((4,), M // 4, jnp.int32), block_m=64,
                             block_n=64, block_k=64, max_concurrent_steps=2, grid_block_n=2)


def transposed_ragged_dot():
    """Hopper grouped matmul with ragged contraction: the K loop's length is data."""
    return transposed_ragged.transposed_ragged_dot(
        _zeros((M, K)), _zeros((M, K)), group_sizes=jnp.full((4,), M // 4, jnp.int32),
        block_m=64, block_n=64, block_k=64, max_concurrent_steps=2, grid_block_n=2)


def collective_matmul():
    """All-gather + matmul over 2 devices (shard_map): the Hopper matmul per device step; a
    global semaphore tells each device when the next shard of lhs has arrived."""
    from jax.sharding import AbstractMesh, AxisType, PartitionSpec as P
    cfg = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2)
    mesh = AbstractMesh((2,), ("x",), axis_types=(AxisType.Auto,))
    fn = jax.shard_map(
        lambda a, b: collective.all_gather_lhs_matmul(a, b, "x", config=cfg, dtype=F16),
        mesh=mesh, in_specs=(P("x", None), P(None, "x")), out_specs=P(None, "x"),
        check_vma=False)
    return fn(_zeros((2 * 256, K)), _zeros((K, 2 * 256)))
