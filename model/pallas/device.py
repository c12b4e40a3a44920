"""What kernels ask the (absent) GPU while they are traced on a CPU: SM count, CUDA version."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable

from ..ir import ModelError

DEFAULT_CORE_COUNT = 132          # H100 SXM; what the shipped kernels size their grids by


class _GpuDevice:
    """A stand-in for a GPU device: the real (CPU) device plus the facts kernels read."""

    def __init__(self, real, core_count: int):
        self._real = real
        self.core_count = core_count
        self.device_kind = "NVIDIA H100 80GB HBM3"
        self.platform = "gpu"

    def __getattr__(self, name):
        return getattr(self._real, name)


class _CudaVersions:
    """`jax._src.lib.cuda_versions` is None without CUDA; attention asks for the runtime."""

    @staticmethod
    def cuda_runtime_get_version() -> int:
        return 12090 + 1    # outside the 12.8.0 .. 12.9.0 window where causal attention is off


@contextlib.contextmanager
def device_facts(core_count: int = DEFAULT_CORE_COUNT, device_count: int | None = None):
    """Make `jax.devices()[0].core_count` (and friends) answer as on an H100, while tracing.

    Kernels size persistent grids by the SM count (`backend.get_default_device().core_count`,
    `jax.devices()[0].core_count`, `jax.local_devices()[0].core_count`) and attention checks the
    CUDA runtime version; on a CPU those facts are missing. Only the public lookups are patched,
    and only for the duration of the `with` block.
    """
    import jax
    import jax.extend.backend as jeb

    saved_devices, saved_local = jax.devices, jax.local_devices
    saved_default = jeb.get_default_device
    saved_count, saved_local_count = jax.device_count, jax.local_device_count
    jax.devices = lambda *a, **k: [_GpuDevice(d, core_count) for d in saved_devices(*a, **k)]
    jax.local_devices = lambda *a, **k: [_GpuDevice(d, core_count) for d in saved_local(*a, **k)]
    jeb.get_default_device = lambda: _GpuDevice(saved_default(), core_count)
    if device_count is not None:
        jax.device_count = lambda *a, **k: device_count
        jax.local_device_count = lambda *a, **k: device_count
    patched = []
    for name, module in list(sys.modules.items()):
        if (name.startswith("jax") and module is not None
                and getattr(module, "cuda_versions", 0) is None):
            module.cuda_versions = _CudaVersions
            patched.append(module)
    try:
        yield
    finally:
        jax.devices, jax.local_devices = saved_devices, saved_local
        jeb.get_default_device = saved_default
        jax.device_count, jax.local_device_count = saved_count, saved_local_count
        for module in patched:
            module.cuda_versions = None


def device_facts_of(fn: Callable) -> dict:
    """Device facts a target module declares for its kernels, e.g.
    `DEVICE_FACTS = {"core_count": 132, "device_count": 2}` (collective kernels check
    `jax.device_count()` against their mesh)."""
    facts = dict(getattr(fn, "__globals__", {}).get("DEVICE_FACTS", None) or {})
    unknown = set(facts) - {"core_count", "device_count"}
    if unknown:
        raise ModelError(f"DEVICE_FACTS has unknown keys {sorted(unknown)}",
                         hint="use core_count and device_count")
    return facts
