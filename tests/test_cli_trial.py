"""A new user's slips, each a one-line answer: a misspelt report format, a parameter too large
for the machine, a report that cannot be written, a Ctrl-C before the protocol that has the
--param. Each test runs the CLI in this process (about 1 s in all)."""

import dataclasses
import json
import os
import signal
import textwrap

import pytest

from barrierproof.checker import engine_registry
from barrierproof.cli import main
from barrierproof.safe_write import write_output

from conftest import EXAMPLES

PROTOCOL = '''
from barrierproof import protocol

@protocol
def handoff(k, rounds=1):
    k.threads(2, name="wg")
    k.assume(rounds >= 1)
    ready = k.Barrier(num_arrivals=1, num_barriers=rounds)
    with k.when(k.thread == 0):
        with k.loop(rounds) as i:
            k.barrier_arrive(ready.at[i])
    with k.otherwise():
        with k.loop(rounds) as i:
            k.barrier_wait(ready.at[i])
'''

PLAIN = '''
from barrierproof import protocol

@protocol
def plain(k):
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(ready)
    with k.otherwise():
        k.barrier_wait(ready)
'''


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_a_misspelt_report_format_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    (tmp_path / "p.py").write_text(textwrap.dedent(PROTOCOL))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "check", "p.py", "--no-cache", "-o", "xml=report.xml")
    assert code == 3 and out == ""
    assert "'xml' is not a report format (formats: text, json, sarif, junit" in err, err
    assert not (tmp_path / "xml=report.xml").exists()
    # a file whose name holds '=' is still one path away
    code, out, err = run(capsys, "check", "p.py", "--no-cache", "-o", "./xml=report.xml")
    assert code == 0, err
    assert "handoff: verified" in (tmp_path / "xml=report.xml").read_text()


def test_a_parameter_beyond_a_machine_word_is_an_input_error(tmp_path, capsys):
    path = tmp_path / "p.py"
    path.write_text(textwrap.dedent(PROTOCOL))
    code, out, err = run(capsys, "check", str(path), "--no-cache", "--jobs", "1",
                         "--param", f"rounds={10 ** 20}", "--format", "json")
    assert code == 3, err
    [verdict] = json.loads(out)
    assert verdict["verdict"] == "error"
    # refused before building: the barrier array is past what one block's shared memory holds
    message = verdict["diagnostics"][0]["message"]
    assert "100,000,000,000,000,000,000 barriers" in message and "32,768" in message, message
    assert "Traceback" not in err


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs a /proc that refuses files")
def test_a_report_that_cannot_be_written_is_named_not_its_temporary():
    with pytest.raises(OSError) as err:
        write_output("/proc/barrierproof-report.json", "{}")
    assert err.value.filename == "/proc/barrierproof-report.json"


def test_ctrl_c_before_the_protocol_with_the_param_still_writes_the_report(tmp_path, capsys,
                                                                           monkeypatch):
    """The first target is interrupted, so the one with `rounds` is never built: the run reports
    both as not finished (exit 2), never 'no protocol has parameter(s) rounds'."""
    (tmp_path / "a.py").write_text(textwrap.dedent(PLAIN))
    (tmp_path / "b.py").write_text(textwrap.dedent(PROTOCOL))
    explore = engine_registry.ENGINES["explore"]

    class Interrupted(type(explore)):
        def load(self):
            def engine(*args):
                os.kill(os.getpid(), signal.SIGINT)     # the user's Ctrl-C, mid-search
                raise AssertionError("the signal did not interrupt the search")
            return engine
    monkeypatch.setitem(engine_registry.ENGINES, "explore",
                        Interrupted(**{f.name: getattr(explore, f.name)
                                       for f in dataclasses.fields(explore)}))
    report = tmp_path / "report.json"
    code, out, err = run(capsys, "check", str(tmp_path), "--no-cache", "--jobs", "1",
                         "--param", "rounds=2", "-o", f"json={report}")
    assert code == 2, err
    assert "no protocol has parameter" not in err
    verdicts = {v["name"]: v for v in json.loads(report.read_text())}
    assert verdicts["plain"]["verdict"] == "bounded"
    assert "interrupted (Ctrl-C)" in verdicts["plain"]["coverage"]
    assert verdicts["handoff"]["coverage"] == "not checked: interrupted (Ctrl-C)"


@pytest.fixture
def overrun_trace(tmp_path, capsys):
    """A counterexample of a bundled protocol, written as a user gets it (--trace-dir)."""
    target = os.path.join(EXAMPLES, "handoff.py") + "::arrivals_without_waiter"
    code, _, err = run(capsys, "check", target, "--no-cache", "--jobs", "1",
                       "--trace-dir", str(tmp_path / "traces"))
    assert code == 1, err
    path = tmp_path / "traces" / "arrivals_without_waiter.trace.json"
    return path, json.loads(path.read_text()), target


def test_replay_names_an_action_the_protocol_does_not_have(overrun_trace, capsys):
    path, trace, target = overrun_trace
    trace["actions"] = [0, 10 ** 30]
    path.write_text(json.dumps(trace))
    code, _, err = run(capsys, "replay", str(path), "--protocol", target)
    assert code == 3, err
    assert f"action {10 ** 30} is none of the 2 actions of" in err, err


def test_replay_of_parameters_that_do_not_build_says_so_with_one_hint(overrun_trace, capsys):
    path, trace, target = overrun_trace
    trace["params"] = {"stages": 3}
    path.write_text(json.dumps(trace))
    code, _, err = run(capsys, "replay", str(path), "--protocol", target)
    assert code == 3, err
    assert "its parameters {'stages': 3} do not build" in err, err
    assert err.count("hint:") == 1 and "protocol changed" not in err
