"""BP146 (peer-exited) proved by Z3 as an error condition of the class systems
(checker/symbolic/peer_exit.py) for PTX arrivals and multicast copies into a peer block, which
lifetimes.py's lemmas do not cover; a remote arrival that can come after the peer's exit is refuted at its smallest
breaking value, the explorer agreeing."""

import os

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.lifetimes import peer_exit_obligations
from conftest import ROOT
from prove_files import build, prove, source_file

SOURCE = '''from barrierproof import protocol


def _exchange(k, steps, drain_last=True):
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)      # the peer's: the leader arrives on it remotely
    empty = k.Barrier(num_arrivals=1)     # the leader's: the peer arrives on it remotely
    with k.loop(steps) as i:
        with k.when(k.block("x") == 0):
            if drain_last:
                k.arrive(full.on(1))
                k.barrier_wait(empty)
            else:
                with k.when(i > 0):
                    k.barrier_wait(empty)
                k.arrive(full.on(1))
        with k.otherwise():
            k.barrier_wait(full)
            k.arrive(empty.on(0))


@protocol(expect="verified", symbolic=("steps",))
def peer_releases_into_leader(k, steps=2):
    """Each step the leader fills the peer's `full` and waits for the peer's release on its own
    `empty`: both remote arrivals come before the block they reach is done."""
    _exchange(k, steps)


@protocol(expect="violation:BP146", symbolic=("steps",))
def leader_skips_last_drain(k, steps=2):
    """The leader waits for the previous step's release before filling (never for the last):
    the peer's last release can reach the leader after it exited."""
    _exchange(k, steps, drain_last=False)


@protocol(expect="violation:BP146", symbolic=("steps",))
def peer_leaves_before_release(k, steps=2):
    """The peer signals the leader but never waits for the release: the leader's remote
    arrive can reach the peer after it exited."""
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    ready = k.ClusterBarrier(collective_axes="x", leader_tracked=True)
    released = k.Barrier(num_arrivals=1)
    with k.loop(steps):
        k.barrier_arrive(ready)
        with k.when(k.block("x") == 0):
            k.barrier_wait(ready)
            k.arrive(released.on(1))


def _multicast(k, steps, last_wait):
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)      # a PTX barrier: lemma 1 does not hold for it
    with k.loop(steps) as i:
        k.arrive_expect_tx(full, 8192)
        k.tma_load(full, 8192, collective_axes="x")
        with k.when(last_wait | (i + 1 < steps)):
            k.wait_parity(full, i % 2)


@protocol(expect="verified", symbolic=("steps",))
def multicast_waited(k, steps=2):
    """Each block waits for both halves of every step's tile: the peer's share lands first."""
    _multicast(k, steps, True)


@protocol(expect="violation:BP146", symbolic=("steps",))
def multicast_last_share_unwaited(k, steps=2):
    """The last step's tile is never waited for (a parity wait: no BP103), so a block may exit
    while the peer's half is still in flight into it."""
    _multicast(k, steps, False)


def _push(k, steps, short):
    k.cluster(x=2)
    k.threads(1, name="wg")
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1)      # block 1's: block 0 stores into it
    empty = k.Barrier(num_arrivals=1)     # block 0's: block 1 releases it remotely
    with k.when(k.block("x") == 0):
        with k.loop(steps) as i:
            with k.when(i >= 1):
                k.wait_parity(empty, (i - 1) % 2)
            k.async_store_smem(full.on(1), 4096)
        with k.when((steps >= 1) & (not short)):
            k.wait_parity(empty, (steps - 1) % 2)
    with k.otherwise():
        with k.loop(steps - 1 if short else steps) as i:      # steps - 1: none at steps 0
            k.wait_parity(full, i % 2)
            k.arrive(empty.on(0))


@protocol(expect="verified", symbolic=("steps",))
def push_waited(k, steps=2):
    """Block 0 stores into block 1's `full` once block 1 released the previous store."""
    _push(k, steps, False)


@protocol(expect="violation:BP146", symbolic=("steps",))
def push_last_unwaited(k, steps=2):
    """Block 1 stops one store early: the last store reaches it after it exited."""
    _push(k, steps, True)
'''


source = source_file(SOURCE, "peer_exit.py")


def _prove(capsys, target):
    return prove(capsys, target, "--timeout", "60")


@pytest.mark.parametrize("target", ["examples/patterns/leader_tracked.py::"
                                    "leader_collects_both_blocks", "peer_releases_into_leader",
                                    "multicast_waited", "push_waited"])
def test_ptx_arrivals_into_a_peer_are_proved_for_every_step_count(source, capsys, target):
    target = os.path.join(ROOT, target) if "::" in target else f"{source}::{target}"
    code, report = _prove(capsys, target)
    assert (code, report["verdict"]) == (0, "proved"), report
    (note,) = [n for n in report["notes"] if n.startswith("BP146")]
    assert "proved by Z3 as an error condition" in note and "peer_exit.py" in note
    path, name = target.split("::")
    kernel = build(path, name)
    assert peer_exit_obligations(kernel)
    for steps in range(5):
        assert check_kernel(kernel, {"steps": steps}).verdict == "verified", steps


@pytest.mark.parametrize("name", ["leader_skips_last_drain", "peer_leaves_before_release",
                                  "multicast_last_share_unwaited", "push_last_unwaited"])
def test_a_remote_arrival_after_the_peers_exit_is_refuted_at_its_smallest_value(
        source, capsys, name):
    kernel = build(source, name)
    assert check_kernel(kernel, {"steps": 0}).verdict == "verified"
    assert check_kernel(kernel, {"steps": 1}).label == "violation:BP146"
    code, report = _prove(capsys, f"{source}::{name}")
    assert (code, report["verdict"], report["params"]) == (1, "violation", {"steps": 1})
    assert report["diagnostics"][0]["code"] == "BP146"


def _capture_conditions(monkeypatch) -> list:
    """The labels of the peer-exit conditions the class systems get, each asserted
    satisfiable with the initial condition's hypotheses (not vacuous)."""
    import z3
    from barrierproof.checker.symbolic import encode
    labels = []
    original = encode.peer_exit_conditions

    def capture(enc, st):
        found = original(enc, st)
        for label, cond in found:
            solver = z3.Solver(ctx=cond.ctx)
            solver.add(enc.init_body, cond)
            assert solver.check() == z3.sat, label
            labels.append(label)
        return found

    monkeypatch.setattr(encode, "peer_exit_conditions", capture)
    return labels


def test_the_encoded_condition_is_checked_and_not_vacuous(source, capsys, monkeypatch):
    """The proof of peer_releases_into_leader discharges one peer-exit condition per remote
    arrival site, each satisfiable by some valuation of the class system's variables (so it is
    the invariant, not the condition, that excludes it)."""
    labels = _capture_conditions(monkeypatch)
    code, report = _prove(capsys, f"{source}::peer_releases_into_leader")
    assert report["verdict"] == "proved"
    labels = sorted(set(labels))
    assert sorted(labels) == [
        "peer-exit (BP146): arrive(empty@block(0)) by b1.wg0 reaches block 0 after its threads "
        "exited",
        "peer-exit (BP146): arrive(full@block(1)) by b0.wg0 reaches block 1 after its threads "
        "exited"]


@pytest.mark.parametrize("name, needles", [
    ("multicast_waited", ["a tma delivery to full@0 in flight after block 0 exited",
                          "by b1.wg0 reaches block 0 after its threads exited"]),
    ("push_waited", ["delivery to full@1 in flight after block 1 exited",
                     "async_store_smem(full@block(1)"])])
def test_copies_into_a_peer_are_error_conditions_of_the_class_system(source, capsys,
                                                                       monkeypatch, name,
                                                                       needles):
    """A copy into a peer's barrier is carried by the class system: a thread at the copy
    (peer-issue) and its delivery in flight (peer-land) while the receiving block's roles are
    done, each condition satisfiable by some valuation (the invariant excludes it)."""
    labels = _capture_conditions(monkeypatch)
    code, report = _prove(capsys, f"{source}::{name}")
    assert report["verdict"] == "proved", report
    for needle in needles:
        assert any(needle in label for label in labels), (needle, sorted(set(labels)))
