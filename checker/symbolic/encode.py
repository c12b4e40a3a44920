"""The transition system of one barrier class, with Z3 terms over symbolic parameters.

This module knows nothing about the IR: `program.py` builds a `CounterSystem` (counters.py:
roles of identical threads, each running a small "class program" over the barrier instances of
one class, with symbolic loop bounds) and this module turns it into an initial condition, a list
of guarded transitions and a list of error conditions over integer state variables, all in
linear integer arithmetic (`invariants.py` guesses, `houdini.py` proves with Z3). The barrier
micro-steps, the moves of each kind of role and the error conditions stay here: they all read
the same views of a state (places, observations, loop coordinates); the state itself, its
variables' names and order and each role's positions, is state.py.

State variables:

    frozen...                      parameters, threshold counts U(x), the representative index:
                                   never change, constrained by the initial condition
    (phase, pending, tx, expected) of every barrier instance of the class (model/semantics.py)
    in_flight[slot]                asynchronous deliveries issued and not yet landed
    a role of ONE thread           pos (its position in the class program), k[j] (its loop
                                   coordinate in loop segment j; past the loop, lo plus the
                                   iterations it ran), obs[b] (what it observed of b)
    a role of N threads            kref[j] (least loop coordinate of its threads in loop
    (counter abstraction)          segment j), n[L] (how many threads are in local state L: a
                                   position with loop offset d = k - kref[j] and an observation
                                   for every instance the role waits on)
    newest[role]                   the slot of a one-thread role's newest tcgen05 op while it is
                                   in flight, -1 once landed: its queue's order (queue_order.py)

An observation is `U` (never waited: seen = -1), `J0` (seen = phase) or `J1` (seen = phase - 1).
A thread that falls two completions behind breaks BP101 at that completion, so three values are
exact. Offsets of a counter role are kept at most B; a thread that would run more than B
iterations ahead of the slowest thread of its role is an "offset overflow" error: the abstraction
is too coarse and the proof fails (the verdict is then `unknown`, never `proved`).

Error conditions (any reachable one fails the proof):
    rule         a transition that breaks BP101 / BP121 (as `_arrive`, `_tx`, `_maybe_complete`),
                 or a parity wait that passes with nothing new to observe (J0)
    late-join    BP102 on a state, for Pallas and parity waits alike
    phase-ahead  a thread at a `wait_parity(phase=n)` while the barrier has completed more than
                 n + 1 phases; passing such a wait at a count other than n + 1 is a rule
                 transition (the hardware's rule, docs/parity.md: these waits keep no
                 observation and may skip phases)

Parity waits are held to the Pallas rules (observe every completion; at exit only barrier_wait
observers are, as in model/semantics.py) and, besides, must never pass stale nor join late: together these imply the hardware's rule that model/semantics.py
checks for them (return for the completion meant, never wait on a barrier that ran past it), so
a proof is sound for it; a kernel that skips phases on purpose states them (`phase=`).
    exit         every role finished its class program: BP103 (for barrier_wait observers, as
                 model/semantics.py), BP104, BP105, BP130; checked once the tcgen05 slots
                 that a later arrival of their queue proves landed are empty (queue_tail.py)
    progress     a thread blocked at a wait while every event that precedes the wait in the
                 static order tau has happened and nothing is in flight (prove.py explains
                 why this rules out deadlocks)
    overflow     the offset bound of a counter role is exceeded
    race         two live accesses of different agents overlap, one writes (races.py)
"""

from __future__ import annotations

from typing import Iterator, Sequence

import z3

from ...model.ir import MAX_TX
from . import queue_order
from .error_states import exit_bad, late_join, phase_ahead, progress_bad
from .peer_exit import peer_exit_conditions
from .semaphores import SEM_SIGNAL, SEM_TAKE, SEM_WAITS
from .work import checked, tick
from .budget import UNITS_PER_ENCODED_CELL
from .counters import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX, ISSUE, WAIT,
                       WAIT_PARITY, WAIT_PHASE, BLOCKING, WAITS, CounterSystem, COp, CSegment)
from .counters import J0, J1, UNJOINED  # noqa: F401  (observations; imported from here too)
from .state import FALSE, TRUE, Layout, Pos, SymState, _subst  # noqa: F401  (also from here)


# ----------------------------------------------------------------------------------------------
# The encoding
# ----------------------------------------------------------------------------------------------

Branch = tuple  # (conditions: list, state: SymState, violations: list)


class Encoder:
    def __init__(self, system: CounterSystem):
        self.system = system
        self.layout = Layout(system)
        self.codes = self.layout.codes
        self.vars = [z3.Int(f"x{i}!{name}") for i, name in enumerate(self.layout.names)]
        self.built = False
        self._place_cache: dict[int, list] = {}
        self._site_cache: dict[tuple, list] = {}

    # -- views of the threads of a state ---------------------------------------------------------

    def term(self, st: SymState, t, k=None):
        return _subst(t, self.system.frozen, st.frozen, k)

    def threads(self, st: SymState, r: int) -> Iterator[tuple[Pos, dict, z3.ArithRef, z3.ArithRef]]:
        """(position, observation per waited instance, loop coordinate, how many threads are
        there as a term) for every place a thread of role r can be."""
        for i in range(len(self._places(r))):
            yield self._thread_at(st, r, i)

    def _places(self, r: int) -> list:
        """Role r's places: positions of a one-thread role, (position, observations) of a
        counter role, with the observations as Z3 values (built once: the encoding visits
        every place of every role for each barrier event)."""
        if r not in self._place_cache:
            code = self.codes[r]
            if code.role.single:
                places = [(p, None) for p in self.layout.single_positions[r]]
            else:
                places = [(p, {b: z3.IntVal(s) for b, s in zip(code.waited, sigma)})
                          for p, sigma in self.layout.counter_locals[r]]
            self._place_cache[r] = places
        return self._place_cache[r]

    def _thread_at(self, st: SymState, r: int, i: int):
        p, obs = self._places(r)[i]
        if self.codes[r].role.single:
            k = st.k[r][p.seg] if p.where == "at" and p.seg in st.k[r] else z3.IntVal(0)
            return p, st.obs[r], k, z3.If(st.pos[r] == i, 1, 0)
        k = st.k[r][p.seg] + p.d if p.where == "at" and p.seg in st.k[r] else z3.IntVal(0)
        return p, obs, k, st.n[r][i]

    def _sites(self, inst: int, kinds) -> list[tuple[int, int]]:
        """(role, place) of every place at an operation of `kinds` on `inst` (static)."""
        key = (inst, tuple(kinds))
        if key not in self._site_cache:
            sites = []
            for r, code in enumerate(self.codes):
                for i, (p, _) in enumerate(self._places(r)):
                    op = code.op(p)
                    if op is not None and op.kind in kinds and op.targets and \
                            op.targets[0] == inst:
                        sites.append((r, i))
            self._site_cache[key] = sites
        return self._site_cache[key]

    def guard(self, st: SymState, r: int, p: Pos, k):
        op = self.codes[r].op(p)
        return self.term(st, op.guard, k)

    def count(self, st: SymState, select) -> z3.ArithRef:
        """Number of threads for which select(r, pos, obs, k) holds (None: never)."""
        total = []
        for r in range(len(self.codes)):
            for p, obs, k, c in self.threads(st, r):
                cond = select(r, p, obs, k)
                if cond is None or z3.is_false(cond):
                    continue
                total.append(c if z3.is_true(cond) else z3.If(cond, c, 0))
        return z3.Sum(total) if total else z3.IntVal(0)

    def observing(self, st: SymState, inst: int, value: int, pallas_only: bool = False):
        """Threads whose observation of `inst` is `value`."""
        total = []
        for r, code in enumerate(self.codes):
            if inst not in code.waited or (pallas_only and inst not in code.pallas_waited):
                continue
            if code.role.single:
                total.append(z3.If(st.obs[r][inst] == value, 1, 0))
            else:
                b = code.waited.index(inst)
                total += [st.n[r][i] for i, (_, sigma) in
                          enumerate(self.layout.counter_locals[r]) if sigma[b] == value]
        return z3.Sum(total) if total else z3.IntVal(0)

    def waiting(self, st: SymState, inst: int, value: int | None, kinds=WAITS):
        """Threads at a wait on `inst` whose guard holds (optionally with an observation)."""
        total = []
        for r, i in self._sites(inst, kinds):
            p, obs, k, c = self._thread_at(st, r, i)
            cond = self.guard(st, r, p, k)
            if value is not None:
                cond = z3.And(cond, obs[inst] == value)
            cond = z3.simplify(cond)
            if z3.is_false(cond):
                continue
            total.append(c if z3.is_true(cond) else z3.If(cond, c, 0))
        return z3.Sum(total) if total else z3.IntVal(0)

    # -- barrier micro-steps (model/semantics.py: _arrive, _tx, _maybe_complete) --------------
    # A micro-step maps a branch (conditions, state, violations) to the branches it splits
    # into: every transition then has a head without if-then-else over barrier fields.

    def maybe_complete(self, br: Branch, inst: int, actor) -> list[Branch]:
        conds, st, viols = br
        cond = z3.And(st.pend[inst] == 0, st.tx[inst] == 0)
        behind = [self.observing(st, inst, J1) > 0,
                  z3.And(st.ph[inst] >= 1, self.waiting(st, inst, UNJOINED) > 0)]
        if actor is not None:
            # The actor's pc already moved; its next class event may be a wait on `inst` after
            # operations skipped by their guards: count it as waiting when it never joined.
            r, obs = actor
            if inst in obs:
                behind.append(z3.And(st.ph[inst] >= 1, obs[inst] == UNJOINED))
        new = st.copy()
        new.ph[inst] = st.ph[inst] + 1
        new.pend[inst] = st.exp[inst]
        for r, code in enumerate(self.codes):
            if inst not in code.waited:
                continue
            if code.role.single:
                o = st.obs[r][inst]
                new.obs[r][inst] = z3.If(o == J0, J1, o)
            else:
                locs = self.layout.counter_locals[r]
                index = self.layout.counter_index[r]
                b = code.waited.index(inst)
                for i, (p, sigma) in enumerate(locs):
                    if sigma[b] == J0:
                        new.n[r][i] = z3.IntVal(0)
                    elif sigma[b] == J1:
                        j0 = index[(p, sigma[:b] + (J0,) + sigma[b + 1:])]
                        new.n[r][i] = st.n[r][i] + st.n[r][j0]
        return [(conds + [cond], new, viols + [z3.Or(behind)]),
                (conds + [z3.Not(cond)], st, viols)]

    def arrive(self, br: Branch, inst: int, count, actor) -> list[Branch]:
        conds, st, viols = br
        new = st.copy()
        new.pend[inst] = st.pend[inst] - count
        return self.maybe_complete((conds, new, viols + [new.pend[inst] < 0]), inst, actor)

    def add_tx(self, br: Branch, inst: int, delta, actor) -> list[Branch]:
        conds, st, viols = br
        new = st.copy()
        new.tx[inst] = st.tx[inst] + delta
        bad = z3.Or(new.tx[inst] > MAX_TX, new.tx[inst] < -MAX_TX)
        return self.maybe_complete((conds, new, viols + [bad]), inst, actor)

    def effects(self, st: SymState, actor, op: COp, k) -> list[Branch]:
        """Barrier effects of an executed operation (the thread already moved)."""
        amount = self.term(st, op.amount, k)
        branches: list[Branch] = [([], st, [])]

        def each(fn):
            nonlocal branches
            out = []
            for br in branches:
                out += fn(br)
            branches = out

        for inst in op.targets:
            if op.kind == ARRIVE and op.sync and actor is not None:
                each(lambda br, i=inst: self.sync_arrival(br, i, actor))
            if op.kind == ARRIVE:
                each(lambda br, i=inst: self.arrive(br, i, amount, actor))
            elif op.kind == ARRIVE_DROP:
                def drop(br, i=inst):
                    conds, s, viols = br
                    new = s.copy()
                    new.exp[i] = s.exp[i] - 1
                    return self.arrive((conds, new, viols + [new.exp[i] < 0]), i, 1, actor)
                each(drop)
            elif op.kind in (EXPECT_TX, ARRIVE_TX, ISSUE):
                each(lambda br, i=inst: self.add_tx(br, i, amount, actor))
                if op.kind in (ARRIVE_TX, ISSUE):
                    each(lambda br, i=inst: self.arrive(br, i, 1, actor))
            elif op.kind == COMPLETE_TX:
                each(lambda br, i=inst: self.add_tx(br, i, -amount, actor))
            elif op.kind in (SEM_SIGNAL, SEM_TAKE):
                sign = 1 if op.kind == SEM_SIGNAL else -1

                def count(br, i=inst, sign=sign):
                    conds, s, viols = br
                    new = s.copy()
                    new.ph[i] = s.ph[i] + sign * amount    # a semaphore's value
                    return [(conds, new, viols)]
                each(count)
            elif op.kind not in BLOCKING + SEM_WAITS:
                raise ValueError(op.kind)
        if op.kind == ISSUE and op.slots:
            def fly(br):
                conds, s, viols = br
                new = s.copy()
                for q in op.slots:
                    new.fly[q] = s.fly[q] + 1
                if actor is not None:
                    queue_order.issue(new, actor[0], op, self.layout.queues)
                return [(conds, new, viols)]
            each(fly)
        return branches

    def sync_arrival(self, br: Branch, inst: int, actor) -> list[Branch]:
        """A bar.sync arrives in the phase its wait must see complete (hw.py): the thread has
        observed every completion so far, or never waited and the barrier is in phase 0."""
        conds, st, viols = br
        o = actor[1][inst]
        ok = z3.Or(o == J0, z3.And(o == UNJOINED, st.ph[inst] == 0))
        return [(conds, st, viols + [z3.Not(ok)])]

    def landing(self, st: SymState, q: int) -> list[Branch]:
        slot = self.system.slots[q]
        new = st.copy()
        new.fly[q] = st.fly[q] - 1
        out = []
        for conds, landed in queue_order.landing(st, new, q, self.layout.queues):
            br = ([st.fly[q] >= 1] + conds, landed, [])
            if slot.effect == "tx":
                out += self.add_tx(br, slot.inst, -self.term(st, slot.amount), None)
            else:
                out += self.arrive(br, slot.inst, 1, None)
        return out

    def enabled(self, st: SymState, op: COp, obs: dict, k):
        inst = op.targets[0] if op.targets else None
        if op.kind == WAIT:
            o = obs[inst]
            return z3.Or(o == J1, z3.And(o == UNJOINED, st.ph[inst] % 2 == 1))
        if op.kind == WAIT_PARITY:
            return st.ph[inst] % 2 != self.term(st, op.parity, k) % 2
        if op.kind == WAIT_PHASE:
            return st.ph[inst] % 2 != self.term(st, op.phase, k) % 2
        if op.kind in SEM_WAITS:
            return st.ph[inst] >= self.term(st, op.amount, k)
        return TRUE()

    def wrong_phase(self, st: SymState, op: COp, k):
        """A stated-phase wait that passes returns for completion ph: the hardware's rule
        wants the completion it means, phase + 1 (docs/parity.md, steps.effect_wait_parity)."""
        if op.kind != WAIT_PHASE:
            return FALSE()
        return st.ph[op.targets[0]] != self.term(st, op.phase, k) + 1

    def entry(self, st: SymState, seg: CSegment):
        """(a thread at the head of seg enters it, the loop's first coordinate)."""
        guard = self.term(st, seg.guard)
        lo, hi = self.term(st, seg.lo), self.term(st, seg.hi)
        return (z3.And(guard, lo < hi) if seg.loop else guard), lo

    def continues(self, st: SymState, seg: CSegment, how: str, k):
        """The condition of moving on from an op at loop coordinate k by `how`
        (same, iter, leave)."""
        if how == "iter":
            return k + 1 < self.term(st, seg.hi)
        if how == "leave" and seg.loop:
            return k + 1 >= self.term(st, seg.hi)
        return TRUE()

    # -- moves of a single thread ---------------------------------------------------------------

    def single_transitions(self, st: SymState, r: int):
        code = self.codes[r]
        index = self.layout.single_index[r]
        for value, p in enumerate(self.layout.single_positions[r]):
            here = st.pos[r] == value
            if p.where == "head":
                if p.seg == code.nseg:
                    continue
                seg = code.role.segments[p.seg]
                enter, lo = self.entry(st, seg)
                new = st.copy()
                new.pos[r] = z3.IntVal(index[Pos("at", p.seg, 0)])
                if seg.loop:
                    new.k[r][p.seg] = lo
                yield (f"{code.role.name} enters {seg.text}", [here, enter], new, FALSE())
                new = st.copy()
                new.pos[r] = z3.IntVal(index[Pos("head", p.seg + 1)])
                yield (f"{code.role.name} skips {seg.text}", [here, z3.Not(enter)], new, FALSE())
                continue
            op = code.op(p)
            seg = code.role.segments[p.seg]
            k = st.k[r][p.seg] if seg.loop else z3.IntVal(0)
            guard = self.term(st, op.guard, k)
            for how, q in code.next_of(p):
                cond = self.continues(st, seg, how, k)
                if how == "iter":
                    q = Pos("at", q.seg, q.pc)
                moved = st.copy()
                moved.pos[r] = z3.IntVal(index[q])
                # Leaving a loop sets k to hi (it is read only inside the loop, so nothing
                # observable changes): past the loop, k - lo counts the iterations run, 0 when
                # it was skipped, and a count of the loop's events stays linear in k there.
                if how == "iter" or (how == "leave" and seg.loop):
                    moved.k[r][p.seg] = k + 1
                yield (f"{code.role.name} skips {op.text}", [here, cond, z3.Not(guard)], moved,
                       FALSE())
                stale = FALSE()
                if op.kind in WAITS:
                    moved = moved.copy()
                    moved.obs[r][op.targets[0]] = z3.IntVal(J0)
                    if op.kind == WAIT_PARITY:
                        stale = st.obs[r][op.targets[0]] == J0
                if op.kind == WAIT_PHASE:
                    stale = self.wrong_phase(st, op, k)
                enabled = self.enabled(st, op, st.obs[r], k)
                for conds, after, viols in self.effects(moved, (r, moved.obs[r]), op, k):
                    viols = viols + [stale] if not z3.is_false(stale) else viols
                    yield (f"{code.role.name}: {op.text}", [here, cond, guard, enabled] + conds,
                           after, z3.Or(viols) if viols else FALSE())

    # -- moves of a counter role ------------------------------------------------------------------

    def counter_move(self, st: SymState, r: int, src, dst):
        """One thread of role r moves from local src to dst (dst may have offset B+1); then the
        role's loop offsets are normalized. Returns [(conditions, state, overflow)]."""
        code = self.codes[r]
        locs = self.layout.counter_locals[r]
        index = self.layout.counter_index[r]
        counts = {loc: st.n[r][i] for i, loc in enumerate(locs)}
        counts[src] = counts[src] - 1
        extra = None
        if dst in index:
            counts[dst] = counts[dst] + 1
        else:
            extra = dst
        (sp, _), (dp, _) = src, dst
        candidates = [j for j in code.loop_segments
                      if (sp.where == "at" and sp.seg == j and sp.d == 0)
                      or (code.before(sp, j) and not code.before(dp, j))]
        branches = [([], counts, dict(st.k[r]), extra)]
        for j in candidates:
            out = []
            for conds, cnt, kref, ext in branches:
                before = [c for (p, _), c in cnt.items() if code.before(p, j)]
                at0 = [c for (p, _), c in cnt.items() if p.where == "at" and p.seg == j
                       and p.d == 0]
                later = [c for (p, _), c in cnt.items() if p.where == "at" and p.seg == j
                         and p.d > 0]
                if ext is not None and ext[0].seg == j:
                    later.append(z3.IntVal(1))
                if not later:
                    out.append((conds, cnt, kref, ext))
                    continue
                shift = z3.And(z3.Sum(before + [z3.IntVal(0)]) == 0,
                               z3.Sum(at0 + [z3.IntVal(0)]) == 0, z3.Sum(later) > 0)
                shifted = dict(cnt)
                for (p, sigma) in locs:
                    if p.where == "at" and p.seg == j:
                        up = (Pos("at", j, p.pc, p.d + 1), sigma)
                        if up in cnt:
                            shifted[(p, sigma)] = cnt[up]
                        elif ext == up:
                            shifted[(p, sigma)] = z3.IntVal(1)
                        else:
                            shifted[(p, sigma)] = z3.IntVal(0)
                kr2 = dict(kref)
                kr2[j] = kref[j] + 1
                ext2 = None if (ext is not None and ext[0].seg == j) else ext
                out.append((conds + [shift], shifted, kr2, ext2))
                out.append((conds + [z3.Not(shift)], cnt, kref, ext))
            branches = out
        result = []
        for conds, cnt, kref, ext in branches:
            new = st.copy()
            new.n[r] = [cnt[loc] for loc in locs]
            new.k[r] = kref
            result.append((conds, new, ext is not None))
        return result

    def counter_transitions(self, st: SymState, r: int):
        code = self.codes[r]
        locs = self.layout.counter_locals[r]
        for i, (p, sigma) in enumerate(locs):
            here = st.n[r][i] >= 1
            obs = {b: z3.IntVal(s) for b, s in zip(code.waited, sigma)}
            if p.where == "head":
                if p.seg == code.nseg:
                    continue
                seg = code.role.segments[p.seg]
                enter, lo = self.entry(st, seg)
                # kref[j] stays at lo while a thread is before segment j: entering is offset 0.
                stale = st.k[r][p.seg] != lo if seg.loop else FALSE()
                for conds, new, ovf in self.counter_move(st, r, (p, sigma),
                                                         (Pos("at", p.seg, 0), sigma)):
                    yield (f"{code.role.name} enters {seg.text}", [here, enter] + conds, new,
                           FALSE(), z3.Or(stale, z3.BoolVal(ovf)))
                for conds, new, ovf in self.counter_move(st, r, (p, sigma),
                                                         (Pos("head", p.seg + 1), sigma)):
                    yield (f"{code.role.name} skips {seg.text}", [here, z3.Not(enter)] + conds,
                           new, FALSE(), z3.BoolVal(ovf))
                continue
            op = code.op(p)
            seg = code.role.segments[p.seg]
            k = st.k[r][p.seg] + p.d if seg.loop else z3.IntVal(0)
            guard = self.term(st, op.guard, k)
            for how, q in code.next_of(p):
                cond = self.continues(st, seg, how, k)
                for conds, moved, ovf in self.counter_move(st, r, (p, sigma), (q, sigma)):
                    yield (f"{code.role.name} skips {op.text}",
                           [here, cond, z3.Not(guard)] + conds, moved, FALSE(), z3.BoolVal(ovf))
                new_sigma = sigma
                stale = False
                if op.kind in WAITS:
                    b = code.waited.index(op.targets[0])
                    new_sigma = sigma[:b] + (J0,) + sigma[b + 1:]
                    # a parity wait that passes with nothing new to observe returns for a
                    # phase it does not mean (steps.effect_wait_parity)
                    stale = op.kind == WAIT_PARITY and sigma[b] == J0
                wrong = self.wrong_phase(st, op, k)
                enabled = self.enabled(st, op, obs, k)
                actor_obs = {b: z3.IntVal(s) for b, s in zip(code.waited, new_sigma)}
                for conds, moved, ovf in self.counter_move(st, r, (p, sigma), (q, new_sigma)):
                    for conds2, after, viols in self.effects(moved, (r, actor_obs), op, k):
                        viols = viols + [TRUE()] if stale else viols
                        viols = viols + [wrong] if not z3.is_false(wrong) else viols
                        yield (f"{code.role.name}: {op.text}",
                               [here, cond, guard, enabled] + conds + conds2, after,
                               z3.Or(viols) if viols else FALSE(), z3.BoolVal(ovf))

    # -- the whole system -------------------------------------------------------------------------

    def initial(self) -> list:
        sysm = self.system
        cur = SymState(self.layout, self.vars)
        vals = list(cur.frozen)
        for inst in sysm.instances:
            e = self.term(cur, inst.expected)
            vals += [z3.IntVal(0), e, z3.IntVal(0), e]
        vals += [z3.IntVal(0)] * len(sysm.slots)
        for r, code in enumerate(self.codes):
            vals += [self.term(cur, code.role.segments[j].lo) for j in code.loop_segments]
            if code.role.single:
                vals.append(z3.IntVal(self.layout.single_index[r][Pos("head", 0)]))
                vals += [z3.IntVal(UNJOINED)] * len(code.waited)
            else:
                start = self.layout.counter_index[r][(Pos("head", 0),
                                                      (UNJOINED,) * len(code.waited))]
                vals += [self.term(cur, code.role.size) if i == start else z3.IntVal(0)
                         for i in range(len(self.layout.counter_locals[r]))]
        vals += [z3.IntVal(queue_order.NONE)] * len(self.layout.queues)
        return vals

    def build(self) -> "Encoder":
        if self.built:
            return self
        sysm = self.system
        cur = SymState(self.layout, self.vars)
        self.init_body = z3.And([self.term(cur, c) for c in sysm.constraints] or [TRUE()])
        self.init_head = self.initial()
        self.steps: list[tuple[str, z3.BoolRef, list]] = []
        self.bad: list[tuple[str, z3.BoolRef]] = []

        def add(label, conds, new, viol, ovf):
            pre = z3.simplify(z3.And(conds))
            if z3.is_false(pre):
                return
            viol, ovf = z3.simplify(viol), z3.simplify(ovf)
            if not z3.is_false(ovf):
                self.bad.append((f"overflow: {label}", z3.And(pre, ovf)))
            if z3.is_true(ovf) or z3.is_true(viol):
                if z3.is_true(viol):
                    self.bad.append((f"rule: {label}", pre))
                return
            if not z3.is_false(viol):
                self.bad.append((f"rule: {label}", z3.And(pre, viol)))
            # A transition that breaks a rule is terminal (model/semantics.py): its successor
            # is not a state of the system.
            step_pre = z3.simplify(z3.And(pre, z3.Not(viol), z3.Not(ovf)))
            if not z3.is_false(step_pre):
                self.steps.append((label, step_pre, new.vector()))

        # counted work (budget.py): terms of every transition's successor built, ticked per
        # role and delivery so that a spent budget stops the build there
        def counted(made):
            tick((len(self.steps) - made) * len(self.vars) * UNITS_PER_ENCODED_CELL)

        for r, code in enumerate(self.codes):
            made = len(self.steps)
            if code.role.single:
                for label, conds, new, viol in self.single_transitions(cur, r):
                    add(label, conds, new, viol, FALSE())
            else:
                for label, conds, new, viol, ovf in self.counter_transitions(cur, r):
                    add(label, conds, new, viol, ovf)
            counted(made)
        for q, slot in enumerate(sysm.slots):
            made = len(self.steps)
            label = f"{slot.kind} lands on {sysm.instances[slot.inst].name}"
            for conds, new, viols in self.landing(cur, q):
                add(label, conds, new, z3.Or(viols) if viols else FALSE(), FALSE())
            counted(made)
        self.bad.append(("late-join (BP102)", late_join(self, cur)))
        self.bad.append(("phase-ahead (BP101)", phase_ahead(self, cur)))
        self.bad.append(("exit (BP103/BP104/BP105/BP130)", exit_bad(self, cur)))
        self.bad += peer_exit_conditions(self, cur)
        if sysm.progress:
            self.bad.append(("progress (deadlock)", progress_bad(self, cur)))
        if sysm.cells:
            from .races import race_conditions
            races = race_conditions(self, cur)
            if sysm.races_only:
                # the barrier rules were proved on the same class system without the accesses;
                # an offset overflow is still the abstraction's own failure, never dropped
                self.bad = [b for b in self.bad if b[0].startswith("overflow")]
            self.bad += races
        self.sane = self.sane_of(cur)
        self.built = True
        return self

    def sane_of(self, st: SymState) -> list:
        """Facts true by construction (a move takes one thread from a place with a thread to
        another; completions move counts between observations): assumed everywhere, checked
        inductive by `check_sane`."""
        out = [f >= 0 for f in st.fly]
        for r, code in enumerate(self.codes):
            if code.role.single:
                out += [st.pos[r] >= 0, st.pos[r] < len(self.layout.single_positions[r])]
                for value, p in enumerate(self.layout.single_positions[r]):
                    if p.where == "at" and p.seg in st.k[r]:
                        seg = code.role.segments[p.seg]
                        k = st.k[r][p.seg]
                        out.append(z3.Implies(st.pos[r] == value,
                                              z3.And(k >= self.term(st, seg.lo),
                                                     k < self.term(st, seg.hi))))
                out += [z3.And(o >= UNJOINED, o <= J1) for o in st.obs[r].values()]
            else:
                out += [c >= 0 for c in st.n[r]]
                out.append(z3.Sum(st.n[r]) == self.term(st, code.role.size))
                locs = self.layout.counter_locals[r]
                for j in code.loop_segments:
                    before = z3.Sum([c for (p, _), c in zip(locs, st.n[r]) if code.before(p, j)]
                                    + [z3.IntVal(0)])
                    inside = z3.Sum([c for (p, _), c in zip(locs, st.n[r])
                                     if p.where == "at" and p.seg == j] + [z3.IntVal(0)])
                    at0 = z3.Sum([c for (p, _), c in zip(locs, st.n[r])
                                  if p.where == "at" and p.seg == j and p.d == 0]
                                 + [z3.IntVal(0)])
                    seg = code.role.segments[j]
                    lo, hi = self.term(st, seg.lo), self.term(st, seg.hi)
                    for (p, _), c in zip(locs, st.n[r]):
                        if p.where == "at" and p.seg == j:
                            out.append(z3.Implies(c >= 1, z3.And(st.k[r][j] + p.d >= lo,
                                                                 st.k[r][j] + p.d < hi)))
                    # normalized offsets; kref stays at lo while a thread is before the loop
                    out.append(z3.Implies(z3.And(before == 0, inside > 0), at0 >= 1))
                    out.append(z3.Implies(before > 0,
                                          st.k[r][j] == self.term(st, code.role.segments[j].lo)))
        return out + queue_order.facts(st, self.layout.queues)

    def transition_relation(self):
        """(post-state variables, the disjunction of all transitions, frozen frame)."""
        if not hasattr(self, "_relation"):
            nf = len(self.system.frozen)
            post = [z3.Int(f"{v}'") for v in self.vars]
            # Or(And(pre, post == next, ...), ...) built through the C API: the same terms as
            # z3.Or/z3.And/== make, without the Python API's per-argument coercions (most of
            # the time otherwise on a class of hundreds of transitions)
            ctx = self.vars[0].ctx if self.vars else z3.main_ctx()
            ref = ctx.ref()
            posts = [p.as_ast() for p in post[nf:]]
            post0 = post[0] if post else None
            disjuncts = []
            for _, pre, nxt in self.steps:
                # (each new term held by a reference: Z3 may free an unreferenced one; a
                # numeral on the right is asked first by Python's `==`, as a subclass)
                eqs = [z3.BoolRef(z3.Z3_mk_eq(ref, *((t.as_ast(), p) if _reflected(post0, t)
                                                     else (p, t.as_ast()))), ctx)
                       for p, t in zip(posts, nxt[nf:])]
                args = [pre.as_ast()] + [e.as_ast() for e in eqs]
                disjuncts.append(z3.BoolRef(z3.Z3_mk_and(ref, len(args),
                                                         (z3.Ast * len(args))(*args)), ctx))
            relation = z3.BoolRef(z3.Z3_mk_or(ref, len(disjuncts), (z3.Ast * len(disjuncts))(
                *[d.as_ast() for d in disjuncts])), ctx) if disjuncts else z3.Or([])
            frame = [p == v for p, v in zip(post[:nf], self.vars[:nf])]
            self._relation = (post, relation, frame)
        return self._relation

    def check_sane(self, timeout: float = 30.0, asked: Sequence[int] | None = None
                   ) -> str | None:
        """None when the construction facts are inductive, else the offending step.

        One query per transition (the disjunction of all of them is unsat exactly when each
        disjunct is; one query over a class of hundreds of transitions is far harder for Z3
        than its parts), all under the parameters' constraints (frozen: true in every state).
        `asked`: only these transitions, when every other one is the mirror image of one asked
        under a swap that maps the facts onto themselves (symmetry.py checks both with Z3):
        from a state v with the facts, u = sigma(t) steps to sigma(t(sigma(v))), and
        sigma(v) has the facts, so t's check covers u."""
        solver = z3.Solver()
        solver.set("timeout", int(timeout * 1000))
        init = SymState(self.layout, self.init_head)
        solver.add(self.init_body, z3.Not(z3.And(self.sane_of(init))))
        if checked(solver) != z3.unsat:     # within the budget in force (work.py)
            return "initial state"
        solver = z3.Solver()
        solver.set("timeout", int(timeout * 1000))
        solver.add(self.init_body, *self.sane)
        facts = z3.And(self.sane)
        for t in (range(len(self.steps)) if asked is None else asked):
            label, pre, nxt = self.steps[t]
            after = z3.substitute(facts, *[(v, x) for v, x in zip(self.vars, nxt)]) \
                if nxt else facts
            solver.push()
            solver.add(pre, z3.Not(after))
            r = checked(solver)
            solver.pop()
            if r == z3.unknown:
                return f"undecided ({solver.reason_unknown()})"
            if r != z3.unsat:
                return label
        return None

    def spacer(self, timeout: float = 60.0) -> str:
        """Ask Spacer directly (kept for comparison: it rarely converges on these systems)."""
        self.build()
        fp = z3.Fixedpoint()
        fp.set(engine="spacer")
        fp.set("timeout", int(timeout * 1000))
        inv = z3.Function("Inv", *([z3.IntSort()] * len(self.vars)), z3.BoolSort())
        err = z3.Function("Err", z3.BoolSort())
        fp.register_relation(inv, err)
        fp.declare_var(*self.vars)
        fp.rule(inv(*self.init_head), self.init_body)
        for _, pre, nxt in self.steps:
            fp.rule(inv(*nxt), [inv(*self.vars), pre] + self.sane)
        for _, cond in self.bad:
            fp.rule(err(), [inv(*self.vars), cond] + self.sane)
        try:
            answer = fp.query(err())
        except z3.Z3Exception as exc:
            return f"unknown ({exc})"
        return {z3.unsat: "proved", z3.sat: "failed"}.get(answer, "unknown")


def _reflected(left, right) -> bool:
    """Does Python's `left == right` call right.__eq__(left) (a subclass on the right)?"""
    return type(right) is not type(left) and isinstance(right, type(left))
