"""The command-line contract: verdict lines, JSON, exit codes, replay, and bad input."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from barrierproof.cli import main

from conftest import EXAMPLES, ROOT


def run_cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "barrierproof", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


# `check examples/ --expect` (text, JUnit and JSON from one run):
# test_reports.py::test_one_run_of_the_examples_meets_expectations_in_text_junit_and_json


def test_exit_codes_follow_the_verdict():
    assert run_cli("check", "examples/handoff.py::single_handoff")[0] == 0
    assert run_cli("check", "examples/handoff.py::wrong_arrival_count")[0] == 1
    assert run_cli("check", "examples/hopper_ring.py::tma_ring", "--param", "steps=40",
                   "--max-states", "50")[0] == 2
    assert run_cli("check", "examples/handoff.py::semaphore_handoff")[0] == 2
    assert run_cli("check", "examples/handoff.py::semaphore_handoff", "--ignore", "BP190")[0] == 0
    assert run_cli("check", "examples/nope.py")[0] == 3


def test_json_contract(tmp_path):
    code, out, _ = run_cli("check", "examples/hopper_ring.py", "--format", "json")
    assert code == 3  # the file holds an input-error example (index out of range)
    data = json.loads(out)
    assert isinstance(data, list) and len(data) >= 5
    for item in data:
        assert {"name", "verdict", "diagnostics", "trace", "states", "seconds"} <= set(item)
        for d in item["diagnostics"]:
            assert {"code", "message", "location"} <= set(d)
    bad = next(i for i in data if i["name"] == "ring_without_drain")
    assert bad["verdict"] == "violation" and bad["diagnostics"][0]["code"] == "BP103"
    assert bad["trace"]["steps"] and bad["trace"]["violation"]["code"] == "BP103"
    good = next(i for i in data if i["name"] == "tma_ring")
    assert good["verdict"] == "verified" and good["trace"] is None and good["states"] > 0


def test_bounded_says_what_was_covered():
    code, out, _ = run_cli("check", "examples/hopper_ring.py::tma_ring", "--param", "steps=40",
                           "--max-states", "50", "--format", "json")
    assert code == 2
    item = json.loads(out)[0]
    assert item["verdict"] == "bounded" and "state limit 50" in item["coverage"]


def test_replay_round_trip(tmp_path):
    code, out, _ = run_cli("check", "examples/cutlass.py::expect_tx_larger_than_copy",
                           "--trace-dir", str(tmp_path))
    assert code == 1 and "BP130" in out
    trace = tmp_path / "expect_tx_larger_than_copy.trace.json"
    code, out, err = run_cli("replay", str(trace), "--protocol", "examples/cutlass.py")
    assert code == 1, err
    assert "BP130" in out and "replayed" in out
    assert "independent reference (model/reference): deadlock BP130" in out
    # A trace whose recorded barrier states are wrong is refused by the reference.
    data = json.loads(trace.read_text())
    step = next(s for s in data["steps"] if s["barriers"])
    name = next(iter(step["barriers"]))
    step["barriers"][name]["phase"] += 1
    trace.write_text(json.dumps(data))
    code, out, err = run_cli("replay", str(trace), "--protocol", "examples/cutlass.py")
    assert code == 3 and "independent reference" in err and name in err, err
    # A tampered trace does not replay: an input error, not a traceback.
    data = json.loads(trace.read_text())
    data["actions"] = [data["actions"][0]] * 6
    trace.write_text(json.dumps(data))
    code, out, err = run_cli("replay", str(trace), "--protocol", "examples/cutlass.py")
    assert code == 3 and "does not replay" in err and "Traceback" not in err


BAD_INPUTS = {
    "num_arrivals_zero": ("""
        @protocol
        def p(k):
            bar = k.Barrier(num_arrivals=0)
        """, "num_arrivals=0"),
    "undefined_barrier": ("""
        @protocol
        def q(k):
            k.Barrier()

        @protocol
        def p(k):
            other = q.build().barriers[0]
            from barrierproof.model.ir import BarrierRef
            k.barrier_arrive(BarrierRef(other))
        """, "not allocated"),
    "index_out_of_range": ("""
        @protocol
        def p(k):
            bar = k.Barrier(num_barriers=2)
            k.barrier_arrive(bar.at[2])
        """, "out of range"),
    "non_integer_expression": ("""
        @protocol
        def p(k, steps=2):
            bar = k.Barrier()
            with k.loop(steps / 2):
                k.barrier_arrive(bar)
        """, "unsupported operand"),
    "float_index": ("""
        @protocol
        def p(k):
            bar = k.Barrier(num_barriers=2)
            k.barrier_arrive(bar.at[0.5])
        """, "float"),
    "parameter_without_value": ("""
        @protocol
        def p(k, steps):
            bar = k.Barrier()
            with k.loop(steps):
                k.barrier_arrive(bar)
        """, "has no value"),
    "python_error": ("""
        @protocol
        def p(k):
            bar = k.Barrier()
            k.barrier_arrive(barr)
        """, "NameError"),
    "python_if_on_symbol": ("""
        @protocol
        def p(k, steps=2):
            if steps > 1:
                pass
        """, "k.when"),
    "python_range_over_parameter": ("""
        @protocol
        def p(k, stages=2):
            bar = k.Barrier(num_barriers=stages)
            for s in range(stages):
                k.barrier_arrive(bar.at[s])
        """, "range()"),
    "python_min_of_parameters": ("""
        @protocol
        def p(k, stages=2, steps=4):
            bar = k.Barrier()
            with k.loop(min(steps, stages)):
                k.barrier_arrive(bar)
        """, "minimum"),
    "python_and_on_conditions": ("""
        @protocol
        def p(k, steps=2):
            k.threads(2)
            bar = k.Barrier()
            with k.when(k.thread == 0 and steps > 1):
                k.barrier_arrive(bar)
        """, "&"),
    "axis_named_like_a_parameter": ("""
        @protocol
        def p(k, m=3):
            k.grid(m=m)
            bar = k.Barrier()
            with k.when(k.program_id("m") == m - 1):
                k.barrier_arrive(bar)
        """, "same name"),
    "thread_branch_without_threads": ("""
        @protocol
        def p(k):
            bar = k.Barrier()
            with k.when(k.thread == 1):
                k.barrier_arrive(bar)
        """, "k.threads"),
    "misspelt_expectation": ("""
        @protocol(expect="verifed")
        def p(k):
            k.Barrier()
        """, "not a verdict"),
    "syntax_error": ("""
        @protocol
        def p(k)
            pass
        """, "SyntaxError"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_with_location(tmp_path, case, capsys):
    body, needle = BAD_INPUTS[case]
    path = tmp_path / f"{case}.py"
    path.write_text("from barrierproof import protocol\n" + textwrap.dedent(body))
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    text = out + err
    assert code == 3, text
    assert "Traceback" not in text
    assert needle in text, text
    assert f"{case}.py:" in text, text       # file:line
    assert "hint" in text or "help" in text, text


def test_unknown_parameter_and_bad_param_syntax(capsys):
    assert main(["check", os.path.join(EXAMPLES, "handoff.py::single_handoff"),
                 "--param", "stages=2"]) == 3
    assert main(["check", os.path.join(EXAMPLES, "handoff.py"), "--param", "steps"]) == 3
    assert main(["check", os.path.join(EXAMPLES, "handoff.py::nope")]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "available:" in err


def test_param_on_a_sized_pallas_kernel_says_prove_covers_its_sizes(capsys):
    """A --param naming a size of a @sizes kernel: `check` traces it at its defaults, `prove`
    covers every size; the hint says so instead of asking for the @sizes it already has."""
    pytest.importorskip("jax")
    assert main(["check", os.path.join(EXAMPLES, "pallas", "sizes.py::ring_any_steps"),
                 "--param", "steps=3"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "covered by `prove`" in err, err
    assert "declare sizes with @sizes" not in err, err


def test_usage_errors_exit_3():
    assert run_cli("check")[0] == 3
    assert run_cli("frobnicate")[0] == 3


def test_random_run_prints_a_timeline():
    code, out, _ = run_cli("run", "examples/handoff.py::single_handoff", "--seed", "1")
    assert code == 0 and "terminated" in out and "barrier_wait(ready)" in out
    code, out, _ = run_cli("run", "examples/handoff.py::wrong_arrival_count")
    assert code == 1 and "BP100" in out


def test_summary_counts_errors_against_the_expectations(tmp_path):
    """A file that fails to load met no expectation: the summary's count includes it."""
    shutil.copy(os.path.join(EXAMPLES, "handoff.py"), tmp_path / "handoff.py")
    (tmp_path / "broken.py").write_text("import no_such_module_here\n\n@protocol\ndef p(k):\n"
                                        "    pass\n")
    proc = subprocess.run([sys.executable, "-m", "barrierproof", "check", "handoff.py",
                           "broken.py", "--no-cache"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    summary = proc.stdout.strip().splitlines()[-1]
    assert "1 error" in summary and "7/8 as expected" in summary, proc.stdout + proc.stderr
