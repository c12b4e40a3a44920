"""JAX's GPU interpret mode as an oracle: every example kernel it can run is run in a child
process under a watchdog, and what the interpreter did agrees with barrierproof's verdict.

The corpus is written so that each bug shows on the interpreter's first schedule (e.g. a consumer
that first waits for a `go` signal), so one run per kernel suffices; where the interpreter is blind
(TMA copies land at issue, pending arrivals are not checked at exit) the example says so and the
interpreter completes.
"""

import json
import os

import pytest

from barrierproof import confirm as oracle
from barrierproof.cli import main
from barrierproof.model import pallas

from conftest import EXAMPLES, ROOT

# The interpreter runs of the module fixtures below take a minute or two: one worker runs the
# tests that read them (the tests that run the interpreter themselves go to any worker).
SHARED = pytest.mark.xdist_group("pallas_confirm")

PALLAS = os.path.join(EXAMPLES, "pallas")
FILES = ["handoff.py", "ring.py", "roles.py", "hardware.py", "audit_kernels.py"]
MODULES = {f: pallas.import_file(os.path.join(PALLAS, f)) for f in FILES}
RUNNABLE = [(f, n) for f, m in MODULES.items() for n, o in m.INTERPRETER.items()
            if o not in ("unsupported", "schedule-dependent")]
# Bugs the free-running interpreter shows in some runs only: they are checked under the forced
# schedule of their counterexample (FORCED below), never by one free run.
SCHEDULE_DEPENDENT = [(f, n) for f, m in MODULES.items() for n, o in m.INTERPRETER.items()
                      if o == "schedule-dependent"]
UNSUPPORTED_SAMPLE = [("hardware.py", "warp_handoff"), ("hardware.py", "tcgen05_commit")]
# JAX's own kernels that the interpreter runs in seconds at the example configuration.
SHIPPED = pallas.import_file(os.path.join(PALLAS, "jax_kernels.py"))
SHIPPED_RUNNABLE = ["ragged_dot"]
TIMEOUT = 90.0     # a hang is reported after 5 s without barrier progress, long before this


def _ref(file, name):
    return f"{os.path.relpath(os.path.join(PALLAS, file), ROOT)}::{name}"


@pytest.fixture(scope="module")
def outcomes():
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        targets = [_ref(f, n) for f, n in RUNNABLE + UNSUPPORTED_SAMPLE] + \
            [_ref("jax_kernels.py", n) for n in SHIPPED_RUNNABLE]
        results = oracle.confirm_all(targets, runs=1, timeout=TIMEOUT)
    finally:
        os.chdir(cwd)
    return {r.target: r for r in results}


def test_most_of_the_corpus_runs_on_the_interpreter():
    assert len(RUNNABLE) >= 20


@SHARED
@pytest.mark.parametrize("file,name", RUNNABLE, ids=[f"{f[:-3]}.{n}" for f, n in RUNNABLE])
def test_interpreter_agrees_with_barrierproof(outcomes, file, name):
    mod = MODULES[file]
    result = outcomes[_ref(file, name)]
    assert result.outcome == mod.INTERPRETER[name], result.one_line()
    # a raise agrees only if its message's class can stand for the code; a hang only if JAX's
    # own threads are blocked in its Barrier.wait
    assert oracle.agrees(mod.EXPECT[name], result.outcome, result.message), \
        f"barrierproof says {mod.EXPECT[name]}, the interpreter {result.one_line()}"


@SHARED
@pytest.mark.parametrize("file,name", UNSUPPORTED_SAMPLE)
def test_unsupported_kernels_are_reported_as_such(outcomes, file, name):
    result = outcomes[_ref(file, name)]
    assert result.outcome == "unsupported", result.one_line()
    assert not oracle.agrees(MODULES[file].EXPECT[name], result.outcome)


@SHARED
@pytest.mark.parametrize("name", SHIPPED_RUNNABLE)
def test_interpreter_agrees_on_jax_shipped_kernels(outcomes, name):
    result = outcomes[_ref("jax_kernels.py", name)]
    assert result.outcome == "completed", result.one_line()
    assert oracle.agrees(SHIPPED.EXPECT[name], result.outcome)


@SHARED
def test_raised_outcomes_carry_the_interpreters_message(outcomes):
    lap = outcomes[_ref("ring.py", "producer_laps_consumer")]
    assert "completed again before previous completion was observed" in lap.message
    drain = outcomes[_ref("ring.py", "ring_without_drain")]
    assert "did not observe all phases" in drain.message
    bp110 = outcomes[_ref("hardware.py", "tcgen05_commit_plain_barrier")]
    assert "orders_tensor_core" in bp110.message
    hung = outcomes[_ref("handoff.py", "missing_arrival")]
    assert "1 thread(s) blocked in JAX's Barrier.wait (shared_memory.py:" in hung.message


def test_message_classes():
    assert oracle.message_class("ValueError: Barrier arrival was completed again before "
                                "previous completion was observed by a thread.")[0] == \
        "completed-twice"
    assert oracle.agrees("violation:BP103", "raised",
                         "ValueError: Thread 1 did not observe all phases (2) for barrier")
    # the right outcome with the wrong message class does not agree
    assert not oracle.agrees("violation:BP103", "raised", "ValueError: Barrier arrival was "
                             "completed again before previous completion was observed")
    assert not oracle.agrees("violation:BP101", "raised", "IndexError: out of bounds")
    assert not oracle.agrees("violation:BP100", "hung", "no thread is in Barrier.wait; ...")


def test_agreement_table():
    assert oracle.agrees("verified", "completed")
    assert not oracle.agrees("verified", "hung")
    assert oracle.agrees("violation:BP100", "hung")
    assert not oracle.agrees("violation:BP100", "completed")
    assert oracle.agrees("violation:BP104", "completed")      # the interpreter is blind to it
    assert not oracle.agrees("violation:BP101", "unsupported")
    assert not oracle.agrees("verified", "timeout")          # a slow run proves nothing


def test_confirm_command_line(capsys):
    os.chdir(ROOT)
    assert main(["confirm", _ref("handoff.py", "handoff"), "--timeout", "90"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("handoff.py::handoff: completed"), out
    assert main(["confirm", _ref("handoff.py", "nope")]) == 3
    assert "has no function nope" in capsys.readouterr().out


# Violations found by search (static ones have no schedule) that the interpreter can show (it
# completes on BP104/BP105 by construction).
STATIC_CODES = ("BP110", "BP111", "BP112", "BP120")
FORCED = [(f, n) for f, n in RUNNABLE + SCHEDULE_DEPENDENT
          if MODULES[f].EXPECT[n].startswith("violation")
          and MODULES[f].EXPECT[n] not in oracle.INTERPRETER_BLIND
          and not MODULES[f].EXPECT[n].endswith(STATIC_CODES)]


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    """Each violation's counterexample, forced on JAX's interpreter threads."""
    from concurrent.futures import ThreadPoolExecutor

    from barrierproof.checker.check import check_kernel

    directory = tmp_path_factory.mktemp("schedules")

    def one(file, name):
        (kernel,) = pallas.load(getattr(MODULES[file], name), name=name)
        verdict = check_kernel(kernel, source=_ref(file, name))
        path = directory / f"{name}.trace.json"
        path.write_text(verdict.trace.dumps())
        return verdict, oracle.confirm_all([_ref(file, name)], timeout=TIMEOUT,
                                           schedule=str(path))[0]

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda fn: one(*fn), FORCED))
    finally:
        os.chdir(cwd)
    return dict(zip(FORCED, results))


def test_there_are_forced_schedules_to_check():
    assert len(FORCED) >= 12 and SCHEDULE_DEPENDENT
    assert set(SCHEDULE_DEPENDENT) <= set(FORCED)


@SHARED
@pytest.mark.parametrize("file,name", FORCED, ids=[f"{f[:-3]}.{n}" for f, n in FORCED])
def test_counterexample_is_reproduced_under_its_schedule(forced, file, name):
    verdict, result = forced[(file, name)]
    assert result.outcome in ("raised", "hung"), result.one_line()
    assert oracle.agrees(verdict.label, result.outcome, result.message), \
        f"barrierproof says {verdict.label}, JAX under the forced schedule {result.one_line()}"
    if result.outcome == "hung":   # played to its end: JAX hangs where the trace ends
        assert "played to its end" in result.message, result.message


def test_the_turnstile_forces_the_order(tmp_path):
    """A schedule in which the consumer waits before the producer arrives cannot be played:
    JAX's wait blocks and the turnstile holds the producer back, so the run stalls at event 1."""
    trace = {"grid_position": {}, "steps": [
        {"agent": "wg1", "agent_kind": "thread", "text": "barrier_wait(ready)"},
        {"agent": "wg0", "agent_kind": "thread", "text": "barrier_arrive(ready)"}]}
    assert oracle.schedule_of(trace) == [(1, "wait"), (0, "arrive")]
    path = tmp_path / "reversed.trace.json"
    path.write_text(json.dumps(trace))
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        (result,) = oracle.confirm_all([_ref("handoff.py", "handoff")], timeout=TIMEOUT,
                                       schedule=str(path))
    finally:
        os.chdir(cwd)
    assert result.outcome == "hung" and "stopped at event 1 of 2 (thread 1 wait)" in \
        result.message, result.one_line()


def test_check_confirm_says_reproduced_only_when_jax_shows_it(capsys):
    os.chdir(ROOT)
    code = main(["check", _ref("ring.py", "consumer_races_free_running_producer"),
                 _ref("handoff.py", "extra_arriving_warpgroup"), "--confirm", "--no-cache"])
    out = capsys.readouterr().out
    assert code == 1
    assert "note: reproduced in JAX's interpreter under this schedule (raised: ValueError: " \
           "Barrier arrival was completed again" in out, out
    # BP104 is invisible to the interpreter: it completes, and the note does not claim more
    assert "JAX's interpreter does not check BP104" in out, out
    assert out.count("reproduced in JAX's interpreter") == 1, out
