"""The built wheel holds everything the source tree runs with, and works installed on its own.

The package list and the package data are discovered from the layout (setup.py, pyproject.toml);
these tests build the wheel from a copy of the tree, compare its contents with the files the
source checkout imports and reads, and run every command from a virtual environment that has the
wheel and not the checkout.
"""

import glob
import os
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

from conftest import ROOT

# Top-level folders and the import package each one is in the wheel.
LAYOUT = {"barrierproof": "barrierproof", "model": "barrierproof/model",
          "checker": "barrierproof/checker"}
SKIP_DIRS = {"__pycache__", "build", ".barrierproof_cache"}


def expected_files() -> set[str]:
    """Wheel paths of every module and every run-time data file of the source tree."""
    files = set()
    for folder, package in LAYOUT.items():
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True) + \
                glob.glob(os.path.join(ROOT, folder, "**", "*.java"), recursive=True) + \
                glob.glob(os.path.join(ROOT, folder, "**", "*.c"), recursive=True):
            rel = os.path.relpath(path, os.path.join(ROOT, folder))
            files.add(f"{package}/{rel}")
    from barrierproof.resources import SCHEMA_FILE, specs_dir
    files |= {f"barrierproof/specs/{p.name}" for p in specs_dir().iterdir()
              if p.name.endswith(".tla")}
    files.add(f"barrierproof/{SCHEMA_FILE}")
    return files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    """The wheel built from a copy of the tree (a build writes build/ and *.egg-info)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "*.egg-info", "*.so",
                                                                 *SKIP_DIRS))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(tmp / "dist"), str(src)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    [built] = glob.glob(str(tmp / "dist" / "barrierproof-*.whl"))
    return built


def test_wheel_holds_every_module_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = expected_files()
    assert len([f for f in expected if f.startswith("barrierproof/checker/repair/")]) > 1
    assert len([f for f in expected if f.endswith(".tla")]) == 3
    assert expected - names == set()
    # The compiled exploration core: its source always, its module where pip had a compiler.
    if shutil.which("gcc") or shutil.which("cc"):
        assert [n for n in names if n.startswith("barrierproof/checker/engines/_core.")
                and n.endswith((".so", ".pyd"))], "the compiled core was not built"
    # Test-only code stays out of the package.
    assert not [n for n in names if n.startswith("tests/") or "crosscheck" in n]


def test_wheel_metadata_states_the_license(wheel):
    z = zipfile.ZipFile(wheel)
    [meta] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
    text = z.read(meta).decode()
    assert "License-Expression: Apache-2.0" in text or "License: Apache-2.0" in text
    assert any(n.endswith("licenses/LICENSE") or n.endswith("/LICENSE") for n in z.namelist())


@pytest.mark.slow
def test_every_command_runs_from_the_installed_wheel(wheel, tmp_path):
    """A venv with the wheel (its dependencies from this interpreter's site-packages, where the
    checkout is installed editable): the checkout must not be what runs."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = str(env_dir / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["JAX_PLATFORMS"] = "cpu"
    # --no-index: the declared dependency ranges must admit the versions the suite runs on.
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", wheel],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    work = tmp_path / "work"
    shutil.copytree(os.path.join(ROOT, "examples"), work / "examples")

    def run(*args):
        return subprocess.run([python, "-m", "barrierproof", *args], capture_output=True,
                              text=True, cwd=work, env=env, timeout=300)

    where = subprocess.run([python, "-c", "import barrierproof; print(barrierproof.__file__)"],
                           capture_output=True, text=True, cwd=work, env=env)
    assert where.stdout.startswith(str(env_dir)), where.stdout + where.stderr
    bug = "examples/handoff.py::wrong_arrival_count"
    steps = [(0, ["check", "examples/handoff.py::single_handoff",
                  "examples/pallas/handoff.py::handoff"]),
             (1, ["check", bug, "--format", "json", "-o", "report.json"]),
             (1, ["replay", "report.json", "--protocol", "examples/handoff.py"]),
             (0, ["prove", "examples/hopper_ring.py::tma_ring_single_step"]),
             (0, ["fix", bug]),
             (1, ["check", bug, "--fix"]),
             (0, ["tla", "examples/handoff.py::single_handoff", "-o", "tla"]),
             (0, ["tlc", "examples/handoff.py::single_handoff"]),
             (0, ["graph", "examples/handoff.py::single_handoff", "-o", "g.dot"])]
    for code, args in steps:
        proc = run(*args, *(["--no-cache"] if args[0] in ("check", "prove", "tlc") else []))
        assert (proc.returncode, "Traceback" in proc.stderr) == (code, False), \
            (args, proc.stdout[-2000:], proc.stderr[-2000:])
    assert (work / "tla" / "MBarrier.tla").is_file()
    assert "digraph" in (work / "g.dot").read_text()
