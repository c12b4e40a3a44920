"""pytest plugin: protocol and kernel files as test items, each with its declared verdict.

Opt in with `pytest --barrierproof` or `barrierproof = true` under `[tool.pytest.ini_options]`
(off by default, so installing barrierproof changes no one's test run). Then every `.py` file
pytest is pointed at that `barrierproof check DIR` would import (it declares `@protocol` or a
module-level `EXPECT`; never `test_*.py`, `conftest.py` or `_private.py`) becomes a collector,
and each protocol or EXPECT-named kernel function an item:

    $ pytest --barrierproof kernels/
    kernels/ring.py::ring PASSED
    kernels/old_bugs.py::ring_without_drain PASSED     (declares violation:BP103, and is)

An item runs exactly `barrierproof check PATH::NAME` in this process ([tool.barrierproof] in
pyproject.toml applies: params, select, ignore, limits, cache; suppressions too). It passes when
the verdict is the one the target declares (`expect=` / EXPECT), or, with none declared, when it
is `verified` or `proved`; a failure's message is the text report with the counterexample.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from .collect import collected
from .loader import resolve
from .model.ir import ModelError


def pytest_addoption(parser) -> None:
    group = parser.getgroup("barrierproof")
    group.addoption("--barrierproof", action="store_true", default=False,
                    help="collect @protocol / EXPECT files as tests, one item per target, "
                         "passing when the verdict is the declared one")
    parser.addini("barrierproof", type="bool", default=False,
                  help="collect @protocol / EXPECT files as tests (as --barrierproof)")


def _enabled(config) -> bool:
    return bool(config.getoption("barrierproof") or config.getini("barrierproof"))


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix != ".py" or not _enabled(parent.config):
        return None
    root = parent.config.rootpath
    base = root if file_path.is_relative_to(root) else file_path.parent
    if not collected(file_path, base):
        return None
    return ProtocolFile.from_parent(parent, path=file_path)


def _ref_path(path: Path) -> str:
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


class ProtocolFile(pytest.File):
    def collect(self):
        try:
            targets = resolve(_ref_path(self.path))
        except ModelError as err:       # the file does not import: one failing item says why
            yield LoadError.from_parent(self, name=self.path.name, error=str(err))
            return
        for target in targets:
            yield TargetItem.from_parent(self, name=target.name, ref=target.ref,
                                         expect=target.expect)


class BarrierproofFailure(Exception):
    """A target's verdict is not the one it declares."""


class TargetItem(pytest.Item):
    def __init__(self, *, ref: str, expect: str | None, **kwargs):
        super().__init__(**kwargs)
        self.ref = ref
        self.expect = expect
        self.user_properties.append(("expected", expect or "verified"))

    def runtest(self) -> None:
        from .cli import main
        with tempfile.TemporaryDirectory() as out:
            report, text = os.path.join(out, "report.json"), os.path.join(out, "report.txt")
            argv = ["check", self.ref, "-q", "--jobs", "1", "-o", f"json={report}",
                    "-o", f"text={text}"] + (["--expect"] if self.expect else [])
            code = main(argv)
            verdicts = json.load(open(report)) if os.path.exists(report) else []
            printed = open(text).read() if os.path.exists(text) else ""
        for v in verdicts:
            self.user_properties.append(("verdict", v["verdict"]))
        if code != 0:
            raise BarrierproofFailure(
                f"{self.ref}: " + ", ".join(_label(v) for v in verdicts)
                + (f", declared {self.expect}" if self.expect else ", not verified or proved")
                + f" (exit {code})\n\n{printed}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, BarrierproofFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"{self.ref} [{self.expect or 'verified'}]"


def _label(v: dict) -> str:
    codes = [d["code"] for d in v["diagnostics"]]
    return v["verdict"] + (f":{codes[0]}" if v["verdict"] in ("violation", "error") and codes
                           else "")


class LoadError(pytest.Item):
    def __init__(self, *, error: str, **kwargs):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise BarrierproofFailure(self.error)

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, None, f"{self.path.name} (not loaded)"
