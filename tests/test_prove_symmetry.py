"""The swap of a cluster's two blocks (checker/symbolic/symmetry.py): found on the class system,
checked by Z3, and used by Houdini and the sampling without changing what they return."""

from __future__ import annotations


from barrierproof.model.dsl import protocol

from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.houdini import houdini
from barrierproof.checker.symbolic.invariants import Compiler, Substitution, guess, sample
from barrierproof.checker.symbolic.symmetry import block_swap, close, mirror
from barrierproof.checker.symbolic.work import ticks
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


@protocol(symbolic=("steps",))
def both_release_block_0_first(k, steps=2):
    """Each block's thread arrives on block 0's barrier, then on block 1's (a loop over the
    destination, as a multicast release is written): the two blocks run one program, but the
    swap of the blocks maps block 0's order onto one no block runs."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    done = k.Barrier(num_arrivals=2)
    with k.loop(steps) as i:
        with k.loop(2) as dst:
            k.barrier_arrive(done.on(dst))
        k.wait_parity(done, i % 2)


def test_a_swap_that_maps_a_transition_outside_the_system_is_not_used_to_sample():
    """Pairs are found (block 1's second arrival is block 0's first, mirrored), but block 0's
    first arrival has no image: the mirror is not closed, a state's mirror need not be
    reachable, so the sampling explores the system as it is (the mirrored closure reached
    arrivals past the count, an error of no run) and the protocol is proved; the explorer
    agrees on a grid. (~6 s)"""
    from barrierproof.checker.check import Options, check_kernel
    from barrierproof.checker.engines.explore import Limits
    from barrierproof.checker.symbolic import prove as P
    kern = both_release_block_0_first.build()
    seen = []

    def spy(frag, cls, system, *rest):
        enc = Encoder(system).build()
        m = mirror(enc, Compiler(enc.vars), Substitution)
        vals = [v for p in rest[-2] for v in frag.valuations(cls, system, p)]
        plain_enc = Encoder(system).build()
        plain_enc._mirror = None
        seen.append((m, sample(enc, vals, limit=10**5), sample(plain_enc, vals, limit=10**5)))
        return spied(frag, cls, system, *rest)

    spied, P._prove_class = P._prove_class, spy
    try:
        proof = P.prove(kern, ["steps"], {}, timeout=60)
    finally:
        P._prove_class = spied
    (m, paired, plain), = seen
    assert m is not None and m.twin and not m.closed
    assert set(paired.states) == set(plain.states) and not paired.errors
    assert proof.status == "proved", proof.reason
    for steps in range(5):
        assert check_kernel(kern, {"steps": steps},
                            Options(Limits(max_states=10_000))).verdict == "verified"


def test_equalities_where_a_twin_is_are_read_off_its_mirror_the_same_ones():
    """States closed under the checked swap: the equalities where a thread of block 1 is are
    the swapped ones of its block-0 twin, so guess reads them off those (fewer span checks,
    counted) and proposes exactly the candidates it reads off the states."""
    system, vals = _system()
    enc = Encoder(system).build()
    samples = sample(enc, vals, limit=5000)
    assert samples.mirrored
    before = ticks()
    plain = guess(enc, samples.states, ())
    plain_units = ticks() - before
    before = ticks()
    paired = guess(enc, samples.states, (), mirrored=True)
    assert ticks() - before < plain_units
    assert [c.formula.get_id() for c in paired] == [c.formula.get_id() for c in plain]
    assert any(" => " in c.text and "==" in c.text.split(" => ")[1] for c in plain)
