"""The error states of a class system (encode.py's Encoder): a thread that joins a barrier
too late (BP102), a stated-phase wait whose phase has passed (BP101), an exit with work left
(BP103/BP104/BP105/BP130) and a deadlock, as Z3 conditions over a symbolic state."""

from __future__ import annotations

import z3

from .budget import UNITS_PER_ORDER_TERM
from .counters import BLOCKING, J1, UNJOINED, WAIT, WAIT_PARITY, WAIT_PHASE
from .semaphores import SEM_WAITS
from .state import FALSE, Pos, SymState
from .work import tick


def late_join(enc, st: SymState):
    bad = []
    for inst in range(len(enc.system.instances)):
        # (a parity wait's first wait means completion 0 or 1: two completions past it
        # the barrier has run past the phase it means, as for a Pallas wait)
        waiting = enc.waiting(st, inst, UNJOINED, kinds=(WAIT, WAIT_PARITY))
        if not z3.is_false(z3.simplify(waiting > 0)):
            bad.append(z3.And(waiting > 0, st.ph[inst] >= 2))
    return z3.Or(bad) if bad else FALSE()

def phase_ahead(enc, st: SymState):
    """A thread at a stated-phase wait (guard true) while the barrier has completed more
    than the phase it means: the wait returns for a later phase, or never (BP101 for parity
    waits, model/semantics.py: state_violations)."""
    def select(r, p, obs, k):
        op = enc.codes[r].op(p)
        if op is None or op.kind != WAIT_PHASE:
            return None
        ahead = st.ph[op.targets[0]] > enc.term(st, op.phase, k) + 1
        return z3.simplify(z3.And(enc.guard(st, r, p, k), ahead))
    n = enc.count(st, select)
    return FALSE() if z3.is_false(z3.simplify(n > 0)) else n > 0

def all_done(enc, st: SymState):
    conds = []
    for r, code in enumerate(enc.codes):
        if code.role.single:
            conds.append(st.pos[r] == enc.layout.single_index[r][code.done])
        else:
            done = [c for p, obs, k, c in enc.threads(st, r) if p == code.done]
            conds.append(z3.Sum(done) == enc.term(st, code.role.size))
    return z3.And(conds)

def exit_bad(enc, st: SymState):
    drained = {q: enc.term(st, c) for q, c in enc.system.drained.items()}
    bad = [f > 0 if q not in drained else z3.And(z3.Not(drained[q]), f > 0)
           for q, f in enumerate(st.fly)]
    for inst, ci in enumerate(enc.system.instances):
        # an open phase of a named barrier at exit is legal on hardware (hw.py)
        open_phase = [] if ci.hw else [st.pend[inst] != st.exp[inst]]
        bad += [st.tx[inst] != 0, enc.observing(st, inst, J1, pallas_only=True) > 0] + \
            open_phase
    landed = [z3.Implies(drained[q], st.fly[q] == 0) for q in sorted(drained)]
    return z3.And([all_done(enc, st)] + landed + [z3.Or(bad)])

def key_less(enc, r2: int, p2: Pos, k2, r: int, p: Pos, k):
    """Do the events of a thread at p2 (loop coordinate k2) all come before the event at p
    in the tau order? (A head precedes everything of its group: conservative.)"""
    code2, code = enc.codes[r2], enc.codes[r]
    seg = code.role.segments[p.seg]
    g = seg.group
    if p2.where == "head":
        if p2.seg == code2.nseg:
            return FALSE()
        return z3.BoolVal(code2.role.segments[p2.seg].group <= g)
    seg2 = code2.role.segments[p2.seg]
    if seg2.group != g:
        return z3.BoolVal(seg2.group < g)
    rank2, rank = seg2.body[p2.pc].rank, seg.body[p.pc].rank
    if seg.keyed and seg2.keyed:
        return z3.Or(k2 < k, z3.And(k2 == k, rank2 < rank))
    return z3.BoolVal(rank2 < rank)

def progress_bad(enc, st: SymState):
    """A deadlock: some thread blocked, nothing in flight, and every thread ordered before
    it (key_less) gone. The (blocked place, earlier place) terms are counted work, ticked
    per blocked place so that a spent budget stops the build there (work.tick)."""
    bad = []
    quiet = [f == 0 for f in st.fly]
    # every place of every role once, with its `none there` term (the pairs below visit
    # each of them for every blocked place)
    places = [[(p2, k2, c2 == 0) for p2, _, k2, c2 in enc.threads(st, r2)]
              for r2 in range(len(enc.codes))]
    for r, code in enumerate(enc.codes):
        for p, obs, k, c in enc.threads(st, r):
            op = code.op(p)
            if op is None or op.kind not in BLOCKING + SEM_WAITS:
                continue
            blocked = z3.Not(enc.enabled(st, op, obs, k))
            prefix, order, pairs = [], {}, 0
            for r2, there in enumerate(places):
                for p2, k2, gone in there:
                    pairs += 1
                    key = (r2, p2)
                    if key not in order:
                        order[key] = z3.simplify(key_less(enc, r2, p2, k2, r, p, k))
                    less = order[key]
                    if z3.is_false(less):
                        continue
                    prefix.append(gone if z3.is_true(less) else z3.Implies(less, gone))
            bad.append(z3.And([c >= 1, enc.guard(st, r, p, k), blocked] + quiet + prefix))
            tick(pairs * UNITS_PER_ORDER_TERM)
    return z3.Or(bad) if bad else FALSE()
