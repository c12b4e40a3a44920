"""A proof is never weaker than a search: every rule an engine does not decide weakens its
verdict, and `prove` is cross-checked by the explorer at the smallest points before it claims
anything.

The protocols here are a cluster-launch-control loop of two blocks in the style of Triton TLX's
(block 0 answers tile requests for both blocks; block 1's consumer releases each answer with a
remote arrive on block 0's barriers). After the final "no more work" answer, block 1 still
arrives on a barrier of block 0, which may have exited: BP146, which lifetimes.py's lemmas do not
give for a PTX arrive, so the class systems carry it as an error condition (peer_exit.py)."""

from __future__ import annotations

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.rules import (CLUSTER_BARRIER, ENGINES, INIT, MEMORY, NAMED, PEER,
                                        RULES, features, in_play, undecided)
from barrierproof.checker.symbolic.lifetimes import peer_lifetime_gap
from barrierproof.checker.symbolic.prove import prove_kernel, smallest_points
from barrierproof.model.violations import CODES


def _clc(k, tiles, trailing, final_sync=False, late_from=None):
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(tiles >= 0)
    clc_full = k.Barrier(num_arrivals=1)       # block 1: an answer arrived
    clc_empty = k.Barrier(num_arrivals=1)      # block 0: block 1 consumed it
    done = k.Barrier(num_arrivals=1)           # block 0: block 1 read the final answer
    stats = k.Barrier(num_arrivals=1)          # block 0: a counter nobody waits on
    with k.when(k.block("x") == 0):
        with k.loop(tiles + 1) as i:
            with k.when(i >= 1):
                k.barrier_wait(clc_empty)
            k.arrive(clc_full.on(1))
        k.barrier_wait(done)
    with k.otherwise():
        with k.loop(tiles + 1) as i:
            k.barrier_wait(clc_full)
            with k.when(i < tiles):
                k.arrive(clc_empty.on(0))
        k.arrive(done.on(0))
        if trailing:
            if late_from is None:
                k.arrive(stats.on(0))          # after block 0 may have exited
            else:
                with k.when(tiles >= late_from):
                    k.arrive(stats.on(0))
    if final_sync:
        bye = k.ClusterBarrier(collective_axes="x", num_arrivals=1)
        k.barrier_arrive(bye)
        k.barrier_wait(bye)


@protocol(expect="violation:BP146", symbolic=("tiles",))
def clc_trailing_remote_arrive(k, tiles=2):
    _clc(k, tiles, trailing=True)


@protocol(expect="verified", symbolic=("tiles",))
def clc_trailing_remote_arrive_then_cluster_sync(k, tiles=2):
    _clc(k, tiles, trailing=True, final_sync=True)


@protocol(expect="violation:BP146", symbolic=("tiles",))
def clc_trailing_remote_arrive_from_three_tiles(k, tiles=3):
    _clc(k, tiles, trailing=True, late_from=3)


def _prove(p, **kw):
    return prove_kernel(p.build(), options=Options(Limits(timeout=60), **kw))


def test_the_registry_has_one_row_per_code_and_names_only_known_engines():
    assert set(RULES) == set(CODES)
    for rule in RULES.values():
        assert rule.decided_by <= set(ENGINES) and "explore" in rule.decided_by
        assert rule.help


def test_the_diagnostics_table_lists_the_registry_by_its_names():
    """docs/diagnostics.md's code table (the one the README points to) has one row per code of
    the registry, in its order, each with the registry's name."""
    import os
    import re
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "diagnostics.md")
    rows = re.findall(r"^\| \[(BP\d+)\]\(rules/\1\.md\) \| ([\w-]+) \|", open(path).read(), re.M)
    assert rows == sorted((code, rule.name) for code, rule in RULES.items())


def test_the_docs_table_of_which_engine_decides_what_is_the_registrys():
    import os
    from barrierproof.checker.rules import coverage_markdown
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "diagnostics.md")
    text = open(path).read()
    assert coverage_markdown() in text.split("## Which engine decides each rule")[1]


def test_features_put_only_the_rules_they_concern_in_play():
    kernel = clc_trailing_remote_arrive.build()
    assert features(kernel) == {PEER}
    assert "BP146" in in_play(kernel) and "BP200" not in in_play(kernel)
    assert not {NAMED, CLUSTER_BARRIER, INIT, MEMORY} & features(kernel)
    assert undecided(kernel, "symbolic") == {"BP146"}
    assert undecided(kernel, "symbolic", ignored={"BP146"}) == set()
    assert undecided(kernel, "explore") == set()


def test_every_hardware_barrier_kind_puts_its_rules_in_play():
    """The features are registry classes, so a new hardware-barrier kind cannot slip past them
    and leave its rules out of play (a verdict claimed without deciding them)."""
    from barrierproof.checker.rules import CLUSTER_KINDS, NAMED_KINDS
    from barrierproof.model.hw_barriers import HARDWARE_BARRIER_KINDS
    assert NAMED_KINDS | CLUSTER_KINDS == HARDWARE_BARRIER_KINDS
    assert not NAMED_KINDS & CLUSTER_KINDS


def test_the_explorer_finds_the_trailing_remote_arrive():
    v = check_kernel(clc_trailing_remote_arrive.build())
    assert v.verdict == "violation" and v.codes == ["BP146"]


def test_prove_never_proves_what_the_explorer_refutes():
    """Before the explorer net, `prove` said `proved` here: the class systems had no BP146.
    Now their peer-exit condition is reached, and the explorer gives the trace."""
    v = _prove(clc_trailing_remote_arrive)
    assert v.verdict == "violation" and v.codes == ["BP146"], v.coverage
    assert v.trace is not None                         # replayed on the interpreter
    assert any("reaches `peer-exit (BP146)" in n for n in v.notes)


def test_a_violation_beyond_the_smallest_points_is_refuted_through_the_encoded_rule():
    """Broken only from three tiles on: beyond the explorer's smallest points (it used to be
    `unknown`, BP146 open). The class system reaches its peer-exit condition at tiles = 3, and
    the bounded search confirms it there, the smallest breaking value."""
    kernel = clc_trailing_remote_arrive_from_three_tiles.build()
    assert [check_kernel(kernel, {"tiles": t}).verdict for t in range(3)] == ["verified"] * 3
    assert check_kernel(kernel, {"tiles": 3}).codes == ["BP146"]
    v = _prove(clc_trailing_remote_arrive_from_three_tiles)
    assert v.verdict == "violation" and v.codes == ["BP146"], v.coverage
    assert v.params == {"tiles": 3}
    assert any("peer-exit (BP146)" in n and "{'tiles': 3}" in n for n in v.notes)


def test_an_ignored_open_rule_leaves_the_proof_of_the_others():
    v = _prove(clc_trailing_remote_arrive_from_three_tiles, ignore=frozenset({"BP146"}))
    assert v.verdict == "proved", v.coverage


def test_a_final_cluster_sync_decides_the_peer_rule_by_lemma():
    kernel = clc_trailing_remote_arrive_then_cluster_sync.build()
    assert peer_lifetime_gap(kernel) is None
    v = _prove(clc_trailing_remote_arrive_then_cluster_sync)
    assert v.verdict == "proved", v.coverage
    assert any("BP146 (peer-exited) follows" in n for n in v.notes)
    for tiles in range(4):          # the explorer agrees beyond the smallest points
        assert check_kernel(kernel, {"tiles": tiles}).verdict == "verified"


def test_the_lemma_refuses_barriers_touched_without_a_trace():
    """A remote `arrive` on a barrier waited by nobody leaves no trace at exit (no Pallas
    rule 2 for PTX-driven barriers): lemma 1 does not apply, and without a final cluster sync
    neither does lemma 2."""
    gap = peer_lifetime_gap(clc_trailing_remote_arrive.build())
    assert gap is not None and "`arrive`" in gap and "cluster-wide" in gap


def test_the_smallest_points_take_two_values_of_each_parameter_inside_the_assumptions():
    @protocol(symbolic=("a", "b"))
    def two(k, a=1, b=3):
        k.threads(1)
        k.assume(a >= 1, b >= 2)
        bar = k.Barrier(num_arrivals=1)
        k.barrier_arrive(bar)
        k.barrier_wait(bar)

    pts = smallest_points(two.build(), ["a", "b"], {})
    assert [(p["a"], p["b"]) for p in pts] == [(1, 2), (1, 3), (2, 2), (2, 3)]


@pytest.mark.parametrize("code", sorted(c for c, r in RULES.items()
                                        if "symbolic" not in r.decided_by))
def test_every_rule_the_prover_leaves_open_is_named_when_in_play(code):
    """Fail closed: a rule outside the prover's set is in play only where its feature is, and
    then undecided by the prover."""
    assert RULES[code].about is not None, f"{code} is in play everywhere but the prover skips it"
    kernel = clc_trailing_remote_arrive.build()
    assert (code in undecided(kernel, "symbolic")) == (RULES[code].about in features(kernel))
