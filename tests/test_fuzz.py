"""Fuzzing the gate: CLI arguments, configs, trace files, cache entries and reporters.

The contract: no traceback (the CLI returns or exits through argparse, nothing else escapes),
an exit code in {0, 1, 2, 3}, and machine-readable output that parses (JSON, SARIF, JUnit XML).
Runs in-process, a few dozen cases per test by default (well under a minute in CI); set
BARRIERPROOF_FUZZ_EXAMPLES=N for a longer run of N cases per test.
"""

import contextlib
import io
import json
import math
import os
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from barrierproof.cache import Cache, entry_digest
from barrierproof.checker.report.junit import junit_report
from barrierproof.checker.report.sarif import sarif_report
from barrierproof.checker.report.text import json_report, text_report
from barrierproof.cli import main
from barrierproof.config import KEYS

from test_hardening import BAD, GOOD

EXAMPLES = int(os.environ.get("BARRIERPROOF_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(max_examples=EXAMPLES or 40, deadline=None, derandomize=EXAMPLES is None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large], database=None)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A user's directory: a good and a bad protocol, a trace of the bad one, a config."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "good.py").write_text(GOOD)
    (root / "bad.py").write_text(BAD)
    (root / "sub").mkdir()
    with in_dir(root):
        code, _ = call(["check", "bad.py", "--no-cache", "--trace-dir", "traces", "-q"],
                       record=False)
        assert code == 1
    return root


@contextlib.contextmanager
def in_dir(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def call(argv, record: bool = True) -> tuple[int, str]:
    """main(argv) in-process: (exit code, stdout). Anything but a return or argparse's
    SystemExit is a traceback, and fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    assert "Traceback" not in err.getvalue(), err.getvalue()
    assert code in (0, 1, 2, 3), (argv, code, err.getvalue())
    if record:
        event(f"exit {code}")
    return code, out.getvalue()


def parses(fmt: str, text: str) -> None:
    if fmt in ("json", "sarif"):
        json.loads(text)
    elif fmt == "junit":
        ET.fromstring(text)


# -- CLI arguments -------------------------------------------------------------------------------

PATHS = ["good.py", "bad.py", "good.py::handoff", "good.py::nope", "sub", "missing.py", ".",
         "traces/stuck.trace.json", "good.py::", "::x", ""]
VALUES = ["0", "1", "-1", "3", "2.5", "nan", "inf", "-inf", "1e9", "x", "", "BP100", "BP10O",
          "bp101,BP200", "BP100,,", "rounds=2", "rounds=x", "nope=1", "=1", "rounds", "json",
          "sarif", "junit", "text", "html", "out.json", "sub", "sub/x/y.json", "traces",
          "good.py", "explore", "symbolic", "rounds", "\x1b[31m", "[/]", "..", "/dev/null"]
FLAGS = ["--param", "--format", "-o", "--output", "--max-states", "--max-depth", "--timeout",
         "--max-memory", "--select", "--ignore", "--trace-dir", "--expect", "-q", "--progress",
         "--no-cache", "--no-reduction", "--config", "--no-config", "--engine", "--symbolic",
         "--seed", "--max-steps", "--protocol", "--cache-dir", "--version", "--workers"]
COMMANDS = ["check", "prove", "replay", "run", "graph", "tla", "nope"]

# Per flag: mostly values it accepts, some it must refuse with a message.
OPTIONS = {
    "--param": ["rounds=1", "rounds=2", "rounds=0", "rounds=x", "nope=1", "=1", "rounds"],
    "--format": ["json", "sarif", "junit", "text", "html"],
    "-o": ["out.json", "sub/out.xml", "sub", "missing/x.json", "", "/dev/null"],
    "--max-states": ["1", "50", "3000", "0", "-5", "x"],
    "--max-depth": ["1", "5", "40", "0"],
    "--timeout": ["0.5", "5", "20", "0", "-1", "nan", "inf"],
    "--max-memory": ["4000", "16000", "0", "1"],
    "--select": ["BP100", "BP101,BP103", "bp100", "BP10O", "", ",", "BP100,,BP999"],
    "--ignore": ["BP100", "BP190", "BP10l", "X"],
    "--trace-dir": ["traces", "t2/deeper", "good.py", "good.py/x"],
    "--engine": ["explore", "symbolic", "nope"],
    "--symbolic": ["rounds", "nope"],
    "--seed": ["0", "7", "x"],
    "--max-steps": ["1", "100", "0"],
    "--config": ["sub/pyproject.toml", "missing.toml", "good.py"],
    "--cache-dir": ["cache", "good.py", "sub/c"],
    "--protocol": ["bad.py::stuck", "good.py::handoff", "missing.py::x", "good.py"],
    "--workers": ["1", "0"],
}
SWITCHES = ["--expect", "-q", "--progress", "--no-cache", "--no-reduction", "--no-config",
            "--version", "--help"]


@st.composite
def argv_strategy(draw):
    command = draw(st.sampled_from(COMMANDS))
    argv = [command]
    if command == "replay":
        argv.append(draw(st.sampled_from(["traces/stuck.trace.json", "good.py", "missing.json",
                                          "report.json"])))
    else:
        argv += draw(st.lists(st.sampled_from(PATHS[:6]), min_size=1, max_size=2))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["option", "option", "option", "switch", "junk"]))
        if kind == "option":
            flag = draw(st.sampled_from(sorted(OPTIONS)))
            argv += [flag, draw(st.sampled_from(OPTIONS[flag]))]
        elif kind == "switch":
            argv.append(draw(st.sampled_from(SWITCHES)))
        else:
            argv.append(draw(st.one_of(st.sampled_from(VALUES + FLAGS), st.text(max_size=6))))
    return argv[0], argv[1:]


@FUZZ
@given(argv_strategy())
def test_cli_arguments(workdir, case):
    command, rest = case
    # The work itself stays small: these come first, so a fuzzed flag later overrides them.
    argv = [command] + (["--max-states", "3000", "--timeout", "20", "--no-cache"]
                        if command in ("check", "prove") else []) + rest
    with in_dir(workdir):
        code, out = call(argv)
        formats = [argv[i + 1] for i in range(len(argv) - 1) if argv[i] == "--format"]
        fmt = formats[-1] if formats else None      # the last one wins, as in argparse
        to_file = any(a in ("-o", "--output") for a in argv)
        if any(a in ("--help", "--version") for a in argv):
            return              # usage text, not a report
        if command in ("check", "prove") and fmt in ("json", "sarif", "junit") and \
                code != 3 and not to_file:
            parses(fmt, out)


# -- configs ---------------------------------------------------------------------------------

def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") \
            if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)     # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"


scalar = st.one_of(st.integers(-3, 10 ** 7), st.floats(allow_nan=True), st.booleans(),
                   st.sampled_from(VALUES), st.text(max_size=5))
config_value = st.one_of(scalar, st.lists(scalar, max_size=3),
                         st.dictionaries(st.sampled_from(["rounds", "nope", "x y"]),
                                         st.one_of(st.integers(-2, 3), st.text(max_size=3)),
                                         max_size=2))
CONFIG_VALUES = {
    "paths": st.lists(st.sampled_from(["good.py", "../good.py", "../bad.py", "nope", "."]),
                      max_size=2),
    "params": st.dictionaries(st.sampled_from(["rounds", "nope"]),
                              st.one_of(st.integers(-1, 3), st.text(max_size=2)), max_size=2),
    "select": st.one_of(st.lists(st.sampled_from(["BP100", "BP103", "BP10O", "x"]), max_size=2),
                        st.sampled_from(["BP100", "BP100,BP101", ""])),
    "ignore": st.lists(st.sampled_from(["BP190", "BP100", "BPl00"]), max_size=2),
    "max-states": st.sampled_from([1, 100, 3000, 0, -1, 2.5, True]),
    "max-depth": st.sampled_from([1, 40, 0, "x"]),
    "timeout": st.sampled_from([0.5, 10, 0, -3, float("nan"), float("inf"), "5"]),
    "max-memory": st.sampled_from([8000, 0, 1.5]),
    "reduction": st.sampled_from([True, False, "yes"]),
    "engine": st.sampled_from(["explore", "symbolic", "tlc2", 3]),
    "expect": st.sampled_from([True, False, 1]),
    "cache": st.sampled_from([False, "no"]),
    "cache-dir": st.sampled_from(["c", "../good.py", 5]),
}
config_strategy = st.one_of(
    st.dictionaries(st.sampled_from(sorted(CONFIG_VALUES)), st.just(None), max_size=4).flatmap(
        lambda keys: st.fixed_dictionaries({k: CONFIG_VALUES[k] for k in keys})).map(
        lambda d: "[tool.barrierproof]\n" + "".join(f"{k} = {toml_value(v)}\n"
                                                    for k, v in d.items())),
    st.dictionaries(st.one_of(st.sampled_from(sorted(KEYS)), st.text(min_size=1, max_size=6)),
                    config_value, max_size=5).map(
        lambda d: "[tool.barrierproof]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n"
                                                    for k, v in d.items())),
    st.text(max_size=60).map(lambda t: "[tool.barrierproof]\n" + t))


@FUZZ
@given(config_strategy)
def test_configs(workdir, text):
    (workdir / "sub" / "pyproject.toml").write_text(text)
    with in_dir(workdir):
        code, out = call(["check", "--config", "sub/pyproject.toml", "--no-cache",
                          "--max-states", "3000", "--timeout", "20", "--format", "json"]
                         + (["good.py"] if "paths" not in text else []))
        if code != 3:
            json.loads(out)


# -- trace files ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 10 ** 6), st.floats(allow_nan=False),
              st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


@FUZZ
@given(st.data())
def test_trace_files(workdir, data):
    trace = json.loads((workdir / "traces" / "stuck.trace.json").read_text())
    kind = data.draw(st.sampled_from(["field", "step", "whole", "report", "text"]))
    if kind == "field":
        key = data.draw(st.sampled_from(sorted(trace)))
        trace[key] = data.draw(json_values)
        text = json.dumps(trace)
    elif kind == "step" and trace["steps"]:
        step = data.draw(st.sampled_from(trace["steps"]))
        step[data.draw(st.sampled_from(sorted(step)))] = data.draw(json_values)
        text = json.dumps(trace)
    elif kind == "report":
        text = json.dumps([{"name": "x", "verdict": "violation", "trace": data.draw(json_values)}])
    elif kind == "whole":
        text = json.dumps(data.draw(json_values))
    else:
        text = data.draw(st.text(max_size=40))
    (workdir / "case.json").write_text(text)
    with in_dir(workdir):
        call(["replay", "case.json", "--protocol", "bad.py"])


# -- cache entries and reporters -----------------------------------------------------------------

@FUZZ
@given(json_values, st.booleans())
def test_cache_entries(workdir, verdict, signed):
    """Whatever an entry holds, the cache serves a verdict every reporter can render, or
    nothing."""
    cache = Cache(str(workdir / "cache"))
    key = "ab" + "0" * 62
    path = cache._path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    entry = {"key": key, "verdict": verdict}
    if signed:      # a digest that matches: only the shape check stands between it and a report
        entry["digest"] = entry_digest(key, verdict)
    with open(path, "w") as f:
        json.dump(entry, f)
    found = cache.get(key)
    if found is not None:
        render_everything([found])


names = st.one_of(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2070),
                          max_size=12),
                  st.sampled_from(["<script>alert(1)</script>", "[/]", "[bold]x", "\x1b[2J"]))


@FUZZ
@given(names, names, names)
def test_reporters_with_hostile_names(name, message, agent):
    from barrierproof.checker.verdict import Diagnostic, Verdict
    from barrierproof.model.interpreter import Step, Trace
    trace = Trace(name, f"p.py::{name}", {}, {}, [agent], [0],
                  [Step(1, 0, agent, "thread", message, "p.py:1", [message], {})], "deadlock",
                  {"code": "BP100", "message": message, "details": [message]})
    verdicts = [Verdict(name, "violation", [Diagnostic("BP100", message, "p.py:1", message)],
                        trace=trace, source=f"p.py::{name}", notes=[message]),
                Verdict(name, "bounded", coverage=message)]
    render_everything(verdicts)


def render_everything(verdicts) -> None:
    from rich.console import Console

    from barrierproof.checker.report.console import print_report
    json.loads(json_report(verdicts))
    json.loads(sarif_report(verdicts))
    ET.fromstring(junit_report(verdicts))
    ET.fromstring(junit_report(verdicts, expect=True))
    from barrierproof.checker.report.html import html_report
    assert "<script>alert" not in html_report(verdicts)     # names are escaped, not markup
    text = text_report(verdicts)
    assert not any(ord(c) < 32 and c != "\n" for c in text)
    print_report(verdicts, Console(file=io.StringIO(), force_terminal=True, width=120))
