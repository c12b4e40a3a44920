"""BP146 (peer-exited) from the rules the prover does prove: when a block cannot exit while a
peer still reaches into its shared memory.

The prover's class systems let a block's barriers live on after its threads exit, so BP146 is
not among their error conditions. Two lemmas derive it instead, each from the proof of the other
rules (no reachable state of the model without BP146 deadlocks or breaks BP101-BP105, BP121 or
BP130) plus a condition read off the program text. A kernel gets BP146 when every barrier a peer
block reaches is covered by one of them; otherwise BP146 stays open and `prove` says so.

Lemma 1 (traces at the end). A barrier driven by Pallas operations only (model/compile.py
PALLAS_KINDS without `barrier_test`), whose peer landings carry a positive constant byte count.
Take a first BP146 state s: every thread of block B has exited and an effect e on an instance i
of B is about to happen (a thread's arrive) or in flight (a landing). Nothing deadlocks in the
model without BP146, so every run from s ends with all threads finished, and e happens on the
way. Pallas operations change i's tx-count only by an arrive.expect_tx (one atomic step with an
arrival) or by a landing (a decrease). Let n be i's phase when e happens. If phase n completes
later, it completes after every thread of B exited: a Pallas waiter of i (all are in B: waits
are local, BP112) ends having observed fewer completions than there are, and with no waiter i
completes a phase nobody waits for: BP103 either way (Pallas's rule 2). If phase n never
completes, then at the end either it received an arrival (e is one, or an arrive.expect_tx came
with it: BP104 or BP130), or none, so its tx-count only fell from the 0 every phase starts with
(BP130). Each is excluded at the end of that run: s is not reachable.

Lemma 2 (a final cluster sync). The kernel's last two statements, for every thread, are
`barrier_arrive(C)` and `barrier_wait(C)` on a ClusterBarrier C used nowhere else, over the one
cluster axis longer than 1, expecting one arrival per thread. Its instance in block B completes
its phase only when every thread of the cluster has arrived (no over-arrival: BP121/BP101 are
proved), and B's threads exit only after that. A thread reaches into a peer's shared memory by
its own operations before its arrive on C, in program order, so no block it reaches has exited
then. This covers a thread's own operations only; asynchronous deliveries into peers (multicast
shares, peer stores, collective commits) may land after the sync, so their barriers need lemma 1.

Where neither lemma covers a thread's own arrival on a peer's barrier (a PTX `arrive`), the
class system of that barrier carries BP146 as an error condition instead (peer_exit.py,
`peer_exit_obligations` names the barriers), and the proof decides it.
"""

from __future__ import annotations

from ...model import kinds, primitives as K
from ...model.compile import PALLAS_KINDS
from ...model.ir import Const, Kernel, Op

# Pallas operations whose every effect on a barrier leaves a trace at the end of a run: all
# but the tests, which may observe a completion or nothing.
TRACED_KINDS = PALLAS_KINDS - kinds.kinds_where(lambda p: p.waits_for != "" and not p.blocking)
# Landings that bring bytes to their barrier (complete_tx when they land).
BYTE_LANDINGS = kinds.kinds_where(lambda p: p.async_arrival and "bytes" in p.needs)
# Operations whose effect on a peer's barrier is a thread's own step (not an in-flight landing):
# the mbarrier arrivals lemma 2 was argued for; any other kind is left to lemma 1.
THREAD_KINDS = frozenset({K.BARRIER_ARRIVE, K.ARRIVE, K.ARRIVE_DROP, K.EXPECT_TX,
                          K.ARRIVE_EXPECT_TX, K.COMPLETE_TX})
# Operations whose effect on a peer's barrier the class systems carry as BP146 conditions
# (peer_exit.py): a thread's own arrivals and the copies that land there.
ENCODED_KINDS = THREAD_KINDS | BYTE_LANDINGS


def reaches_peer(op: Op) -> bool:
    """Whether `op` may touch a barrier instance of another block than its thread's."""
    ref = op.barrier
    return ref is not None and (ref.block is not None or ref.alloc.cluster
                                or bool(op.collective_axes) or op.kind == K.ASYNC_STORE_SMEM)


def peer_lifetime_gap(kernel: Kernel, encoded: frozenset = frozenset()) -> str | None:
    """None when BP146 follows from the other rules for `kernel` (lemma 1 or 2 for every barrier
    a peer reaches, or the class systems' peer-exit condition proved for the barriers in
    `encoded`, peer_exit.py), else why it does not."""
    reached = [op for op in kernel.ops() if reaches_peer(op)]
    if not reached:
        return None
    synced = _final_cluster_sync(kernel)
    for op in reached:
        name = op.barrier.alloc.name
        if synced is not None and op.kind in THREAD_KINDS and name != synced:
            continue                                                  # lemma 2
        why = _untraced(kernel, name)                                 # lemma 1
        if why and op.kind in ENCODED_KINDS and name in encoded:
            continue                                                  # peer_exit.py
        if why:
            sync = ("" if op.kind not in THREAD_KINDS else
                    "; nor does the kernel end with a cluster-wide barrier_arrive + "
                    "barrier_wait on a ClusterBarrier in every thread")
            return f"`{name}` is reached from a peer block ({op.loc}) and {why}{sync}"
    return None


def peer_exit_obligations(kernel: Kernel) -> frozenset[str]:
    """The barriers whose arrivals from peer blocks neither lemma covers: their class systems
    carry BP146 as an error condition (peer_exit.py): a thread's own arrivals and copies into
    a peer; a barrier also reached by a tcgen05 commit keeps its gap."""
    synced = _final_cluster_sync(kernel)
    out = set()
    for op in kernel.ops():
        if not reaches_peer(op) or op.kind not in ENCODED_KINDS:
            continue
        name = op.barrier.alloc.name
        if synced is not None and name != synced and op.kind in THREAD_KINDS:
            continue
        if _untraced(kernel, name):
            out.add(name)
    return frozenset(out)


def bp146_note(kernel: Kernel, encoded: frozenset) -> str:
    """How a proof decided BP146 (for the verdict's notes)."""
    mine = sorted(encoded & peer_exit_obligations(kernel))
    if not mine:
        return ("BP146 (peer-exited) follows from the proved exit rules: every barrier a peer "
                "block reaches is driven by Pallas operations only, or released by a final "
                "cluster sync (checker/symbolic/lifetimes.py)")
    return ("BP146 (peer-exited) proved by Z3 as an error condition of the class systems for "
            f"the peer arrivals on {', '.join(f'`{n}`' for n in mine)} (no thread arrives on, "
            "and no copy lands in, a peer block's barrier once the peer's threads have "
            "finished: "
            "checker/symbolic/peer_exit.py), and from the proved exit rules for the rest "
            "(checker/symbolic/lifetimes.py)")


def _untraced(kernel: Kernel, name: str) -> str | None:
    """Why lemma 1 does not hold for barrier `name`, or None."""
    for op in kernel.ops():
        if op.barrier is None or op.barrier.alloc.name != name:
            continue
        if op.kind not in TRACED_KINDS:
            return (f"is also driven by `{op.kind}` ({op.loc}), which can touch it without a "
                    "trace at the end of the run")
        if reaches_peer(op) and op.kind in BYTE_LANDINGS and not (
                isinstance(op.bytes, Const) and op.bytes.value > 0):
            return (f"receives `{op.kind}` of {op.bytes!r} bytes ({op.loc}), not a positive "
                    "constant: an empty landing would leave no trace at the end")
    return None


def _final_cluster_sync(kernel: Kernel) -> str | None:
    """The ClusterBarrier of lemma 2's final sync, or None."""
    long_axes = [a for a, n in kernel.cluster if not (isinstance(n, Const) and n.value == 1)]
    body = kernel.body
    if len(long_axes) != 1 or len(body) < 2:
        return None
    arrive, wait = body[-2], body[-1]
    if not (isinstance(arrive, Op) and isinstance(wait, Op) and arrive.kind == K.BARRIER_ARRIVE
            and wait.kind == K.BARRIER_WAIT and arrive.barrier is not None
            and wait.barrier is not None and arrive.barrier.alloc is wait.barrier.alloc
            and arrive.barrier.block is None and wait.barrier.block is None):
        return None
    alloc = arrive.barrier.alloc
    if not alloc.cluster or alloc.leader_tracked or long_axes[0] not in alloc.collective_axes \
            or not alloc.scalar or repr(alloc.num_arrivals) != repr(kernel.num_threads) \
            and not _same_constant(alloc.num_arrivals, kernel.num_threads):
        return None
    uses = [op for op in kernel.ops() if op.barrier is not None and op.barrier.alloc is alloc]
    if len(uses) != 2:
        return None
    return alloc.name


def _same_constant(a, b) -> bool:
    return isinstance(a, Const) and isinstance(b, Const) and a.value == b.value

