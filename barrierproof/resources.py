"""The data files barrierproof reads at run time, found through importlib.resources.

They ship in the wheel as package data (pyproject.toml): the TLA+ library modules every emitted
spec EXTENDS (specs/*.tla, the package `barrierproof.specs`) and the JSON report's schema.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

SCHEMA_FILE = "barrierproof-report.schema.json"


def specs_dir() -> Traversable:
    """The folder of MBarrier.tla and its siblings."""
    try:
        return resources.files("barrierproof.specs")
    except ModuleNotFoundError:
        # A source checkout imported without installing it (PYTHONPATH) maps only the three code
        # packages; its specs/ folder stands beside barrierproof/.
        return Path(str(resources.files("barrierproof"))).parent / "specs"


def report_schema() -> dict:
    """The JSON Schema of `check --format json` (a list of verdict objects)."""
    return json.loads((resources.files("barrierproof") / SCHEMA_FILE).read_text())
