"""The loader asks each frontend of barrierproof/loader.py FRONTENDS whether a module attribute
is its own: a frontend added to the table is found without another change to the loader."""

import os
import textwrap

import pytest

from barrierproof import loader
from barrierproof.loader import FRONTENDS, Frontend, Target, claimant, resolve
from barrierproof.model.dsl import Protocol
from barrierproof.model.ir import ModelError
from barrierproof.model.samples import handoff

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _write(tmp_path, text: str, name: str = "kernels.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_each_example_folder_is_claimed_by_its_frontend():
    kinds = {f.name for f in FRONTENDS}
    assert kinds == {"dsl", "pallas", "gluon", "cute"}
    assert {t.kind for t in resolve(os.path.join(EXAMPLES, "handoff.py"))} == {"dsl"}
    assert claimant(handoff).name == "dsl"
    assert claimant(lambda: None).name == "pallas"      # any other function, asked last
    assert claimant(3) is None


def test_a_registered_frontend_is_asked_before_the_defaults(tmp_path, monkeypatch):
    """A new frontend is one row of the table: its objects are found by `::NAME` and by EXPECT."""
    path = _write(tmp_path, """
        class Recipe:
            pass
        soup = Recipe()
        EXPECT = {"soup": "verified"}
    """)

    def make(path, name, obj, expect):
        return Target(f"{path}::{name}", name, "", lambda: handoff.build(), expect, path)
    recipes = Frontend("recipe", lambda obj: type(obj).__name__ == "Recipe", make)
    monkeypatch.setattr(loader, "FRONTENDS", [recipes, *FRONTENDS])
    [named] = resolve(f"{path}::soup")
    [listed] = resolve(path)
    assert (named.kind, listed.kind, listed.expect) == ("recipe", "recipe", "verified")
    assert named.build().name == "handoff"


def test_an_object_no_frontend_claims_says_what_it_is_and_what_would_do(tmp_path):
    path = _write(tmp_path, "stages = 3\n\ndef kernel():\n    pass\n")
    with pytest.raises(ModelError) as err:
        resolve(f"{path}::stages")
    assert "kernels.py::stages is a value of type int, not a protocol or function" in str(err.value)
    assert "use @protocol or a zero-argument kernel function" in str(err.value)
    with pytest.raises(ModelError) as err:
        resolve(f"{path}::kernal")
    assert "has no protocol or kernel function named 'kernal'" in str(err.value)
    assert "available: kernel" in str(err.value)


@pytest.mark.parametrize("frontend", [f for f in FRONTENDS if f.frameworks],
                         ids=lambda f: f.name)
def test_a_missing_framework_names_its_frontends_extra(tmp_path, frontend):
    root = frontend.frameworks[0]
    path = _write(tmp_path, f"raise ModuleNotFoundError('No module named {root}', "
                            f"name='{root}.sub')\n", f"needs_{frontend.name}.py")
    with pytest.raises(ModelError) as err:
        resolve(path)
    assert err.value.hint == frontend.install and "pip install 'barrierproof[" in frontend.install


def test_a_protocol_is_found_once_under_two_names(tmp_path):
    path = _write(tmp_path, """
        from barrierproof.model.samples import handoff
        from barrierproof import protocol

        @protocol(expect="verified")
        def mine(k):
            k.threads(1)
        alias = mine
    """)
    found = resolve(path)
    assert [t.name for t in found] == ["mine"]
    assert isinstance(loader.import_file(path).alias, Protocol)
