"""The swap of a cluster's two blocks (checker/symbolic/symmetry.py): found on the class system,
checked by Z3, and used by Houdini and the sampling without changing what they return."""

from __future__ import annotations

import z3

from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.houdini import houdini
from barrierproof.checker.symbolic.invariants import Compiler, Substitution, guess, sample
from barrierproof.checker.symbolic.symmetry import block_swap, close, mirror
from test_symbolic import _fragment, kernel, points

REF = "cluster.py::cluster_exchange"


def _system():
    frag, sym, fixed, systems = _fragment(REF)
    (cls, system, _), = [s for s in systems if s[1].roles]
    vals = [v for p in points(kernel(REF), sym, fixed, 3) for v in frag.valuations(cls, system, p)]
    return system, vals


def test_houdini_asks_one_of_each_mirror_pair_and_keeps_the_same_invariant():
    """Both blocks run one program: every block-1 transition is the checked mirror image of a
    block-0 one, so Houdini asks about half of them, and keeps exactly the candidates it keeps
    asking every transition (the largest inductive subset of a mirror-closed set)."""
    system, vals = _system()
    enc = Encoder(system).build()
    m = mirror(enc, Compiler(enc.vars), Substitution)
    assert m is not None and m.twin and len(m.asked) + len(m.twin) == len(enc.steps)
    assert all(m.perm[m.perm[i]] == i for i in range(len(enc.vars)))
    cands = guess(enc, sample(enc, vals, limit=5000).states, ())
    closed, image = close(cands, m.perm, enc.vars, Substitution)
    assert all(image[image[id(c)]] == id(c) for c in closed)
    plain = houdini(enc, closed, timeout=600, symmetry=False)
    paired = houdini(enc, closed, timeout=600)
    assert plain.status == paired.status == "proved"
    assert sorted(c.formula.get_id() for c in plain.invariant) == \
        sorted(c.formula.get_id() for c in paired.invariant)
    assert len(paired.invariant) < len(closed)       # Houdini had candidates to drop
    assert paired.checks < plain.checks


def test_a_transition_without_its_mirror_is_asked_itself():
    """The pairing proposes, Z3 decides: a block-1 transition changed so that it is no longer
    the image of its twin is asked by Houdini (and a system whose construction facts the swap
    does not preserve gets no mirror at all)."""
    system, _ = _system()
    enc = Encoder(system).build()
    m = mirror(enc, Compiler(enc.vars), Substitution)
    u = sorted(m.twin)[0]
    label, pre, nxt = enc.steps[u]
    changed = list(nxt)
    i = next(i for i in range(len(enc.system.frozen), len(nxt)) if not nxt[i].eq(enc.vars[i]))
    changed[i] = changed[i] + 1
    enc.steps[u] = (label, pre, changed)
    again = mirror(enc, Compiler(enc.vars), Substitution)
    assert u in again.asked and u not in again.twin
    j = next(j for j in range(len(enc.vars)) if m.perm[j] != j)
    enc.sane = list(enc.sane) + [enc.vars[j] <= enc.vars[m.perm[j]]]
    assert mirror(enc, Compiler(enc.vars), Substitution) is None


def test_sampling_a_state_and_its_mirror_as_one_gives_the_same_states():
    system, vals = _system()
    enc = Encoder(system).build()
    assert block_swap(enc) is not None
    paired = sample(enc, vals, limit=10**6)
    assert enc._mirror is not None
    plain_enc = Encoder(system).build()
    plain_enc._mirror = None
    plain = sample(plain_enc, vals, limit=10**6)
    assert set(paired.states) == set(plain.states) and paired.errors == plain.errors
    assert paired.units < plain.units
