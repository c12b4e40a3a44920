"""Helpers of the tests that prove protocols written to a file of their own: the file as a
module fixture, `prove`'s JSON report through the command line, and a kernel of the file."""

import json

import pytest

from barrierproof.cli import main
from barrierproof.loader import resolve


def source_file(text: str, name: str):
    """A module-scoped fixture: `text` written to a fresh file `name`, its path."""
    @pytest.fixture(scope="module")
    def source(tmp_path_factory):
        path = tmp_path_factory.mktemp(name.split(".")[0]) / name
        path.write_text(text)
        return str(path)
    return source


def prove(capsys, target: str, *extra: str):
    """`barrierproof prove TARGET --format json --no-cache`: the exit code and the report."""
    code = main(["prove", target, "--format", "json", "--no-cache", *extra])
    (report,) = json.loads(capsys.readouterr().out)
    return code, report


def build(path: str, name: str):
    """The kernel `name` of the file at `path`."""
    (target,) = resolve(f"{path}::{name}")
    return target.build()
