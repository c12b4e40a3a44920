"""Symmetry of a System: identical threads of a block, and blocks of the cluster that map onto
each other, reduced to one representative state per orbit.

Two kinds of symmetry, combined:

- thread symmetry: threads of one block whose unrolled programs are equal may be permuted; the
  representative sorts their local parts (program counter, observed phases, tcgen05 queue).
- block symmetry: a permutation of the coordinates along each cluster axis moves every block, and
  with it its agents, barrier instances, in-flight slots and tcgen05 arrival sets. It is kept only
  when it is an automorphism of the System: every agent's program, renamed, is the program of the
  agent it maps to (arrival targets compared as sets, since an arrival reaches all of them), every
  instance keeps its arrival count, every slot and arrival set has an image, and (races checked)
  the buffers' cells renamed with the blocks carry every access onto its image's. The permutations kept
  form a group (automorphisms compose); the representative of a state is the least, over that
  group, of the thread-sorted image.

A block symmetry acts on a state as a permutation of its positions, plus a renaming of the
arrival-set numbers held in tcgen05 queues. Thread symmetries of one block are mapped by a block
symmetry onto thread symmetries of its image, so the least image over the block group of the
thread-sorted state is the same for every state of an orbit of the combined group.

Violation codes: the state after a step does not depend on the order of an arrival's targets,
but which rule a multi-target arrival reports first can (one target overruns, another
over-arrives). `orbit_code` therefore takes the least code over the block images of a violating
step, which is the code the unreduced search reports at that depth.
"""

from __future__ import annotations

import itertools
import math
from operator import itemgetter
from typing import Callable

from ...model.semantics import BARRIER_FIELDS, OPCODE_NAMES, System
from ...model.steps import STEPS, UNREDUCED
from ...model.violations import rank
from .opcode_classes import UnclassifiedOpcode, require_classified

# How block symmetry carries an opcode's operands onto its image (`_automorphism`); each
# opcode's family names its class (`Step.symmetry`, model/steps.py).
OPERAND_CLASSES = {
    "arrival set": "its target instances are renamed with the blocks (compared as a set)",
    "instance": "its target instance is renamed; aux is the thread's own seen position",
    "semaphore": "its target instance is renamed; aux (decrement) must be equal",
    "arrival set and slots": "its targets and its in-flight slots are renamed",
    "tcgen05 arrival set": "its tcgen05 arrival set is renamed (consistently)",
    "parent agent": "aux names the warpgroup it waits for (renamed) and a program counter",
    "warp agents": "aux names warps (renamed) and program counters",
    "fork": "no operand; it links the warps of a warpgroup to it",
    "hw wait": "literal; aux is the thread's own arrived_in position",
    "hw arrival": "literal; aux.pos is the thread's own position",
    "literal": "its operands must be equal (an object of no block)",
    UNREDUCED: "the explorer turns the reductions off where it occurs",
}
# Opcodes whose operands name other agents: their threads are not interchangeable.
LINKS = frozenset({"fork", "parent agent", "warp agents"})
# Opcodes whose aux holds the thread's own position (compared without it).
OWN_POSITION = frozenset({"instance", "hw wait"})
OWN_POSITION_FIELD = frozenset({"hw arrival"})


def check_classified(opcodes=OPCODE_NAMES, steps=STEPS) -> None:
    """Every opcode is classified, with a class this module knows (run at import; tests run
    it on a grown opcode table)."""
    table = {op: step.symmetry for op, step in steps.items()}
    require_classified(table, opcodes, "symmetry reduction",
                       "its family's `Step` (model/steps.py)")
    unknown = {opcodes[op]: c for op, c in table.items() if c not in OPERAND_CLASSES}
    if unknown:
        raise UnclassifiedOpcode(f"symmetry reduction does not know the operand class(es) "
                                 f"{unknown}: one of {sorted(OPERAND_CLASSES)}")


check_classified()
# opcode -> operand class, as imported (the engine reads STEPS, which grows in place)
OPERANDS = {op: step.symmetry for op, step in STEPS.items()}

# Above this many candidate block permutations (the product over cluster axes of n!), block
# symmetry is not tried: the canonical form takes the least of all images.
MAX_BLOCK_PERMUTATIONS = 120


def thread_classes(system: System) -> list[list[int]]:
    """Groups of interchangeable agents: same block, same unrolled program, no fork/join links."""
    groups: dict[tuple, list[int]] = {}
    for a, agent in enumerate(system.agents):
        prog = system.programs[a]
        if any(STEPS[i.op].symmetry in LINKS for i in prog):
            continue
        # Waits carry the agent's own seen position; compare programs without it.
        prog = tuple(i._replace(aux=None) if STEPS[i.op].symmetry in OWN_POSITION else
                     i._replace(aux=i.aux._replace(pos=None))
                     if STEPS[i.op].symmetry in OWN_POSITION_FIELD else i
                     for i in prog)
        groups.setdefault((agent.block, prog), []).append(a)
    classes = [g for g in groups.values() if len(g) > 1]
    if system.memory is None:
        return classes
    # Threads that touch different memory (warpgroup w writes out_smem[w]) are still
    # interchangeable for the barriers; the race check then looks at every permutation of them
    # (race_permutations). Past a few permutations, split them by what they touch instead.
    out, mixed = [], []
    for cls in classes:
        images = {_memory_image(system, a) for a in cls}
        (out if len(images) == 1 else mixed).append(cls)
    if math.prod(math.factorial(len(c)) for c in mixed) <= MAX_RACE_PERMUTATIONS:
        return out + mixed
    for cls in mixed:
        split: dict[tuple, list[int]] = {}
        for a in cls:
            split.setdefault(_memory_image(system, a), []).append(a)
        out += [g for g in split.values() if len(g) > 1]
    return out


# Above this many permutations of threads that touch different memory, such threads are no
# longer treated as interchangeable (each permutation costs a race check per state).
MAX_RACE_PERMUTATIONS = 24


def _memory_image(system: System, a: int) -> tuple:
    return (tuple(map(tuple, system.memory.lists[a])),
            tuple(sorted(system.memory.self_races[a].items())),
            tuple(sorted(system.memory.retired[a].items())))


def race_permutations(system: System, classes: list[list[int]]) -> list[dict[int, int]]:
    """The agent permutations (other than the identity) under which the race check must look
    at a state: those of classes whose members touch different memory. The reduced search keeps
    one state per orbit, and races are not invariant under such a permutation."""
    if system.memory is None:
        return []
    mixed = [c for c in classes if len({_memory_image(system, a) for a in c}) > 1]
    perms: list[dict[int, int]] = [{}]
    for cls in mixed:
        perms = [{**p, **dict(zip(cls, image))} for p in perms
                 for image in itertools.permutations(cls)]
    return [p for p in perms if any(a != b for a, b in p.items())]


def permute_state(system: System, state: tuple, perm: dict[int, int]) -> tuple:
    """The state in which agent perm[a] is where agent a is in `state`."""
    out = list(state)
    for a, b in perm.items():
        for pa, pb in zip(_local_fields(system, a), _local_fields(system, b)):
            out[pb] = state[pa]
    return tuple(out)


def permute_action(system: System, action: int, perm: dict[int, int]) -> int:
    A = system.n_agents
    if action < A:
        return perm.get(action, action)
    k = action - A - len(system.slots)
    if k >= 0:                                 # a tcgen05 queue moves with its agent
        agent = perm.get(system.queue_agents[k], system.queue_agents[k])
        return A + len(system.slots) + system.queue_agents.index(agent)
    return action


class BlockSymmetry:
    """One automorphism of a System induced by a permutation of the cluster's blocks."""

    def __init__(self, agents: list[int], instances: list[int], slots: list[int],
                 queues: dict[int, int], arrival_sets: dict[int, int], blocks: dict):
        self.agents = agents            # agent -> image agent
        self.instances = instances      # instance -> image instance
        self.slots = slots              # slot -> image slot
        self.queues = queues            # tcgen05 issuer -> image issuer
        self.arrival_sets = arrival_sets  # arrival set number -> image number
        self.blocks = blocks            # block -> image block

    def state_map(self, system: System) -> Callable[[tuple], tuple]:
        """The action on states: position j of the image holds position source[j]."""
        W = system.width
        source = [0] * W
        for a, b in enumerate(self.agents):
            source[b] = a
        for i, j in enumerate(self.instances):
            for f in range(BARRIER_FIELDS):
                source[system.barrier_base + BARRIER_FIELDS * j + f] = \
                    system.barrier_base + BARRIER_FIELDS * i + f
        for (a, inst), pos in system.seen_pos.items():
            source[system.seen_pos[(self.agents[a], self.instances[inst])]] = pos
        for k, m in enumerate(self.slots):
            source[system.slot_base + m] = system.slot_base + k
        for a, b in self.queues.items():
            source[system.queue_pos[b]] = system.queue_pos[a]
        gather = itemgetter(*source)
        queue_positions = list(range(system.queue_base, system.queue_end))
        rename = self.arrival_sets
        if not queue_positions:
            return gather

        def apply(state: tuple) -> tuple:
            out = list(gather(state))
            for q in queue_positions:
                if out[q]:
                    out[q] = tuple(rename[e] for e in out[q])
            return tuple(out)
        return apply

    def action(self, system: System, action: int) -> int:
        A = system.n_agents
        if action < A:
            return self.agents[action]
        k = action - A
        if k < len(system.slots):
            return A + self.slots[k]
        issuer = system.queue_agents[k - len(system.slots)]
        return A + len(system.slots) + system.queue_agents.index(self.queues[issuer])


def _block_permutations(system: System):
    """Every permutation of the coordinates along each cluster axis, as a map of blocks."""
    per_axis = [list(itertools.permutations(range(n))) for n in system.cluster_shape]
    for combo in itertools.product(*per_axis):
        yield {b: tuple(combo[d][c] for d, c in enumerate(b)) for b in system.blocks}


def _automorphism(system: System, blocks: dict) -> BlockSymmetry | None:
    """The automorphism a block permutation induces, or None when the programs do not map."""
    agent_of = {(a.block, a.thread, a.warp): i for i, a in enumerate(system.agents)}
    agents = [agent_of[(blocks[a.block], a.thread, a.warp)] for a in system.agents]
    inst_of = {(i.alloc.name, i.index, i.block): n for n, i in enumerate(system.instances)}
    instances = []
    for inst in system.instances:
        # a semaphore of the grid has no block: it is its own image
        image = inst_of.get((inst.alloc.name, inst.index, blocks.get(inst.block, inst.block)))
        if image is None or system.instances[image].expected != inst.expected:
            return None
        instances.append(image)
    # a copy's destination is named without its block (that is its barrier's): it maps as is
    slot_of = {(s.effect, s.inst, s.amount, s.kind, s.dest): k
               for k, s in enumerate(system.slots)}
    slots = []
    for s in system.slots:
        image = slot_of.get((s.effect, instances[s.inst], s.amount, s.kind, s.dest))
        if image is None:
            return None
        slots.append(image)
    arrival_sets: dict[int, int] = {0: 0}
    queues = {a: agents[a] for a in system.queue_agents}
    if any(b not in system.queue_pos for b in queues.values()):
        return None

    def targets(t) -> tuple:
        return tuple(sorted(instances[i] for i in t))

    for a, prog in enumerate(system.programs):
        other = system.programs[agents[a]]
        if len(prog) != len(other):
            return None
        for mine, theirs in zip(prog, other):
            if mine.op != theirs.op or mine.amount != theirs.amount:
                return None
            here, there = system.sources[mine.src], system.sources[theirs.src]
            if here.op is not there.op or here.loc != there.loc:
                return None
            kind = STEPS[mine.op].symmetry
            if kind == UNREDUCED:
                return None
            if kind == "arrival set":
                same = targets(mine.target) == tuple(sorted(theirs.target))
            elif kind == "instance":
                same = instances[mine.target] == theirs.target
            elif kind == "semaphore":
                same = instances[mine.target] == theirs.target and mine.aux == theirs.aux
            elif kind == "arrival set and slots":
                same = (targets(mine.target) == tuple(sorted(theirs.target)) and
                        sorted(slots[k] for k in mine.aux) == sorted(theirs.aux))
            elif kind == "tcgen05 arrival set":
                same = targets(system.arrival_sets[mine.aux]) == \
                    tuple(sorted(system.arrival_sets[theirs.aux]))
                if arrival_sets.setdefault(mine.aux, theirs.aux) != theirs.aux:
                    return None
            elif kind == "parent agent":
                parent, pc = mine.aux
                same = theirs.aux == (agents[parent], pc)
            elif kind == "warp agents":
                same = theirs.aux == tuple((agents[w], end) for w, end in mine.aux)
            else:   # literal, fork, hw wait, hw arrival
                same = mine.target == theirs.target and mine.aux == theirs.aux
            if not same:
                return None
    if system.memory is not None and not _memory_maps(system, blocks, agents, slots,
                                                       arrival_sets):
        return None
    return BlockSymmetry(agents, instances, slots, queues, arrival_sets, blocks)


def _memory_maps(system: System, blocks: dict, agents: list[int], slots: list[int],
                 arrival_sets: dict[int, int]) -> bool:
    """Do the buffers' cells, renamed with the blocks, carry every agent's accesses onto its
    image's (per program position), every copy's and tcgen05 entry's onto its image's? Then a
    state races iff its image does: the race rule only compares these masks."""
    mem = system.memory
    cell_of = {(alloc.name, index, block): c for c, (alloc, index, block) in enumerate(mem.cells)}
    image = [cell_of[(alloc.name, index, blocks[block])] for alloc, index, block in mem.cells]

    def moved(mask: int) -> int:
        out = 0
        while mask:
            low = mask & -mask
            out |= 1 << image[low.bit_length() - 1]
            mask ^= low
        return out

    def pairs(items) -> tuple:
        return tuple((moved(r), moved(w)) for r, w in items)

    for a, b in enumerate(agents):
        if [pairs(x) for x in mem.items_at[a]] != [tuple(x) for x in mem.items_at[b]]:
            return False
        if sorted(mem.self_races[a]) != sorted(mem.self_races[b]):
            return False
        # a warp's tail that its warpgroup's JOIN retires: the image's, by the image's JOIN
        if {gap: (agents[p], at, pairs(left)) for gap, (p, at, _, left) in mem.retired[a].items()} \
                != {gap: (p, at, tuple(left)) for gap, (p, at, _, left) in mem.retired[b].items()}:
            return False
    for k, accs in mem.slot_access.items():
        mine = sum_masks(acc.mask for acc in accs if acc.write)
        theirs = sum_masks(acc.mask for acc in mem.slot_access.get(slots[k], ()) if acc.write)
        if moved(mine) != theirs:
            return False
    for e, (r, w) in mem.entry_masks.items():
        if (moved(r), moved(w)) != mem.entry_masks.get(arrival_sets.get(e, e), (0, 0)):
            return False
    return True


def sum_masks(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def block_symmetries(system: System) -> list[BlockSymmetry]:
    """The automorphisms of `system` induced by permuting cluster coordinates, identity first;
    just the identity when the cluster has one block or too many candidates."""
    if getattr(system, "hw_instances", None):
        return []       # hardware barriers are not renamed by a block permutation (yet)
    candidates = 1
    for n in system.cluster_shape:
        for k in range(2, n + 1):
            candidates *= k
    found = []
    if 1 < candidates <= MAX_BLOCK_PERMUTATIONS:
        for blocks in _block_permutations(system):
            g = _automorphism(system, blocks)
            if g is not None:
                found.append(g)
    return found if len(found) > 1 else []


class Symmetry:
    """The canonical form of states under thread and block symmetry, and what the explorer needs
    to map its quotient search back to concrete steps."""

    def __init__(self, system: System, threads: bool = True, blocks: bool = True):
        self.system = system
        self.classes = thread_classes(system) if threads else []
        self.blocks = block_symmetries(system) if blocks else []
        self._block_maps = [g.state_map(system) for g in self.blocks[1:]]
        self._block_pairs = list(zip(self.blocks[1:], self._block_maps))
        self._sort = _thread_sorter(system, self.classes)

    @property
    def active(self) -> bool:
        return bool(self.classes or self.blocks)

    def canonicalizer(self) -> Callable[[tuple], tuple] | None:
        sort = self._sort
        maps = self._block_maps
        if not maps:
            return sort
        sort = sort or (lambda s: s)

        def canon(state: tuple) -> tuple:
            best = sort(state)
            for g in maps:
                image = sort(g(state))
                if image < best:
                    best = image
            return best
        return canon

    def after_step(self) -> Callable[[tuple, int], tuple] | None:
        """Canonical form of a successor of a canonical state, from the action that made it.

        A step changes the local part of at most one agent (the acting thread, or the issuer
        whose tcgen05 queue is popped); every other class stays sorted, so only that agent's
        place among its class is checked, and its class re-sorted if it moved out of order.
        Only for thread symmetry alone: a block image needs the whole state."""
        if self._block_maps:
            return None
        if not self.classes:
            return None
        system = self.system
        where: dict[int, tuple] = {}
        for cls in self.classes:
            getters = [_local_getter(system, a) for a in cls]
            fields = [_local_fields(system, a) for a in cls]
            for i, a in enumerate(cls):
                where[a] = (i, getters, fields)
        # actions: threads, then in-flight slots (no local part), then tcgen05 queues
        moved = ([where.get(a) for a in range(system.n_agents)] + [None] * len(system.slots) +
                 [where.get(a) for a in system.queue_agents])

        def canon(state: tuple, action: int) -> tuple:
            entry = moved[action]
            if entry is None:
                return state
            i, getters, fields = entry
            me = getters[i](state)
            # Insertion of the mover's local part into its sorted class: the members it passes
            # shift by one place towards where it was.
            j, last = i, len(getters) - 1
            while j < last and getters[j + 1](state) < me:
                j += 1
            if j == i:
                while j > 0 and me < getters[j - 1](state):
                    j -= 1
                if j == i:
                    return state
            out = list(state)
            step = 1 if j > i else -1
            for k in range(i, j, step):
                for p, v in zip(fields[k], getters[k + step](state)):
                    out[p] = v
            for p, v in zip(fields[j], me):
                out[p] = v
            return tuple(out)
        return canon

    def twins(self) -> Callable[[tuple], set] | None:
        """Actions whose successor is redundant: two members of a class whose local parts are
        equal are swapped by a symmetry that fixes the state, so their steps lead to one state
        up to that swap (with the same rule broken, if any); of each run of equal neighbours
        only the last steps. Enabledness is local too, so a state keeps a step iff it had one
        (deadlocks stay deadlocks)."""
        if not self.classes:
            return None
        system = self.system
        queue_action = {a: system.n_agents + len(system.slots) + j
                        for j, a in enumerate(system.queue_agents)}
        plan = [([_local_getter(system, a) for a in cls], cls) for cls in self.classes]

        def redundant(state: tuple) -> set:
            skip = set()
            for getters, cls in plan:
                previous = getters[0](state)
                for k in range(1, len(cls)):
                    current = getters[k](state)
                    if current == previous:
                        a = cls[k - 1]
                        skip.add(a)
                        if a in queue_action:
                            skip.add(queue_action[a])
                    previous = current
            return skip
        return redundant

    def orbit_code(self, state: tuple, action: int, code: str, ignore: frozenset,
                   tolerated=None) -> str | None:
        """The least violation code, not ignored, that this step or a block image of it reports
        (see the module doc); None when every one is ignored. `tolerated(v)`: a suppressed
        finding (explore.py), which counts as none."""
        skip = (lambda v: v.code in ignore or (tolerated is not None and tolerated(v)))
        if code in ignore:
            code = None
        elif tolerated is not None:     # the step's own violation: asked again, with its place
            _, own = self.system.step(state, action)
            code = None if own is None or skip(own) else code
        for g, apply in self._block_pairs:
            image = apply(state)
            _, v = self.system.step(image, g.action(self.system, action))
            if v is not None and not skip(v) and (code is None or rank(v.code) < rank(code)):
                code = v.code
        return code

    def describe(self) -> list[list[str]]:
        names = [[self.system.agents[a].name for a in c] for c in self.classes]
        if self.blocks:
            names.append(["blocks: " + ", ".join(
                "(" + " ".join(f"{','.join(map(str, b))}->{','.join(map(str, g.blocks[b]))}"
                               for b in self.system.blocks if g.blocks[b] != b) + ")"
                for g in self.blocks[1:])])
        return names


def _local_fields(system: System, a: int) -> list[int]:
    """The positions of an agent's local part: program counter, observed phases (by
    instance), tcgen05 queue."""
    own = sorted((inst, pos) for (ag, inst), pos in system.seen_pos.items() if ag == a)
    positions = [a] + [pos for _, pos in own]
    # ... and the phase it last arrived in at each hardware barrier it waits on
    positions += [pos for (ag, _), pos in sorted(system.hw_seen_pos.items()) if ag == a]
    if a in system.queue_pos:
        positions.append(system.queue_pos[a])
    return positions


def _local_getter(system: System, a: int) -> Callable[[tuple], tuple]:
    fields = _local_fields(system, a)
    if len(fields) == 1:
        p = fields[0]
        return lambda s: (s[p],)
    return itemgetter(*fields)


def _thread_sorter(system: System, classes: list[list[int]]) -> Callable[[tuple], tuple] | None:
    """Sort the local parts of each class of identical threads; None when there is no class."""
    if not classes:
        return None
    plan = []
    for cls in classes:
        fields = [_local_fields(system, a) for a in cls]
        width = len(fields[0])
        # One getter for the whole class: its members' local parts, one after another.
        flat = [p for f in fields for p in f]
        plan.append((itemgetter(*flat) if len(flat) > 1 else None, flat, width, len(cls)))

    def canon(state: tuple) -> tuple:
        out = None
        for getter, flat, width, n in plan:
            values = getter(state)
            local = [values[i * width:(i + 1) * width] for i in range(n)]
            ordered = sorted(local)
            if ordered != local:
                if out is None:
                    out = list(state)
                k = 0
                for part in ordered:
                    for v in part:
                        out[flat[k]] = v
                        k += 1
        return state if out is None else tuple(out)

    return canon


def schedule_toward(system: System, classes: list[list[int]], actions: list[int],
            racing: tuple) -> list[int]:
    """The concrete schedule ends in some member of the racing state's orbit; rename its agents
    (within their symmetry classes, whose barrier programs are equal, so the renamed schedule
    is one too) so that it ends in the member that races."""
    end = system.initial_state()
    for a in actions:
        end, _ = system.step(end, a)
    rename: dict[int, int] = {}
    for cls in classes:
        free = list(cls)
        for a in cls:
            mine = tuple(end[p] for p in _local_fields(system, a))
            b = next(b for b in free if tuple(racing[p] for p in _local_fields(system, b)) == mine)
            free.remove(b)
            rename[a] = b
    assert permute_state(system, end, rename) == racing, "no renaming reaches the racing state"
    return [permute_action(system, x, rename) for x in actions]
