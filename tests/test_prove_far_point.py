"""Candidate facts refuted before Houdini by states sampled one parameter point past the others
(prove.py `far`): reachable states, so a fact they break is in no inductive invariant, and
Houdini keeps the same facts in fewer queries. About 2 s."""

from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.houdini import houdini
from barrierproof.checker.symbolic.invariants import guess, sample
from barrierproof.checker.symbolic.points import beyond, points
from barrierproof.checker.symbolic.prove import _past
from test_symbolic import _fragment, kernel

REF = "attention.py::pingpong_schedule"


def test_far_point_drops_only_what_houdini_drops_and_saves_queries():
    frag, sym, fixed, systems = _fragment(REF)
    k = kernel(REF)
    (cls, system, _), *_ = [s for s in systems if s[1].roles]
    enc = Encoder(system).build()
    near = points(k, sym, fixed, 3)
    (far,) = beyond(k, sym, fixed, 3)
    assert all(far[n] > max(p[n] for p in near) for n in sym)
    states = sample(enc, [v for p in near for v in frag.valuations(cls, system, p)]).states
    past = sample(enc, frag.valuations(cls, system, far)).states
    every = guess(enc, states, ())
    kept = guess(enc, states, _past(past, states, len(system.frozen)))   # as prove() does
    assert {c.text for c in kept} < {c.text for c in every}     # some bound refuted
    plain, refuted = houdini(enc, every), houdini(enc, kept)
    assert plain.status == refuted.status == "proved"
    assert {c.text for c in refuted.invariant} == {c.text for c in plain.invariant}
    assert refuted.checks < plain.checks
