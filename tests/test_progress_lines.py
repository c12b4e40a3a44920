"""`--progress` without a terminal: one line per window, never losing the latest phase.

The prover enters each phase once. A phase entered within the window of the line before it
(the short search's line, then the class proof's phases a second later) used to be dropped
for good, so a CI log showed the first phase for as long as the proof ran."""

from __future__ import annotations

import time

from barrierproof.runs import Progress as _Progress


def _lines(capsys, wanted, seconds=20.0):
    """stderr's lines once one of them contains `wanted` (or after `seconds`: the caller's
    assertion then fails with what was written)."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen += capsys.readouterr().err.splitlines()
        if any(wanted in line for line in seen):
            break
        time.sleep(0.02)
    return seen


def _phase(progress, name, spent=0.0):
    progress.callback({"phase": name, "spent": spent, "seconds": 60})


def test_a_phase_entered_within_the_window_is_written_when_it_opens(capsys, monkeypatch):
    monkeypatch.setattr(_Progress, "INTERVAL", 0.2)
    progress = _Progress(True, live=False)
    progress.label = "k"
    try:
        _phase(progress, "short search for breaking values")
        _phase(progress, "sampling class barriers", 0.04)
        _phase(progress, "candidate facts of class barriers", 0.07)   # the latest one
        lines = _lines(capsys, "candidate facts")
        assert lines[0] == "k: prove: short search for breaking values (0% of the --timeout 60 " \
                           "budget spent)"
        assert any("candidate facts of class barriers (7%" in line for line in lines), lines
        assert not any("sampling" in line for line in lines), lines     # one line per window
        # a phase that lasts is written again, with its time so far
        lines = _lines(capsys, "s in this phase")
        assert any(line.startswith("k: prove: candidate facts") and line.endswith(
            "s in this phase") for line in lines), lines
    finally:
        progress.stop()
    time.sleep(0.5)
    assert capsys.readouterr().err == ""        # nothing after stop


def test_state_lines_are_not_repeated(capsys, monkeypatch):
    monkeypatch.setattr(_Progress, "INTERVAL", 0.1)
    progress = _Progress(True, live=False)
    try:
        progress.callback({"states": 10, "depth": 2, "rate": 5.0})
        progress.callback({"states": 20, "depth": 3, "rate": 5.0})
        lines = _lines(capsys, "20 states")
        time.sleep(0.5)
        lines += capsys.readouterr().err.splitlines()
        assert lines == [": 10 states, depth 2, 5 states/s", ": 20 states, depth 3, 5 states/s"]
    finally:
        progress.stop()
