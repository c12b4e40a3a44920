"""The race rule of model/memory.py as a finite table of conflicting pairs, for engines that
judge a state by its program counters, in-flight slots and tcgen05 queues alone (the TLA+ spec).

A *holder* is what makes accesses live in a state:
- ("pc", a, P): agent a stands at a gap in P (its loads, stores and own asynchronous accesses
  still live there; a gap of P may also be one where its own program races, see below);
- ("slots", g, K): some TMA slot of K is in flight (g: the slot group, copies that complete
  one transaction on one barrier instance and never race each other: memory.py `slot_groups`);
- ("queue", a, E): agent a's tcgen05 queue holds an entry of E;
- ("tail", a, {gap}, until=(parent, at)): warp a stands at the gap after its last instruction in
  a warp region and its warpgroup (`parent`) has not passed the region's JOIN (at `at`): the
  warp's loads and stores there, which the JOIN retires (memory.py `retired`; what stays live
  at that gap is a "pc" holder).
Holders of one kind and owner with the same accesses are merged into one.

A state races with code C iff some row (C, x, y) has both x and y live, where x and y belong to
different owners (an agent, a slot group, a tcgen05 queue: `racing` compares exactly these)
and some access of x meets some access of y, one of them writing; C is the space of the first
cell they share, as `MemoryLayout.violations` names it. A gap where an agent's own program
races (`self_races`) is a row (C, x, x). `codes(state)` over the table equals the codes of
`MemoryLayout.violations(system, state)` in every state (tests/test_tlc_races.py checks it on
every reachable state of the race examples).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .instructions import ISSUE_TCGEN05
from .memory import SPACE_CODE, Access

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System


@dataclass(frozen=True)
class Holder:
    kind: str                      # "pc", "tail", "slots" or "queue"
    index: int                     # the agent (pc, tail, queue) or the slot group (slots)
    members: tuple[int, ...]       # gaps, slots or queue entries (semantics.py numbering)
    accesses: tuple[Access, ...]
    until: tuple[int, int] = (-1, 0)   # tail: the warpgroup and the pc of its JOIN

    @property
    def owner(self) -> tuple[str, int]:
        return ("pc" if self.kind == "tail" else self.kind), self.index


@dataclass(frozen=True)
class RacePair:
    code: str                      # BP200 or BP201
    x: Holder
    y: Holder                      # x itself for a gap where an agent's own program races
    first: Access                  # one pair of accesses that makes it (for the spec's comment)
    second: Access


def holders(system: "System") -> list[Holder]:
    """Every holder of live accesses of the System's memory layout (none without memory)."""
    memory = system.memory
    out: list[Holder] = []
    if memory is None:
        return out

    def merged(kind, index, items):
        by_accesses: dict[frozenset, list[int]] = {}
        order: dict[frozenset, tuple[Access, ...]] = {}
        for member, accesses in items:
            if accesses:
                key = frozenset(accesses)
                by_accesses.setdefault(key, []).append(member)
                order.setdefault(key, tuple(accesses))
        for key, members in by_accesses.items():
            out.append(Holder(kind, index, tuple(members), order[key]))

    for a in memory.active_agents:
        retired = memory.retired[a]
        merged("pc", a, [(pc, retired[pc][2] if pc in retired else accesses)
                         for pc, accesses in enumerate(memory.lists[a])])
        for gap, (parent, at, left, _) in sorted(retired.items()):
            tail = tuple(x for x in memory.lists[a][gap] if not any(x is y for y in left))
            out.append(Holder("tail", a, (gap,), tail, (parent, at)))
    for g, group in enumerate(memory.slot_groups):
        merged("slots", g, [(k, memory.slot_access[k]) for k, _ in group])
    for a in system.queue_agents:
        issued = sorted({i.aux for i in system.programs[a] if i.op == ISSUE_TCGEN05})
        merged("queue", a, [(e, memory.entry_accesses.get(e, ())) for e in issued])
    return out


def _code(system: "System", mask: int) -> str:
    cell = (mask & -mask).bit_length() - 1
    return SPACE_CODE[system.memory.cells[cell][0].space]


def race_pairs(system: "System") -> list[RacePair]:
    """The table: one row per code and pair of holders that race when both are live."""
    memory = system.memory
    if memory is None:
        return []
    rows: list[RacePair] = []
    for a in memory.active_agents:
        by_code: dict[str, list[int]] = {}
        pairs: dict[str, tuple[Access, Access]] = {}
        for pc, (acc, other) in sorted(memory.self_races[a].items()):
            code = _code(system, acc.mask & other.mask)
            by_code.setdefault(code, []).append(pc)
            pairs.setdefault(code, (acc, other))
        for code, pcs in sorted(by_code.items()):
            # the gap's own accesses do not matter here: the row is live wherever the pc is
            x = Holder("pc", a, tuple(pcs), ())
            rows.append(RacePair(code, x, x, *pairs[code]))
    found = holders(system)
    for i, x in enumerate(found):
        for y in found[i + 1:]:
            if x.owner == y.owner:
                continue
            seen: dict[str, tuple[Access, Access]] = {}
            for p in x.accesses:
                for q in y.accesses:
                    shared = p.mask & q.mask
                    if shared and (p.write or q.write):
                        seen.setdefault(_code(system, shared), (p, q))
            for code, (p, q) in sorted(seen.items()):
                rows.append(RacePair(code, x, y, p, q))
    return rows


def live(system: "System", state: tuple, holder: Holder) -> bool:
    """Whether `holder` makes its accesses live in `state`."""
    if holder.kind == "pc":
        return state[holder.index] in holder.members
    if holder.kind == "tail":
        parent, at = holder.until
        return state[holder.index] in holder.members and state[parent] <= at
    if holder.kind == "slots":
        return any(state[system.slot_base + k] for k in holder.members)
    return any(e in holder.members for e in state[system.queue_pos[holder.index]])


def codes(system: "System", table: list[RacePair], state: tuple) -> frozenset[str]:
    """The race codes `state` shows by the table."""
    return frozenset(row.code for row in table
                     if live(system, state, row.x) and live(system, state, row.y))
