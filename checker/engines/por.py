"""Partial-order reduction by dynamic persistent sets: in each state the explorer expands only the
enabled steps of a set of actors that no step outside the set can interfere with.

Actors are the threads (each its next instruction), the in-flight slots (a TMA landing or async
arrival) and the tcgen05 queues (the head's completion). Each instruction is summarised by the
*resources* it reads and writes (a bit each): P(i) a barrier instance (arrivals, tx updates,
deliveries and queue pops write it; waits read it, and so does the step that moves a thread
that has observed nothing yet onto a Pallas wait of i, since a completion's BP101 check reads
that); H(i) a hardware barrier; F(a) / J(w) fork and join, read by `await_fork` / `join` only
while their guard is false (program counters only grow).

Steps whose resources do not conflict commute, neither enables nor disables the other, and
neither changes the rule the other breaks. From a seed actor, the set T is closed under:

- an enabled step in T pulls in every actor whose *future* (its instructions from its program
  counter on; a slot while copies are in flight; a queue's entries; for a thread, also the
  deliveries and completions of the copies and MMAs it will issue) may conflict with it;
- a disabled step in T pulls in every actor whose future writes what its guard reads, and a
  blocked thread whose enablers are all in T stays out (it cannot move outside T);
- a thread's future counts only up to its horizon: the first wait ahead whose guard is false
  and reads nothing that the thread before it or any actor outside T may write.

T is then a strong stubborn set and its enabled steps a persistent set: every deadlock and
every rule broken by a step stays reachable. State rules hold because the seed removes no
error a path outside T could reach: T holds an unfinished thread (so no such path finishes
every thread, as the exit rules need), an unfinished thread of each block a thread seed stops
reaching into is in T (BP146), and every actor whose future memory conflicts with what the
seed's step stops touching is in T (BP200, BP201). The state graph has no cycles, so no cycle
proviso is needed. docs/POR.md has the argument rule by rule.

With thread symmetry, the races of the symmetric images of a state are checked too (the
explorer's race permutations): memory is then taken over a thread's whole symmetry class.

What depends on the program alone is tabled when the chooser is built (resources, futures and
each position's candidate horizon stops, `_stops`); a state evaluates only guards and who may
write their inputs, once per distinct resource mask, and the set is remembered by what it reads
of the state where states share that (`_Memo`). `leaves_nothing_out` tells the explorer where
the reduction saves nothing. `depth_unkept` names the rules whose shortest violation the sets
may put off to a greater depth: where none is left, the reduced breadth-first search's
counterexample is a shortest one without a confirming search; `keeps_overruns` says where the
chooser counts arrivals (`chooser(keep_overruns=True)`, por_overrun.py) so that BP101 and BP102
are kept too. tests/por_reference.py keeps
the chooser before these savings as the oracle this one is compared with.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Callable

from ...model.semantics import OPCODE_NAMES, System
from ...model.steps import (BARRIER, ENDED, FORKED, GUARDS, HARDWARE, RESOURCE_SPACES, STEPS,
                            UNREDUCED)
from .opcode_classes import require_classified

# What each opcode's step reads and writes, in words (its family's `Step.touches` states it
# for the branches of `PersistentSets.__init__`). "unreduced": the explorer turns the
# reductions off wherever the opcode occurs. As imported (the engine reads STEPS).
RESOURCES = {op: step.resources for op, step in STEPS.items()}


def check_classified(opcodes=OPCODE_NAMES, steps=STEPS) -> None:
    """Every opcode is classified (run at import; tests run it on a grown opcode table)."""
    require_classified({op: step.resources for op, step in steps.items()}, opcodes,
                       "partial-order reduction", "its family's `Step` (model/steps.py)")


check_classified()
# How many blocking instructions ahead a horizon looks for one that holds a thread back.
HORIZON_WAITS = 3


class PersistentSets:
    """Per state: the enabled actions of a persistent set, or None when the set is every
    enabled action (or no seed qualifies)."""

    def __init__(self, system: System, classes: list[list[int]] | None = None):
        self.system = system
        A = system.n_agents
        n_inst = len(system.instances)
        hw_instances = getattr(system, "hw_instances", [])
        bit = 0
        P = [1 << (bit + i) for i in range(n_inst)]
        bit += n_inst
        H = [1 << (bit + i) for i in range(len(hw_instances))]
        bit += len(hw_instances)
        F = [1 << (bit + a) for a in range(A)]
        bit += A
        J = [1 << (bit + a) for a in range(A)]
        bit += A
        blocks = {b: n for n, b in enumerate(system.blocks)}
        E = {b: 1 << (bit + n) for b, n in blocks.items()} if len(system.blocks) > 1 else {}

        def inst_block(i):
            return system.instances[i].block

        # reads[a][pc], writes[a][pc]: the step of agent a at pc. fut_w/fut_r[a][pc]: the union
        # over pc.. of the agent's steps, plus the deliveries / completions it will cause.
        reads = [[0] * len(p) for p in system.programs]
        writes = [[0] * len(p) for p in system.programs]
        causes = [[0] * len(p) for p in system.programs]   # P bits of later async arrivals
        onto = [[None] * len(p) for p in system.programs]  # (P bit, seen position) of a wait next
        # Program counters only grow: once `await_fork` / `join` is enabled it stays enabled
        # and commutes with everything, so what its guard reads matters only while disabled.
        guard_only = [[0] * len(p) for p in system.programs]
        remote = [[0] * (len(p) + 1) for p in system.programs]   # E bits a step reaches into
        bits = {BARRIER: P, HARDWARE: H, FORKED: F, ENDED: J}
        assert set(bits) == RESOURCE_SPACES

        def mask(resources) -> int:
            out = 0
            for space, index in resources:
                out |= bits[space][index]
            return out

        touched = []
        for a, prog in enumerate(system.programs):
            own = system.agents[a].block
            row = []
            for pc, instr in enumerate(prog):
                touches = STEPS[instr.op].touches
                if touches == UNREDUCED:
                    raise ValueError(f"partial-order reduction on a {OPCODE_NAMES[instr.op]} "
                                     "step: the explorer turns the reductions off where it "
                                     "occurs")
                t = touches(system, a, instr)
                row.append(t)
                reads[a][pc] |= mask(t.reads)
                writes[a][pc] |= mask(t.writes)
                guard_only[a][pc] |= mask(t.guard_reads)
                for k in t.issues:          # deliveries write the slots' instances later
                    causes[a][pc] |= P[system.slots[k].inst]
                if t.enqueues is not None:  # so does the tcgen05 completion
                    for i in system.arrival_sets[t.enqueues]:
                        causes[a][pc] |= P[i]
                if E:
                    for i in t.reaches:
                        if inst_block(i) != own and inst_block(i) in E:
                            remote[a][pc] |= E[inst_block(i)]
            touched.append(row)
            for pc in range(len(prog) - 1):
                # moving onto a Pallas wait: a completion of its barrier reads whether a
                # waiter that has observed nothing yet stands at it (BP101)
                standing = row[pc + 1].standing
                if standing is not None:
                    onto[a][pc] = (P[standing[0]], standing[1])
        for row in touched:
            for t in row:
                for agent, pc, resource in t.writes_at:
                    writes[agent][pc] |= mask((resource,))
        self.touched = touched
        self.P = P
        self.reads, self.writes = reads, writes
        self.guard_only = guard_only
        # BP146 reads whether a thread stands at an access into an exited block: a seed may
        # remove that only if the next instruction no longer reaches into the same blocks.
        self.leaves = [[remote[a][pc] & ~remote[a][pc + 1] for pc in range(len(p))]
                       for a, p in enumerate(system.programs)]
        self.block_bit = [E.get(system.agents[a].block, 0) for a in range(A)]
        # Once a thread has observed a completion of the barrier it moves onto (its seen entry,
        # which only its own waits change, is >= 0), where it stands no longer matters to BP101.
        self.onto = [{pc: x for pc, x in enumerate(row) if x is not None} for row in onto]
        # One instruction's share of a thread's future: what it reads (with its guard and the
        # wait it moves onto) and writes (with the deliveries and completions it causes).
        self.step_r = [[reads[a][pc] | guard_only[a][pc] | (onto[a][pc][0] if onto[a][pc] else 0)
                        for pc in range(len(p))] for a, p in enumerate(system.programs)]
        self.step_w = [[writes[a][pc] | causes[a][pc] for pc in range(len(p))]
                       for a, p in enumerate(system.programs)]
        # Instructions that can block: a thread's horizon may end at one whose guard is false
        # for good on paths outside the set.
        self.blocking = [[pc for pc, i in enumerate(p) if STEPS[i.op].waits]
                         for p in system.programs]
        self.fut_r, self.fut_w = [], []
        for a, prog in enumerate(system.programs):
            fr = [0] * (len(prog) + 1)
            fw = [0] * (len(prog) + 1)
            for pc in range(len(prog) - 1, -1, -1):
                fr[pc] = fr[pc + 1] | reads[a][pc] | guard_only[a][pc] | \
                    (onto[a][pc][0] if onto[a][pc] else 0)
                fw[pc] = fw[pc + 1] | writes[a][pc] | causes[a][pc]
            self.fut_r.append(fr)
            self.fut_w.append(fw)
        self.slot_w = [P[s.inst] for s in system.slots]
        self.entry_w = [sum_bits(P[i] for i in targets) for targets in system.arrival_sets]
        self._memory(system, classes or [])
        self.n_threads = A
        self.n_slots = len(system.slots)
        self.guards = [[GUARDS[i.op] for i in prog] for prog in system.programs]
        self.stop_table = self._stops()

    def _memory(self, system: System, classes: list[list[int]]) -> None:
        """Memory each thread touches at each gap, and may touch from it on (reads, writes), as
        masks of cells; slots' and tcgen05 entries' writes and reads."""
        mem = system.memory
        self.has_memory = mem is not None
        if mem is None:
            return
        A = system.n_agents
        cls_of = {a: c for c in classes for a in c}
        gap_r, gap_w = [], []
        for a in range(A):
            members = cls_of.get(a, [a])
            n = system.lengths[a] + 1
            r, w = [0] * n, [0] * n
            for m in members:
                for pc in range(n):
                    for mr, mw in mem.items_at[m][pc]:
                        r[pc] |= mr
                        w[pc] |= mw
            gap_r.append(r)
            gap_w.append(w)
        self.slot_mem = [0] * len(system.slots)
        for k, accs in mem.slot_access.items():
            for acc in accs:
                self.slot_mem[k] |= acc.mask      # copies only write
        # a slot's copies count as one transaction with the other slots of its group
        for group in mem.slot_groups:
            union = 0
            for k, mask in group:
                union |= mask
            for k, _ in group:
                self.slot_mem[k] |= union
        entry = mem.entry_masks
        self.entry_mem = [entry.get(e, (0, 0)) for e in range(len(system.arrival_sets))]
        self.gap_r, self.gap_w = gap_r, gap_w
        # What a thread's step stops touching (per member of its class, then united): a race
        # can only be removed by a step that ends one of its accesses.
        self.release_r, self.release_w = [], []
        # what each JOIN stops its warps touching (memory.py `retired`), per parent and pc
        joined: dict[int, dict[int, tuple[int, int]]] = {}
        for w in range(A):
            for gap, (parent, at, _, left) in mem.retired[w].items():
                (r0, w0), (r1, w1) = _masks_of(mem.items_at[w][gap]), _masks_of(left)
                was = joined.setdefault(parent, {}).get(at, (0, 0))
                joined[parent][at] = (was[0] | r0 & ~(r1 | w1), was[1] | w0 & ~w1)
        for a in range(A):
            members = cls_of.get(a, [a])
            n = system.lengths[a]
            rr, rw = [0] * n, [0] * n
            for m in members:
                here = [_masks_of(mem.items_at[m][pc]) for pc in range(n + 1)]
                for pc in range(n):
                    (r0, w0), (r1, w1) = here[pc], here[pc + 1]
                    rr[pc] |= r0 & ~(r1 | w1)
                    rw[pc] |= w0 & ~w1
                    if pc + 1 in mem.self_races[m] or pc in mem.self_races[m]:
                        rr[pc] |= r0
                        rw[pc] |= w0
                for pc, (r, w) in joined.get(m, {}).items():
                    rr[pc] |= r
                    rw[pc] |= w
            self.release_r.append(rr)
            self.release_w.append(rw)
        self.fmem_r, self.fmem_w = [], []
        for a, prog in enumerate(system.programs):
            members = cls_of.get(a, [a])
            n = len(prog)
            fr = [0] * (n + 1)
            fw = [0] * (n + 1)
            fr[n], fw[n] = gap_r[a][n], gap_w[a][n]
            for pc in range(n - 1, -1, -1):
                r, w = gap_r[a][pc], gap_w[a][pc]
                for m in members:
                    t = self.touched[m][pc]
                    for k in t.issues:
                        w |= self.slot_mem[k]
                    if t.enqueues is not None:
                        er, ew = self.entry_mem[t.enqueues]
                        r |= er
                        w |= ew
                fr[pc] = fr[pc + 1] | r
                fw[pc] = fw[pc + 1] | w
            self.fmem_r.append(fr)
            self.fmem_w.append(fw)

    def _stops(self) -> list[list[tuple]]:
        """Per thread and position: where its horizon may end, as (guard reads, guard,
        instruction, future reads and writes before it) for each of the next HORIZON_WAITS
        blocking instructions that the thread itself neither writes what its guard reads nor
        waits on before it. All of that depends on the program only; what is left for a state
        is whether the guard is false now and who else may write what it reads."""
        table = []
        self.stop_pcs = []      # the same stops' program points
        for a, prog in enumerate(self.system.programs):
            srow, wrow, base = self.step_r[a], self.step_w[a], self.reads[a]
            pcs_row = []
            ahead = self.blocking[a]
            rows = []
            for pc in range(len(prog)):
                hr = hw = own = 0
                q = pc
                row, at = [], []
                first = bisect_right(ahead, pc)
                for b in ahead[first:first + HORIZON_WAITS]:
                    while q < b:
                        hr |= srow[q]
                        hw |= wrow[q]
                        own |= base[q] | wrow[q]
                        q += 1
                    gr = self.reads[a][b] | self.guard_only[a][b]
                    if not own & gr:
                        row.append((gr, self.guards[a][b], prog[b], hr, hw))
                        at.append(b)
                rows.append(tuple(row))
                pcs_row.append(tuple(at))
            table.append(rows)
            self.stop_pcs.append(pcs_row)
        return table

    def chooser(self, always_remember: bool = False, keep_overruns: bool = False
                ) -> Callable[[tuple], list[int] | None]:
        """The per-state choice. Everything a program point decides is read from the tables
        built above; a state adds only its guards, which actors exist (finished threads,
        in-flight copies, queue entries) and, per distinct resource mask a step reads or
        writes, which actors' futures touch it (computed once per state and mask, whatever
        number of actors share the step)."""
        system = self.system
        A = self.n_threads
        n_slots = self.n_slots
        leaves, block_bit = self.leaves, self.block_bit
        slot_base, queue_base, queue_end = system.slot_base, system.queue_base, system.queue_end
        slot_w, entry_w = self.slot_w, self.entry_w
        n_queues = queue_end - queue_base
        has_memory = self.has_memory
        if has_memory:
            release_r, release_w = self.release_r, self.release_w
            fmem_r, fmem_w = self.fmem_r, self.fmem_w
            slot_mem, entry_mem = self.slot_mem, self.entry_mem

        # Per thread and position: (reads, writes, future reads, future writes, future reads or
        # writes, guard, instr, (P bit, seen position) of a wait next or None, guard-only
        # reads, the horizon's candidate stops that have a guard, local), where local means
        # the step touches nothing shared (nor memory it stops touching, nor a block it stops
        # reaching into): enabled, it is a persistent set on its own. None past the end.
        info = []
        for a, prog in enumerate(system.programs):
            row = []
            for pc, instr in enumerate(prog):
                released = (release_r[a][pc] | release_w[a][pc]) if has_memory else 0
                r, w = self.reads[a][pc], self.writes[a][pc]
                local = not (r | w | leaves[a][pc] | released)
                stops = tuple(s for s in self.stop_table[a][pc] if s[1] is not None)
                fr, fw = self.fut_r[a][pc], self.fut_w[a][pc]
                row.append((r, w, fr, fw, fr | fw, self.guards[a][pc], instr,
                            self.onto[a].get(pc), self.guard_only[a][pc], stops, local))
            row.append(None)        # finished
            info.append(row)

        # Keeping BP101 and BP102 at their depth (por_overrun.py): the arrivals each actor
        # outside a set can still make on each Pallas barrier decide whether the set is safe.
        keep = keep_overruns
        if keep:
            from .por_overrun import Arrivals, completions, fields, lag
            arrivals = Arrivals(system, self)
            # per thread and position: its stops that have a guard, with their program points
            hz_at = [[tuple((st[0], st[1], st[2], b) for st, b in
                            zip(self.stop_table[a][pc], self.stop_pcs[a][pc])
                            if st[1] is not None) for pc in range(len(prog))]
                     for a, prog in enumerate(system.programs)]

        # the threads with a local step somewhere, and where (most protocols have none)
        local_at = [(a, frozenset(pc for pc, x in enumerate(row) if x is not None and x[-1]))
                    for a, row in enumerate(info)]
        local_at = [(a, pcs) for a, pcs in local_at if pcs]

        def choose(state: tuple) -> list[int] | None:
            # A local step first: nothing to compute (unless it must keep overruns: others
            # may complete a barrier outside it).
            for a, pcs in (() if keep else local_at):
                pc = state[a]
                if pc in pcs:
                    x = info[a][pc]
                    wait_next, guard = x[7], x[5]
                    if (wait_next is None or state[wait_next[1]] >= 0) and \
                            (guard is None or guard(system, state, x[6])):
                        return [a]
            # The actors that can still move: action number, current step's reads and writes,
            # future reads and writes (and their union); indices into these lists are bits.
            act, cur_r, cur_w, f_r, f_w, f_t, stops_of = [], [], [], [], [], [], []
            on = staged = 0
            seeds = []
            remember = memo.active and not keep    # the safety reads counts and phases
            if remember:
                # what the choice reads of the state beyond the program counters and what is
                # in flight, as bits: onto-wait flags and the stops' guards (taken now), one
                # bit each, so many as the program counters say there are
                signature = 0
                falses = []
            for a in range(A):
                x = info[a][state[a]]
                if x is None:
                    continue
                r, w, fr, fw, ft, guard, instr, wait_next, only, stops, _ = x
                j = len(act)
                if wait_next is not None:
                    unseen = state[wait_next[1]] < 0
                    if unseen:
                        r |= wait_next[0]
                    if remember:
                        signature = (signature << 1) | unseen
                if guard is None or guard(system, state, instr):
                    on |= 1 << j
                    seeds.append(j)
                else:
                    r |= only
                if stops:
                    staged |= 1 << j
                    if remember:
                        false = [not guard(system, state, instr) for _, guard, instr, _, _ in stops]
                        for x in false:
                            signature = (signature << 1) | x
                        falses.append(false)
                elif remember:
                    falses.append(())
                act.append(a)
                cur_r.append(r)
                cur_w.append(w)
                f_r.append(fr)
                f_w.append(fw)
                f_t.append(ft)
                stops_of.append(stops)
            n_threads = len(act)
            occupied = 0
            for k in range(n_slots):
                if state[slot_base + k]:
                    occupied |= 1 << k
                    on |= 1 << len(act)
                    act.append(A + k)
                    cur_r.append(0)
                    cur_w.append(slot_w[k])
                    f_r.append(0)
                    f_w.append(slot_w[k])
                    f_t.append(slot_w[k])
            for j in range(n_queues):
                queue = state[queue_base + j]
                if queue:
                    on |= 1 << len(act)
                    act.append(A + n_slots + j)
                    w = 0
                    for e in queue:
                        w |= entry_w[e]
                    cur_r.append(0)
                    cur_w.append(entry_w[queue[0]])
                    f_r.append(0)
                    f_w.append(w)
                    f_t.append(w)
            n_on = on.bit_count()
            if n_on <= 1:
                return None
            if remember:
                key = (state[:A], occupied, state[queue_base:queue_end], on, signature)
                hit = memo.get(key)
                if hit is not None:
                    memo.hits += 1
                    return hit[0]
            if n_threads:
                # an in-flight copy or a tcgen05 queue may seed a set too (after the threads)
                seeds += range(n_threads, len(act))
            L = len(act)
            bits = [1 << j for j in range(L)]
            # Per distinct resource mask a step reads or writes: the actors whose future
            # writes (touches) something of it. Actors that stand at like steps share them.
            writers_of: dict[int, int] = {0: 0}
            touchers_of: dict[int, int] = {0: 0}
            conflicts = []      # per actor: the actors that must join a set holding it
            for i in range(L):
                m = cur_r[i]
                wr = writers_of.get(m)
                if wr is None:
                    wr = 0
                    for j in range(L):
                        if m & f_w[j]:
                            wr |= bits[j]
                    writers_of[m] = wr
                if (on >> i) & 1:
                    # an enabled step: the futures that write what it reads or touch what
                    # it writes
                    m = cur_w[i]
                    to = touchers_of.get(m)
                    if to is None:
                        to = 0
                        for j in range(L):
                            if m & f_t[j]:
                                to |= bits[j]
                        touchers_of[m] = to
                    wr |= to
                # a disabled one: the futures that write what its guard reads (for a blocked
                # thread, with itself taken out, its enablers)
                conflicts.append(wr)

            mem: list[tuple[int, int]] = []

            def memory() -> list[tuple[int, int]]:
                """Every actor's memory from now on: (reads, writes) cell masks."""
                for j in range(L):
                    x = act[j]
                    if x < A:
                        pc = state[x]
                        mem.append((fmem_r[x][pc], fmem_w[x][pc]))
                    elif x < A + n_slots:
                        mem.append((0, slot_mem[x - A]))
                    else:
                        mr = mw = 0
                        for e in state[queue_base + x - A - n_slots]:
                            er, ew = entry_mem[e]
                            mr |= er
                            mw |= ew
                        mem.append((mr, mw))
                return mem

            blocked = ((1 << n_threads) - 1) & ~on      # threads at a step not enabled
            best, best_size = 0, n_on
            # (seed, actors in the set from the start). A block a thread seed stops reaching
            # into must not exit outside the set (BP146): one unfinished thread of each such
            # block in the set is enough.
            starts = []

            def quietest(candidates: list[int]) -> int:
                """The thread that drags the fewest actors in with it: a blocked one with the
                fewest enablers, else the first."""
                stuck = [k for k in candidates if not (on >> k) & 1]
                if not stuck:
                    return candidates[0]
                return min(stuck, key=lambda k: (conflicts[k] & ~bits[k]).bit_count())

            anchor = None
            for seed in seeds:
                if seed >= n_threads:
                    # a delivery or completion may end the last thing in flight at exit: an
                    # unfinished thread in the set keeps every path outside it short of the exit
                    if anchor is None:
                        anchor = quietest(list(range(n_threads)))
                    starts.append(((conflicts[seed] | bits[anchor]).bit_count(), seed,
                                   bits[anchor]))
                    continue
                gone = leaves[act[seed]][state[act[seed]]]
                extra = 0
                while gone:
                    low = gone & -gone
                    gone ^= low
                    members = [k for k in range(n_threads) if block_bit[act[k]] & low]
                    if members:
                        extra |= 1 << quietest(members)
                starts.append(((conflicts[seed] | extra).bit_count(), seed, extra))
            # Per thread, the horizon's stops whose guard is false now, with their other
            # writers: taken once per state, when first needed.
            stops: dict[int, list] = {}

            at_risk = None

            def overruns(inside: int) -> int:
                """The actors outside `inside` that must join it so that no path outside
                it leaves a Pallas waiter two completions behind (por_overrun.py)."""
                nonlocal at_risk
                if at_risk is None:
                    at_risk = []
                    for k, b in enumerate(arrivals.bits):
                        behind = lag(system, arrivals, state, k)
                        if behind < 0:
                            continue
                        wr = to = 0
                        for j in range(L):
                            if f_w[j] & b:
                                wr |= bits[j]
                            if f_t[j] & b:
                                to |= bits[j]
                        at_risk.append((k, behind, wr, to))
                add = 0
                for k, behind, wr, to in at_risk:
                    if behind >= 2:
                        add |= to & ~inside
                        continue
                    out = wr & ~inside
                    if not out:
                        continue
                    total, wild, arrivers = 0, False, 0
                    m = out
                    while m:
                        low = m & -m
                        m ^= low
                        j = low.bit_length() - 1
                        x = act[j]
                        if x < A:
                            pc = state[x]
                            end = len(system.programs[x])
                            for gr, guard, instr, b in hz_at[x][pc]:
                                if guard(system, state, instr):
                                    continue
                                need = 0
                                for q in range(L):
                                    if gr & f_w[q]:
                                        need |= bits[q]
                                if not need & ~low & ~inside:
                                    end = b
                                    break
                            cum, unb = arrivals.cum[x], arrivals.unbounded[x]
                            loose = unb[end][k] > unb[pc][k]
                            got = cum[end][k] - cum[pc][k]
                        elif x < A + n_slots:
                            kk, per = arrivals.slot[x - A]
                            loose = kk == k and per < 0
                            got = max(per, 0) * state[slot_base + x - A] if kk == k else 0
                        else:
                            got, loose = 0, False
                            for e in state[queue_base + x - A - n_slots]:
                                got += arrivals.entry[e].count(k)
                        total += got
                        wild = wild or loose
                        if got or loose:
                            arrivers |= low
                    pending, expected = fields(system, state, arrivals.insts[k])
                    if behind + completions(total, wild, pending, expected) > 1:
                        # those that arrive first (the set is checked again once closed),
                        # the writers that may complete a phase by tx bytes alone after
                        add |= arrivers or out
                return add

            # the seeds with the fewest direct conflicts first: a set of one ends the search
            starts.sort(key=_first)
            sure = on & ~staged     # enabled actors a conflict always adds (no horizon)
            for _, seed, extra in starts:
                inside = bits[seed] | extra
                if ((inside | (conflicts[seed] & sure)) & on).bit_count() >= best_size:
                    continue            # it ends with them at least: no smaller set
                horizons: dict[int, tuple[int, int]] = {}
                if seed >= n_threads:
                    # a delivery or completion may end a copy's or an MMA's accesses
                    if has_memory:
                        x = act[seed] - A
                        if x < n_slots:
                            sr, sw = 0, slot_mem[x]
                        else:
                            sr, sw = entry_mem[state[queue_base + x - n_slots][0]]
                        if sr | sw:
                            for j, (mr, mw) in enumerate(mem or memory()):
                                if sr & mw or sw & (mr | mw):
                                    inside |= 1 << j
                elif has_memory:
                    # who could race with what the seed's thread stops touching
                    a = act[seed]
                    sr, sw = release_r[a][state[a]], release_w[a][state[a]]
                    if sr | sw:
                        for j, (mr, mw) in enumerate(mem or memory()):
                            if sr & mw or sw & (mr | mw):
                                inside |= 1 << j
                todo = inside
                while todo:
                    low = todo & -todo
                    todo ^= low
                    i = low.bit_length() - 1
                    new = conflicts[i] & ~inside
                    m = new & blocked
                    while m:
                        # a blocked thread whose enablers are all in the set stays where it is
                        # on every path outside the set: its future does not matter
                        low = m & -m
                        m ^= low
                        if not conflicts[low.bit_length() - 1] & ~inside & ~low:
                            new ^= low
                    # A thread that cannot pass a wait outside the set matters only up to that
                    # wait (its horizon): the first of its stops whose guard is false now and
                    # whose other writers are all in the set, taken with the set as it is when
                    # the thread is first met (the set only grows, which only shortens
                    # horizons). One without a stop has its whole future as horizon, which
                    # conflicts with step i since it is in `conflicts[i]`: it stays.
                    m = new & staged
                    if m:
                        r, w, enabled_u = cur_r[i], cur_w[i], (on >> i) & 1
                        while m:
                            low = m & -m
                            m ^= low
                            j = low.bit_length() - 1
                            hz = horizons.get(j)
                            if hz is None:
                                mine = stops.get(j)
                                if mine is None:
                                    if remember:
                                        mine = [(gr, hr, hw) for (gr, _, _, hr, hw), false
                                                in zip(stops_of[j], falses[j]) if false]
                                    else:
                                        mine = [(gr, hr, hw)
                                                for gr, guard, instr, hr, hw in stops_of[j]
                                                if not guard(system, state, instr)]
                                    for n, (gr, hr, hw) in enumerate(mine):
                                        wr = writers_of.get(gr)
                                        if wr is None:
                                            wr = 0
                                            for k in range(L):
                                                if gr & f_w[k]:
                                                    wr |= bits[k]
                                            writers_of[gr] = wr
                                        mine[n] = (wr & ~low, hr, hw)
                                    stops[j] = mine
                                    if not mine:
                                        # no stop holds it back now: its whole future counts
                                        staged &= ~low
                                hz = f_r[j], f_w[j]
                                for need, hr, hw in mine:
                                    if not need & ~inside:
                                        hz = hr, hw
                                        break
                                horizons[j] = hz
                            hr, hw = hz
                            if (not (w & (hr | hw) or r & hw)) if enabled_u else not r & hw:
                                new ^= low
                    if new:
                        inside |= new
                        todo |= new
                        if (inside & on).bit_count() >= best_size:
                            break
                    if keep and not todo:
                        # closed: the actors that could overrun a phase outside it join
                        todo = overruns(inside)
                        inside |= todo
                        if todo and (inside & on).bit_count() >= best_size:
                            break
                size = (inside & on).bit_count()
                if size < best_size:
                    best, best_size = inside, size
                    if size == 1:
                        break
            if not best:
                chosen = None
            else:
                best &= on
                chosen = [act[i] for i in range(L) if (best >> i) & 1]
            if remember:
                memo.store(key, chosen)
            return chosen

        memo = _Memo(always_remember)
        return choose


class _Memo(dict):
    """Persistent sets by what the choice reads of a state: the program counters, what is in
    flight, which steps are enabled, which threads move onto a wait they have seen nothing of,
    and the guards of the horizons' stops. States that differ elsewhere (barrier counts, tx
    bytes, phases the guards do not tell apart) share their set. Remembering costs the stops'
    guards up front and memory, so it stops where few states share one (most protocols: the
    program counters tell the barriers' state apart) and starts afresh when it grows large."""

    TRIAL, MIN_SHARE, LIMIT = 500, 0.25, 50_000

    def __init__(self, always: bool = False):
        super().__init__()
        self.active, self.hits, self.always = True, 0, always

    def store(self, key: tuple, chosen: list[int] | None) -> None:
        self[key] = (chosen,)
        if len(self) == self.TRIAL and not self.always:
            self.always = True      # tried once: kept from here on
            if self.hits < self.MIN_SHARE * (self.TRIAL + self.hits):
                self.active = False
                self.clear()
        elif len(self) >= self.LIMIT:
            self.clear()


def _first(start: tuple) -> int:
    return start[0]


def _masks_of(items) -> tuple[int, int]:
    r = w = 0
    for mr, mw in items:
        r |= mr
        w |= mw
    return r, w


def sum_bits(masks) -> int:
    out = 0
    for b in masks:
        out |= b
    return out


# Shortest counterexamples (docs/POR.md): the rules no path made of steps outside a persistent
# set can break, so that a breadth-first search over the sets meets their first violation at its
# depth in the full graph. Deadlock states (BP100, BP130 for a tx-count that never returns to
# zero, BP144) keep the seed enabled; exit states (BP103, BP104, BP105, BP130) need every thread
# finished, and the set holds an unfinished one that does not move outside it.
DEPTH_KEPT = frozenset({"BP100", "BP103", "BP104", "BP105", "BP130", "BP144"})
# Judged before any search (model/static_rules.py, compile.py, hw_barriers.py's checks of the
# program): no state is involved.
NO_SEARCH = frozenset({"BP110", "BP111", "BP112", "BP120", "BP140", "BP143", "BP145", "BP190"})


# BP101 at a completion and BP102, kept where the chooser counts arrivals (por_overrun.py).
OVERRUNS = frozenset({"BP101", "BP102"})


def keeps_overruns(system: System, ignore: frozenset = frozenset()) -> bool:
    """Whether the chooser should count arrivals: BP101 or BP102 is left, every other rule
    left is kept anyway, and the System's BP101 is the completion rule alone. Elsewhere a
    confirming search runs all the same, and the sets stay as small as they were."""
    from .por_overrun import keepable
    left = set(depth_unkept(system, ignore))
    return bool(left) and left <= OVERRUNS and keepable(system)


def depth_unkept(system: System, ignore: frozenset = frozenset(),
                 overruns_kept: bool = False) -> list[str]:
    """The rules, not ignored, whose first violation the persistent sets may put off to a greater
    depth than the full graph's (every known code but those kept, and those the System cannot
    raise: races without memory effects, hardware-barrier rules without hardware barriers,
    peers that exit in a one-block System). Empty: the reduced breadth-first search's
    counterexample is a shortest one as it stands."""
    from ...model.violations import CODES
    cannot = set(NO_SEARCH)
    if system.memory is None:
        cannot |= {"BP200", "BP201"}
    if not getattr(system, "hw_instances", []):
        cannot |= {"BP141", "BP142"}
    if len(system.blocks) <= 1:
        cannot.add("BP146")
    if not getattr(system, "init_insts", ()):
        cannot.add("BP147")
    if overruns_kept:       # the chooser counts arrivals (por_overrun.py)
        cannot |= OVERRUNS
    return sorted(set(CODES) - set(ignore) - DEPTH_KEPT - cannot)


def persistent_sets(system: System, classes: list[list[int]] | None = None,
                    keep_overruns: bool = False) -> Callable[[tuple], list[int] | None] | None:
    """The persistent-set chooser for `system`, or None when nothing can be reduced (a single
    agent); with `keep_overruns`, sets that keep BP101 and BP102 at their depth."""
    if system.n_agents + len(system.slots) + len(system.queue_agents) <= 1:
        return None
    return PersistentSets(system, classes).chooser(keep_overruns=keep_overruns)


def leaves_nothing_out(system: System, choose: Callable[[tuple], list[int] | None],
                       canon: Callable[[tuple], tuple], sample: int) -> int | None:
    """How many states were tried when none of the first `sample` states of a breadth-first
    walk over the (canonical) graph gets a persistent set that leaves out an enabled step;
    None as soon as one does. The walk stops at the first such state, so a reduction that
    pays is found out in a few states.

    Switching the reduction off is always sound: the full expansion is a persistent set of
    every state. A walk fixed by the graph alone (not by the search's order) keeps the
    reduced graph a function of the system, the same for breadth and depth first."""
    start = canon(system.initial_state())
    seen, frontier, tried = {start}, [start], 0
    while frontier:
        level = []
        for state in frontier:
            chosen = choose(state)
            if chosen is not None and any(system.enabled(state, b)
                                          for b in range(system.n_actions) if b not in chosen):
                return None
            tried += 1
            if tried >= sample:
                return tried
            for _, nxt, violation in system.successors(state):
                nxt = canon(nxt)
                if violation is None and nxt not in seen:
                    seen.add(nxt)
                    level.append(nxt)
        frontier = level
    return tried
