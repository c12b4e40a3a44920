"""model/built.py: a frontend's build of a user's function is done once per process while its
file is unchanged; each caller gets kernels of its own; errors are not kept; an edited file,
other arguments or a function with no source file are built again."""

import importlib.util

import pytest

from barrierproof.model.built import built_once
from barrierproof.model.ir import Kernel, ModelError, Param


def _function(path, text="def target():\n    return 1\n"):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"built_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.target


class Builds:
    """A build that counts its runs."""

    def __init__(self, fail=False):
        self.runs, self.fail = 0, fail

    def __call__(self):
        self.runs += 1
        if self.fail:
            raise ModelError(f"failed, run {self.runs}")
        return [Kernel("k", (), params={"n": Param("n", 2)})]


def test_the_same_function_and_file_is_built_once_and_each_caller_gets_its_own(tmp_path):
    fn, build = _function(tmp_path / "k.py"), Builds()
    first = built_once(fn, ("k", None), build)
    first[0].params["m"] = Param("m", 1)     # a caller changing its kernel changes no other's
    second = built_once(fn, ("k", None), build)
    assert build.runs == 1
    assert second[0] is not first[0] and list(second[0].params) == ["n"]
    assert second[0].body is first[0].body     # the frozen IR is shared, not copied


def test_other_arguments_or_an_edited_file_build_again(tmp_path):
    path = tmp_path / "k.py"
    fn, build = _function(path), Builds()
    built_once(fn, ("k", None), build)
    built_once(fn, ("k", "verified"), build)
    assert build.runs == 2
    path.write_text("def target():\n    return 2\n")
    built_once(fn, ("k", None), build)
    assert build.runs == 3
    built_once(fn, ("k", None), build)
    assert build.runs == 3


def test_an_error_is_not_kept(tmp_path):
    fn, build = _function(tmp_path / "k.py"), Builds(fail=True)
    for run in (1, 2):
        with pytest.raises(ModelError, match=f"run {run}"):
            built_once(fn, ("k", None), build)
    assert build.runs == 2


def test_a_function_without_a_source_file_is_built_every_time():
    space: dict = {}
    exec(compile("def target():\n    return 1\n", "<string>", "exec"), space)
    build = Builds()
    for _ in range(2):
        built_once(space["target"], ("k", None), build)
    assert build.runs == 2
