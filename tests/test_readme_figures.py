"""The documentation's figures that a script produces are the script's: the JAX kernel table
of docs/jax-kernels.md (bench/jax_kernels_table.py; the fast rows are re-run here, seconds left
out), the interpreter corpus counts and the repair summary (docs/repair.md)."""

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import jax_kernels_table as table  # noqa: E402

JAX_KERNELS = os.path.join(ROOT, "docs", "jax-kernels.md")
REPAIR = os.path.join(ROOT, "docs", "repair.md")


@pytest.mark.slow
def test_the_jax_kernel_table_is_what_the_script_produces():
    fresh = table.run([r for r in table.ROWS if not r.slow])
    assert table.compare(fresh, JAX_KERNELS) == []


def test_every_row_of_the_readme_table_has_a_script_row():
    assert set(table.readme_rows(JAX_KERNELS)) == {r.label for r in table.ROWS}


def test_the_comparison_sees_a_changed_figure():
    row = table.readme_rows(JAX_KERNELS)["hopper_matmul"]
    changed = [row[0], row[1], row[2], "231", row[4], "0.0 + 0.0"]
    (problem,) = table.compare([changed], JAX_KERNELS)
    assert "states explored is '231'" in problem
    assert table.compare([row], JAX_KERNELS) == []


def test_the_interpreter_corpus_counts():
    import re

    import test_pallas_confirm as corpus

    text = open(JAX_KERNELS).read()
    outcomes = [o for m in corpus.MODULES.values() for o in m.INTERPRETER.values()]
    total = int(re.search(r"(\d+) small kernels in `examples/pallas/`", text).group(1))
    runs = int(re.search(r"(\d+) of them run on JAX's GPU interpret mode", text).group(1))
    other = int(re.search(r"The other (\d+) \(WarpMesh", text).group(1))
    assert total == sum(len(m.EXPECT) for m in corpus.MODULES.values()) == len(outcomes)
    assert runs == sum(o != "unsupported" for o in outcomes)
    assert other == outcomes.count("unsupported")


def test_the_repair_figures_are_those_of_bench_repair_md():
    """The repair page's sentence quotes the summary bench/bench_repair.py wrote."""
    import re

    summary = open(os.path.join(ROOT, "bench", "REPAIR.md")).read()
    buggy = int(re.search(r"buggy examples: (\d+)", summary)[1])
    fixed = int(re.search(r"with a verified suggestion: (\d+)/", summary)[1])
    sibling, first, some = map(int, re.search(
        r"with a correct sibling: (\d+); first suggestion matches it: (\d+)/\d+; some "
        r"suggestion matches: (\d+)/", summary).groups())
    text = " ".join(open(REPAIR).read().split())
    assert f"{fixed} of the {buggy} buggy examples got a verified fix" in text
    assert (f"of the {sibling} with a correct sibling, the first suggestion is exactly the "
            f"sibling's protocol for {first} (some suggestion for {some})") in text
