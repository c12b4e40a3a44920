"""The multi-process explorer (checker/engines/mproc.py) against the one-process compiled core:
the same verdict, code, distinct states, transitions, depth and counterexample (schedule and
witness) on the example systems and on generated protocols, with 2 and 3 workers; the limits;
what it does not run said in a note; a worker's death and a Ctrl-C end every worker and report
the levels covered. About 25 s on one core, 15 s of it the examples (each search starts its
processes: about 0.1 s)."""

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import compiled, mproc
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.checker.engines.flatten import _memory, refusal
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems

from test_compiled_core import _big_copy, _outcome
from test_examples import TARGETS
from test_properties import protocols

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from family import cluster, pipeline  # noqa: E402

CAP = Limits(max_states=50_000, timeout=None)
built = pytest.mark.skipif(mproc._mproc is None or not compiled.available(),
                           reason="the compiled extensions are not built")
PARALLEL = mproc.NOTE.split("{n}")[0]


def _same(system, workers=2, ignore=frozenset(), limits=CAP):
    one = explore(system, limits, reduction=False, ignore=ignore, order="bfs", core="compiled")
    many = explore(system, limits, reduction=False, ignore=ignore, order="bfs", workers=workers)
    assert any(n.startswith(PARALLEL) for n in many.notes), many.notes
    assert _outcome(many) == _outcome(one)
    if one.violation is not None:
        assert many.violation.message == one.violation.message
    return many


def test_the_workers_are_built_where_a_compiler_is():
    """pip builds _mproc.c beside _core.c wherever a C compiler is: the tests below never skip
    there."""
    if shutil.which("gcc") or shutil.which("cc"):
        assert mproc._mproc is not None


@pytest.fixture(scope="module")
def examples():
    accepted = []
    for target in TARGETS:
        try:
            systems = compile_systems(target.build())
        except ModelError:
            continue
        accepted += [s for s in systems if refusal(s) is None]
    return accepted


@pytest.mark.slow
@built
def test_the_examples_search_the_same_graph_in_parallel(examples):
    """Every other accepted example on 2 workers, the rest on 3: violations of every kind
    (deadlocks, steps, states, parity aliasing, hardware barriers, memory races) with the same
    counterexample."""
    verdicts, features = set(), set()
    for n, system in enumerate(examples):
        r = _same(system, workers=2 + n % 2)
        verdicts.add(r.violation.code if r.violation else r.status)
        features |= _features(system)
    assert len(examples) >= 200
    assert {"verified", "BP100", "BP101", "BP144", "BP200", "BP201"} <= verdicts, verdicts
    # the widened core's state: every part of it is searched by the workers too
    assert features == {"tcgen05 queues", "hardware barriers", "mbarrier init", "memory races",
                        "clusters"}, features


def _features(system) -> set[str]:
    """The parts of the compiled core's state a System uses beyond barriers and slots."""
    races = _memory(system)[0][0]
    return {name for name, used in [("tcgen05 queues", system.queue_agents),
                                    ("hardware barriers", system.hw_instances),
                                    ("mbarrier init", system.init_insts),
                                    ("memory races", races), ("clusters", len(system.blocks) > 1)]
            if used}


@built
def test_ignored_codes_are_searched_past_alike(examples):
    for system in examples[::5]:
        _same(system, ignore=frozenset({"BP101", "BP121"}))
        _same(system, ignore=frozenset({"BP100", "BP103", "BP104"}))


@built
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(protocols(), st.sampled_from([frozenset(), frozenset({"BP121"}), frozenset({"BP101"})]),
       st.sampled_from([2, 3, 4]))
def test_generated_protocols_search_the_same_graph(kernel, ignore, workers):
    system = System(kernel)
    if refusal(system) is None:
        _same(system, workers, ignore)


@built
@pytest.mark.parametrize("proto, params", [(pipeline, dict(stages=3, consumers=3, steps=6)),
                                           (cluster, dict(blocks=3, consumers=1, steps=2))],
                         ids=["pipeline-3-3-6", "cluster-3-1-2"])
def test_the_bench_families_search_the_same_graph(proto, params):
    assert _same(System(proto.build(), params), workers=3).states > 400


@built
def test_limits_stop_at_the_same_depth():
    system = System(pipeline.build(), dict(stages=2, consumers=3, steps=4))
    r = _same(system, limits=Limits(max_depth=7, timeout=None))
    assert r.status == "bounded" and "depth limit 7" in r.reason
    capped = explore(system, Limits(max_states=300, timeout=None), reduction=False, order="bfs",
                     workers=2)
    assert capped.status == "bounded" and "state limit 300" in capped.reason


@built
def test_values_beyond_16_bits_are_searched_in_wider_words():
    assert _same(System(_big_copy(100_000))).status == "verified"


@built
def test_what_it_does_not_run_runs_in_one_process_with_a_note():
    system = System(pipeline.build(), dict(stages=2, consumers=2, steps=3))
    reduced = explore(system, CAP, workers=2)
    assert not any(n.startswith(PARALLEL) for n in reduced.notes)
    assert any("searched in one process, not 2" in n and "--no-reduction" in n
               for n in reduced.notes), reduced.notes
    python = explore(system, CAP, reduction=False, order="bfs", core="python", workers=2)
    assert any("--core python" in n for n in python.notes)


@built
def test_the_verdict_pipeline_replays_the_parallel_counterexample():
    bad = next(t for t in TARGETS if t.name == "early_exit_skips_wait")
    one = check_kernel(bad.build(), options=Options(reduction=False, order="bfs"))
    many = check_kernel(bad.build(), options=Options(reduction=False, order="bfs", workers=2))
    assert any(n.startswith(PARALLEL) for n in many.notes)
    assert (many.label, many.codes, many.states, many.trace.actions) == \
        (one.label, one.codes, one.states, one.trace.actions)


BIG = System(pipeline.build(), dict(stages=3, consumers=5, steps=8))


@built
def test_a_dead_worker_ends_the_search_bounded_and_the_others_with_it():
    def kill_one(info):
        if info["depth"] == 3:
            os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)

    r = explore(BIG, Limits(max_states=None, timeout=None), reduction=False, order="bfs",
                workers=2, progress=kill_one)
    assert r.status == "bounded" and "ended (exit code -9)" in r.reason, r.reason
    assert not multiprocessing.active_children()


@built
def test_an_interrupt_reports_the_levels_covered():
    def interrupt(info):
        if info["depth"] == 5:
            raise KeyboardInterrupt

    r = explore(BIG, Limits(max_states=None, timeout=None), reduction=False, order="bfs",
                workers=2, progress=interrupt)
    assert r.status == "bounded" and r.reason == "interrupted at depth 5"
    assert r.states > 100 and not multiprocessing.active_children()


def _children(pid: int) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        return set()


@built
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc")
def test_ctrl_c_on_the_command_line_leaves_no_worker_behind(tmp_path):
    """A terminal's Ctrl-C (SIGINT to the process group) mid-search: the run reports a
    bounded verdict and every worker process is gone. About 3 s."""
    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
    cmd = [sys.executable, "-m", "barrierproof", "check",
           os.path.join(bench, "family.py::pipeline"),
           "--no-reduction", "--workers", "2", "--no-cache", "--max-states", "100000000",
           "--param", "stages=3", "--param", "consumers=7", "--param", "steps=12"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, cwd=tmp_path)
    workers: set[int] = set()
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        time.sleep(0.05)
    assert len(workers) >= 2, proc.communicate()
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert b"interrupted" in out + err, (out, err)
    assert all(not os.path.exists(f"/proc/{pid}") or _zombie_or_gone(pid) for pid in workers)


def _zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] in ("Z", "X")
    except OSError:
        return True
