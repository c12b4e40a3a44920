"""A class that is a proved class renamed (renamed.py): a ping-pong producer feeding two
consumers, each through its own `full`/`empty` pair, is proved in halves (partition.py
`role_components`), and the second half's system is the first's with its barriers and consumer
renamed: its invariant is the first's renamed, no Houdini there. A twin whose second consumer
waits on the wrong phase is not the first half renamed: it is asked on its own and not proved;
the explorer agrees with both verdicts on a grid."""

from __future__ import annotations

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic import prove as P
from barrierproof.checker.symbolic.encode import Encoder
from barrierproof.checker.symbolic.renamed import renaming
from barrierproof.model.dsl import protocol


def _pingpong(k, steps, late: int):
    k.threads(3, name="wg")
    k.assume(steps >= 0)
    full = [k.Barrier(num_arrivals=1, name=f"full{h}") for h in range(2)]
    empty = [k.Barrier(num_arrivals=1, name=f"empty{h}") for h in range(2)]
    with k.loop(steps) as i:
        with k.when(k.thread == 0):         # the producer serves both halves in turn
            for h in range(2):
                k.wait_parity(empty[h], (i + 1) % 2)
                k.barrier_arrive(full[h])
        with k.when(k.thread == 1):
            k.wait_parity(full[0], i % 2)
            k.barrier_arrive(empty[0])
        with k.when(k.thread == 2):
            k.wait_parity(full[1], (i + late) % 2)
            k.barrier_arrive(empty[1])


@protocol(symbolic=("steps",))
def two_halves(k, steps=3):
    """Each consumer takes every step of its own pair."""
    _pingpong(k, steps, 0)


@protocol(symbolic=("steps",))
def second_half_one_phase_off(k, steps=3):
    """The second consumer waits on the phase after the one its step completes."""
    _pingpong(k, steps, 1)


def _proved_classes(kern):
    """(the proof, [(class, its system's encoding, proved from)])."""
    seen = []
    inner = P._prove_class

    def spy(frag, cls, system, *rest):
        got = inner(frag, cls, system, *rest)
        proofs = rest[4]
        last = proofs[-1] if proofs and proofs[-1].name == cls.name else None
        seen.append((cls.name, Encoder(system).build(), last.renamed if last else ""))
        return got

    P._prove_class = spy
    try:
        proof = P.prove(kern, ["steps"], {}, timeout=60)
    finally:
        P._prove_class = inner
    return proof, seen


def _explorer(kern) -> set[str]:
    return {check_kernel(kern, {"steps": steps}, Options(Limits(max_states=20_000))).verdict
            for steps in range(5)}


def test_the_second_half_is_the_first_renamed_and_proved_so():
    kern = two_halves.build()
    proof, seen = _proved_classes(kern)
    assert proof.status == "proved", proof.reason
    halves = [s for s in seen if "full" in s[0]]
    assert [h[2] for h in halves] == ["", halves[0][0]], seen
    assert renaming(halves[0][1], halves[1][1]) is not None
    assert any(c.startswith("renamed class") for c in proof.cases)
    assert _explorer(kern) == {"verified"}


def test_a_half_on_the_wrong_phase_is_not_the_other_renamed_and_is_not_proved():
    kern = second_half_one_phase_off.build()
    proof, seen = _proved_classes(kern)
    halves = [s for s in seen if "full" in s[0]]
    assert len(halves) == 2 and halves[1][2] == ""
    assert renaming(halves[0][1], halves[1][1]) is None
    assert proof.status != "proved"
    assert "violation" in _explorer(kern)
