"""por.py's persistent-set tables as the integer arrays _core.c's chooser (`choose`) reads.

Everything por.py's `PersistentSets` computes from the program alone (per instruction its
resources, future, guard-only reads, the wait it moves onto, whether it is local, the blocks
it stops reaching into, the memory it stops touching, and the horizon's candidate stops) is
taken from that object, not computed again: the C chooser only evaluates a state's guards and
does the closure of `PersistentSets.chooser` step by step, so both choose the same set in
every state (tests/test_compiled_por.py compares the searches). Resource and memory masks go
to C in chunks of CHUNK bits. What the C chooser does not state is refused by name.
"""

from __future__ import annotations

from ...model import instructions as ins
from .flatten import CHUNK, Refused
from bisect import bisect_right

from .por import HORIZON_WAITS, PersistentSets
from .por_overrun import Arrivals

# Actor sets are one 64-bit word in C.
MAX_ACTORS = 64


def _words(bits: int) -> int:
    return max(1, -(-bits // CHUNK))


def _chunks(mask: int, words: int) -> list[int]:
    return [mask >> (CHUNK * j) & (2**CHUNK - 1) for j in range(words)]


def _stop_pcs(p: PersistentSets, a: int, pc: int) -> list[int]:
    """The program points of the horizon's candidate stops of agent a at pc, in the order of
    por.py's table (`_stops`, which keeps the instructions, not where they are)."""
    ahead = p.blocking[a]
    first = bisect_right(ahead, pc)
    own, q, found = 0, pc, []
    for b in ahead[first:first + HORIZON_WAITS]:
        while q < b:
            own |= p.reads[a][q] | p.step_w[a][q]
            q += 1
        if not own & (p.reads[a][b] | p.guard_only[a][b]):
            found.append(b)
    assert len(found) == len(p.stop_table[a][pc]), "por.py's stops are not where they were"
    return found


def persistent_tables(system, classes, overruns: bool = False) -> tuple:
    """(scalars, arrays) of the C chooser, or `Refused`."""
    actors = system.n_agents + len(system.slots) + len(system.queue_agents)
    if actors > MAX_ACTORS:
        raise Refused(f"partial-order reduction over more than {MAX_ACTORS} actors")
    in_class = {a for c in classes for a in c}
    if any(a in system.queue_pos for a in in_class):
        # the core orders a queue by the entries it delivered, Python by their arrival sets:
        # representatives, hence chosen sets, could differ
        raise Refused("partial-order reduction with thread symmetry between tcgen05 issuers")
    p = PersistentSets(system, classes)
    A = system.n_agents
    # the width of the resource masks: every mask por.py builds is below this bit
    top = 1
    for rows in (p.reads, p.writes, p.guard_only, p.fut_r, p.fut_w, p.leaves):
        for row in rows:
            for v in row:
                top = max(top, v.bit_length())
    for v in list(p.slot_w) + list(p.entry_w) + list(p.block_bit):
        top = max(top, v.bit_length())
    RW = _words(top)
    MW = 1
    if p.has_memory:
        cells = 1
        for rows in (p.fmem_r, p.fmem_w, p.release_r, p.release_w):
            for row in rows:
                for v in row:
                    cells = max(cells, v.bit_length())
        for v in p.slot_mem:
            cells = max(cells, v.bit_length())
        for r, w in p.entry_mem:
            cells = max(cells, r.bit_length(), w.bit_length())
        MW = _words(cells)

    r, w, fr, fw, only, leaves, rel_r, rel_w = ([] for _ in range(8))
    onto_bit, onto_pos, local, st_off = [], [], [], []
    st_gr, st_instr, st_hr, st_hw = [], [], [], []
    fm_r, fm_w = [], []
    off = 0
    for a, prog in enumerate(system.programs):
        for pc, instr in enumerate(prog):
            released = (p.release_r[a][pc] | p.release_w[a][pc]) if p.has_memory else 0
            rr, ww = p.reads[a][pc], p.writes[a][pc]
            r += _chunks(rr, RW)
            w += _chunks(ww, RW)
            fr += _chunks(p.fut_r[a][pc], RW)
            fw += _chunks(p.fut_w[a][pc], RW)
            only += _chunks(p.guard_only[a][pc], RW)
            leaves += _chunks(p.leaves[a][pc], RW)
            rel_r += _chunks(p.release_r[a][pc] if p.has_memory else 0, MW)
            rel_w += _chunks(p.release_w[a][pc] if p.has_memory else 0, MW)
            onto = p.onto[a].get(pc)
            onto_bit.append(-1 if onto is None else onto[0].bit_length() - 1)
            onto_pos.append(-1 if onto is None else onto[1])
            local.append(int(not (rr | ww | p.leaves[a][pc] | released)))
            st_off.append(len(st_instr))
            for b, (gr, guard, _, hr, hw) in zip(_stop_pcs(p, a, pc), p.stop_table[a][pc]):
                if guard is None:
                    continue
                st_gr += _chunks(gr, RW)
                st_instr.append(off + b)
                st_hr += _chunks(hr, RW)
                st_hw += _chunks(hw, RW)
        for pc in range(len(prog) + 1):     # at `issued`'s index, the end included
            fm_r += _chunks(p.fmem_r[a][pc] if p.has_memory else 0, MW)
            fm_w += _chunks(p.fmem_w[a][pc] if p.has_memory else 0, MW)
        off += len(prog)
    st_off.append(len(st_instr))
    block_bit = [c for a in range(A) for c in _chunks(p.block_bit[a], RW)]
    slot_w = [c for m in p.slot_w for c in _chunks(m, RW)]
    slot_mem = [c for k in range(len(system.slots))
                for c in _chunks(p.slot_mem[k] if p.has_memory else 0, MW)]
    # tcgen05 queue entries in the core's numbering (flatten.py `_queues`): their arrival sets
    entry_w, entry_r_mem, entry_w_mem = [], [], []
    for a in system.queue_agents:
        for instr in system.programs[a]:
            if instr.op == ins.ISSUE_TCGEN05:
                entry_w += _chunks(p.entry_w[instr.aux], RW)
                er, ew = p.entry_mem[instr.aux] if p.has_memory else (0, 0)
                entry_r_mem += _chunks(er, MW)
                entry_w_mem += _chunks(ew, MW)
    n_ov, ov = _overrun_tables(system, p) if overruns else (0, [[0]] * 11)
    scalars = [RW, MW, int(p.has_memory), int(overruns), n_ov]
    arrays = [r, w, fr, fw, only, leaves, rel_r, rel_w, onto_bit, onto_pos, local, st_off,
              st_gr or [0], st_instr or [0], st_hr or [0], st_hw or [0], fm_r, fm_w,
              block_bit, slot_w or [0], slot_mem or [0], entry_w or [0], entry_r_mem or [0],
              entry_w_mem or [0], *ov]
    return scalars, arrays


def _overrun_tables(system, p: PersistentSets) -> tuple[int, list[list[int]]]:
    """The number of Pallas barriers and por_overrun.py's `Arrivals` as _por.c's ov_ arrays
    (per Pallas barrier; per (agent, pc) at `issued`'s index, the end included; per slot; per
    queue entry in the core's numbering)."""
    arr = Arrivals(system, p)
    n = len(arr.insts)
    bit = [b.bit_length() - 1 for b in arr.bits]
    w_off, w_agent, w_pos, w_last = [0], [], [], []
    for row in arr.waiters:
        for a, pos, last in row:
            w_agent.append(a)
            w_pos.append(pos)
            w_last.append(last)
        w_off.append(len(w_agent))
    cum = [c for rows in arr.cum for row in rows for c in row]
    unb = [u for rows in arr.unbounded for row in rows for u in row]
    slot_k = [k for k, _ in arr.slot]
    slot_per = [d for _, d in arr.slot]
    entry = []
    for a in system.queue_agents:
        for instr in system.programs[a]:
            if instr.op == ins.ISSUE_TCGEN05:
                entry += [arr.entry[instr.aux].count(k) for k in range(n)]
    return n, [bit or [0], arr.insts or [0], w_off, w_agent or [0], w_pos or [0],
            w_last or [0], cum or [0], unb or [0], slot_k or [0], slot_per or [0],
            entry or [0]]
