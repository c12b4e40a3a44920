"""Houdini's per-transition solvers built from terms made once (checker/symbolic/houdini.py):
the hypotheses given it with its guard's values put in, and each
transition's successor terms. A solver made again after LIVE_SOLVERS dropped it simplifies
nothing anew, and the largest inductive subset is the same. A few seconds."""

from __future__ import annotations

import z3

from barrierproof.checker.symbolic import houdini as houdini_mod
from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.houdini import _fixed_values
from barrierproof.checker.symbolic.invariants import guess, sample
from test_symbolic import _fragment, kernel, points

REF = "attention.py::pingpong_schedule"


def _houdini_counting(monkeypatch, enc, cands, live: int):
    """Houdini with `live` solvers kept; (its result, the z3.simplify calls it made)."""
    calls = []
    plain = z3.simplify

    def counted(*args, **kw):
        calls.append(1)
        return plain(*args, **kw)

    monkeypatch.setattr(houdini_mod, "LIVE_SOLVERS", live)
    monkeypatch.setattr(z3, "simplify", counted)
    try:
        result = houdini_mod.houdini(enc, cands, timeout=600)
    finally:
        monkeypatch.setattr(z3, "simplify", plain)
    return result, len(calls)


def test_a_solver_made_again_reuses_its_terms_and_keeps_the_same_invariant(monkeypatch):
    frag, sym, fixed, systems = _fragment(REF)
    (cls, system, _), *_ = [s for s in systems if s[1].roles]
    enc = Encoder(system).build()
    vals = [v for p in points(kernel(REF), sym, fixed, 3) for v in frag.valuations(cls, system, p)]
    cands = guess(enc, sample(enc, vals, limit=20000).states, ())
    steps = len(enc.steps)
    every, made = _houdini_counting(monkeypatch, enc, cands, steps)
    few, again = _houdini_counting(monkeypatch, enc, cands, 2)
    assert every.status == few.status == "proved"
    assert sorted(c.formula.get_id() for c in every.invariant) == \
        sorted(c.formula.get_id() for c in few.invariant)
    assert steps > 2            # more transitions than solvers kept: some made again
    assert again == made        # ... from the terms made the first time
    guards = {tuple(sorted(_fixed_values(pre, enc.vars).items())) for _, pre, _ in enc.steps}
    assert len(guards) < steps  # transitions from one place share a guard
    # a term per transition for its successors and one per batch of hypotheses given it
    # (the first, then one per query that had to assume more)
    assert made <= 2 * steps + every.checks
