"""The same inputs give the same `prove` verdict run after run (issue #32 item 4): each proof
runs in a Z3 context of its own (checker/symbolic/budget.py own_context), so neither the proofs
run before it in the process nor how often the budget is read change its course, its verdict
or the work units it spends."""

from __future__ import annotations

import json
import re
import runpy
import textwrap

import barrierproof.checker.symbolic.prove as prove_module
from barrierproof.checker.check import Options
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.budget import units_spent
from barrierproof.cli import main

TARGETS = textwrap.dedent('''
    from barrierproof.model.dsl import protocol


    @protocol(symbolic=("rounds",))
    def no_backpressure(k, rounds=1):
        k.threads(2, name="wg")
        k.assume(rounds >= 0)
        ready = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            with k.loop(rounds):
                k.barrier_arrive(ready)
        with k.otherwise():
            with k.loop(rounds):
                k.barrier_wait(ready)


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
''')



def _targets(tmp_path):
    path = tmp_path / "targets.py"
    path.write_text(TARGETS)
    return path


def _without_seconds(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?s\b", "Ns", text)


def _prove(kernel, progress=None):
    """(verdict, coverage without its seconds, work units spent)."""
    before = units_spent()
    found = prove_module.prove_kernel(kernel, options=Options(Limits(timeout=20),
                                                              progress=progress))
    return found.verdict, _without_seconds(found.coverage), units_spent() - before


def test_a_proof_takes_the_same_course_after_other_proofs(tmp_path):
    targets = runpy.run_path(str(_targets(tmp_path)))
    handoff, no_backpressure = targets["handoff"], targets["no_backpressure"]
    alone = _prove(handoff.build())
    assert alone[0] == "proved", alone
    assert _prove(no_backpressure.build())[0] == "violation"
    # after a refutation and a proof, and with the progress display reading the budget
    assert _prove(handoff.build()) == alone
    assert _prove(handoff.build(), progress=lambda info: None) == alone


def test_prove_over_a_file_gives_each_target_the_verdict_it_has_alone(tmp_path, monkeypatch):
    path = _targets(tmp_path)
    spent = []
    proved = prove_module.prove_kernel

    def counted(kernel, *args, **kwargs):
        before = units_spent()
        found = proved(kernel, *args, **kwargs)
        spent.append((kernel.name, units_spent() - before))
        return found
    monkeypatch.setattr(prove_module, "prove_kernel", counted)

    def run(*refs) -> dict:
        out = tmp_path / "out.json"
        spent.clear()
        main(["prove", "--jobs", "1", "--no-cache", "--timeout", "20", "-q", "--exit-zero",
              "-o", f"json={out}", *refs])
        found = {v["name"]: (v["verdict"], v["params"], _without_seconds(v["coverage"]),
                             [_without_seconds(n) for n in v["notes"]])
                 for v in json.loads(out.read_text())}
        return {name: (found[name], units) for name, units in spent}

    together = run(str(path))
    assert [together[n][0][0] for n in ("no_backpressure", "handoff")] == \
        ["violation", "proved"], together
    for name in together:
        assert run(f"{path}::{name}") == {name: together[name]}
