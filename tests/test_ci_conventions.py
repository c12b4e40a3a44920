"""CI conventions: several reports from one run, GitHub annotations, suppressions on a line and
on a protocol (reported, never silent), --exclude, --exit-zero, --statistics, -q, and the pytest
plugin that runs protocol files as tests."""

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from barrierproof.cli import main
from barrierproof.checker.report.github import annotation, escape_data, escape_property

from conftest import ROOT

RING = '''
from barrierproof import protocol

@protocol(expect="{expect}"{extra})
def {name}(k, steps=2):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1){comment}
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i >= 1):
                k.barrier_wait(empty)
            k.barrier_arrive(full)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(full)
            k.barrier_arrive(empty)
'''
# The finding of the undrained ring: BP103 at the allocation of `empty` (line 8 of RING).
EMPTY_LINE = 8

GOOD = '''
from barrierproof import protocol

@protocol(expect="verified")
def handoff(k):
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(ready)
    with k.otherwise():
        k.barrier_wait(ready)
'''


def ring(name="ring", expect="violation:BP103", extra="", comment=""):
    return RING.format(name=name, expect=expect, extra=extra, comment=comment)


def run(capsys, tmp_path, monkeypatch, *argv):
    monkeypatch.chdir(tmp_path)
    code = main(["check", *argv, "--no-cache", "--no-config", "--jobs", "1"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "good.py").write_text(GOOD)
    (tmp_path / "k" / "bad.py").write_text(ring())
    return tmp_path


# -- one run, several reports ------------------------------------------------------------------

def test_one_run_writes_console_sarif_junit_github_and_json(project, capsys, monkeypatch):
    code, out, err = run(capsys, project, monkeypatch, "k", "-o", "sarif=r/bp.sarif",
                         "-o", "junit=r/bp.xml", "-o", "github=r/bp.gh", "-o", "json=r/bp.json")
    assert code == 3 and "r/bp.sarif" in err      # the directory must exist: checked up front
    (project / "r").mkdir()
    code, out, err = run(capsys, project, monkeypatch, "k", "-o", "sarif=r/bp.sarif",
                         "-o", "junit=r/bp.xml", "-o", "github=r/bp.gh", "-o", "json=r/bp.json")
    assert code == 1
    assert "k/bad.py::ring: violation:BP103" in out and "2 checked:" in out   # the console
    sarif = json.loads((project / "r" / "bp.sarif").read_text())
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "BP103"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == EMPTY_LINE
    suite = ET.parse(project / "r" / "bp.xml").getroot()
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    (line, summary) = (project / "r" / "bp.gh").read_text().splitlines()
    assert line.startswith(f"::error file=k/bad.py,line={EMPTY_LINE},title=BP103 ")
    assert summary.startswith("2 checked:")
    assert [v["verdict"] for v in json.loads((project / "r" / "bp.json").read_text())] == \
        ["violation", "verified"]


def test_a_plain_output_path_takes_the_console_report_as_before(project, capsys, monkeypatch):
    code, out, _ = run(capsys, project, monkeypatch, "k", "--format", "json", "-o", "x.json")
    assert code == 1 and out == ""
    assert len(json.loads((project / "x.json").read_text())) == 2


@pytest.mark.parametrize("argv, says", [
    (["-o", "sarif="], "no path after sarif="),
    (["-o", "a.txt", "-o", "json=a.txt"], "names a.txt twice"),
])
def test_bad_output_values_are_input_errors(project, capsys, monkeypatch, argv, says):
    code, out, err = run(capsys, project, monkeypatch, "k", *argv)
    assert code == 3 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# -- GitHub annotations ------------------------------------------------------------------------

def test_github_escaping_follows_the_workflow_command_rules():
    assert escape_data("100% of\r\nit") == "100%25 of%0D%0Ait"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = annotation("error", "x::warning::y\nz", "BP100 a,b", "dir/we,ird:name.py:12")
    assert line == ("::error file=dir/we%2Cird%3Aname.py,line=12,title=BP100 a%2Cb::"
                    "x::warning::y%0Az")
    assert "\n" not in line


def test_github_format_marks_expected_findings_as_notices(project, capsys, monkeypatch):
    code, out, _ = run(capsys, project, monkeypatch, "k", "--format", "github", "--expect")
    assert code == 0
    (note, summary) = out.splitlines()
    assert note.startswith(f"::notice file=k/bad.py,line={EMPTY_LINE},title=BP103 ")
    assert "(as expected)" in note and summary.endswith("2/2 as expected")


# -- suppressions ------------------------------------------------------------------------------

def test_a_comment_on_the_findings_line_suppresses_it_and_is_reported(project, capsys,
                                                                        monkeypatch):
    (project / "k" / "bad.py").write_text(
        ring(expect="verified", comment="  # barrierproof: ignore[BP103]"))
    (project / "r").mkdir()
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", "-o", "json=r/bp.json",
                       "-o", "sarif=r/bp.sarif", "-o", "junit=r/bp.xml", "-o", "github=r/bp.gh",
                       "-o", "html=r/bp.html", "--expect")
    assert code == 0
    assert f"note: suppressed: BP103 [unobserved-completion] at k/bad.py:{EMPTY_LINE} by " \
           "# barrierproof: ignore[BP103]" in out
    assert out.rstrip().endswith("1/1 as expected; 1 finding(s) suppressed")
    (v,) = json.loads((project / "r" / "bp.json").read_text())
    assert v["verdict"] == "verified"
    assert [(s["code"], s["location"], s["by"]) for s in v["suppressed"]] == \
        [("BP103", f"k/bad.py:{EMPTY_LINE}", "# barrierproof: ignore[BP103]")]
    (result,) = json.loads((project / "r" / "bp.sarif").read_text())["runs"][0]["results"]
    assert result["suppressions"] == [{"kind": "inSource",
                                       "justification": "# barrierproof: ignore[BP103]"}]
    assert "suppressed: BP103" in (project / "r" / "bp.xml").read_text()
    # both stay valid against their schemas with the suppression in them
    import jsonschema
    from barrierproof.resources import report_schema
    jsonschema.Draft202012Validator(report_schema()).validate(
        json.loads((project / "r" / "bp.json").read_text()))
    with open(os.path.join(ROOT, "tests", "data", "sarif-schema-2.1.0.json")) as f:
        jsonschema.Draft4Validator(json.load(f)).validate(
            json.loads((project / "r" / "bp.sarif").read_text()))
    assert (project / "r" / "bp.gh").read_text().startswith("::notice file=k/bad.py,line=8,")
    assert "suppressed: BP103" in (project / "r" / "bp.html").read_text()


@pytest.mark.parametrize("comment", ["  # barrierproof: ignore[BP100]",   # another code
                                     ""])
def test_a_comment_for_another_code_or_line_suppresses_nothing(project, capsys, monkeypatch,
                                                                comment):
    source = ring(comment=comment)
    if not comment:     # the right code, on the line after the finding's
        lines = source.splitlines()
        lines[EMPTY_LINE] += "  # barrierproof: ignore[BP103]"
        source = "\n".join(lines) + "\n"
    (project / "k" / "bad.py").write_text(source)
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py")
    assert code == 1 and "violation:BP103" in out and "suppressed" not in out


def test_a_comment_naming_an_unknown_code_is_an_input_error(project, capsys, monkeypatch):
    (project / "k" / "bad.py").write_text(ring(comment="  # barrierproof: ignore[BP999]"))
    code, _, err = run(capsys, project, monkeypatch, "k/bad.py")
    assert code == 3 and "'BP999', which is not a diagnostic code" in err


def test_a_suppression_silences_one_finding_and_the_next_is_still_reported(project, capsys,
                                                                           monkeypatch):
    """Suppressing the exit finding of a ring that also deadlocks leaves the deadlock."""
    source = ring(comment="  # barrierproof: ignore[BP103]").replace(
        "full = k.Barrier(num_arrivals=1)", "full = k.Barrier(num_arrivals=2)")
    (project / "k" / "bad.py").write_text(source)
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py")
    assert code == 1 and "violation:BP100" in out


# Two undrained barriers: BP103 twice, at the allocations of `done` and `left`, in one state.
TWO_UNDRAINED = '''
from barrierproof import protocol

@protocol(expect="violation:BP103")
def undrained(k):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=1){done}
    left = k.Barrier(num_arrivals=1){left}
    with k.when(k.thread == 0):
        k.barrier_arrive(full)
    with k.otherwise():
        k.barrier_wait(full)
        k.barrier_arrive(done)
        k.barrier_arrive(left)
'''
DONE_LINE, LEFT_LINE = 8, 9
# Two producers that overrun their consumers: BP101 at two arrivals, on different schedules.
TWO_OVERRUNS = '''
from barrierproof import protocol

@protocol(expect="violation:BP101")
def overruns(k):
    k.threads(4, name="wg")
    a = k.Barrier(num_arrivals=1)
    b = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(2):
            k.barrier_arrive(a){a}
    with k.when(k.thread == 1):
        with k.loop(2):
            k.barrier_wait(a)
    with k.when(k.thread == 2):
        with k.loop(2):
            k.barrier_arrive(b){b}
    with k.when(k.thread == 3):
        with k.loop(2):
            k.barrier_wait(b)
'''
A_LINE, B_LINE = 11, 17
IGNORE = "  # barrierproof: ignore[{}]"


def test_a_comment_silences_its_line_only_and_the_same_code_elsewhere_still_fails(
        project, capsys, monkeypatch):
    (project / "k" / "bad.py").write_text(
        TWO_UNDRAINED.format(done=IGNORE.format("BP103"), left=""))
    (project / "r").mkdir()
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", "-o", "json=r/bp.json",
                       "-o", "sarif=r/bp.sarif")
    assert code == 1
    assert f"k/bad.py:{LEFT_LINE}: BP103" in out and "replayed on the interpreter" in out
    assert f"suppressed: BP103 [unobserved-completion] at k/bad.py:{DONE_LINE} by " \
           "# barrierproof: ignore[BP103]; that place only" in out
    (v,) = json.loads((project / "r" / "bp.json").read_text())
    assert [(d["code"], d["location"]) for d in v["diagnostics"]] == \
        [("BP103", f"k/bad.py:{LEFT_LINE}")]
    assert v["trace"]["violation"]["code"] == "BP103"
    assert [(s["code"], s["location"]) for s in v["suppressed"]] == \
        [("BP103", f"k/bad.py:{DONE_LINE}")]
    results = json.loads((project / "r" / "bp.sarif").read_text())["runs"][0]["results"]
    lines = {r["locations"][0]["physicalLocation"]["region"]["startLine"]: r for r in results}
    assert sorted(lines) == [DONE_LINE, LEFT_LINE]
    assert "suppressions" in lines[DONE_LINE] and "suppressions" not in lines[LEFT_LINE]


def test_a_comment_on_each_finding_passes_and_reports_both(project, capsys, monkeypatch):
    (project / "k" / "bad.py").write_text(TWO_UNDRAINED.format(
        done=IGNORE.format("BP103"), left=IGNORE.format("BP103")).replace(
        'expect="violation:BP103"', 'expect="verified"'))
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", "--expect")
    assert code == 0
    assert out.rstrip().endswith("1/1 as expected; 2 finding(s) suppressed")
    for line in (DONE_LINE, LEFT_LINE):
        assert f"suppressed: BP103 [unobserved-completion] at k/bad.py:{line}" in out


@pytest.mark.parametrize("flags", [(), ("--search", "bfs"), ("--no-reduction",)])
def test_a_suppressed_step_is_a_dead_end_and_the_other_schedule_still_fails(
        project, capsys, monkeypatch, flags):
    """The same code at another arrival, on other schedules: found by every search order,
    reduced or not, with its own counterexample."""
    (project / "k" / "bad.py").write_text(TWO_OVERRUNS.format(a=IGNORE.format("BP101"), b=""))
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", *flags)
    assert code == 1 and f"k/bad.py:{B_LINE}: BP101" in out
    assert "replayed on the interpreter" in out and "barrier_arrive(b)" in out
    assert f"the search did not go past the suppressed BP101 at k/bad.py:{A_LINE}" in out


def test_what_lies_only_beyond_a_suppressed_finding_is_not_reported_and_the_note_says_so(
        project, capsys, monkeypatch):
    """Ignoring BP101 lets the search go on past the overrun, to the late join it causes
    (BP102); suppressing both overruns stops there, so the kernel passes with both reported."""
    both = TWO_OVERRUNS.format(a=IGNORE.format("BP101"), b=IGNORE.format("BP101"))
    (project / "k" / "bad.py").write_text(both)
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", "--ignore", "BP101")
    assert code == 1 and "violation:BP102" in out
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py")
    assert code == 0 and "2 finding(s) suppressed" in out
    assert "a finding reachable only through it is not looked for" in out


@pytest.mark.parametrize("line", [8, 9])
def test_a_comment_silences_one_of_several_static_findings(project, capsys, monkeypatch, line):
    """BP110 twice, found before any search and reported together: either may be suppressed."""
    source = textwrap.dedent('''
        from barrierproof import protocol

        @protocol(expect="violation:BP110")
        def unordered(k):
            k.threads(1, name="wg")
            a = k.Barrier(num_arrivals=1)
            b = k.Barrier(num_arrivals=1)
            k.tcgen05_commit_arrive(a)
            k.tcgen05_commit_arrive(b)
            k.barrier_wait(a)
            k.barrier_wait(b)
        ''').lstrip().splitlines()
    source[line - 1] += IGNORE.format("BP110")
    (project / "k" / "bad.py").write_text("\n".join(source) + "\n")
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py")
    other = 17 - line
    assert code == 1 and f"k/bad.py:{other}: BP110" in out and f"k/bad.py:{line}: BP110" not in out
    assert f"suppressed: BP110 [tensor-core-order] at k/bad.py:{line}" in out


def test_an_engine_that_cannot_place_a_finding_ignores_its_code_and_says_so(
        project, capsys, monkeypatch):
    (project / "k" / "bad.py").write_text(
        TWO_UNDRAINED.format(done=IGNORE.format("BP103"), left=""))
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", "--engine", "symbolic")
    assert code == 0      # the BP103 of `left` is hidden too: the note says so
    assert "the symbolic engine cannot suppress at one place, so BP103 is then ignored for " \
           "this target and no other BP103 in it is reported" in out


def test_protocol_ignore_suppresses_for_the_protocol_and_says_so(project, capsys, monkeypatch):
    (project / "k" / "bad.py").write_text(ring(expect="verified", extra=', ignore=["BP103"]'))
    code, out, _ = run(capsys, project, monkeypatch, "k/bad.py", "--statistics")
    assert code == 0
    assert "by @protocol(ignore=['BP103'])" in out
    assert "1  BP103  unobserved-completion (suppressed)" in out


def test_protocol_ignore_with_an_unknown_code_is_an_input_error(project, capsys, monkeypatch):
    (project / "k" / "bad.py").write_text(ring(extra=', ignore=["BP10O"]'))
    code, _, err = run(capsys, project, monkeypatch, "k/bad.py")
    assert code == 3 and "ignore='BP10O' is not a diagnostic code" in err


# -- --exclude, --exit-zero, --statistics, -q --------------------------------------------------

def test_exclude_skips_files_without_importing_them(project, capsys, monkeypatch):
    (project / "k" / "legacy").mkdir()
    (project / "k" / "legacy" / "boom.py").write_text(
        "from barrierproof import protocol\nraise SystemExit('imported')\n")
    code, out, _ = run(capsys, project, monkeypatch, "k", "--exclude", "legacy",
                       "--exclude", "bad.py")
    assert code == 0 and out.rstrip().endswith("1 checked: 1 verified; 1/1 as expected")


def test_exit_zero_passes_findings_but_never_an_input_error(project, capsys, monkeypatch):
    code, out, _ = run(capsys, project, monkeypatch, "k", "--exit-zero")
    assert code == 0 and "violation:BP103" in out
    (project / "k" / "broken.py").write_text("from barrierproof import protocol\n1/0\n")
    code, _, err = run(capsys, project, monkeypatch, "k/broken.py", "--exit-zero")
    assert code == 3


def test_statistics_count_the_findings_per_code(project, capsys, monkeypatch):
    (project / "k" / "bad2.py").write_text(ring(name="ring2"))
    code, out, _ = run(capsys, project, monkeypatch, "k", "--statistics", "--format", "json")
    assert code == 1
    assert len(json.loads(out)) == 3         # stdout stays JSON; the counts go to stderr
    code, out, _ = run(capsys, project, monkeypatch, "k", "--statistics", "-q")
    assert out.rstrip().splitlines()[-1] == "2  BP103  unobserved-completion"


def test_quiet_prints_only_the_failures_and_the_summary(project, capsys, monkeypatch):
    code, out, err = run(capsys, project, monkeypatch, "k", "-q")
    assert code == 1
    assert "k/bad.py::ring: violation:BP103" in out and "good.py" not in out
    assert out.rstrip().endswith("2 checked: 1 verified, 1 violation; 2/2 as expected")
    code, out, _ = run(capsys, project, monkeypatch, "k", "-q", "--expect", "--exit-zero")
    assert out.strip() == "2 checked: 1 verified, 1 violation; 2/2 as expected"


# -- the pytest plugin -------------------------------------------------------------------------

def pytest_run(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.environ.get("PYTHONPATH", ""), ROOT]))
    # an installed barrierproof registers the plugin by its pytest11 entry point; loading it
    # again with -p is an error ("Plugin already registered"), so -p only for a bare checkout
    from importlib.metadata import entry_points
    installed = any(e.name == "barrierproof" for e in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "barrierproof.pytest_plugin"]
    return subprocess.run([sys.executable, "-m", "pytest", *plugin,
                           "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rA", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_pytest_plugin_runs_protocol_files_as_tests_when_asked(project):
    (project / "k" / "wrong.py").write_text(ring(name="declared_clean", expect="verified"))
    (project / "k" / "test_unit.py").write_text("def test_plain():\n    assert True\n")
    proc = pytest_run(project, "--barrierproof", "k")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "PASSED k/good.py::handoff" in proc.stdout
    assert "PASSED k/bad.py::ring" in proc.stdout        # declares its BP103, and has it
    assert "FAILED k/wrong.py::declared_clean" in proc.stdout
    assert "violation:BP103, declared verified" in proc.stdout   # the report as the message
    assert "PASSED k/test_unit.py::test_plain" in proc.stdout
    assert "1 failed, 3 passed" in proc.stdout


def test_the_pytest_plugin_is_off_unless_asked_and_the_ini_option_turns_it_on(project):
    proc = pytest_run(project, "k")
    assert "no tests ran" in proc.stdout, proc.stdout
    (project / "pytest.ini").write_text("[pytest]\nbarrierproof = true\n")
    proc = pytest_run(project, "k")
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        points = tomllib.load(f)["project"]["entry-points"]["pytest11"]
    assert points == {"barrierproof": "barrierproof.pytest_plugin"}


def test_ring_template_puts_the_finding_on_the_line_the_tests_name():
    assert ring().splitlines()[EMPTY_LINE - 1].strip().startswith("empty = k.Barrier")
    assert textwrap.dedent(GOOD).count("@protocol") == 1


# -- small things ------------------------------------------------------------------------------

SPELLED = '''
from barrierproof import protocol

STAGES = 4


@protocol(expect="violation:BP100")
def arrivals(k):
    k.threads(STAGES, name="wg")
    ready = k.Barrier(num_arrivals=STAGES, num_barriers=STAGES - 1)
    with k.when(k.thread < STAGES - 1):
        k.barrier_arrive(ready.at[0])
    with k.otherwise():
        k.barrier_wait(ready.at[0])
'''


def test_a_fix_keeps_the_expression_the_protocol_spells_its_counts_with(tmp_path, capsys,
                                                                        monkeypatch):
    """The three arriving threads are `STAGES - 1` in the source: the diff says so, where the
    IR holds only the value 3 (and the argument it replaces is `STAGES`, not `4`)."""
    (tmp_path / "spelled.py").write_text(SPELLED)
    monkeypatch.chdir(tmp_path)
    code = main(["fix", "spelled.py::arrivals"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "-    ready = k.Barrier(num_arrivals=STAGES, num_barriers=STAGES - 1)" in out
    assert "+    ready = k.Barrier(num_arrivals=STAGES - 1, num_barriers=STAGES - 1)" in out
    assert "num_arrivals=STAGES - 1 (was STAGES)" in err
    code = main(["fix", "spelled.py::arrivals", "--apply"])
    capsys.readouterr()
    assert code == 0
    assert "num_arrivals=STAGES - 1," in (tmp_path / "spelled.py").read_text()


def test_spellings_leave_out_names_the_protocol_binds_itself():
    from barrierproof.checker.repair.spelling import spellings_in
    source = ("def p(k, steps=2):\n    n = 3\n    with k.loop(steps) as i:\n"
              "        k.threads(N + i)\n    k.threads(N * 2)\n")
    assert spellings_in(source, "p", {"N": 2, "steps": 9, "i": 1, "n": 5}) == \
        {2: "N", 4: "N * 2"}


def test_naming_a_missing_function_lists_the_ones_the_file_has(tmp_path, capsys, monkeypatch):
    (tmp_path / "f.py").write_text("def ring_sum():\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    code = main(["check", "f.py::nope", "--no-cache", "--no-config"])
    err = capsys.readouterr().err
    assert code == 3 and "available: ring_sum" in err and "none" not in err


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_jobs_must_be_a_positive_number_of_processes(project, capsys, monkeypatch, jobs):
    monkeypatch.chdir(project)
    code = main(["check", "k", "--no-cache", "--jobs", jobs])
    err = capsys.readouterr().err
    assert code == 3 and f"--jobs must be an integer >= 1 (a number of processes), not {jobs}" \
        in err


def test_exclude_in_the_config_adds_to_the_flags(project, capsys, monkeypatch):
    (project / "pyproject.toml").write_text('[tool.barrierproof]\npaths = ["k"]\n'
                                            'exclude = ["bad.py"]\n')
    monkeypatch.chdir(project)
    code = main(["check", "--no-cache"])
    out = capsys.readouterr().out
    assert code == 0 and "bad.py" not in out and "1 checked" in out
    (project / "pyproject.toml").write_text('[tool.barrierproof]\nexclude = "bad.py"\n')
    code = main(["check", "k", "--no-cache"])
    assert code == 3 and "exclude must be a list of globs" in capsys.readouterr().err


def test_the_pytest_plugin_runs_a_bundled_example_file_as_tests(tmp_path):
    """examples/handoff.py under the plugin: one item per protocol, each passing with the
    verdict it declares (violations included)."""
    from barrierproof.loader import resolve
    path = os.path.join(ROOT, "examples", "handoff.py")
    expected = len(resolve(path))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")     # not the project's own ini
    proc = pytest_run(tmp_path, "--barrierproof", "-c", str(tmp_path / "pytest.ini"),
                      "--rootdir", str(tmp_path), path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"{expected} passed" in proc.stdout
