"""bench/NVIDIA_CHECKER.md is what bench/nvidia_checker.py measures: every fast row of the side
by side table re-run here (NVIDIA's exhaustive checker on the task-scheduling form, its
structural checks, barrierproof `check` on the CuTe form), states and verdicts compared exactly,
seconds left out. The rows where NVIDIA's checker runs to its state bound and the `prove` table
are the script's alone (minutes). About 20 s: four CuTe targets compiled on the CPU."""

import os
import sys

import pytest

pytest.importorskip("cutlass.experimental.task_scheduling.exhaustive_checker")

from conftest import ROOT  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
import nvidia_checker as bench  # noqa: E402

WRITTEN = os.path.join(ROOT, "bench", "NVIDIA_CHECKER.md")


def test_every_row_of_the_table_is_a_row_of_the_script():
    written = bench.table_rows(WRITTEN)
    assert [(r[0], int(r[1]), int(r[2])) for r in written] == \
        [(r.pair, r.tiles, r.k_tiles) for r in bench.ROWS]


def test_the_fast_rows_measure_what_the_table_says():
    fast = [r for r in bench.ROWS if not r.slow]
    fresh = bench.measure(fast)
    written = {(r[0], r[1], r[2]): r for r in bench.table_rows(WRITTEN)}
    for cells in fresh:
        assert bench.without_seconds(cells) == \
            bench.without_seconds(written[tuple(cells[:3])]), cells[:3]


def test_each_pair_gets_the_verdicts_the_example_declares():
    """The CuTe form's declared verdict (EXPECT) is the one barrierproof answers in the table,
    at every size; the correct pair is safe for NVIDIA's checker wherever it completes."""
    from barrierproof.loader import import_file
    expect = import_file(bench.TWINS).EXPECT
    for cells in bench.table_rows(WRITTEN):
        pair = bench.PAIRS[cells[0]]
        assert cells[9] == expect[pair.cute], cells[:3]
        if pair.label in ("correct", "tutorial GEMM"):
            assert cells[5] == "safe" or cells[5].startswith("bounded"), cells[:3]


def test_the_bound_is_the_one_taskmanager_uses():
    """TaskManager passes no max_states: the checker's default is the bound the table names."""
    import inspect

    from cutlass.experimental.task_scheduling.task_manager import TaskManager
    source = inspect.getsource(TaskManager._exhaustive_aliasing_races)
    assert "max_states" not in source.split("check_all_interleavings(", 1)[1].split(")")[0]
    with open(WRITTEN) as f:
        assert f"max_states={bench.nvidia_max_states():,}" in f.read()


def test_the_readme_quotes_the_table():
    """README's comparison table: NVIDIA's bound and the size that reaches it, barrierproof's
    states there, and the never-released accumulator's tile counts, all from the table."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = " ".join(f.read().split())
    fig = bench.facts(bench.table_rows(WRITTEN))
    assert f"up to {bench.nvidia_max_states():,} states (reached at {fig['bound_at']}:" in readme
    assert f"all (`check`: {fig['bound_bp_states']} states at {fig['bound_at']})" in readme
    assert (f"an accumulator never released: safe at {fig['never_safe']} tiles, a deadlock from "
            f"{fig['never_deadlock']})") in readme
    assert fig["never_bp"] == "violation:BP100"
    assert f"the accumulator never released: a deadlock at {fig['never_bp_tiles']} tile)" in readme
