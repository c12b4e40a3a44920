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
breaks BP146 with a thread's own arrival on that barrier. In-flight deliveries (copies,
commits, multicast shares) land without their issuer's step: they are not covered here and stay
with lemma 1, or BP146 stays open.
"""

from __future__ import annotations

import contextvars

import z3

from .counters import ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX

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
            if op is None or op.kind not in OWN_EFFECTS:
                continue
            for inst in op.targets:
                peer = system.instances[inst].block
                if inst not in marked or mine is None or peer is None or peer == mine:
                    continue
                here = z3.simplify(z3.And(c >= 1, enc.guard(st, r, p, k)))
                if z3.is_false(here):
                    continue
                done = [_done(enc, st, r2) for r2, code2 in enumerate(enc.codes)
                        if code2.role.block == peer]
                out.append((f"peer-exit (BP146): {op.text} by {code.role.name} reaches block "
                            f"{','.join(map(str, peer))} after its threads exited",
                            z3.And([here] + done)))
    return out


def _done(enc, st, r: int) -> z3.BoolRef:
    """Every thread of role r has finished its class program."""
    code = enc.codes[r]
    if code.role.single:
        return st.pos[r] == enc.layout.single_index[r][code.done]
    at_end = [c for p, obs, k, c in enc.threads(st, r) if p == code.done]
    return z3.Sum(at_end) == enc.term(st, code.role.size)


__all__ = ["ENCODED", "OWN_EFFECTS", "peer_exit_conditions"]
