import gc
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ci_mode import (pytest_make_collect_report,  # noqa: E402,F401  (a skip fails when CI is set)
                     pytest_runtest_makereport)

# A CI gate must not fail on an input no run has drawn before: under CI the property tests draw
# the same examples every run (locally they keep drawing new ones).
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    _hypothesis_settings.load_profile("ci")

# TLC runs in these tests are small (seconds) and many: HotSpot's optimizing compiler costs more
# CPU than it saves on them, so the suite runs the JVM with the quick compiler only. Same TLC,
# same results; a user's long run keeps the JVM's defaults.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests marked `slow` are handed out first (stable order
    otherwise): a minute-long test started last keeps one worker busy while the other idles.
    (loadgroup hands out the xdist groups first, largest first, then single tests in this
    order.) A run on one process keeps the files' order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """Collection imports every test module (JAX, Triton, the example kernels: some 400,000
    objects that live to the end of the run). The cyclic garbage collector is paused while they
    are made and they are then frozen out of its scans: each full collection during the tests
    would otherwise walk all of them again. Collection only; every test runs with the collector
    on as before."""
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


def pytest_unconfigure(config):
    # back under the collector for the interpreter's exit (Triton's bindings report objects
    # still alive then as leaks)
    gc.unfreeze()
