"""User code runs in a child process (barrierproof/isolate.py): nothing a protocol file does at
import or build time decides the verdicts or the exit code, holds the run, or escapes its limits.

Each case is a protocol whose thread 1 waits forever (a violation), preceded by code that tries
to turn the run into a pass, a hang or a crash; run from the command line, as CI runs it, one
process at a time and with a worker pool."""

import io
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from barrierproof import isolate

HEADER = "from barrierproof import protocol\n"
STUCK = '''
@protocol
def stuck(k):
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=2)
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(ready)
        k.barrier_wait(done)
    with k.otherwise():
        k.barrier_wait(ready)
        k.barrier_arrive(done)
'''


def check(tmp_path, prelude: str, *flags, jobs="1", timeout=90, pipe=False, body=STUCK):
    """`check` on p.py (prelude + body) and, with a pool, a second stuck file; (exit code,
    stdout, stderr, seconds). `pipe`: stdout goes through `| cat`, as a CI log reads it."""
    (tmp_path / "p.py").write_text(HEADER + textwrap.dedent(prelude) + body)
    files = ["p.py"]
    if jobs != "1":
        (tmp_path / "q.py").write_text(HEADER + STUCK.replace("def stuck", "def stuck2"))
        files.append("q.py")
    argv = [sys.executable, "-m", "barrierproof", "check", *files, "--no-cache", "--jobs", jobs,
            *flags]
    start = time.monotonic()
    if pipe:
        command = "set -o pipefail; " + " ".join(argv) + " | cat"
        proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              cwd=tmp_path, timeout=timeout)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path,
                              timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


# -- no false pass ----------------------------------------------------------------------------

PATCHES = {
    "rebinds_the_engine_and_the_exit_code": '''
        import barrierproof.checker.check as engine
        import barrierproof.check_cmd as cli
        _real = engine.run_engine
        def run_engine(*args, **kwargs):
            verdict = _real(*args, **kwargs)
            verdict.verdict, verdict.diagnostics, verdict.trace = "verified", [], None
            return verdict
        engine.run_engine = run_engine
        cli.exit_code = lambda *args, **kwargs: 0
        ''',
    "rebinds_the_verdict_class": '''
        from barrierproof.checker import verdict
        verdict.Verdict.verdict = property(lambda self: "verified", lambda self, value: None)
        ''',
    "wraps_sys_exit": '''
        import sys
        _exit = sys.exit
        sys.exit = lambda code=0: _exit(0)
        ''',
    "exits_at_interpreter_exit": '''
        import atexit, os
        atexit.register(lambda: os._exit(0))
        ''',
}


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("case", sorted(PATCHES))
def test_user_code_that_patches_barrierproof_changes_no_verdict(tmp_path, case, jobs):
    code, out, err, _ = check(tmp_path, PATCHES[case], jobs=jobs)
    assert code == 1, (code, out, err)
    assert "p.py::stuck: violation:BP100" in out and "verified" not in out, out


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("where", ["import", "body"])
def test_user_code_that_ends_the_process_is_an_input_error(tmp_path, where, jobs):
    if where == "import":
        code, out, err, _ = check(tmp_path, "import os\nos._exit(0)\n", jobs=jobs)
        doing = "importing p.py"
    else:
        body = STUCK.replace('k.threads(2, name="wg")', 'k.threads(2, name="wg")\n    os._exit(0)')
        code, out, err, _ = check(tmp_path, "import os\n", jobs=jobs, body=body)
        doing = "building stuck"
    assert code == 3, (code, out, err)
    assert f"ended (exit status 0) without a result while {doing}" in out + err, (out, err)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_lowered_recursion_limit_is_the_user_codes_own(tmp_path, jobs):
    code, out, err, _ = check(tmp_path, "import sys\nsys.setrecursionlimit(40)\n", jobs=jobs)
    assert code == 1 and "p.py::stuck: violation:BP100" in out, (code, out, err)


# -- no hang, every limit kept ----------------------------------------------------------------

FORKS = {
    "setsid_and_fork": '''
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
            os._exit(0)
        ''',
    "subprocess_in_a_session_of_its_own": '''
        import subprocess
        subprocess.Popen(["sleep", "120"], start_new_session=True)
        ''',
}


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("case", sorted(FORKS))
def test_a_process_the_user_code_leaves_does_not_hold_the_report(tmp_path, case, jobs):
    code, out, err, seconds = check(tmp_path, FORKS[case], jobs=jobs, pipe=True)
    assert code == 1 and "p.py::stuck: violation:BP100" in out, (code, out, err)
    assert seconds < 60, seconds


def test_user_code_that_blocks_the_watchdogs_signal_ends_at_its_limit(tmp_path):
    prelude = '''
        import signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        while True:
            pass
        '''
    code, out, err, seconds = check(tmp_path, prelude, "--timeout", "2")
    assert code == 2, (code, out, err)
    assert "bounded (stopped: time limit 2s reached while importing p.py" in out, out
    assert seconds < 2 + isolate.SLACK + 10, seconds


def test_a_native_allocation_past_max_memory_is_stopped(tmp_path):
    pytest.importorskip("numpy")
    prelude = "import numpy\nblock = numpy.ones(2 ** 30 // 8)\n"     # 1 GB, filled in C
    code, out, err, seconds = check(tmp_path, prelude, "--max-memory", "300")
    assert code == 2, (code, out, err)
    assert "memory limit 300 MB reached while importing p.py" in out, out


def test_user_code_that_ignores_sigterm_cannot_keep_the_run_from_stopping(tmp_path):
    """The signals the user's code takes are its child's: SIGTERM still ends the run, with
    the report."""
    (tmp_path / "a.py").write_text(HEADER + textwrap.dedent('''
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        ''') + STUCK)
    (tmp_path / "b.py").write_text(HEADER + textwrap.dedent('''
        import sys, time
        @protocol
        def slow(k):
            print("building", file=sys.stderr, flush=True)
            time.sleep(60)
            k.threads(1)
        '''))
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", "a.py", "b.py",
                             "--no-cache", "--jobs", "1", "--format", "json", "-o", "r.json"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:
        if line.startswith("building"):
            break
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert time.monotonic() - start < 20
    verdicts = json.loads((tmp_path / "r.json").read_text())
    assert verdicts and all(v["verdict"] == "bounded" and "interrupted" in v["coverage"]
                            for v in verdicts), verdicts


@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGTERM, signal.SIGTERM],
                                     [signal.SIGHUP]])
def test_a_signal_while_the_pool_builds_is_an_interrupt_and_leaves_no_process(tmp_path,
                                                                             signals):
    """Not the user's KeyboardInterrupt (an input error): the run's; a second SIGTERM while
    the first is handled orphans nothing."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(HEADER + textwrap.dedent(f'''
            import time
            @protocol
            def {name}(k):
                time.sleep(60)
                k.threads(1)
            '''))
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", "a.py", "b.py",
                             "--no-cache", "--jobs", "2", "--format", "json", "-o", "r.json"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    time.sleep(8)       # the workers are building
    group = _group(proc.pid)
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.3)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    verdicts = json.loads((tmp_path / "r.json").read_text())
    assert [v["verdict"] for v in verdicts] == ["bounded", "bounded"], verdicts
    assert "KeyboardInterrupt" not in json.dumps(verdicts)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(group):
        time.sleep(0.2)
    left = _alive(group)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def _group(pgid: int) -> list[int]:
    """The run's processes: its group, and their descendants (a child building user code is a
    group of its own)."""
    stats = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            stats[int(pid)] = (int(fields[1]), int(fields[2]))     # ppid, pgrp
        except (OSError, ValueError, IndexError):
            pass
    found = {pid for pid, (_, group) in stats.items() if group == pgid}
    grew = True
    while grew:
        more = {pid for pid, (parent, _) in stats.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    return alive


# -- what comes back is data ------------------------------------------------------------------

class _Runs:
    def __reduce__(self):
        return (os.system, ("true",))


def test_the_parent_reads_only_the_irs_classes_from_a_child():
    with pytest.raises(pickle.UnpicklingError, match="posix.system is not plain data"):
        isolate.plain(pickle.dumps(("ok", _Runs())))
    from barrierproof.model.ir import Loc
    assert isolate.plain(pickle.dumps(("ok", [Loc("p.py", 3)]))) == ("ok", [Loc("p.py", 3)])
