"""The documentation: a README that gets a user to a first verdict (short, its set-up commands
first, its quickstarts run as printed) and a site under docs/ that mkdocs builds with every
warning an error."""

import os
import re
import subprocess
import sys

import pytest

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
    assert install.strip() == ('python3 -m pip install -e ".[pallas,gluon,cute]" && '
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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as CI builds it: every warning (a broken link or anchor, a page left out of
    the nav) fails the build. (Not --quiet: it hides the warnings strict mode counts.)"""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", os.path.join(ROOT, "mkdocs.yml"), "-d", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_site_builds_with_warnings_as_errors(site):
    assert (site / "index.html").exists()
    assert (site / "ci" / "index.html").exists()


def test_links_from_the_readme_into_docs_resolve():
    for target in re.findall(r"\]\((docs/[^)#]+)", readme()):
        assert os.path.exists(os.path.join(ROOT, target)), target


def test_the_docs_extra_brings_mkdocs_and_all_includes_it():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert any(dep.startswith("mkdocs") for dep in extras["docs"])
    assert "docs" in re.search(r"\[(.*)\]", extras["all"][0]).group(1).split(",")


# -- a page per diagnostic code ----------------------------------------------------------------

RULES_DIR = os.path.join(ROOT, "docs", "rules")


def rule_pages() -> dict[str, str]:
    return {name[:-3]: open(os.path.join(RULES_DIR, name), encoding="utf-8").read()
            for name in os.listdir(RULES_DIR) if re.fullmatch(r"BP\d+\.md", name)}


def test_every_code_of_the_registry_has_its_page_and_no_page_is_stale():
    from barrierproof.checker.rules import RULES
    pages = rule_pages()
    assert set(pages) == set(RULES)
    with open(os.path.join(ROOT, "mkdocs.yml")) as f:
        nav = f.read()
    index = open(os.path.join(RULES_DIR, "index.md"), encoding="utf-8").read()
    for code, rule in RULES.items():
        page = pages[code]
        assert page.startswith(f"# {code}: {rule.name}\n"), code
        # the usual fix is the registry's help line, word for word
        assert rule.help[1:] in " ".join(page.split()), code
        assert f"rules/{code}.md" in nav and f"[{code}]({code}.md)" in index, code


def test_each_pages_example_gets_the_verdict_it_states(tmp_path):
    """The minimal example of every page, checked: its declared verdict (`expect=`) is what
    `check` answers, and it names the page's own code."""
    for code, page in rule_pages().items():
        (example,) = blocks(page, "python")
        expect = re.search(r'expect="([^"]+)"', example).group(1)
        assert expect.endswith(code) or (code == "BP190" and expect == "unknown"), code
        (tmp_path / f"{code.lower()}.py").write_text(example)
    proc = subprocess.run([sys.executable, "-m", "barrierproof", "check", str(tmp_path),
                           "--expect", "--no-cache", "--format", "json", "--jobs", "1"],
                          capture_output=True, text=True, timeout=300)
    import json
    verdicts = json.loads(proc.stdout)
    assert len(verdicts) == len(rule_pages())
    assert proc.returncode == 0, [(v["name"], v["verdict"], v["expected"]) for v in verdicts
                                  if not v["verdict"].startswith(v["expected"].split(":")[0])]
    unknown = [v for v in verdicts if v["verdict"] == "unknown"]
    assert [d["code"] for d in unknown[0]["diagnostics"]] == ["BP190"]


def test_sarif_rules_and_text_help_lines_point_at_the_pages():
    from barrierproof.checker.report.sarif import sarif_report
    from barrierproof.checker.report.text import text_report
    from barrierproof.checker.rules import DOCS_URL, docs_url
    import json
    with open(os.path.join(ROOT, "mkdocs.yml")) as f:
        assert f"site_url: {DOCS_URL}\n" in f.read()
    broken = _broken_handoff()
    sarif = json.loads(sarif_report([broken]))
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["BP100"]["helpUri"] == docs_url("BP100") == f"{DOCS_URL}rules/BP100/"
    assert f"(docs: {docs_url('BP100')})" in text_report([broken])


def _broken_handoff():
    from barrierproof import check_kernel
    from barrierproof.loader import resolve
    (target,) = resolve(os.path.join(ROOT, "examples", "handoff.py") + "::wrong_arrival_count")
    return check_kernel(target.build())


def test_a_help_uri_is_a_page_of_the_built_site(site):
    from barrierproof.checker.rules import DOCS_URL, RULES, docs_url
    for code in RULES:
        path = docs_url(code)[len(DOCS_URL):]
        assert (site / path / "index.html").exists(), code
