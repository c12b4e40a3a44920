"""The README's figures that a script produces are the script's: the JAX kernel table
(bench/jax_kernels_table.py; the fast rows are re-run here, seconds left out)."""

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import jax_kernels_table as table  # noqa: E402

README = os.path.join(ROOT, "README.md")


@pytest.mark.slow
def test_the_jax_kernel_table_is_what_the_script_produces():
    fresh = table.run([r for r in table.ROWS if not r.slow])
    assert table.compare(fresh, README) == []


def test_every_row_of_the_readme_table_has_a_script_row():
    assert set(table.readme_rows(README)) == {r.label for r in table.ROWS}


def test_the_comparison_sees_a_changed_figure():
    row = table.readme_rows(README)["hopper_matmul"]
    changed = [row[0], row[1], row[2], "231", row[4], "0.0 + 0.0"]
    (problem,) = table.compare([changed], README)
    assert "states explored is '231'" in problem
    assert table.compare([row], README) == []


def test_the_interpreter_corpus_counts():
    import re

    import test_pallas_confirm as corpus

    text = open(README).read()
    outcomes = [o for m in corpus.MODULES.values() for o in m.INTERPRETER.values()]
    total = int(re.search(r"(\d+) small kernels in `examples/pallas/`", text).group(1))
    runs = int(re.search(r"(\d+) of them run on JAX's GPU interpret mode", text).group(1))
    other = int(re.search(r"The other (\d+) \(WarpMesh", text).group(1))
    assert total == sum(len(m.EXPECT) for m in corpus.MODULES.values()) == len(outcomes)
    assert runs == sum(o != "unsupported" for o in outcomes)
    assert other == outcomes.count("unsupported")
