"""The persistent-set chooser as it was before its per-state work was cut down (the per-bit
writer indexes, the grouping of actors by future, the horizon skipped where a thread has no
stop): kept here, unchanged in what it computes, as the exact oracle checker/engines/por.py's
chooser is compared against state by state (tests/test_por_tables.py). It reads the tables a
`PersistentSets` builds and walks horizons instruction by instruction (`walk=True`) or reads
them from `stop_table`."""

from __future__ import annotations

from bisect import bisect_right
from typing import Callable

from barrierproof.checker.engines.por import HORIZON_WAITS, PersistentSets


class ReferenceSets:
    """The old chooser over the tables of `sets`."""

    def __init__(self, sets: PersistentSets):
        self.__dict__.update(sets.__dict__)

    def _walker(self, state: tuple, act: list[int], f_r: list[int], f_w: list[int],
                writers: Callable[[int], int]) -> Callable[[int, int], tuple[int, int]]:
        """The horizon walked instruction by instruction in each state: the reference the
        tables of `_stops` are tested against (tests/test_por_tables.py)."""
        system, programs, guards = self.system, self.system.programs, self.guards
        step_r, step_w, blocking = self.step_r, self.step_w, self.blocking
        reads, guard_only = self.reads, self.guard_only

        def horizon(j: int, inside: int) -> tuple[int, int]:
            """Thread j's future up to the first instruction it cannot pass on a path
            outside `inside`: a blocking step whose guard is false now and whose inputs
            nothing outside `inside` can change (no other actor outside it writes what
            the guard reads; j itself neither writes it nor waits on it before). Taken
            with the set as it is now: the set only grows, which only shortens horizons,
            so this one stays a safe over-approximation."""
            a = act[j]
            pc = state[a]
            srow, wrow, base = step_r[a], step_w[a], reads[a]
            hr = hw = own = 0
            q = pc
            ahead = blocking[a]
            first = bisect_right(ahead, pc)
            # a few waits ahead at most: past them the whole future is cheaper and as good
            for b in ahead[first:first + HORIZON_WAITS]:
                while q < b:
                    hr |= srow[q]
                    hw |= wrow[q]
                    own |= base[q] | wrow[q]
                    q += 1
                gr = reads[a][b] | guard_only[a][b]
                if own & gr:
                    continue
                if writers(gr) & ~inside & ~(1 << j):
                    continue
                guard = guards[a][b]
                if guard is not None and not guard(system, state, programs[a][b]):
                    return hr, hw
            return f_r[j], f_w[j]

        return horizon

    def chooser(self, walk: bool = False) -> Callable[[tuple], list[int] | None]:
        """`walk`: horizons walked per state (the reference) instead of read from the
        tables."""
        system = self.system
        A = self.n_threads
        n_slots = self.n_slots
        programs = system.programs
        lengths = system.lengths
        guards = self.guards
        reads, writes = self.reads, self.writes
        onto = self.onto
        guard_only, leaves, block_bit = self.guard_only, self.leaves, self.block_bit
        fut_r, fut_w = self.fut_r, self.fut_w
        stop_table = self.stop_table
        slot_base, queue_base, queue_end = system.slot_base, system.queue_base, system.queue_end
        slot_w, entry_w = self.slot_w, self.entry_w
        n_queues = queue_end - queue_base
        has_memory = self.has_memory
        if has_memory:
            gap_r, gap_w = self.gap_r, self.gap_w
            release_r, release_w = self.release_r, self.release_w
            fmem_r, fmem_w = self.fmem_r, self.fmem_w
            slot_mem, entry_mem = self.slot_mem, self.entry_mem

        # Per thread and position: (reads, writes, future reads, future writes, guard, instr,
        # (P bit, seen position) of a wait next or None, guard-only reads, local), where local
        # means the step touches nothing shared (nor memory it stops touching, nor a block it
        # stops reaching into): enabled, it is a persistent set on its own.
        info = []
        for a, prog in enumerate(programs):
            row = []
            for pc, instr in enumerate(prog):
                released = (release_r[a][pc] | release_w[a][pc]) if has_memory else 0
                local = not (reads[a][pc] | writes[a][pc] | leaves[a][pc] | released)
                row.append((reads[a][pc], writes[a][pc], fut_r[a][pc], fut_w[a][pc],
                            guards[a][pc], instr, onto[a].get(pc), guard_only[a][pc], local))
            info.append(row)

        # the threads with a local step somewhere, and where (most protocols have none)
        local_at = [(a, frozenset(pc for pc, x in enumerate(row) if x[-1]))
                    for a, row in enumerate(info)]
        local_at = [(a, pcs) for a, pcs in local_at if pcs]

        def choose(state: tuple) -> list[int] | None:
            # A local step first: nothing to compute.
            for a, pcs in local_at:
                pc = state[a]
                if pc in pcs:
                    r, w, fr, fw, guard, instr, wait_next, only, local = info[a][pc]
                    if (wait_next is None or state[wait_next[1]] >= 0) and \
                            (guard is None or guard(system, state, instr)):
                        return [a]
            # The actors that can still move: action number, current step's reads and writes,
            # future reads and writes; indices into these lists are bits below.
            act, cur_r, cur_w, f_r, f_w = [], [], [], [], []
            on = 0
            seeds = []
            for a in range(A):
                pc = state[a]
                if pc >= lengths[a]:
                    continue
                r, w, fr, fw, guard, instr, wait_next, only, local = info[a][pc]
                if wait_next is not None and state[wait_next[1]] < 0:
                    r |= wait_next[0]
                if guard is None or guard(system, state, instr):
                    on |= 1 << len(act)
                    seeds.append(len(act))
                else:
                    r |= only
                act.append(a)
                cur_r.append(r)
                cur_w.append(w)
                f_r.append(fr)
                f_w.append(fw)
            n_threads = len(act)
            for k in range(n_slots):
                if state[slot_base + k]:
                    on |= 1 << len(act)
                    act.append(A + k)
                    cur_r.append(0)
                    cur_w.append(slot_w[k])
                    f_r.append(0)
                    f_w.append(slot_w[k])
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
            n_on = on.bit_count()
            if n_on <= 1:
                return None
            if n_threads:
                # an in-flight copy or a tcgen05 queue may seed a set too (after the threads)
                seeds += [j for j in range(n_threads, len(act))]
            L = len(act)
            conflicts: dict[int, int] = {}

            def conflict(i: int) -> int:
                """The actors that must join a set holding actor i (see the module doc)."""
                r, w = cur_r[i], cur_w[i]
                out = 0
                if (on >> i) & 1:
                    if r | w:
                        for j in range(L):
                            if w & (f_r[j] | f_w[j]) or r & f_w[j]:
                                out |= 1 << j
                elif r:
                    for j in range(L):
                        if r & f_w[j]:
                            out |= 1 << j
                conflicts[i] = out
                return out

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
            enablers: dict[int, int] = {}

            def enabling(j: int) -> int:
                """The other actors whose future writes what blocked thread j's step reads."""
                r = cur_r[j]
                out = 0
                for k in range(L):
                    if k != j and r & f_w[k]:
                        out |= 1 << k
                enablers[j] = out
                return out

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
                return min(stuck, key=lambda k: (enablers.get(k) if k in enablers
                                                 else enabling(k)).bit_count())

            anchor = None
            for seed in seeds:
                if seed >= n_threads:
                    # a delivery or completion may end the last thing in flight at exit: an
                    # unfinished thread in the set keeps every path outside it short of the exit
                    if anchor is None:
                        anchor = quietest(list(range(n_threads)))
                    starts.append((seed, 1 << anchor))
                    continue
                gone = leaves[act[seed]][state[act[seed]]]
                if not gone:
                    starts.append((seed, 0))
                    continue
                extra = 0
                while gone:
                    low = gone & -gone
                    gone ^= low
                    members = [k for k in range(n_threads) if block_bit[act[k]] & low]
                    if members:
                        extra |= 1 << quietest(members)
                starts.append((seed, extra))
            threads = (1 << n_threads) - 1
            writers_of: dict[int, int] = {}

            def writers(gr: int) -> int:
                """The actors whose future writes what a guard reading `gr` reads."""
                wr = writers_of.get(gr)
                if wr is None:
                    wr = 0
                    for k in range(L):
                        if gr & f_w[k]:
                            wr |= 1 << k
                    writers_of[gr] = wr
                return wr

            if walk:
                horizon = self._walker(state, act, f_r, f_w, writers)
            else:
                stops: dict[int, list] = {}

                def horizon(j: int, inside: int) -> tuple[int, int]:
                    """Thread j's future up to the first wait ahead (of its table, `stop_table`)
                    whose guard is false now and whose other writers are all in `inside`. The
                    guards and writers depend on the state only, so they are taken once per
                    state and thread; each set then only picks the first stop it covers."""
                    mine = stops.get(j)
                    if mine is None:
                        a = act[j]
                        mine = stops[j] = [
                            (writers(gr) & ~(1 << j), hr, hw)
                            for gr, guard, instr, hr, hw in stop_table[a][state[a]]
                            if guard is not None and not guard(system, state, instr)]
                    for need, hr, hw in mine:
                        if not need & ~inside:
                            return hr, hw
                    return f_r[j], f_w[j]

            # the seeds with the fewest direct conflicts first: a set of one ends the search
            starts.sort(key=lambda st: ((conflicts[st[0]] if st[0] in conflicts
                                         else conflict(st[0])) | st[1]).bit_count())
            for seed, extra in starts:
                inside = (1 << seed) | extra
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
                else:
                    a = act[seed]
                if has_memory and seed < n_threads:
                    # who could race with what the seed's thread stops touching
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
                    c = conflicts.get(i)
                    if c is None:
                        c = conflict(i)
                    new = c & ~inside
                    if new & blocked:
                        # a blocked thread whose enablers are all in the set stays where it is
                        # on every path outside the set: its future does not matter
                        m = new & blocked
                        while m:
                            low = m & -m
                            m ^= low
                            j = low.bit_length() - 1
                            e = enablers.get(j)
                            if e is None:
                                e = enabling(j)
                            if not e & ~inside:
                                new ^= low
                    if new & threads:
                        # a thread that cannot pass a wait outside the set matters only up to
                        # that wait (its horizon)
                        r, w, enabled_u = cur_r[i], cur_w[i], (on >> i) & 1
                        m = new & threads
                        while m:
                            low = m & -m
                            m ^= low
                            j = low.bit_length() - 1
                            hz = horizons.get(j)
                            if hz is None:
                                hz = horizons[j] = horizon(j, inside)
                            hr, hw = hz
                            if (not (w & (hr | hw) or r & hw)) if enabled_u else not r & hw:
                                new ^= low
                    if new:
                        inside |= new
                        todo |= new
                        if (inside & on).bit_count() >= best_size:
                            break
                size = (inside & on).bit_count()
                if size < best_size:
                    best, best_size = inside, size
                    if size == 1:
                        break
            if not best:
                return None
            chosen = best & on
            return [act[i] for i in range(L) if (chosen >> i) & 1]

        return choose
