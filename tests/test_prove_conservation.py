"""Conservation candidates (checker/symbolic/conservation.py): `exp * ph` of a barrier and
`size * k` of a counter role as features of the sampled equalities, so that "arrivals absorbed
== arrivals made by every block's arriving roles" is proposed, and Houdini keeps it."""

from __future__ import annotations

from barrierproof.model.dsl import protocol

TILE = 16384


@protocol(symbolic=("consumers", "steps"))
def one_slot_cluster_release(k, consumers=2, steps=3):
    """A 2-block cluster's one-slot multicast ring: each block's consumers release `empty` in
    both blocks (a ClusterBarrier), so each block's `empty` counts both blocks' consumers."""
    k.cluster(x=2)
    k.threads(consumers + 1, name="wg")
    k.assume(consumers >= 1, consumers <= 2, steps >= 0)
    full = k.Barrier(num_arrivals=1)
    empty = k.ClusterBarrier(collective_axes="x", num_arrivals=consumers)
    with k.when(k.thread == consumers):
        with k.loop(steps) as i:
            with k.when(i >= 1):
                k.barrier_wait(empty)
            k.copy_gmem_to_smem(full, bytes=TILE, collective_axes="x")
        with k.when(steps >= 1):
            k.barrier_wait(empty)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(full)
            k.barrier_arrive(empty)


def test_arrivals_absorbed_equal_arrivals_made_across_the_blocks():
    """The invariant Houdini proves holds an equality over `exp*ph` of a block's `empty` and
    `size*k` of the consumers of BOTH blocks (Z3 checked it inductive; no linear equality over
    the plain variables states it). (~70 s)"""
    from barrierproof.checker.symbolic import prove as P
    kept = []
    real = P.houdini

    def spy(*args, **kw):
        result = real(*args, **kw)
        kept.extend(c.text for c in result.invariant or ())
        return result

    P.houdini = spy
    try:
        proof = P.prove(one_slot_cluster_release.build(), ["consumers", "steps"], {}, timeout=300)
    finally:
        P.houdini = real
    assert proof.status == "proved", proof.reason
    laws = [t for t in kept if "exp*ph[empty" in t and "size*k[b0." in t and "size*k[b1." in t
            and "=>" not in t]
    assert laws, "no conservation equality over both blocks' consumers was kept"
