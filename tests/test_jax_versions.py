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
