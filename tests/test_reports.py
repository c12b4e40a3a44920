"""Every output format, validated by something we did not write: JSON against the documented
schema, SARIF against the OASIS SARIF 2.1.0 schema, JUnit by junitparser, HTML in a real browser
(headless Chromium), DOT by pydot. Text stays as it was when piped, and is rich on a terminal."""

import doctest
import importlib
import json
import os
import pty
import select
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.report.text import text_report
from barrierproof.loader import resolve

from conftest import ROOT

DATA = os.path.join(ROOT, "tests", "data")
IN_CI = bool(os.environ.get("CI"))


def need(module: str):
    """Import a validator; in CI a missing one fails the test instead of skipping it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if IN_CI:
            pytest.fail(f"{module} is not installed; .ci/run installs it")
        pytest.skip(f"{module} is not installed")


def cli(*args, cwd=ROOT, **kw):
    proc = subprocess.run([sys.executable, "-m", "barrierproof", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300, **kw)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def verdicts():
    """Every DSL example: verified, violations of every code, static findings, an input error,
    an unknown; plus a bounded search."""
    out = []
    for target in resolve(os.path.join("examples", "")):
        if target.kind == "dsl":
            out.append(check_kernel(target.build(), None, None, target.ref))
    from barrierproof.checker.check import Options
    from barrierproof.checker.engines.explore import Limits
    ring = resolve("examples/hopper_ring.py::tma_ring")[0]
    out.append(check_kernel(ring.build(), {"steps": 40}, Options(Limits(max_states=50)),
                            ring.ref))
    kinds = {v.verdict for v in out}
    assert {"verified", "violation", "error", "unknown", "bounded"} <= kinds
    return out


def test_doctests_of_the_gate_modules():
    for name in ["barrierproof.checker.report.sarif", "barrierproof.checker.report.junit",
                 "barrierproof.checker.report.html", "barrierproof.checker.report.views",
                 "barrierproof.checker.report.graph", "barrierproof.cache", "barrierproof.testing"]:
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted > 0 and result.failed == 0, name


# -- JSON --------------------------------------------------------------------------------------

def test_json_matches_the_documented_schema():
    jsonschema = need("jsonschema")
    from barrierproof.resources import report_schema
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    # the whole examples folder, from the one run of test_one_run_of_the_examples below
    code, out, _ = cli("check", "examples/handoff.py", "--format", "json", "--no-cache")
    assert code == 1
    jsonschema.Draft202012Validator(schema).validate(json.loads(out))


# -- SARIF -------------------------------------------------------------------------------------

def sarif_validator():
    jsonschema = need("jsonschema")
    with open(os.path.join(DATA, "sarif-schema-2.1.0.json")) as f:
        schema = json.load(f)
    return jsonschema.Draft4Validator(schema)


def test_sarif_is_valid_sarif_2_1_0(verdicts):
    from barrierproof.checker.report.sarif import sarif_log
    log = sarif_log(verdicts)
    sarif_validator().validate(log)
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert len(rules) == len(set(rules))
    diagnostics = sum(len(v.diagnostics) for v in verdicts)
    bounded = sum(v.verdict == "bounded" for v in verdicts)
    assert len(run["results"]) == diagnostics + bounded     # one result per diagnostic
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning")
        assert result["partialFingerprints"]
        physical = result["locations"][0]["physicalLocation"]
        uri = physical["artifactLocation"]["uri"]
        assert not uri.startswith("/") and ":" not in uri, uri   # relative to %SRCROOT%
        assert os.path.exists(os.path.join(ROOT, uri)), uri


def test_sarif_points_at_the_kernel_line_and_carries_the_interleaving(verdicts):
    from barrierproof.checker.report.sarif import sarif_log
    v = next(v for v in verdicts if v.name == "wrong_arrival_count")
    result = sarif_log([v])["runs"][0]["results"][0]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert result["ruleId"] == "BP100"
    assert region["startLine"] == int(v.diagnostics[0].location.rsplit(":", 1)[1])
    flows = result["codeFlows"][0]["threadFlows"]
    assert [f["id"] for f in flows] == ["wg0", "wg1"]
    stuck = flows[1]["locations"][-1]
    assert stuck["importance"] == "essential" and "blocked at barrier_wait" in \
        stuck["location"]["message"]["text"]
    orders = sorted(loc["executionOrder"] for f in flows for loc in f["locations"])
    assert orders == sorted(orders) and orders[0] == 1


def test_sarif_from_the_command_line(tmp_path):
    out = tmp_path / "report.sarif"
    code, _, _ = cli("check", "examples/handoff.py", "--format", "sarif", "-o", str(out),
                     "--no-cache")
    assert code == 1
    log = json.loads(out.read_text())
    sarif_validator().validate(log)
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == \
        {"BP100", "BP101", "BP102", "BP103", "BP104", "BP190"}


# -- JUnit -------------------------------------------------------------------------------------

def test_junit_parses_with_one_case_per_protocol(verdicts):
    junitparser = need("junitparser")
    from barrierproof.checker.report.junit import junit_report
    text = junit_report(verdicts)
    xml = junitparser.JUnitXml.fromstring(text)
    cases = [case for suite in xml for case in suite]
    assert len(cases) == len(verdicts)
    by_name = {case.name: case for case in cases}
    for v, case in zip(verdicts, cases):
        assert case.name == v.name
        kinds = {type(r).__name__ for r in case.result}
        expected = {"verified": set(), "proved": set(), "violation": {"Failure"},
                    "error": {"Error"}, "bounded": {"Error"}, "unknown": {"Error"}}
        assert kinds == expected[v.verdict], (v.name, kinds)
    failed = by_name["wrong_arrival_count"].result[0]
    assert "BP100" in failed.message and "stuck: wg1 blocked" in failed.text
    assert by_name["wrong_arrival_count"].classname == "examples.handoff"


def test_junit_shows_a_target_nobody_proved_as_an_error_unless_declared():
    """bounded/unknown are an <error> of that type with the reason as message (a <skipped> shows
    green in most CI dashboards); with --expect a declared verdict that matches passes."""
    from barrierproof.checker.report.junit import junit_tree
    from barrierproof.checker.verdict import Diagnostic, Verdict
    unmodeled = Diagnostic("BP190", "`semaphore_signal` is synchronization the model does not "
                           "cover", "k.py:7")
    unknown = Verdict("u", "unknown", [unmodeled], source="k.py::u", expected="unknown",
                      coverage="exhaustive for the modelled synchronization only")
    bounded = Verdict("b", "bounded", source="k.py::b", expected="verified",
                      coverage="stopped: state limit 50 reached")
    root = junit_tree([unknown, bounded])
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert root.get("errors") == "2" and root.get("skipped") == "0" and root.get("failures") == "0"
    u, b = cases["u"].find("error"), cases["b"].find("error")
    assert u.get("type") == "unknown" and "k.py:7: BP190" in u.get("message")
    assert b.get("type") == "bounded" and "state limit 50" in b.get("message")
    assert "k.py::u: unknown" in u.text        # the whole report, as for a failure
    # --expect: the declared unknown passes; a bounded search where verified was declared is
    # still an error of type bounded, saying both
    root = junit_tree([unknown, bounded], expect=True)
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["u"].find("error") is None and cases["u"].find("failure") is None
    b = cases["b"].find("error")
    assert b.get("type") == "bounded" and b.get("message").startswith("expected verified, got "
                                                                       "bounded: stopped")
    assert root.get("errors") == "1"


@pytest.mark.slow
def test_one_run_of_the_examples_meets_expectations_in_text_junit_and_json(tmp_path):
    """`check examples/ --expect` once (the whole folder takes a minute), writing every report a
    CI reads: the console text exits 0 without a traceback, the JUnit report has no failure, the
    JSON report validates against the documented schema and holds every kind of verdict."""
    junitparser = need("junitparser")
    jsonschema = need("jsonschema")
    from barrierproof.resources import report_schema
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    code, out, err = cli("check", "examples/", "--expect", "--no-cache",
                         "-o", f"junit={junit}", "-o", f"json={report}")
    assert code == 0, out + err
    assert "Traceback" not in out + err
    xml = junitparser.JUnitXml.fromfile(str(junit))
    ET.parse(str(junit))   # also plain well-formed XML
    assert xml.tests >= 30 and xml.failures == 0 and xml.errors == 0 and xml.skipped == 0
    data = json.loads(report.read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    assert {d["verdict"] for d in data} >= {"verified", "violation", "error", "unknown"}
    assert len(data) == xml.tests


# -- text --------------------------------------------------------------------------------------

def test_piped_text_is_the_plain_report():
    code, out, _ = cli("check", "examples/handoff.py", "--no-cache")
    targets = resolve("examples/handoff.py")
    plain = text_report([check_kernel(t.build(), None, None, t.ref) for t in targets])
    assert code == 1
    strip = [line for line in out.splitlines() if "states" not in line]  # timings/state counts
    assert strip == [line for line in plain.splitlines() if "states" not in line]
    assert "\x1b[" not in out


def run_on_a_terminal(*args, cwd=ROOT, timeout=120, env=None):
    """Run the CLI with stdout and stderr on a pseudo-terminal; return (exit code, output)."""
    master, slave = pty.openpty()
    env = dict(env or os.environ, COLUMNS="160", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", *args], stdout=slave,
                            stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            raise AssertionError("no output from the CLI")
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")


def test_terminal_text_has_colour_and_tables():
    code, out = run_on_a_terminal("check", "examples/handoff.py::wrong_arrival_count",
                                  "--no-cache")
    assert code == 1
    assert "\x1b[" in out                                  # colour
    assert "┃" in out or "│" in out                        # a table
    assert "violation:BP100" in out and "blocked at barrier_wait(ready)" in out


# -- HTML --------------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    sync_api = need("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        if IN_CI:
            pytest.fail("chromium is not installed; .ci/run installs it")
        pytest.skip("chromium is not installed")
    with sync_api.sync_playwright() as p:
        # The system Chromium; Playwright gives it a fresh temporary profile.
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def open_report(browser, path, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems, requests = [], []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"file://{path}")
    page.wait_for_load_state("load")
    shot = tmp_path / (os.path.basename(str(path)) + ".png")
    # a loaded 2-core machine can take longer than the 30 s default to paint a large page
    page.screenshot(path=str(shot), full_page=True, timeout=180_000)
    return page, problems, requests, shot


def test_html_report_renders_in_chromium(browser, verdicts, tmp_path):
    from barrierproof.checker.report.html import html_report
    path = tmp_path / "report.html"
    path.write_text(html_report(verdicts))
    page, problems, requests, shot = open_report(browser, path, tmp_path)
    assert problems == []
    assert requests == [f"file://{path}"]               # self-contained: nothing else fetched
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert page.locator("table.verdicts tbody tr").count() == len(verdicts)
    with_trace = [v for v in verdicts if v.trace is not None]
    assert page.locator("table.timeline").count() == len(with_trace)

    # The deadlock of hopper_ring.py::empty_count_too_large, lane by lane.
    v = next(v for v in verdicts if v.name == "empty_count_too_large")
    table = page.locator(f'table.timeline[data-protocol="{v.source}"]')
    lanes = table.locator("th.lane").all_inner_texts()
    assert [x.split("\n")[0] for x in lanes] == ["wg0", "wg1", "wg2", "tma"]
    assert table.locator("tr[data-step]").count() == len(v.trace.steps) + 1   # + initial state
    barriers = table.locator("th.barrier").all_inner_texts()
    assert barriers == ["full[0]", "full[1]", "empty[0]", "empty[1]"]
    stuck = table.locator("td.stuck")
    assert stuck.count() == 3
    assert "waiting for completion 1 of empty[0]" in stuck.nth(2).inner_text()
    colour = stuck.first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour == "rgb(253, 226, 226)"                # highlighted
    assert table.locator("td.ev.land").count() == 2      # the TMA lane's landings
    assert table.locator("td.state.completed").count() >= 2
    # Clicking a step selects it; the keyboard moves the selection.
    table.locator("tr[data-step='3']").click()
    assert table.locator("tr.selected").get_attribute("data-step") == "3"
    page.keyboard.press("j")
    assert table.locator("tr.selected").get_attribute("data-step") == "4"
    assert problems == []


def test_html_from_the_command_line(browser, tmp_path):
    path = tmp_path / "report.html"
    code, out, _ = cli("check", "examples/blackwell.py", "examples/attention.py", "--format",
                       "html", "-o", str(path))
    assert code == 1 and out == ""
    page, problems, requests, _ = open_report(browser, path, tmp_path)
    assert problems == [] and len(requests) == 1
    # tcgen05 queues are lanes of their own
    lanes = page.locator("th.lane.tcgen05").all_inner_texts()
    assert any(x.startswith("tcgen05(wg0)") for x in lanes)
    assert page.locator("td.where").count() >= 1        # BP101: where the overrun thread is


# -- DOT ---------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:.*deprecated")   # pydot's use of old pyparsing names
def test_graph_writes_dot_that_pydot_reads(tmp_path):
    pydot = need("pydot")
    out = tmp_path / "g.dot"
    code, _, err = cli("graph", "examples/handoff.py::wrong_arrival_count", "-o", str(out))
    assert code == 0, err
    graphs = pydot.graph_from_dot_data(out.read_text())
    assert graphs and len(graphs) == 1
    g = graphs[0]
    nodes = [n for n in g.get_nodes() if n.get_name().startswith("s")]
    assert len(nodes) == 2 and len(g.get_edges()) == 1
    assert any("BP100" in (n.get("label") or "") for n in nodes)


def test_graph_agrees_with_the_explorer_and_refuses_big_models(tmp_path):
    from barrierproof.checker.report.graph import state_graph
    from barrierproof.checker.check import Options
    from barrierproof.model.semantics import System
    target = resolve("examples/hopper_ring.py::tma_ring")[0]
    kernel = target.build()
    graph = state_graph(System(kernel))
    unreduced = check_kernel(kernel, None, Options(reduction=False))
    assert graph.number_of_nodes() == unreduced.states
    code, _, err = cli("graph", "examples/hopper_ring.py::tma_ring", "--param", "steps=30",
                       "--max-states", "100")
    assert code == 2 and "more than 100 states" in err and "Traceback" not in err
    code, _, err = cli("graph", "examples/handoff.py")
    assert code == 3 and "graph draws one" in err
