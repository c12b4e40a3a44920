"""check --jobs N: protocols checked in N processes give the verdicts one process gives, in the
same order, through the same cache."""

import json

from test_cli import run_cli

PATHS = ["examples/cluster.py", "examples/handoff.py", "examples/hopper_ring.py"]


def _summary(out: str) -> list[tuple]:
    return [(v["source"], v["verdict"], v["states"], [d["code"] for d in v["diagnostics"]],
             v["trace"]["actions"] if v["trace"] else None) for v in json.loads(out)]


def test_parallel_verdicts_equal_sequential_ones_in_the_same_order(tmp_path):
    cache = str(tmp_path / "cache")
    code2, out2, err2 = run_cli("check", *PATHS, "--jobs", "2", "--format", "json",
                                "--cache-dir", cache)
    code1, out1, err1 = run_cli("check", *PATHS, "--jobs", "1", "--format", "json",
                                "--no-cache")
    assert code1 == code2 and "Traceback" not in err1 + err2
    assert _summary(out2) == _summary(out1)
    assert len(_summary(out1)) >= 8
    # the workers filled the cache the sequential run reads
    code, _, err = run_cli("check", *PATHS, "--jobs", "1", "--cache-dir", cache)
    assert code == code1 and "verdicts from the cache" in err
