"""docs/ARCHITECTURE.md names the files and tables a change touches: each file it names exists,
and each `file.py` `TABLE` it names is defined in that file (a checklist that points at a
moved table would send the next change to the wrong place)."""

import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..")
TEXT = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
FOLDERS = "model|checker|barrierproof|tests|specs|docs|examples|bench"


def test_every_file_it_names_exists():
    named = set(re.findall(rf"`((?:{FOLDERS})/[\w/.-]*)`", TEXT))
    assert len(named) > 40
    missing = sorted(p for p in named if "BPxxx" not in p
                     and not os.path.exists(os.path.join(ROOT, p)))
    assert not missing, missing


def test_every_table_it_names_is_in_its_file():
    pairs = re.findall(r"`((?:model|checker|barrierproof)/[\w/]+\.py)` `(\w+)`", TEXT)
    assert ("barrierproof/loader.py", "FRONTENDS") in pairs
    assert ("checker/engine_registry.py", "ENGINES") in pairs
    for path, name in pairs:
        source = open(os.path.join(ROOT, path), encoding="utf-8").read()
        assert re.search(rf"^\s*(?:def |class )?{name}\b", source, re.M), (path, name)
