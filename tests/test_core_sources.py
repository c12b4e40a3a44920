"""A compiled core built from other C sources than the checkout's is not used
(checker/engines/core_sources.py): an editable install updated without a rebuild would feed the
old core a layout it no longer reads. A fraction of a second."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pytest

from barrierproof.checker.engines import compiled, core_sources

ENGINES = Path(core_sources.__file__).parent


def _fake_core(folder: Path, digest: str | None) -> types.SimpleNamespace:
    module = types.SimpleNamespace(__file__=str(folder / "_core.so"))
    if digest is not None:
        module.SOURCE_DIGEST = digest
    return module


@pytest.mark.skipif(not compiled.available(), reason="the compiled core is not built here")
def test_the_built_core_carries_the_digest_of_the_sources_beside_it():
    here = core_sources.digest(str(ENGINES))
    assert compiled._core.SOURCE_DIGEST == here or here is None   # a wheel ships no sources
    assert core_sources.stale(compiled._core) is None


def test_a_core_from_other_sources_is_stale_and_one_without_sources_is_not(tmp_path):
    for name in core_sources.SOURCES:
        shutil.copy(ENGINES / name, tmp_path / name)
    same = core_sources.digest(str(tmp_path))
    assert same == core_sources.digest(str(ENGINES))
    assert core_sources.stale(_fake_core(tmp_path, same)) is None
    # the sources changed after the build, or a build from before digests were baked in
    (tmp_path / "_por.c").write_text((tmp_path / "_por.c").read_text() + "\n/* changed */\n")
    for built in (same, None):
        why = core_sources.stale(_fake_core(tmp_path, built))
        assert why is not None and "pip install -e ." in why
    # no sources beside the binary (an installed wheel): nothing to compare
    (tmp_path / "_core.c").unlink()
    assert core_sources.digest(str(tmp_path)) is None
    assert core_sources.stale(_fake_core(tmp_path, "anything")) is None
