"""bench/prove_units.py, the script SYMBOLIC.md's per-phase units come from: it runs what
`prove` runs (the same verdict as the command line's), prints the units at the start of every
phase in order, and gives the same figures run after run (units are counted, not timed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

TARGET = "examples/persistent.py::persistent_ring"


def _units_run() -> list[str]:
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "prove_units.py"), TARGET,
                          "--timeout", "60"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_phases_in_order_the_cli_verdict_and_the_same_units_twice():
    first = _units_run()
    phases = [line for line in first if line.startswith(" ") and "M  " in line]
    units = [float(line.split("M", 1)[0]) for line in phases]
    assert len(units) >= 5 and units == sorted(units), first
    assert any("Houdini on class" in line for line in phases), first
    verdict_line = next(line for line in first if line.startswith(TARGET))
    cli = subprocess.run([sys.executable, "-m", "barrierproof", "prove", TARGET, "--timeout",
                          "60", "--no-cache", "--format", "json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    (result,) = json.loads(cli.stdout)
    assert verdict_line.startswith(f"{TARGET}: {result['verdict']},"), (verdict_line, result)
    assert result["verdict"] == "proved"
    again = _units_run()       # the coverage line after the verdict names seconds: not compared
    assert again[:len(phases) + 1] == first[:len(phases) + 1]
