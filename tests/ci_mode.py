"""CI mode: when the environment variable CI is set, a skipped test is a failed test.

Tests of external engines (TLC needs Java, the report tests need Chromium, the interpreter tests
need JAX) skip on a developer machine that lacks them; in CI the same absence must fail the run,
or a green build could mean "nothing was checked"."""

import os

import pytest

IN_CI = bool(os.environ.get("CI"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI={os.environ['CI']!r}), which counts as a failure: " \
                          f"{reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module-level skip (`pytest.importorskip`, `pytest.skip(allow_module_level=True)`)
    skips at collection, before any test item exists: in CI it fails too."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"module skipped in CI (CI={os.environ['CI']!r}), which counts as a " \
                          f"failure: {reason}"
