"""BP146 (peer-exited) as an error condition of the class systems, for the arrivals the lemmas
of lifetimes.py do not cover.

A thread's own arrival on a peer block's barrier (a PTX `arrive` on `bar.on(peer)`, a
ClusterBarrier arrival reaching the leader) breaks BP146 when every thread of the peer block has
exited. lifetimes.py derives BP146 from the exit rules when such an effect must leave a trace at
the end of the run; an arrival on a barrier that PTX operations also drive may leave none, so
there the class system of the barrier carries the rule itself:

    peer-exit    a thread at an arrival (its guard true) on an instance of another block
                 while every role of that block has finished its class program

Why it is enough. A BP146 state of the model has a thread about to make the arrival e on an
instance of block B, every thread of B exited. In the class system, the thread's next class
event is e, and each thread of B has no class event left: the class system reaches the state
where the thread is at e and B's roles are done (loop entries and exits are the roles' own
steps, enabled whatever the other roles do), the condition above. A role of B without
operations in the class is not in the system: leaving it out only makes the condition weaker
to reach, never stronger. So if no state of the class system meets the condition (Z3 proves
it with the other error conditions, by the same inductive invariant), no state of the model
breaks BP146 with a thread's own arrival on that barrier.

Copies into a peer (a multicast share, an async_store_smem) land without their issuer's step;
on a marked instance two more conditions carry them:

    peer-issue   a thread at a copy (its guard true) whose delivery lands on an instance of
                 another block while every role of that block has finished its class program
    peer-land    a delivery to an instance of block B in flight (in_flight >= 1) while every
                 role of B has finished its class program

The model's BP146 for a delivery is a state with it in flight into a block whose threads all
exited (model/hw_barriers.py, while some thread still runs); the class system reaches that
state's projection (the delivery's slot counts it, B's roles are done), which meets
peer-land. peer-land also counts a block's own deliveries and the end of the run, which the
model leaves to BP105: a condition stronger than the rule, so a proof still implies it.
tcgen05 commits stay with lemma 1 (their queue is not a slot count here).
"""

from __future__ import annotations

import contextvars

import z3

from .counters import ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX, ISSUE

# class-program operations that are a thread's own effect on an instance (no landing)
OWN_EFFECTS = (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX)


# False while a proof runs with BP146 ignored by the user: the other rules are proved without it
ENCODED = contextvars.ContextVar("peer_exit_encoded", default=True)


def peer_exit_conditions(enc, st) -> list[tuple[str, z3.BoolRef]]:
    """The peer-exit error conditions of `enc`'s system (module doc): one per arrival site on
    an instance marked `peer_exit` of another block than the arriving role's."""
    system = enc.system
    if not ENCODED.get():
        return []
    marked = [i for i, inst in enumerate(system.instances) if inst.peer_exit]
    if not marked:
        return []
    out = []
    for r, code in enumerate(enc.codes):
        mine = code.role.block
        for p, obs, k, c in enc.threads(st, r):
            op = code.op(p)
            if op is None or op.kind not in OWN_EFFECTS + (ISSUE,):
                continue
            targets = tuple(op.targets) + (tuple(system.slots[q].inst for q in op.slots)
                                           if op.kind == ISSUE else ())
            for inst in targets:
                peer = system.instances[inst].block
                if inst not in marked or mine is None or peer is None or peer == mine:
                    continue
                here = z3.simplify(z3.And(c >= 1, enc.guard(st, r, p, k)))
                if z3.is_false(here):
                    continue
                out.append((f"peer-exit (BP146): {op.text} by {code.role.name} reaches block "
                            f"{','.join(map(str, peer))} after its threads exited",
                            z3.And([here] + _block_done(enc, st, peer))))
    for q, slot in enumerate(system.slots):
        block = system.instances[slot.inst].block
        if slot.inst not in marked or block is None:
            continue
        out.append((f"peer-exit (BP146): a {slot.kind} delivery to "
                    f"{system.instances[slot.inst].name} in flight after block "
                    f"{','.join(map(str, block))} exited",
                    z3.And([st.fly[q] >= 1] + _block_done(enc, st, block))))
    return out


def _block_done(enc, st, block) -> list[z3.BoolRef]:
    """Every role of `block` in the class system has finished its class program."""
    return [_done(enc, st, r) for r, code in enumerate(enc.codes) if code.role.block == block]


def _done(enc, st, r: int) -> z3.BoolRef:
    """Every thread of role r has finished its class program."""
    code = enc.codes[r]
    if code.role.single:
        return st.pos[r] == enc.layout.single_index[r][code.done]
    at_end = [c for p, obs, k, c in enc.threads(st, r) if p == code.done]
    return z3.Sum(at_end) == enc.term(st, code.role.size)


__all__ = ["ENCODED", "OWN_EFFECTS", "peer_exit_conditions"]
