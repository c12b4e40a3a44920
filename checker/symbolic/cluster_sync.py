"""The hardware cluster barrier (`barrier.cluster.arrive` + `.wait`, CUTLASS `cluster_sync()`)
as a ClusterBarrier of the prover, where every thread uses it in arrive-wait pairs.

model/hw_barriers.py: a phase of the cluster barrier completes when every thread of every block
of the cluster has arrived; `cluster_wait` passes once the phase its thread arrived in has
completed. `lower_cluster_sync` rewrites, before the fragment is built,

    cluster_arrive()  ->  barrier_arrive(C)
    cluster_wait()    ->  barrier_wait(C)

with C one ClusterBarrier over the cluster's one axis longer than 1 (a plain Barrier in a
cluster of one block) expecting one arrival per thread of a block: an arrival reaches every
block's instance, so each instance expects one per thread of the cluster, as the hardware does.

Why the rewrite is exact where it applies (every `cluster_arrive` is directly followed by a
`cluster_wait` in the same statement list, every `cluster_wait` directly preceded by one, none
inside a warp region or a branch on the lane, no barrier the kernel initialises itself):
- each thread alternates arrive, wait, starting with the arrive, on every path, so BP145 cannot
  happen (this is the lemma `alternates` states for the verdict);
- a thread's k-th arrival goes to phase k - 1 of every instance (it has passed k - 1 waits, each
  for a completion that needed every thread's arrival of that phase, and no thread can arrive
  for phase k before every thread arrived for k - 1), so completion k happens exactly when the
  hardware's phase k - 1 does, and the Pallas wait (the thread's k-th wait waits completion k)
  passes exactly when `cluster_wait` does;
- no thread arrives twice before others waited past its previous phase, so the rewritten
  barrier never over-arrives (BP121) nor overruns a waiter (BP101), and every thread ends having
  observed every completion (no BP103/BP104): the error conditions the class systems check on C
  are unreachable, as the hardware rules are.
`.relaxed` arrivals differ only in what they publish about barrier inits, so a kernel with
explicit-init barriers is left outside (init_prefix.py's own rules decide those).
"""

from __future__ import annotations

from ...model import primitives as K
from ...model.hw_barriers import LANE
from ...model.ir import (BarrierAlloc, BarrierRef, Const, Kernel, Loop, Op, WarpRegion, When,
                         free_vars, map_ops)
from .terms import Unsupported

KINDS = (K.CLUSTER_ARRIVE, K.CLUSTER_WAIT)
NAME = "barrier.cluster"        # no identifier: no allocation of a protocol carries it


def _pairs_ok(body, in_region: bool = False, lane: bool = False) -> Op | None:
    """The first cluster-barrier operation that breaks the pairing condition, or None."""
    for n, stmt in enumerate(body):
        if isinstance(stmt, Op) and stmt.kind in KINDS:
            if in_region or lane:
                return stmt
            if stmt.kind == K.CLUSTER_ARRIVE:
                nxt = body[n + 1] if n + 1 < len(body) else None
                if not (isinstance(nxt, Op) and nxt.kind == K.CLUSTER_WAIT):
                    return stmt
            else:
                prev = body[n - 1] if n > 0 else None
                if not (isinstance(prev, Op) and prev.kind == K.CLUSTER_ARRIVE):
                    return stmt
        elif isinstance(stmt, Loop):
            bad = _pairs_ok(stmt.body, in_region, lane)
            if bad is not None:
                return bad
        elif isinstance(stmt, When):
            split = lane or LANE in free_vars(stmt.cond)
            bad = _pairs_ok(stmt.then, in_region, split) or _pairs_ok(stmt.orelse, in_region,
                                                                      split)
            if bad is not None:
                return bad
        elif isinstance(stmt, WarpRegion):
            bad = _pairs_ok(stmt.body, True, lane)
            if bad is not None:
                return bad
    return None


def uses_cluster_barrier(kernel: Kernel) -> bool:
    return any(op.kind in KINDS for op in kernel.ops())


def alternates(kernel: Kernel) -> str | None:
    """None when the rewrite applies (module docstring), else why not."""
    bad = _pairs_ok(kernel.body)
    if bad is not None:
        return (f"`{bad.describe()}` ({bad.loc}) is not one half of a cluster_arrive, "
                "cluster_wait pair outside warp regions and lane branches")
    if any(b.explicit_init for b in kernel.barriers):
        return "the kernel initialises barriers itself (what a cluster arrive publishes matters)"
    long_axes = [a for a, n in kernel.cluster if not (isinstance(n, Const) and n.value == 1)]
    if len(long_axes) > 1:
        return f"the cluster is longer than 1 along {', '.join(long_axes)} (one axis only)"
    return None


def lower_cluster_sync(kernel: Kernel) -> Kernel:
    """The kernel with its cluster barrier rewritten into one ClusterBarrier (module
    docstring); the kernel itself when it has none. Raises Unsupported where the rewrite does
    not apply."""
    if not uses_cluster_barrier(kernel):
        return kernel
    why = alternates(kernel)
    if why is not None:
        raise Unsupported(f"the cluster barrier: {why}", kernel.loc)
    long_axes = [a for a, n in kernel.cluster if not (isinstance(n, Const) and n.value == 1)]
    alloc = BarrierAlloc(NAME, kernel.num_threads, cluster=bool(long_axes),
                         collective_axes=tuple(long_axes), loc=kernel.loc)
    ref = BarrierRef(alloc)

    def lower(op: Op):
        if op.kind == K.CLUSTER_ARRIVE:
            return Op(K.BARRIER_ARRIVE, ref, loc=op.loc)
        if op.kind == K.CLUSTER_WAIT:
            return Op(K.BARRIER_WAIT, ref, loc=op.loc)
        return op

    return kernel.replace(body=map_ops(kernel.body, lower),
                          barriers=tuple(kernel.barriers) + (alloc,))


__all__ = ["alternates", "lower_cluster_sync", "uses_cluster_barrier"]
