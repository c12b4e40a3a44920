"""Memory effects of a compiled System and the race rule (BP200 smem-race, BP201 tmem-race).

Every slot of every SMEM / TMEM buffer of every block is one *cell*, a bit of a Python int, so
a set of cells is a mask and an overlap is one `&`.

An access is *live* in a state while it may still be happening:
- a thread's loads and stores between two of its synchronization instructions are live while
  the thread sits between them (they are not steps of their own: they touch no barrier, so they
  add no states);
- a TMA copy writes its destination while it is in flight (issue to landing), in every block a
  multicast reaches;
- a tcgen05 MMA reads its operands and writes its accumulator while it is queued (issue to
  completion, in issue order per thread);
- a TMA store reads its source, a WGMMA its operands, a tcgen05.st writes its TMEM, from issue
  until the issuing thread's covering wait (`wait_smem_to_gmem(n)`, `wgmma_wait(n)`,
  `tcgen05_wait_store`) or the kernel's end: for other agents, through the whole gaps of the
  issue and of the wait (no synchronization inside a gap can order anything against them); for
  the thread itself, by program order, decided when the System is compiled (a "self race" at
  that gap).

Each destination has its own in-flight counter (compile.py `_slot`): copies that complete the
same bytes on the same barrier instance but write different memory land in either order, and a
destination counts as written until its own copy lands (one `full` barrier may serve two
buffers). Copies that land on one instance are parts of one transaction and never race each
other where they write disjoint cells (split tiles, multicast slices) or are all multicast (each
block's share written coarsely as the whole destination); TMA copies of different threads
writing a common cell race (`clashes`).

The rule: a state in which two live accesses of different agents overlap and one of them writes
is a race. Under interleaving semantics this is exactly a pair of conflicting accesses that
happens-before (program order, barrier completion -> wait, issue -> async agent -> its arrival)
does not order: if nothing orders them, some schedule brings both to the same state; if something
does, the ordering one has ended before the other can start. The breadth-first search therefore
finds the shortest schedule to a racing state with no extra state component at all.

A warp's loads and stores after its last instruction in a warp region (its *tail*) end when its
warpgroup joins: from the JOIN on, the warp's gap holds only its asynchronous accesses still in
flight (`retired`, read off the parent's pc: the JOIN changes the warp's live memory).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from .ir import Loc, MemAlloc, MemRef, ModelError, evaluate
from .regions import cell_runs, dest_text, overlap, region_text, runs

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System
    from .violations import Violation

SPACE_CODE = {"smem": "BP200", "tmem": "BP201"}


@dataclass(frozen=True)
class Access:
    """One access: who makes it, whether it writes, the cells it touches, what wrote it."""

    who: str          # "thread", "TMA copy", "tcgen05", "TMA store", "WGMMA", "tcgen05.st"
    write: bool
    mask: int
    src: int          # index into System.sources
    text: str         # the memory it names, with concrete slots ("a[1]@b1", "acc[64:128]")
    boxes: tuple = ()  # per buffer it touches: (name, block, slot runs per dimension)


class MemoryLayout:
    """Cells of one System's buffers and the accesses of its agents, per program position."""

    def __init__(self, buffers: tuple[MemAlloc, ...], blocks: list[tuple[int, ...]],
                 env: Mapping[str, int]):
        self.cells: list[tuple[MemAlloc, tuple[int, ...], tuple[int, ...]]] = []
        self._cell: dict[tuple, int] = {}
        self._shape: dict[str, tuple[int, ...]] = {}
        self._granule: dict[str, tuple[int, ...]] = {}
        self._allocs = {alloc.name: alloc for alloc in buffers}
        self.multi_block = len(blocks) > 1
        for alloc in buffers:
            shape = tuple(evaluate(n, env) for n in alloc.shape)
            if any(n < 1 for n in shape):
                raise ModelError(f"buffer `{alloc.name}` has {tuple(shape)} slots; every "
                                 "dimension must be at least 1", loc=alloc.loc)
            self._shape[alloc.name] = shape
            granule = tuple(alloc.granule) + (1,) * (len(shape) - len(alloc.granule))
            self._granule[alloc.name] = granule
            counts = [-(-n // g) for n, g in zip(shape, granule)]
            for block in blocks:
                for index in itertools.product(*[range(n) for n in counts]):
                    self._cell[(alloc.name, index, block)] = len(self.cells)
                    self.cells.append((alloc, index, block))
        # Filled while the System unrolls programs: per agent, in program order,
        # ("access", pc, "thread", accesses), ("issue", pc, kind, accesses) of a TMA store /
        # WGMMA / tcgen05.st, ("wait", pc, kind, n) retiring all but the newest n; pc is the
        # gap (the index of the agent's next instruction).
        self.events: list[list[tuple]] = []
        self.slot_access: dict[int, list[Access]] = {}    # TMA slot -> writes of its copies
        self.entry_accesses: dict[int, tuple[Access, ...]] = {}  # tcgen05 entry -> accesses
        # TMA slot -> issuing thread -> (the cells its copies write, all of them multicast)
        self.slot_issues: dict[int, dict[int, tuple[int, bool]]] = {}

    # -- compilation -------------------------------------------------------------------------

    def resolve(self, ref: MemRef, env: Mapping[str, int], block: tuple[int, ...],
                loc: Loc) -> tuple[int, str, tuple]:
        """The cells a reference touches in `block`, its text with concrete slots, and its
        box (buffer, block, slot runs per dimension) for naming overlaps."""
        alloc = ref.alloc
        if self._allocs.get(alloc.name) is not alloc:
            raise ModelError(f"buffer `{alloc.name}` is not allocated by this kernel", loc=loc,
                             hint="allocate it with k.SMEM(...) / k.TMEM(...) in the protocol")
        shape = self._shape[alloc.name]
        if not ref.region:
            index = tuple(evaluate(i, env) for i in ref.index)
            if len(index) > len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
                raise ModelError(f"slot {index if len(index) != 1 else index[0]} is out of "
                                 f"range for buffer `{alloc.name}` with "
                                 f"{shape if len(shape) > 1 else shape[0]} slot(s)", loc=loc,
                                 hint="keep slot indices below the slot count")
        box = runs(ref, shape, env, loc)
        mask = 0
        for cell in itertools.product(*cell_runs(box, self._granule[alloc.name])):
            mask |= 1 << self._cell[(alloc.name, cell, block)]
        named = len(ref.index) + len(ref.region)
        text = alloc.name if alloc.scalar else region_text(alloc.name, box, named, shape)
        if self.multi_block:
            text += "@" + ",".join(map(str, block))
        return mask, text, ((alloc.name, block, box),)

    def destination(self, access: Access) -> str:
        """What a copy writes, by its slots alone (`ring[1]`), its block left to its barrier."""
        return ", ".join(dest_text(name, box, self._shape[name]) for name, _, box in access.boxes)

    def issued(self, k: int, issuer: int, mask: int, multicast: bool) -> None:
        """Record a TMA copy of `issuer` on slot k."""
        was = self.slot_issues.setdefault(k, {}).get(issuer, (0, True))
        self.slot_issues[k][issuer] = (was[0] | mask, was[1] and multicast)

    def clashes(self, k: int, issuer: int, mask: int, multicast: bool) -> bool:
        """Does a copy of `issuer` writing `mask` race a copy of another thread on slot k?
        Both land on one barrier instance; they race iff they write a common cell, unless both
        are multicast: each block's share of a multicast is written coarsely as the whole
        destination in every block it reaches, so those copies are one transaction (the rule
        before overlaps were checked, kept)."""
        for a, (m, mc) in self.slot_issues.get(k, {}).items():
            if a != issuer and m & mask and not (mc and multicast):
                return True
        return False

    def _transactions(self, group: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
        """Split the slots landing on one barrier instance into sets that never race each
        other: slots whose copies race (`clashes`) go to different sets, so the rule sees them
        as different agents. Without such a pair the instance stays one set, as before."""
        def race(k1: int, k2: int) -> bool:
            return any(self.clashes(k2, a, m, mc) for a, (m, mc) in
                       self.slot_issues.get(k1, {}).items())
        if not any(race(k1, k2) for (k1, _), (k2, _) in itertools.combinations(group, 2)):
            return [group]
        parts: list[list[tuple[int, int]]] = []
        for item in group:
            for part in parts:
                if not any(race(item[0], k) for k, _ in part):
                    part.append(item)
                    break
            else:
                parts.append([item])
        return parts

    def finish(self, lengths: list[int], slot_insts: list[int],
               joins: Mapping[tuple[int, int], tuple[int, int]] = {}) -> None:
        """From the recorded events, per agent and gap (program position): the mask of what the
        agent may be touching there (its loads and stores, and its own asynchronous accesses
        still live), and whether its own program races there (a store to a buffer its TMA store
        is still reading, say: decided by program order alone). Plus the per-slot and
        per-tcgen05-entry masks of the asynchronous agents. `joins`: per warp's tail gap
        (agent, pc), its warpgroup's JOIN (parent, pc of the JOIN)."""
        self._slot_inst = slot_insts
        # per agent: gap -> (parent, JOIN pc, live accesses once joined, their masks)
        self.retired: list[dict[int, tuple[int, int, tuple[Access, ...], tuple]]] = []
        self.items_at: list[tuple[tuple[tuple[int, int], ...], ...]] = []
        self.lists: list[list[list[Access]]] = []
        self.self_races: list[dict[int, tuple[Access, Access]]] = []
        for a, length in enumerate(lengths):
            live: list[list[Access]] = [[] for _ in range(length + 1)]
            own: dict[int, tuple[Access, Access]] = {}
            plain: dict[int, list[Access]] = {}
            outstanding: dict[str, list[tuple[int, tuple[Access, ...]]]] = {}

            def clash(pc: int, accesses) -> None:
                """Program order: an access, or a new asynchronous one, meets every access the
                thread still has in flight (PTX orders none of them: two cp.async without a
                wait between, a TMA store of a cp.async destination, two tcgen05.st)."""
                for acc in accesses:
                    for _, issued in (x for g in outstanding.values() for x in g):
                        for other in issued:
                            if pc not in own and acc.mask & other.mask and \
                                    (acc.write or other.write):
                                own[pc] = (acc, other)

            for event in self.events[a]:
                kind, pc = event[0], event[1]
                if kind == "access":
                    live[pc].extend(event[3])
                    plain.setdefault(pc, []).extend(event[3])
                    clash(pc, event[3])
                elif kind == "issue":
                    clash(pc, event[3])
                    outstanding.setdefault(event[2], []).append((pc, event[3]))
                else:                                   # a wait retires all but the newest n
                    group, keep = event[2], event[3]
                    pending = outstanding.get(group, [])
                    cut = max(len(pending) - keep, 0)
                    for start, issued in pending[:cut]:
                        for p in range(start, pc + 1):  # live through the gap of the wait
                            live[p].extend(issued)
                    outstanding[group] = pending[cut:]
            for pending in outstanding.values():
                for start, issued in pending:
                    for p in range(start, length + 1):
                        live[p].extend(issued)
            self.lists.append(live)
            self.items_at.append(tuple(
                (m,) if m[0] | m[1] else () for m in (_masks(x) for x in live)))
            self.self_races.append(own)
            retired = {}
            for (w, gap), (parent, at) in joins.items():
                if w == a and plain.get(gap):
                    left = [x for x in live[gap] if not any(x is y for y in plain[gap])]
                    m = _masks(left)
                    retired[gap] = (parent, at, tuple(left), (m,) if m[0] | m[1] else ())
            self.retired.append(retired)
        self.active_agents = tuple(a for a in range(len(lengths))
                                   if any(self.items_at[a]) or self.self_races[a])
        # Copies that land on the same barrier instance are parts of one transaction (multicast
        # slices from each block, tiles split among copies into disjoint cells): one agent,
        # never racing itself. Copies of different threads writing a common cell are not,
        # unless both are multicast (`clashes`): their slots go to different groups.
        groups: dict[int, list[tuple[int, int]]] = {}
        for k, accs in sorted(self.slot_access.items()):
            groups.setdefault(self._slot_inst[k], []).append((k, _masks(accs)[1]))
        self.slot_groups = tuple(tuple(part) for _, g in sorted(groups.items())
                                 for part in self._transactions(g))
        self.entry_masks = {e: _masks(accs) for e, accs in self.entry_accesses.items()}

    # -- the rule ----------------------------------------------------------------------------

    def joined(self, a: int, state: tuple):
        """The retirement of agent a's tail in `state` (its warpgroup has joined), or None."""
        done = self.retired[a].get(state[a])
        return done if done is not None and state[done[0]] > done[1] else None

    def items(self, a: int, state: tuple) -> tuple:
        """Agent a's live (reads, writes) masks in `state`."""
        done = self.joined(a, state)
        return self.items_at[a][state[a]] if done is None else done[3]

    def live(self, a: int, state: tuple) -> "list[Access] | tuple[Access, ...]":
        """Agent a's live accesses in `state`."""
        done = self.joined(a, state)
        return self.lists[a][state[a]] if done is None else done[2]

    def racing(self, system: "System", state: tuple) -> bool:
        """Fast test: do two live accesses of different agents conflict in `state`?"""
        acc_r = acc_w = 0
        for a in self.active_agents:
            pc = state[a]
            if pc in self.self_races[a]:
                return True
            for r, w in self.items(a, state):
                if w & (acc_r | acc_w) or r & acc_w:
                    return True
                acc_r |= r
                acc_w |= w
        base = system.slot_base
        for group in self.slot_groups:
            w = 0
            for k, mask in group:
                if state[base + k]:
                    w |= mask
            if w:
                if w & (acc_r | acc_w):
                    return True
                acc_w |= w
        if self.entry_masks:
            for a in system.queue_agents:
                qr = qw = 0
                for entry in state[system.queue_pos[a]]:
                    m = self.entry_masks.get(entry)
                    if m is not None:
                        qr |= m[0]
                        qw |= m[1]
                if qr | qw:
                    if qw & (acc_r | acc_w) or qr & acc_w:
                        return True
                    acc_r |= qr
                    acc_w |= qw
        return False

    def owners(self, system: "System", state: tuple) -> list[tuple[str, int | None, list]]:
        """Every agent with live accesses in `state`: (timeline lane, issuing thread or None,
        accesses)."""
        out: list[tuple[str, int | None, list[Access]]] = []
        for a in self.active_agents:
            live = self.live(a, state)
            if live:
                out.append((system.agents[a].name, a, live))
        for group in self.slot_groups:
            accs = [x for k, _ in group if state[system.slot_base + k]
                    for x in self.slot_access[k]]
            if accs:
                out.append(("tma", None, accs))
        for a in system.queue_agents:
            accs = [x for e in state[system.queue_pos[a]] for x in self.entry_accesses.get(e, ())]
            if accs:
                out.append((f"tcgen05({system.agents[a].name})", a, accs))
        return out

    @staticmethod
    def _who(system, agent: int | None, acc: Access) -> str:
        if acc.who == "thread":
            return system.agents[agent].name
        if agent is None:
            return f"a {acc.who}"
        what = "tcgen05 op" if acc.who == "tcgen05" else acc.who
        return f"a {what} of {system.agents[agent].name}"

    def violation(self, system: "System", state: tuple,
                  skip: frozenset[str] = frozenset()) -> "Violation | None":
        """The race in `state`, with both accesses, or None. When races in both memories hold,
        the one with the lower code (as `violations.primary` picks among rules), so every state
        of a symmetry orbit reports the same code; codes in `skip` (ignored) are passed over."""
        kept = [v for v in self.violations(system, state) if v.code not in skip]
        return kept[0] if kept else None

    def violations(self, system: "System", state: tuple) -> list["Violation"]:
        """One race per code (BP200, BP201) and place (its first access) that `state`
        exhibits, in code order."""
        from .violations import Violation
        if not self.racing(system, state):
            return []
        found: dict[tuple, Violation] = {}
        for a in self.active_agents:
            pair = self.self_races[a].get(state[a])
            if pair is not None:
                name = system.agents[a].name
                first, second = pair if pair[0].write else pair[::-1]
                race = self._violation(system, (first, name, a), (second, name, a), Violation)
                found.setdefault((race.code, race.src), race)
        owners = self.owners(system, state)
        for (l1, a1, x1), (l2, a2, x2) in itertools.combinations(owners, 2):
            for p in x1:
                for q in x2:
                    if not p.mask & q.mask or not (p.write or q.write):
                        continue
                    # The primary access is the write (the one that clobbers).
                    first, second = ((q, l2, a2), (p, l1, a1)) \
                        if q.write and not p.write else ((p, l1, a1), (q, l2, a2))
                    race = self._violation(system, first, second, Violation)
                    found.setdefault((race.code, race.src), race)
        # by code, the first found of each first (what `violation` and `primary` report);
        # one per place, so a suppressed race does not hide another of its code
        return [v for _, v in sorted(found.items(), key=lambda kv: kv[0][0])]

    def _violation(self, system, first, second, Violation) -> "Violation":
        (acc1, lane1, agent1), (acc2, lane2, agent2) = first, second
        overlap = acc1.mask & acc2.mask
        cell = (overlap & -overlap).bit_length() - 1
        alloc, index, block = self.cells[cell]
        code = SPACE_CODE[alloc.space]
        src1, src2 = system.sources[acc1.src], system.sources[acc2.src]
        name1, name2 = self._who(system, agent1, acc1), self._who(system, agent2, acc2)
        verb1 = "writes" if acc1.write else "reads"
        verb2 = "writes" if acc2.write else "reads"
        space = "shared" if alloc.space == "smem" else "tensor"
        shared = self._overlap_text(acc1, acc2)
        both = f" (they overlap in {shared})" if shared else ""
        message = (f"{name1} {verb1} {acc1.text} ({src1.loc}) while {name2} {verb2} "
                   f"{acc2.text} ({src2.loc}){both}; no barrier orders the two {space}-memory "
                   "accesses")
        details = [f"{lane1} {verb1} {acc1.text}: {src1.text} at {src1.loc}",
                   f"{lane2} {verb2} {acc2.text}: {src2.text} at {src2.loc}"]
        if shared:
            details.append(f"overlapping slots: {shared}")
        return Violation(code, message, agent1, None, acc1.src, details,
                         related=[(f"{name2} {verb2} {acc2.text} here", src2.loc)])

    def _overlap_text(self, acc1: Access, acc2: Access) -> str:
        """The slots two accesses of different regions share (`acc[63, :]`); empty when they
        name the same slots (the texts say it all)."""
        if acc1.text == acc2.text:
            return ""
        found = []
        for name1, block1, box1 in acc1.boxes:
            for name2, block2, box2 in acc2.boxes:
                if (name1, block1) != (name2, block2):
                    continue
                shared = overlap(box1, box2)
                if shared is None:
                    continue
                shape = self._shape[name1]
                text = region_text(name1, shared, len(shape), shape)
                found.append(text + ("@" + ",".join(map(str, block1)) if self.multi_block else ""))
        return ", ".join(found)


def _masks(accesses) -> tuple[int, int]:
    r = w = 0
    for acc in accesses:
        if acc.write:
            w |= acc.mask
        else:
            r |= acc.mask
    return r, w
