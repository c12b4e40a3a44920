"""The construction check of a class system asked transition by transition (on a 2-block
cluster only the transitions Houdini asks: the others are Z3-checked mirror images), the
encoding stopped by a spent budget, and Houdini with few live solvers (checker/symbolic/)."""

from __future__ import annotations

import pytest
import z3

from barrierproof.checker.symbolic import houdini as houdini_mod
from barrierproof.checker.symbolic.budget import Budget, BudgetSpent, z3_limits
from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.invariants import (Compiler, Substitution,
                                                      check_construction, guess, sample)
from barrierproof.checker.symbolic.symmetry import mirror
from test_prove_symmetry import _system


def test_the_construction_check_asks_one_block_and_still_catches_a_broken_twin():
    """cluster_exchange's class: inductive, asked on half the transitions; a block-1
    transition that breaks a construction fact is no longer its twin's image, so it is asked
    and named."""
    system, _ = _system()
    enc = Encoder(system).build()
    m = mirror(enc, Compiler(enc.vars), Substitution)
    assert m is not None and len(m.asked) < len(enc.steps)
    assert enc.check_sane(timeout=30) is None
    assert check_construction(enc, 30) is None
    broken = Encoder(system).build()
    u = sorted(m.twin)[0]
    label, pre, nxt = broken.steps[u]
    i = next(i for i in range(len(broken.system.frozen), len(nxt))
             if not nxt[i].eq(broken.vars[i]))
    changed = list(nxt)
    changed[i] = z3.IntVal(-1)          # a counter or position no state has
    broken.steps[u] = (label, pre, changed)
    assert broken.check_sane(timeout=30, asked=m.asked) is None     # the old pairing misses it
    assert check_construction(broken, 30) == label


def test_a_spent_budget_stops_the_encoding_before_the_deadlock_condition():
    """The encoding ticks its work role by role: with nothing left it stops at the first,
    before the (quadratic) deadlock condition is built."""
    system, _ = _system()
    enc = Encoder(system)
    with z3_limits(Budget(1e-6)), pytest.raises(BudgetSpent):
        enc.build()
    assert not enc.built and not any(label.startswith("progress") for label, _ in enc.bad)


def test_houdini_with_two_live_solvers_keeps_the_same_invariant(monkeypatch):
    """Dropping a transition's solver only loses Z3's lemmas: the same largest inductive
    subset."""
    system, vals = _system()
    enc = Encoder(system).build()
    cands = guess(enc, sample(enc, vals, limit=1000).states, ())
    kept = houdini_mod.houdini(enc, cands, timeout=600)
    monkeypatch.setattr(houdini_mod, "LIVE_SOLVERS", 2)
    again = houdini_mod.houdini(enc, cands, timeout=600)
    assert kept.status == again.status == "proved"
    assert sorted(c.formula.get_id() for c in kept.invariant) == \
        sorted(c.formula.get_id() for c in again.invariant)
