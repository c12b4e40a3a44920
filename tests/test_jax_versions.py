"""The Pallas frontend names the JAX versions it reads and refuses others with a clear error."""

import os

import pytest

from barrierproof.model import pallas
from barrierproof.model.ir import ModelError
from barrierproof.model.pallas.primitives import JAX_RANGE, TESTED_JAX, check_jax_version

from conftest import EXAMPLES

jax = pytest.importorskip("jax")


def test_the_installed_jax_is_tested_and_in_range():
    assert jax.__version__ in TESTED_JAX
    check_jax_version(jax.__version__)


@pytest.mark.parametrize("version", ["0.10.1", "0.9.0", "0.13.0", "1.0"])
def test_versions_outside_the_range_are_refused(version):
    with pytest.raises(ModelError) as err:
        check_jax_version(version)
    assert "0.10.2 <= jax < 0.13" in str(err.value) and version in str(err.value)


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0", "0.12.0.1", "0.10.3.dev20261101"])
def test_versions_inside_the_range_are_read(version):
    check_jax_version(version)


def test_the_extra_pins_the_same_range():
    root = os.path.dirname(EXAMPLES)
    with open(os.path.join(root, "pyproject.toml")) as f:
        text = f.read()
    low, high = (".".join(map(str, v)) for v in JAX_RANGE)
    assert f'"jax>={low},<{high}"' in text and f'"jaxlib>={low},<{high}"' in text


def test_loading_under_an_unknown_jax_fails_before_tracing(monkeypatch):
    monkeypatch.setattr(jax, "__version__", "0.9.0")
    with pytest.raises(ModelError) as err:
        pallas.load_target(os.path.join(EXAMPLES, "pallas", "handoff.py") + "::handoff")
    assert "outside the versions the Pallas frontend reads" in str(err.value)


# The Mosaic GPU primitives JAX 0.11.1 defines (jax/_src/pallas/mosaic_gpu/primitives.py), the
# newest release in the range: each must be in one of the frontend's tables, so a kernel traced
# under it never has synchronization silently dropped.
JAX_0_11_PRIMITIVES = """
async_copy_scales_to_tmem async_copy_smem_to_tmem async_copy_sparse_metadata_to_tmem async_load
async_prefetch async_store_smem async_store_tmem barrier_arrive barrier_test barrier_wait
commit_group commit_smem commit_tmem copy_gmem_to_smem copy_smem_to_gmem griddepcontrol_wait
inline_mgpu_p load mgpu_atomic_store mma multimem_load_reduce multimem_store print_layout
query_cluster_cancel semaphore_signal semaphore_signal_multicast semaphore_signal_parallel
semaphore_wait set_max_registers_p tcgen05_commit_arrive tcgen05_mma try_cluster_cancel
wait_gmem_to_smem wait_load_tmem wait_smem_to_gmem wgmma wgmma_accumulator_deref_p
wgmma_accumulator_store_p wgmma_ref wgmma_wait
""".split()


def test_every_primitive_of_the_newest_jax_in_range_is_classified():
    from barrierproof.model.pallas.primitives import LOCAL, MODELED, UNMODELED
    tables = [MODELED, LOCAL, UNMODELED]
    assert [n for n in JAX_0_11_PRIMITIVES if sum(n in t for t in tables) != 1] == []
    # the synchronizing ones are modelled, not merely recognised
    assert {"barrier_test", "async_store_smem", "semaphore_signal_multicast",
            "semaphore_signal_parallel", "try_cluster_cancel"} <= MODELED
