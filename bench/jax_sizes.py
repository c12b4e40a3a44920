"""examples/pallas/jax_kernels.py re-sized: the contraction (key/value) length of its kernels set
to one K, shared by the benchmarks that grow it (jax_growth.py) or fix it (jax_kernels_k1024.py)."""

from __future__ import annotations


def with_contraction(module, k: int, square: bool = False):
    """The example module with K = k (the attention's key/value length too). `square` makes the
    2-CTA Blackwell matmul k x k x k (the 1024^3 shape of JAX's own benchmark) instead of its
    example M and N."""
    module.K = k

    def qkv():
        return module._zeros((1, k, 2, 64))
    module._qkv = qkv

    def blackwell_matmul_collective():
        cfg = module.blackwell.TuningConfig(tile_m=128, tile_n=128, tile_k=64,
                                            max_concurrent_steps=2, collective=True)
        m, n = (k, k) if square else (module.M, module.N)
        return module.blackwell.matmul_kernel(module._zeros((m, k)), module._zeros((k, n)), cfg)
    module.blackwell_matmul_collective = blackwell_matmul_collective
    return module
