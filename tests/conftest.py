import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ci_mode import pytest_runtest_makereport  # noqa: E402,F401  (a skip fails when CI is set)
