"""The documentation: a README that gets a user to a first verdict (short, its set-up commands
first, its quickstarts run as printed) and a site under docs/ that mkdocs builds with every
warning an error."""

import os
import re
import subprocess
import sys

from conftest import ROOT

README = os.path.join(ROOT, "README.md")


def readme() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_readme_is_short_and_starts_with_the_two_set_up_commands():
    text = readme()
    assert len(text.splitlines()) <= 300
    install, suite = blocks(text, "bash")[:2]
    assert install.strip() == ('python3 -m pip install -e ".[pallas]" && '
                               'barrierproof check examples/ --expect')
    assert suite.startswith("bash .ci/run")
    # .ci/run ends with the test command the README names, word for word
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        last = [line for line in f.read().splitlines() if line.strip()][-1]
    assert suite.rstrip().endswith(f"then: {last}")
    for section in ("## Quickstart: a protocol in the DSL",
                    "## Quickstart: check your own Pallas kernel",
                    "## Gluon and CuTe DSL kernels", "## Reading a counterexample",
                    "## CI in ten minutes", "## Verdicts and exit codes"):
        assert section in text


def test_the_readme_quickstarts_print_what_the_readme_shows(tmp_path):
    """Each `# kernels/NAME.py` block written out as a user would, then the `$ barrierproof
    check ...` lines of the README run on it: their first output line is the one printed."""
    text = readme()
    written = []
    for block in blocks(text, "python"):
        first = block.splitlines()[0]
        if first.startswith("# kernels/"):
            path = tmp_path / first[2:].strip()
            path.parent.mkdir(exist_ok=True)
            path.write_text(block)
            written.append(path.name)
    assert written == ["ring.py", "handoff.py"]
    shown = re.findall(r"^\$ barrierproof (check [^\s#]+)[^\n]*\n(.*)$", text, re.M)
    assert len(shown) == 2
    for command, expected in shown:
        proc = subprocess.run([sys.executable, "-m", "barrierproof", *command.split(),
                               "--no-cache", "--expect"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=240)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.splitlines()[0] == expected


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", os.path.join(ROOT, "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "ci" / "index.html").exists()


def test_links_from_the_readme_into_docs_resolve():
    for target in re.findall(r"\]\((docs/[^)#]+)", readme()):
        assert os.path.exists(os.path.join(ROOT, target)), target


def test_the_docs_extra_brings_mkdocs_and_all_includes_it():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert any(dep.startswith("mkdocs") for dep in extras["docs"])
    assert "docs" in re.search(r"\[(.*)\]", extras["all"][0]).group(1).split(",")
