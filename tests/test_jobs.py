"""check --jobs N: protocols checked in N processes give the verdicts one process gives, in the
same order, through the same cache."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT
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


def _workers_started(pid: int) -> bool:
    """A pool worker of `pid` exists (spawned: its command line runs spawn_main)."""
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return False
    for child in children:
        try:
            if b"spawn_main" in open(f"/proc/{child}/cmdline", "rb").read():
                return True
        except OSError:
            pass
    return False


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
@pytest.mark.parametrize("after,group", [(0.0, True), (0.1, False), (0.25, True)])
def test_ctrl_c_while_the_workers_start_prints_no_traceback(tmp_path, after, group):
    """A terminal's Ctrl-C (SIGINT to the whole process group), or a SIGINT to barrierproof
    alone, while the workers are still importing: no worker's KeyboardInterrupt traceback, the
    report is written, exit 2. About 1 s each."""
    report = tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", *PATHS, "--jobs",
                             "2", "--no-cache", "--format", "json", "-o", str(report)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not _workers_started(proc.pid) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, "the run ended before its workers started"
        time.sleep(after)
        (os.killpg if group else os.kill)(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode == 2, err
    verdicts = json.loads(report.read_text())
    assert len(verdicts) >= 8 and any("interrupted" in (v.get("coverage") or "")
                                      for v in verdicts), verdicts
