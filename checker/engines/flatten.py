"""A System as the integer arrays the compiled core (_core.c) searches, or the reason it cannot be.

The compiled core states the step rules of the opcodes again, in C: the mbarrier arrivals and
tx-counts, the waits (Pallas barrier_wait and barrier_test, parity waits bare and with a stated
phase), TMA and other asynchronous issues with their in-flight slots, semaphores and parallel
semaphore signals, tcgen05 ops with their in-order queue per issuer, named and cluster hardware
barriers (hw_barriers.py), explicit mbarrier init and its fences (init_visibility.py, which wraps
the hardware barriers' arrival and wait), warp regions' fork and join and the no-op of
unmodelled synchronization; the rules a state is judged by (BP101, BP102, BP146 peer exits in
a cluster, BP147 an init not visible, BP200/BP201 races judged per memory space, and at exit
BP103, BP104, BP105, BP130), deadlocks (BP100, BP130, BP144) and the side table of bare parity
waits (BP101 aliasing, parity_returns.py). What it does not state is refused here by name and
the Python explorer runs instead (fail closed, never a different verdict): memory effects whose
race rule is not the per-space one (an access spanning shared and tensor memory, an in-flight
copy that reads), a step rule that a plug-in has replaced (extensions.py `wraps`) beyond what is
stated here, state fields of a plug-in.

The arrays: per agent its program length and first instruction; per instruction its opcode
(`CORE_OPS`), two operand ranges (`t0:t1` into the arrival-set list, or the instance of a wait
or semaphore in `t0`; `x0:x1` into the slot list of an issue or parallel signal, or a wait's
seen position in `x0`; a join's (warp, end pc) pairs in `t0:t1`, an await_fork's warpgroup in
`t0`; a hardware arrival's instance, arrived_in entry, count and site in t0, t1, x0, x1 and
its flags in `aux2`) and its amount; per slot its effect, instance and amount; per instance
its Pallas waiters and whether Pallas holds it to no completion (BP103); the block of each
agent and instance and the slots delivering into another block (BP146 peer exits); the tcgen05
queues, hardware barriers and explicit-init instances (`_queues`, `_hardware`, `_inits`).
A tcgen05 queue is one field, the entries it has delivered: with the issuer's pc it says the
tuple semantics.py keeps (the entries issued before the pc, from that one on), so the core
finds the same distinct states.
"""

from __future__ import annotations

from ...model import exit_async, hw_barriers, init_visibility
from ...model import instructions as ins
from ...model.extensions import EXTENSIONS
from ...model.ir import MAX_TX
from ...model.primitives import mbarrier, semaphores, tcgen05, tma, waits, warp_regions
from ...model.semantics import System
from ...model.steps import EFFECTS, GUARDS

# opcode -> (the core's opcode, the guard and the effect it states again)
CORE_OPS = {
    ins.ARRIVE: (0, None, mbarrier.effect_arrive),
    ins.ARRIVE_DROP: (1, None, mbarrier.effect_arrive_drop),
    ins.EXPECT_TX: (2, None, mbarrier.effect_expect_tx),
    ins.ARRIVE_TX: (3, None, mbarrier.effect_arrive_expect_tx),
    ins.COMPLETE_TX: (4, None, mbarrier.effect_complete_tx),
    ins.WAIT: (5, waits.guard_wait, waits.effect_wait),
    ins.WAIT_PARITY: (6, waits.guard_wait_parity, waits.effect_wait_parity),
    ins.WAIT_PHASE: (7, waits.guard_wait_phase, waits.effect_wait_parity),
    ins.BARRIER_TEST: (8, None, waits.effect_barrier_test),
    ins.ISSUE_ASYNC: (9, None, tma.effect_issue_async),
    ins.UNMODELED: (10, None, None),
    ins.SEM_SIGNAL: (11, None, semaphores.effect_signal),
    ins.SEM_WAIT: (12, semaphores.guard_wait, semaphores.effect_wait),
    ins.FORK: (10, None, None),
    ins.AWAIT_FORK: (13, warp_regions.guard_await_fork, None),
    ins.JOIN: (14, warp_regions.guard_join, None),
    ins.ISSUE_TCGEN05: (15, None, tcgen05.effect_issue_tcgen05),
    # a hardware arrival and wait as init visibility wraps them (the same without its barriers)
    ins.HW_ARRIVE: (16, None, init_visibility.effect_hw_arrive),
    ins.HW_WAIT: (17, hw_barriers.guard_wait, init_visibility.effect_hw_wait),
    ins.SEM_SIGNAL_SET: (18, None, semaphores.effect_signal_set),
    ins.SIGNALS_LANDED: (19, semaphores.guard_signals_landed, None),
    ins.MBAR_INIT: (20, None, init_visibility.effect_init),
    ins.FENCE_INIT: (21, None, init_visibility.effect_fence),
    ins.FENCE_ASYNC: (22, None, init_visibility.effect_fence),
}
# Extensions whose hooks (state fields, rules on a state, deadlocks) _core.c states again.
QUIET_EXTENSIONS = frozenset({"hardware barriers", "mbarrier init visibility"})
INT32 = 2**31 - 1


class Refused(Exception):
    """What in a System the compiled core does not state (the Python explorer runs it)."""


def refusal(system: System) -> str | None:
    """Why the compiled core cannot search `system`, or None when it can."""
    names = sorted({ins.OPCODE_NAMES[i.op] for p in system.programs for i in p
                    if i.op not in CORE_OPS})
    if names:
        return "opcode " + ", ".join(names)
    for op in {i.op for p in system.programs for i in p}:
        core, guard, effect = CORE_OPS[op]
        if GUARDS[op] is not guard or EFFECTS[op] is not effect:
            return f"the step rule of {ins.OPCODE_NAMES[op]} is replaced by a plug-in"
    if system.memory is not None:
        why = _memory_refusal(system.memory)
        if why:
            return why
    if len(system.blocks) > 256:
        return "a cluster of more than 256 blocks"
    if system.init_insts and system.n_agents + 2 > 31:
        return "init visibility of more than 29 agents (a bit each in 32-bit words)"
    if system.width != _width(system):
        return "state fields of a plug-in"
    others = [e.name for e in EXTENSIONS if e.name not in QUIET_EXTENSIONS]
    if others:
        return "extension " + ", ".join(others)
    return None


def _width(system: System) -> int:
    """The state width of the fields the core knows: semantics.py's, the hardware barriers',
    init visibility's."""
    return (system.queue_end + hw_barriers.HW_FIELDS * len(system.hw_instances)
            + len(system.hw_seen_pos) + len(system.init_pos) + len(system.init_rel_pos)
            + len(system.init_relc_pos))


def flatten(system: System, ignore: frozenset[str], classes: list[list[int]] = ()) -> tuple:
    """The arguments of `_core.explore` before the limits: scalars, arrays, ignored codes and
    the initial state; `classes`: interchangeable threads (symmetry.py) the core quotients by
    (`symmetric`). Raises `Refused` with the reason."""
    why = refusal(system)
    if why is not None:
        raise Refused(why)
    lengths, offsets = [], []
    op, t0, t1, amount, x0, x1, insts, slot_list, aux2 = ([] for _ in range(9))
    for a, prog in enumerate(system.programs):
        offsets.append(len(op))
        lengths.append(len(prog))
        for pc, instr in enumerate(prog):
            op.append(CORE_OPS[instr.op][0])
            amount.append(instr.amount)
            aux2.append(0)
            if instr.op == ins.HW_ARRIVE:           # instance, arrived_in entry; count, site
                arrival = instr.aux
                t0.append(instr.target)
                t1.append(arrival.pos)
                x0.append(arrival.count)
                x1.append(arrival.site)
                aux2[-1] = (1 if arrival.partial else 0) | \
                    (2 if (a, pc) in system.init_relaxed else 0)
                continue
            if instr.op == ins.HW_WAIT:             # instance; arrived_in entry
                t0.append(instr.target)
                t1.append(instr.target)
                x0.append(instr.aux)
                x1.append(0)
                continue
            if instr.op in (ins.ISSUE_TCGEN05, ins.MBAR_INIT):   # the instance initialised
                t0.append(instr.target if instr.op == ins.MBAR_INIT else 0)
                t1.append(t0[-1])
                x0.append(0)
                x1.append(0)
                continue
            if instr.op in ins.WAITS or instr.op in (ins.SEM_SIGNAL, ins.SEM_WAIT):
                t0.append(instr.target)
                t1.append(instr.target)
            elif instr.op in (ins.UNMODELED, ins.FORK, ins.FENCE_INIT, ins.FENCE_ASYNC):
                t0.append(0)
                t1.append(0)
            elif instr.op == ins.AWAIT_FORK:        # the warpgroup's agent and pc after FORK
                t0.append(instr.aux[0])
                t1.append(instr.aux[0])
                amount[-1] = instr.aux[1]
            elif instr.op == ins.JOIN:              # (warp, pc at the end of its body) pairs
                t0.append(len(insts))
                insts.extend(x for pair in instr.aux for x in pair)
                t1.append(len(insts))
            else:                                   # an arrival set
                t0.append(len(insts))
                insts.extend(instr.target)
                t1.append(len(insts))
            if instr.op in (ins.ISSUE_ASYNC, ins.SEM_SIGNAL_SET, ins.SIGNALS_LANDED):
                x0.append(len(slot_list))
                slot_list.extend(instr.aux)
                x1.append(len(slot_list))
            elif instr.op in ins.WAITS:
                x0.append(instr.aux)
                x1.append(instr.aux)
            elif instr.op == ins.SEM_WAIT:
                x0.append(1 if instr.aux else 0)
                x1.append(0)
            else:
                x0.append(0)
                x1.append(0)
    offsets.append(len(op))
    part_off, part_waiter, part_pos, part_last = [], [], [], []
    for inst in range(len(system.instances)):
        part_off.append(len(part_pos))
        for waiter, pos in system.participants[inst]:
            if pos not in system.pallas_seen:
                continue
            last = max(pc for pc, i in enumerate(system.programs[waiter])
                       if i.op in ins.WAITS and i.target == inst)
            part_waiter.append(waiter)
            part_pos.append(pos)
            part_last.append(last)
    part_off.append(len(part_pos))
    unwaited = [1 if i in system.unwaited else 0 for i in range(len(system.instances))]
    slots = system.slots
    block = {b: n for n, b in enumerate(system.blocks)}
    arrays = (lengths, offsets, op, t0, t1, amount, x0, x1, insts, slot_list,
              [s.effect for s in slots], [s.inst for s in slots], [s.amount for s in slots],
              part_off, part_waiter, part_pos, part_last,
              [block[a.block] for a in system.agents], [block[i.block] for i in system.instances],
              list(system.remote_slots), unwaited, aux2, *_queues(system, insts),
              *_hardware(system), *_inits(system))
    if any(abs(v) > INT32 for a in arrays for v in a):
        raise Refused("an operand beyond 32 bits")
    # the side table of bare parity waits: kept unless BP101 is ignored (explore.py)
    track = "BP101" not in ignore and any(i.op == ins.WAIT_PARITY
                                          for p in system.programs for i in p)
    scalars = (system.width, system.n_agents, len(system.instances), system.slot_base,
               len(slots), MAX_TX, 1 if exit_async.exit_violations(system) else 0, int(track),
               len(system.blocks), len(system.remote_slots), len(system.queue_agents),
               system.queue_base, len(system.hw_instances), getattr(system, "hw_base", 0),
               hw_barriers.block_threads(system), len(system.init_insts))
    codes = [int(c[2:]) for c in ignore if c[:2] == "BP" and c[2:].isdigit()]
    mem_scalars, mem_arrays = _memory(system)
    sym_scalars, sym_arrays = symmetric(system, classes)
    scalars, arrays = (*scalars, *mem_scalars, *sym_scalars), \
        (*arrays, *mem_arrays, *sym_arrays)
    # a tcgen05 queue's field: the entries it has delivered (none at first)
    init = [0 if isinstance(v, tuple) else v for v in system.initial_state()]
    return scalars, arrays, codes, init


def symmetric(system: System, classes) -> tuple:
    """Thread symmetry as _core.c applies it: the classes (offsets, members), each member's
    local part (symmetry.py `_local_fields`: pc, observed phases, hardware-barrier phases,
    tcgen05 queue), each agent's key in the side table of bare parity waits (its class's
    first member, as parity_returns.py roots an orbit), and per permutation of threads that
    touch different memory the moves of its image (explore.py's race check of the images)."""
    from .symmetry import _local_fields, race_permutations
    root = list(range(system.n_agents))
    cls_off, members = [], []
    for cls in classes:
        cls_off.append(len(members))
        members.extend(cls)
        for a in cls:
            root[a] = cls[0]
        if len({len(_local_fields(system, a)) for a in cls}) != 1:
            raise Refused("thread symmetry between local parts of different widths")
    cls_off.append(len(members))
    loc_off, loc_pos = [], []
    for a in range(system.n_agents):
        loc_off.append(len(loc_pos))
        if a in members:
            loc_pos.extend(_local_fields(system, a))
    loc_off.append(len(loc_pos))
    perm_off, perm_from, perm_to = [], [], []
    for perm in race_permutations(system, classes) if classes else []:
        perm_off.append(len(perm_from))
        for a, b in perm.items():
            for pa, pb in zip(_local_fields(system, a), _local_fields(system, b)):
                perm_from.append(pa)
                perm_to.append(pb)
    perm_off.append(len(perm_from))
    return (len(classes), len(perm_off) - 1), \
        (cls_off, members, loc_off, loc_pos or [0], root, perm_off, perm_from or [0],
         perm_to or [0])


# Race masks go to C in chunks of this many bits (an int32 each).
CHUNK = 30
SPACES = ("smem", "tmem")       # BP200, BP201 (memory.SPACE_CODE)


def _memory_refusal(memory) -> str | None:
    """Why the core cannot state the race rule of these memory effects, or None: it judges each
    memory space apart, which is the rule when every access stays within one space."""
    space = [alloc.space for alloc, _, _ in memory.cells]
    if any(s not in SPACES for s in space):
        return "memory effects in a space other than smem and tmem"
    lists = [acc for live in memory.lists for accs in live for acc in accs]
    lists += [acc for accs in memory.slot_access.values() for acc in accs]
    lists += [acc for accs in memory.entry_accesses.values() for acc in accs]
    for acc in lists:
        if len({space[c] for c in range(acc.mask.bit_length()) if acc.mask >> c & 1}) > 1:
            return "memory effects: an access spanning shared and tensor memory"
    if any(not acc.write for k in memory.slot_access for acc in memory.slot_access[k]):
        return "memory effects: an in-flight copy that reads"
    return None


def _memory(system: System) -> tuple[list, list]:
    """The race rule (memory.py `racing`, per space): scalars (whether it is checked, chunks
    per mask, entries, slot groups) and
    arrays: per (agent, pc) its live accesses' entry (-1: none) and its self race's code (0:
    none); per slot group its (slot, entry) pairs; per tcgen05 queue entry its entry; and the
    masks of every entry, per space then per entry, (reads, writes) in CHUNK-bit chunks; per
    (agent, pc) the warp's tail its warpgroup's JOIN retires (memory.py `retired`): the parent
    (-1: none), the JOIN's pc and the entry left live after it."""
    memory = system.memory
    if memory is None:
        return [0, 0, 0, 0], [[], [], [0], [], [], [], [0], [], [], []]
    space = [alloc.space for alloc, _, _ in memory.cells]
    split = [sum(1 << c for c, sp in enumerate(space) if sp == name) for name in SPACES]
    words = max(1, -(-len(space) // CHUNK))
    entries: list[tuple[int, int]] = []
    index: dict[tuple[int, int], int] = {}

    def entry(rw: tuple[int, int]) -> int:
        if not rw[0] | rw[1]:
            return -1
        if rw not in index:
            index[rw] = len(entries)
            entries.append(rw)
        return index[rw]

    def code(pair) -> int:
        overlap = pair[0].mask & pair[1].mask
        alloc = memory.cells[(overlap & -overlap).bit_length() - 1][0]
        return 200 if alloc.space == "smem" else 201

    lane, self_code = [], []
    ret_parent, ret_pc, ret_entry = [], [], []
    for a, length in enumerate(system.lengths):
        for pc in range(length + 1):
            items = memory.items_at[a][pc]
            lane.append(entry(items[0]) if items else -1)
            parent, at, _, left = memory.retired[a].get(pc, (-1, 0, None, ()))
            ret_parent.append(parent)
            ret_pc.append(at)
            ret_entry.append(entry(left[0]) if left else -1)
            pair = memory.self_races[a].get(pc)
            self_code.append(0 if pair is None else code(pair))
    group_off, group_slot, group_entry = [], [], []
    for group in memory.slot_groups:
        group_off.append(len(group_slot))
        for k, mask in group:
            group_slot.append(k)
            group_entry.append(entry((0, mask)))
    group_off.append(len(group_slot))
    queued = [entry(memory.entry_masks.get(instr.aux, (0, 0))) for a in system.queue_agents
              for instr in system.programs[a] if instr.op == ins.ISSUE_TCGEN05]
    chunks = []
    for sp in split:
        for r, w in entries:
            for mask in (r & sp, w & sp):
                chunks.extend(mask >> (CHUNK * j) & (2**CHUNK - 1) for j in range(words))
    return [1, words, len(entries), len(memory.slot_groups)], \
        [lane, self_code, group_off, group_slot, group_entry, queued, chunks or [0],
         ret_parent, ret_pc, ret_entry]


def _queues(system: System, insts: list) -> tuple:
    """The tcgen05 queues: tcgen05 ops issued before each pc (per agent, pcs 0..len), each
    queue's agent and its entries in issue order (arrival-set ranges appended to `insts`)."""
    issued, agent_of, q_off, q_t0, q_t1 = [], [], [], [], []
    for prog in system.programs:
        n = 0
        for instr in prog:
            issued.append(n)
            n += instr.op == ins.ISSUE_TCGEN05
        issued.append(n)
    for a in system.queue_agents:
        agent_of.append(a)
        q_off.append(len(q_t0))
        for instr in system.programs[a]:
            if instr.op == ins.ISSUE_TCGEN05:
                q_t0.append(len(insts))
                insts.extend(system.arrival_sets[instr.aux])
                q_t1.append(len(insts))
    q_off.append(len(q_t0))
    return issued, agent_of, q_off, q_t0, q_t1


def _hardware(system: System) -> tuple:
    """Per hardware barrier: its kind (1: the cluster's), block (-1: none), and for BP144 the
    top-level agents of its block and those of them with an arrival on it."""
    block = {b: n for n, b in enumerate(system.blocks)}
    kind, where, mem_off, mem, arr_off, arr = ([] for _ in range(6))
    for h, hw in enumerate(system.hw_instances):
        kind.append(1 if hw.kind == "cluster" else 0)
        where.append(block.get(hw.block, -1))
        members = [a for a, ag in enumerate(system.agents)
                   if ag.warp is None and ag.block == hw.block]
        mem_off.append(len(mem))
        mem.extend(members)
        arr_off.append(len(arr))
        arr.extend(a for a in members if any(i.op == ins.HW_ARRIVE and i.target == h
                                             for i in system.programs[a]))
    mem_off.append(len(mem))
    arr_off.append(len(arr))
    return kind, where, mem_off, mem, arr_off, arr


def _inits(system: System) -> tuple:
    """Explicit-init instances, numbered k: vis[k]'s position, the instance, rel[k, h] and
    relc[k] positions (-1: none); per instruction its uses (k, 1 through the async proxy)."""
    number = {i: k for k, i in enumerate(system.init_insts)}
    n_hw = len(system.hw_instances)
    vis = [system.init_pos[i] for i in system.init_insts]
    rel = [system.init_rel_pos.get((i, h), -1) for i in system.init_insts for h in range(n_hw)]
    relc = [system.init_relc_pos.get(i, -1) for i in system.init_insts]
    use_off, use_k, use_proxy = [], [], []
    for a, prog in enumerate(system.programs):
        for pc in range(len(prog)):
            use_off.append(len(use_k))
            if system.init_uses:
                mine, proxy = system.init_uses[a][pc]
                for group, through in ((mine, 0), (proxy, 1)):
                    use_k.extend(number[i] for i in group)
                    use_proxy.extend(through for _ in group)
    use_off.append(len(use_k))
    return vis, list(system.init_insts), rel, relc, use_off, use_k, use_proxy
