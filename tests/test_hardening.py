"""A gate that cannot be fooled: every bad input, limit and signal ends in a clear verdict.

Validation before work (flags, config, codes, params against k.assume, output paths), user code
behind walls (sys.exit, KeyboardInterrupt, argv, stdout, endless loops, memory), writers and
reporters, replay and cache input, and signals. The fuzz suite is tests/test_fuzz.py."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from barrierproof.cache import Cache, entry_digest
from barrierproof.checker.report.junit import junit_report
from barrierproof.checker.report.text import text_report
from barrierproof.checker.verdict import Verdict
from barrierproof.cli import main

from conftest import ROOT

GOOD = '''
from barrierproof import protocol

@protocol
def handoff(k, rounds=1):
    k.threads(2, name="wg")
    k.assume(rounds >= 1)
    ready = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(rounds):
            k.barrier_arrive(ready)
            k.barrier_wait(done)
    with k.otherwise():
        with k.loop(rounds):
            k.barrier_wait(ready)
            k.barrier_arrive(done)
'''
BAD = GOOD.replace("def handoff", "def stuck").replace(
    "ready = k.Barrier(num_arrivals=1)", "ready = k.Barrier(num_arrivals=2)")
# Importing this file leaves a mark: a check that must not import it can prove it did not.
MARKS = '''
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imported.mark"), "w").close()
'''


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(capsys, *argv):
    """The CLI in this process: (exit code, stdout, stderr). Usage errors exit through
    argparse with the same codes."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def cli(*args, cwd=ROOT, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "barrierproof", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def one_line_error(code, err, needle):
    assert code == 3, err
    assert needle in err, err
    assert "Traceback" not in err
    assert len([l for l in err.splitlines() if l.startswith("error:")]) == 1, err


# -- 1. one validation layer ------------------------------------------------------------------

@pytest.mark.parametrize("flags, needle", [
    (["--select", "BP10O"], "unknown diagnostic code 'BP10O' (hint: did you mean BP100?)"),
    (["--ignore", "BP100,bp999"], "unknown diagnostic code 'bp999'"),
    (["--max-states", "-5"], "--max-states must be an integer >= 1"),
    (["--max-depth", "0"], "--max-depth must be an integer >= 1"),
    (["--timeout", "-1"], "--timeout must be a positive number of seconds, not -1.0"),
    (["--timeout", "nan"], "--timeout must be a positive number of seconds, not nan"),
    (["--timeout", "inf"], "--timeout must be a positive number of seconds, not inf"),
    (["--max-memory", "0"], "--max-memory must be an integer >= 1"),
])
def test_bad_flags_are_input_errors_before_any_import(tmp_path, capsys, flags, needle):
    path = write(tmp_path, "p.py", GOOD + MARKS)
    code, out, err = run(capsys, "check", path, "--no-cache", *flags)
    one_line_error(code, err, needle)
    assert not (tmp_path / "imported.mark").exists()


def test_an_unknown_code_never_turns_a_violation_into_a_pass(tmp_path, capsys):
    path = write(tmp_path, "p.py", BAD)
    assert run(capsys, "check", path, "--no-cache", "--select", "BP100")[0] == 1
    assert run(capsys, "check", path, "--no-cache", "--select", "BP10O")[0] == 3


def test_confirm_runs_must_be_positive(capsys):
    code, _, err = run(capsys, "confirm", "x.py::f", "--runs", "0")
    one_line_error(code, err, "--runs must be an integer >= 1")


@pytest.mark.parametrize("make, flag, needle", [
    (lambda d: ["-o", str(d / "missing" / "r.json")], "-o", "does not exist"),
    (lambda d: ["-o", str(d)], "-o", "is a directory"),
    (lambda d: ["--trace-dir", str(d / "p.py")], "--trace-dir", "is a file, not a directory"),
    (lambda d: ["--trace-dir", str(d / "p.py" / "sub")], "--trace-dir", "is a file"),
])
def test_output_paths_are_checked_before_the_work(tmp_path, capsys, make, flag, needle):
    path = write(tmp_path, "p.py", BAD + MARKS)
    code, out, err = run(capsys, "check", path, "--no-cache", *make(tmp_path))
    one_line_error(code, err, needle)
    assert not (tmp_path / "imported.mark").exists()


def test_tla_and_graph_outputs_are_checked_first(tmp_path, capsys):
    path = write(tmp_path, "p.py", GOOD + MARKS)
    code, _, err = run(capsys, "tla", path, "-o", path)
    one_line_error(code, err, "is a file, not a directory")
    code, _, err = run(capsys, "graph", path + "::handoff", "-o", str(tmp_path / "no" / "g.dot"))
    one_line_error(code, err, "does not exist")
    assert not (tmp_path / "imported.mark").exists()


def test_a_full_disk_is_a_message_not_a_traceback(tmp_path, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    path = write(tmp_path, "p.py", BAD)
    code, out, err = run(capsys, "check", path, "--no-cache", "-o", "/dev/full")
    one_line_error(code, err, "cannot write /dev/full")
    assert "stuck violation:BP100" in err       # the verdicts are not lost


def test_every_writer_fails_with_a_message(tmp_path, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    path = write(tmp_path, "p.py", GOOD)
    code, _, err = run(capsys, "graph", path + "::handoff", "-o", "/dev/full")
    one_line_error(code, err, "/dev/full: No space left on device")


def test_version(capsys):
    from barrierproof import __version__
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"barrierproof {__version__}"


def test_params_outside_the_assumptions_are_refused(tmp_path, capsys):
    path = write(tmp_path, "p.py", GOOD)
    code, out, err = run(capsys, "check", path, "--no-cache", "--param", "rounds=0",
                         "--format", "json")
    assert code == 3
    [v] = json.loads(out)
    assert v["verdict"] == "error"
    assert "rounds=0 break its assumption k.assume(rounds >= 1)" in v["diagnostics"][0]["message"]
    assert run(capsys, "check", path, "--no-cache", "--param", "rounds=2")[0] == 0


def test_a_build_error_is_not_hidden_behind_an_unused_param(tmp_path, capsys):
    path = write(tmp_path, "p.py", GOOD.replace("k.threads(2", "k.threads(1 / 0 + 2"))
    code, out, err = run(capsys, "check", path, "--no-cache", "--param", "rounds=2")
    assert code == 3
    assert "ZeroDivisionError" in out and "no protocol has parameter" not in out + err


# -- 2. user code behind walls ------------------------------------------------------------------

def test_sys_exit_at_import_is_that_files_error(tmp_path, capsys):
    write(tmp_path, "d/a_exits.py", "import sys\nfrom barrierproof import protocol\nsys.exit(0)\n"
                                    "@protocol\ndef never(k):\n    k.threads(1)\n")
    write(tmp_path, "d/b_stuck.py", BAD)
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, "check", str(tmp_path / "d"), "--no-cache", "--format", "json",
                         "-o", str(out_file))
    verdicts = {v["name"]: v for v in json.loads(out_file.read_text())}
    assert verdicts["a_exits"]["verdict"] == "error"
    assert "sys.exit(0) called while importing" in verdicts["a_exits"]["diagnostics"][0]["message"]
    assert verdicts["a_exits"]["diagnostics"][0]["location"].endswith("a_exits.py:3")
    assert verdicts["stuck"]["verdict"] == "violation"
    assert code == 3          # an input error outranks the violation; both are reported


def test_sys_exit_and_keyboard_interrupt_in_a_body(tmp_path, capsys):
    path = write(tmp_path, "p.py", GOOD + '''
@protocol
def exits(k):
    raise SystemExit(0)

@protocol
def interrupts(k):
    raise KeyboardInterrupt
''')
    code, out, _ = run(capsys, "check", path, "--no-cache", "--format", "json")
    verdicts = {v["name"]: v for v in json.loads(out)}
    assert verdicts["handoff"]["verdict"] == "verified"
    assert verdicts["exits"]["verdict"] == "error"
    assert "sys.exit(0) called while building exits" in \
        verdicts["exits"]["diagnostics"][0]["message"]
    assert verdicts["interrupts"]["verdict"] == "error"
    assert code == 3


def test_argv_and_prints_of_user_code_stay_out_of_the_report(tmp_path, capsys):
    path = write(tmp_path, "p.py", textwrap.dedent('''
        import argparse, sys
        print("{ not json")
        print("argv:", sys.argv, file=sys.stderr)
        argparse.ArgumentParser().parse_args()     # sees only its own path
    ''') + GOOD.replace("k.threads(2", "print('noise', end=''); k.threads(2"))
    code, out, err = run(capsys, "check", path, "--no-cache", "--format", "json")
    assert code == 0, err
    assert json.loads(out)[0]["verdict"] == "verified"
    assert "{ not json" in err and "noise" in err
    assert f"argv: {[path]}" in err, err


def test_an_endless_loop_in_a_body_ends_at_the_timeout(tmp_path):
    path = write(tmp_path, "p.py", GOOD + '''
@protocol
def spins(k):
    while True:
        pass
''')
    start = time.monotonic()
    code, out, err = cli("check", path, "--no-cache", "--timeout", "2", "--format", "json")
    assert time.monotonic() - start < 30
    verdicts = {v["name"]: v for v in json.loads(out)}
    assert verdicts["spins"]["verdict"] == "bounded"
    assert "time limit 2s reached while building spins" in verdicts["spins"]["coverage"]
    assert verdicts["handoff"]["verdict"] == "verified"
    assert code == 2


def test_a_memory_blow_up_ends_at_the_memory_limit(tmp_path):
    path = write(tmp_path, "p.py", GOOD + '''
@protocol
def hog(k):
    chunks = []
    while True:
        chunks.append(bytearray(8 << 20))
''')
    code, out, err = cli("check", path + "::hog", "--no-cache", "--max-memory", "400",
                         "--format", "json")
    [v] = json.loads(out)
    assert v["verdict"] == "bounded" and "memory limit 400 MB reached while building hog" in \
        v["coverage"], v
    assert code == 2


def test_check_dir_collects_only_files_that_declare_protocols(tmp_path, capsys):
    write(tmp_path, "d/ring.py", GOOD)
    write(tmp_path, "d/test_ring.py", MARKS + "print('from a test')\n")
    write(tmp_path, "d/helpers.py", MARKS)
    write(tmp_path, "d/conftest.py", MARKS)
    write(tmp_path, "d/_private.py", GOOD + MARKS)
    code, out, err = run(capsys, "check", str(tmp_path / "d"), "--no-cache", "--format", "json")
    assert code == 0
    assert [v["name"] for v in json.loads(out)] == ["handoff"]
    assert not (tmp_path / "d" / "imported.mark").exists()


# -- 4. writers and reporters ---------------------------------------------------------------------

def test_trace_files_are_unique_and_stay_inside_the_trace_dir(tmp_path, capsys):
    evil = BAD.replace("@protocol\ndef stuck", "@protocol(name='../../escaped')\ndef stuck")
    write(tmp_path, "a/one.py", BAD)
    write(tmp_path, "b/two.py", BAD)
    write(tmp_path, "c/three.py", evil)
    traces = tmp_path / "traces"
    code, _, _ = run(capsys, "check", str(tmp_path / "a"), str(tmp_path / "b"),
                     str(tmp_path / "c"), "--no-cache", "--trace-dir", str(traces))
    assert code == 1
    names = sorted(os.listdir(traces))
    assert names == ["escaped.trace.json", "stuck-2.trace.json", "stuck.trace.json"]
    assert not (tmp_path / "escaped.trace.json").exists()


def hostile() -> list[Verdict]:
    from barrierproof.checker.verdict import Diagnostic
    return [Verdict("ring\x1b[31m\x00\nverified", "violation",
                    [Diagnostic("BP100", "stuck\x07 [/] [bold]x", "a.py:1")],
                    source="a.py::ring\x1b[31m\x00")]


def test_junit_stays_well_formed_with_control_characters():
    root = ET.fromstring(junit_report(hostile()))
    case = root.find(".//testcase")
    assert "\\x1b" in case.get("name") and "\\x00" in case.get("name")


def test_text_report_escapes_control_characters():
    text = text_report(hostile())
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    assert "a.py::ring\\x1b[31m\\x00: violation" in text


def test_rich_markup_in_names_cannot_crash_the_terminal_report(tmp_path):
    from io import StringIO

    from rich.console import Console

    from barrierproof.checker.report.console import print_report
    from barrierproof.checker.check import check_kernel
    from barrierproof.loader import resolve
    path = write(tmp_path, "p.py", BAD.replace('name="wg"', 'name="[/]wg[bold"'))
    [target] = resolve(path)
    verdict = check_kernel(target.build(), source=target.ref)
    verdict.name = "[/]" + verdict.name
    buffer = StringIO()
    print_report([verdict] + hostile(), Console(file=buffer, force_terminal=True, width=200))
    shown = buffer.getvalue()
    assert "[/]wg[bold0" in shown and "[/] [bold]x" in shown


# -- 5. replay and the cache check their input ------------------------------------------------

@pytest.fixture
def a_trace(tmp_path, capsys):
    write(tmp_path, "p.py", BAD)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, _ = run(capsys, "check", "p.py", "--no-cache", "--format", "json",
                           "--trace-dir", "traces")
        assert code == 1
        yield tmp_path, json.loads(out)
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("mutate, needle", [
    (lambda t: {**t, "actions": "x"}, "$.actions: expected a list, got str"),
    (lambda t: {**t, "params": {"n": "1"}}, "$.params.n: expected an integer, got str"),
    (lambda t: {**t, "steps": [{}]}, "$.steps[0].index: missing"),
    (lambda t: [1, 2], "$[0]: expected an object, got int"),
    (lambda t: "trace", "$: expected an object, got str"),
])
def test_replay_refuses_the_wrong_shape(a_trace, capsys, mutate, needle):
    root, report = a_trace
    trace = json.loads((root / "traces" / "stuck.trace.json").read_text())
    (root / "bad.json").write_text(json.dumps(mutate(trace)))
    code, out, err = run(capsys, "replay", "bad.json")
    one_line_error(code, err, needle)


def test_replay_accepts_the_json_report(a_trace, capsys):
    root, report = a_trace
    (root / "report.json").write_text(json.dumps(report))
    code, out, err = run(capsys, "replay", "report.json", "--protocol", "p.py")
    assert code == 1, err
    assert "p.py::stuck: replayed" in out and "BP100" in out


def test_replay_never_imports_a_path_it_was_not_asked_to(a_trace, capsys, tmp_path_factory):
    root, _ = a_trace
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    evil = write(elsewhere, "evil.py", BAD + MARKS)
    trace = json.loads((root / "traces" / "stuck.trace.json").read_text())
    (root / "evil.json").write_text(json.dumps({**trace, "source": f"{evil}::stuck"}))
    code, out, err = run(capsys, "replay", "evil.json")
    one_line_error(code, err, "only --protocol says which")
    assert f"--protocol {evil}::stuck" in err       # the hint says what to pass
    assert not (elsewhere / "imported.mark").exists()
    # a source below the working directory is not imported either (setup.py, any script)
    write(root, "script.py", MARKS)
    (root / "near.json").write_text(json.dumps({**trace, "source": "script.py::stuck"}))
    code, out, err = run(capsys, "replay", "near.json")
    one_line_error(code, err, "which is not imported")
    assert not (root / "imported.mark").exists()
    # the user points at it: then it runs
    code, out, err = run(capsys, "replay", "evil.json", "--protocol", f"{evil}::stuck")
    assert code == 1 and (elsewhere / "imported.mark").exists()


def test_replay_from_another_directory_with_the_protocol_named(a_trace, capsys,
                                                                tmp_path_factory):
    root, _ = a_trace
    other = tmp_path_factory.mktemp("other")
    os.chdir(other)
    code, out, err = run(capsys, "replay", str(root / "traces" / "stuck.trace.json"),
                         "--protocol", str(root / "p.py"))
    assert code == 1 and "BP100" in out, err


def test_cache_serves_only_entries_whose_digest_and_shape_hold(tmp_path, capsys):
    path = write(tmp_path, "p.py", BAD)
    cache_dir = tmp_path / "cache"
    args = ["check", path, "--cache-dir", str(cache_dir), "--format", "json"]
    assert run(capsys, *args)[0] == 1
    [entry_path] = [os.path.join(d, f) for d, _, fs in os.walk(cache_dir) for f in fs
                    if f.endswith(".json")]
    entry = json.load(open(entry_path))
    assert entry["digest"] == entry_digest(entry["key"], entry["verdict"])
    # a hand edit (violation -> verified) is a miss: the protocol is checked again
    forged = dict(entry, verdict={**entry["verdict"], "verdict": "verified"})
    json.dump(forged, open(entry_path, "w"))
    code, out, err = run(capsys, *args)
    assert code == 1 and json.loads(out)[0]["verdict"] == "violation"
    assert "from the cache" not in err
    # valid JSON of the wrong shape, even with a matching digest: a miss, never a crash
    for verdict in ({"name": 1, "verdict": "verified"}, {"name": "x", "verdict": "great"},
                    {"name": "x", "verdict": "verified", "diagnostics": [{"code": 1}]}, []):
        json.dump({"key": entry["key"], "verdict": verdict,
                   "digest": entry_digest(entry["key"], verdict)}, open(entry_path, "w"))
        assert Cache(str(cache_dir)).get(entry["key"]) is None


# -- 6. signals ----------------------------------------------------------------------------------

SLOW = GOOD + '''
@protocol
def big(k, n=8, steps=400):
    k.threads(n, name="wg")
    bar = k.Barrier(num_arrivals=n)
    with k.loop(steps):
        k.barrier_arrive(bar)
        k.barrier_wait(bar)
'''


def interrupted_run(tmp_path, text, sig, ready):
    """Run `check` on `text` and send `sig` once a line of its stderr starts with `ready` (a
    point reached, not a time slept: under load a fixed sleep may fall before the handlers are
    installed or after the work is done)."""
    path = write(tmp_path, "p.py", text)
    report = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", path, "--no-cache",
                             "--no-reduction", "--jobs", "1", "--progress", "--format", "json",
                             "-o", str(report)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(ready):
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, report, "".join(seen) + err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_while_checking_writes_the_report(tmp_path, sig):
    # `big` reports progress only once `handoff`, before it, is done
    code, report, err = interrupted_run(tmp_path, SLOW, sig, ready="big:")
    assert code == 2, err
    verdicts = {v["name"]: v for v in json.loads(report.read_text())}
    assert verdicts["handoff"]["verdict"] == "verified"
    assert verdicts["big"]["verdict"] == "bounded"
    assert "interrupted" in verdicts["big"]["coverage"]
    assert "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_while_importing_writes_the_report(tmp_path, sig):
    sleeper = "import sys, time\nprint('importing', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    code, report, err = interrupted_run(tmp_path, sleeper + GOOD, sig, ready="importing")
    assert code == 2, err
    [v] = json.loads(report.read_text())
    assert v["verdict"] == "bounded" and "interrupted" in v["coverage"]


# -- docs that must not go stale -------------------------------------------------------------

def test_readme_sample_output_is_what_check_prints(capsys):
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code, out, _ = run(capsys, "check", "examples/handoff.py::wrong_arrival_count",
                           "--no-cache")
    finally:
        os.chdir(cwd)
    assert code == 1
    assert "```\n" + out + "```" in readme, out


def test_pre_commit_hooks_name_only_docs_that_exist():
    import re
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml")) as f:
        text = f.read()
    for doc in re.findall(r"[\w./-]+\.md\b", text):
        assert os.path.exists(os.path.join(ROOT, doc)), doc


# -- 3. prove --timeout: bounded in wall time, deterministic in verdict ------------------------

def test_prove_verdict_depends_on_input_and_budget_only():
    from barrierproof import protocol
    from barrierproof.checker.symbolic.prove import prove

    @protocol(symbolic=("rounds",))
    def handoff(k, rounds=1):
        k.threads(2, name="wg")
        k.assume(rounds >= 0)
        ready = k.Barrier(num_arrivals=1)
        done = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            with k.loop(rounds):
                k.barrier_arrive(ready)
                k.barrier_wait(done)
        with k.otherwise():
            with k.loop(rounds):
                k.barrier_wait(ready)
                k.barrier_arrive(done)
    kernel = handoff.build()
    # A budget too small for the proof: `unknown`, for the same counted reason, every time.
    small = [prove(kernel, ["rounds"], {}, timeout=0.005) for _ in range(2)]
    assert [p.status for p in small] == ["unknown", "unknown"]
    assert small[0].reason == small[1].reason and "work budget of --timeout 0.005 spent" in \
        small[0].reason
    # Enough work: proved, every time.
    assert [prove(kernel, ["rounds"], {}, timeout=20).status for _ in range(2)] == \
        ["proved", "proved"]
    # The budget is the sum over the queries: each may spend only what the others left, so a
    # run never spends several times its --timeout (Z3's own counter is the measure).
    from barrierproof.checker.symbolic.prove import Z3_UNITS_PER_SECOND, z3_work
    for seconds in (0.05, 0.2):
        before = z3_work()
        assert prove(kernel, ["rounds"], {}, timeout=seconds).status == "unknown"
        assert z3_work() - before <= 1.05 * seconds * Z3_UNITS_PER_SECOND + 10_000


def test_prove_returns_within_its_nets_plus_a_small_constant():
    """`--timeout` is prove's work budget; its net stops it at WALL_NET_FACTOR times that in
    CPU seconds at the latest (plus a grace), and the wall clock LOAD_ALLOWANCE times later."""
    import resource
    from barrierproof.checker.check import LOAD_ALLOWANCE, WALL_NET_FACTOR
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code, out, err = cli("prove", "examples/hopper_ring.py::tma_ring", "--timeout", "1",
                         "--no-cache", "--format", "json")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - start
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    [v] = json.loads(out)
    assert (code, v["verdict"]) in ((0, "proved"), (2, "unknown")), v
    if v["verdict"] == "unknown":
        assert "--timeout 1" in v["coverage"] or "net" in v["coverage"], v
    assert cpu < WALL_NET_FACTOR * 1 + 2 + 8, cpu   # 8 s: starting Python, importing, building
    assert wall < WALL_NET_FACTOR * LOAD_ALLOWANCE * 1 + 2 + 8, wall


def test_a_cluster_deadlock_names_the_block_that_never_arrives(capsys):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code, out, _ = run(capsys, "check",
                           "examples/cluster.py::cluster_barrier_skipped_by_a_block",
                           "--no-cache", "--format", "json")
    finally:
        os.chdir(cwd)
    assert code == 1
    details = json.loads(out)[0]["diagnostics"][0]["details"]
    assert details and all("block(s) b1 of its cluster never arrive on it" in d for d in details)


def test_prove_never_claims_a_proof_over_an_empty_range(tmp_path, capsys):
    path = write(tmp_path, "p.py", '''
        from barrierproof import protocol

        @protocol(symbolic=("rounds",))
        def handoff(k, rounds=1, width=1):
            k.threads(2, name="wg")
            k.assume(rounds >= 1, width >= 1)
            ready = k.Barrier(num_arrivals=1)
            with k.when(k.thread == 0):
                with k.loop(rounds):
                    k.barrier_arrive(ready)
            with k.otherwise():
                with k.loop(rounds):
                    k.barrier_wait(ready)

        @protocol(symbolic=("rounds",))
        def never(k, rounds=1):
            k.threads(1)
            k.assume(rounds >= 1, rounds <= 0)
    ''')
    code, out, err = run(capsys, "prove", path + "::handoff", "--param", "width=0", "--no-cache",
                         "--format", "json")
    [v] = json.loads(out)
    assert code == 3 and v["verdict"] == "error"
    assert "width=0 break its assumption k.assume(width >= 1)" in v["diagnostics"][0]["message"]
    code, out, err = run(capsys, "prove", path + "::never", "--no-cache", "--format", "json")
    [v] = json.loads(out)
    assert code == 2 and v["verdict"] == "unknown" and "vacuous" in v["coverage"]


@pytest.mark.parametrize("flags, needle", [
    (["--pick", "0"], "--pick must be an integer >= 1"),
    (["--max-fixes", "-1"], "--max-fixes must be an integer >= 1"),
    (["--budget", "nan"], "--budget must be a positive number of seconds, not nan"),
])
def test_fix_flags_are_checked(tmp_path, capsys, flags, needle):
    path = write(tmp_path, "p.py", BAD + MARKS)
    code, _, err = run(capsys, "fix", path + "::stuck", *flags)
    one_line_error(code, err, needle)
    assert not (tmp_path / "imported.mark").exists()


def test_no_message_points_at_line_zero(tmp_path, capsys):
    path = write(tmp_path, "p.py", GOOD)
    code, _, err = run(capsys, "check", path + "::nope", "--no-cache")
    one_line_error(code, err, "has no protocol or kernel function named 'nope'")
    assert ":0:" not in err and ":0 " not in err
    pallas = write(tmp_path, "k.py", "import os\n\nEXPECT = {'kernel': 'verified'}\n")
    code, _, err = run(capsys, "check", pallas, "--no-cache")
    one_line_error(code, err, "k.py:3: EXPECT names 'kernel', which")


def test_the_watchdogs_stop_is_not_lost_inside_a_finalizer(monkeypatch):
    """A stop arriving while an object is freed (Z3 terms are freed in `__del__`) would be
    printed as "Exception ignored" and dropped; it comes at the next kick instead."""
    from barrierproof.guard import LimitReached, Watchdog
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)

    class SlowToFree:
        def __del__(self):
            until = time.monotonic() + 0.8           # the limit fires in here
            while time.monotonic() < until:
                pass

    with pytest.raises(LimitReached):
        with Watchdog(0.1, None, "freeing"):
            obj = SlowToFree()
            del obj
            while True:
                time.sleep(0.01)
    assert not dropped


def test_unknown_name_lists_the_kernel_functions_of_the_file(tmp_path):
    """A Pallas kernel file needs no EXPECT entry for `file.py::NAME`: the hint names it."""
    (tmp_path / "f.py").write_text("def ring_sum():\n    pass\n\n\ndef _helper():\n    pass\n")
    code, _, err = cli("check", "f.py::nope", "--no-cache", cwd=tmp_path)
    one_line_error(code, err, "available: ring_sum)")
