"""The explorer's side table for bare parity waits: which completions each dynamic wait can
return after (model/parity.py states the rule; docs/POR.md argues the reductions keep it).

A dynamic wait is one program point of one agent's unrolled program. Its completions are a
function of the reachable states (the barrier's phase wherever the agent sits at the wait with
its guard true), so the table is filled state by state, needs nothing in the state vector and
is independent of the order the search meets states in. Keyed by the agent's orbit under the
symmetries the search quotients by: an automorphism maps a member onto another with the same
program and the image barrier, whose phase in the image state is the same, so every member of
an orbit returns after the same set of completions, and a canonical state shows the member it
holds. Per completion the table keeps the shallowest state that shows it (its depth and the
keys of the path to it); two completions of one key are a violation whose length is the depth
of the deeper of the two shallowest, plus the wait's step: the rank breadth first meets it at,
which depth first reproduces (explore.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

from ...model.parity import bare_waits, blocked, returning
from ...model.semantics import System
from ...model.violations import Violation
from .symmetry import Symmetry, permute_action


class Trail:
    """The keys of a path, sharing its prefix with the paths it extends: the last key and the
    trail before it. The depth-first search hands one to `record` instead of a copy of its
    stack, which, made for every state a dynamic wait is first shown in (each wait of an
    unrolled program at its own pc), grew memory and time with the square of the depth."""

    __slots__ = ("key", "before")

    def __init__(self, key, before: "Trail | None"):
        self.key = key
        self.before = before

    def __iter__(self):
        keys, node = [], self
        while node is not None:
            keys.append(node.key)
            node = node.before
        return reversed(keys)


@dataclass(frozen=True)
class Shown:
    """The shallowest state met in which a dynamic wait returns after `completion`."""

    completion: int
    depth: int
    keys: "list | Trail"  # of the states on the path to it, after the initial one


@dataclass(frozen=True)
class Conflict:
    """One dynamic wait (orbit of an agent, pc) returning after two completions."""

    orbit: frozenset[int]
    pc: int
    deeper: Shown
    other: Shown

    @property
    def length(self) -> int:
        return self.deeper.depth + 1


class ParityReturns:
    def __init__(self, system: System, symmetry: Symmetry | None, tolerated=None):
        """`tolerated(v)`: a suppressed finding (explore.py); a wait whose aliasing is one is
        not tracked."""
        self.system = system
        self.waits = bare_waits(system)
        if tolerated is not None:
            self.waits = [(a, kept) for a, at in self.waits
                          if (kept := {pc: w for pc, w in at.items() if not tolerated(
                              _aliasing_at(system, a, pc))})]
        self.symmetry = symmetry
        parent = list(range(system.n_agents))

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        if symmetry is not None:
            for cls in symmetry.classes:
                for a in cls[1:]:
                    parent[find(a)] = find(cls[0])
            for g in symmetry.blocks:
                for a, b in enumerate(g.agents):
                    parent[find(a)] = find(b)
        self.root = [find(a) for a in range(system.n_agents)]
        self.table: dict[tuple[int, int], dict[int, Shown]] = {}

    def __bool__(self) -> bool:
        return bool(self.waits)

    def orbit(self, root: int) -> frozenset[int]:
        return frozenset(a for a, r in enumerate(self.root) if r == root)

    def record(self, state: tuple, depth: int, path: Callable[[], list]) -> Conflict | None:
        """Note the returns `state` (met at `depth`) shows; the shortest conflict among the
        dynamic waits it touched, if any. `path()`: the keys to it, asked for only when the
        state is the shallowest yet to show a completion."""
        best = None
        for a, pc, completion in returning(self.system, state, self.waits):
            key = (self.root[a], pc)
            shown = self.table.setdefault(key, {})
            old = shown.get(completion)
            if old is not None and old.depth <= depth:
                continue
            shown[completion] = Shown(completion, depth, path())
            if len(shown) > 1:
                first, second = sorted(shown.values(), key=lambda s: s.depth)[:2]
                conflict = Conflict(self.orbit(key[0]), pc, second, first)
                if best is None or conflict.length < best.length:
                    best = conflict
        return best

    def returning_agent(self, state: tuple, conflict: Conflict, completion: int) -> int:
        """The member of the conflict's orbit that returns after `completion` in `state`."""
        for a, pc, n in returning(self.system, state, self.waits):
            if a in conflict.orbit and pc == conflict.pc and n == completion:
                return a
        raise AssertionError("the concrete schedule lost the parity wait it was built for")

    def blocked(self, state: tuple) -> list[tuple[int, int, int]]:
        """(agent, pc, completions so far) of the tracked bare parity waits agents sit at in
        the deadlock `state`."""
        return blocked(self.system, state, self.waits)

    def earlier(self, agent: int, pc: int, below: int) -> Conflict | None:
        """The shallowest state met in which the dynamic wait (agent's orbit, pc) returns after
        a completion below `below`, as a conflict whose `other` shows it."""
        shown = [s for n, s in self.table.get((self.root[agent], pc), {}).items() if n < below]
        if not shown:
            return None
        first = min(shown, key=lambda s: s.depth)
        return Conflict(self.orbit(self.root[agent]), pc, first, first)

    def onto(self, actions: list[int], src: int, dst: int) -> list[int]:
        """Rename a concrete schedule by a symmetry that maps agent `src` onto `dst` (a block
        permutation, then a swap inside a thread class): the image is a schedule too."""
        if src == dst:
            return actions
        system, symmetry = self.system, self.symmetry
        classes = symmetry.classes if symmetry is not None else []
        for g in (symmetry.blocks if symmetry is not None else []) or [None]:
            moved = actions if g is None else [g.action(system, x) for x in actions]
            image = src if g is None else g.agents[src]
            if image == dst:
                return moved
            if any(image in cls and dst in cls for cls in classes):
                swap = {image: dst, dst: image}
                return [permute_action(system, x, swap) for x in moved]
        raise AssertionError("no symmetry maps the two returning agents onto each other")


def _aliasing_at(system: System, agent: int, pc: int) -> Violation:
    """The place an aliasing of the bare parity wait at `pc` is reported at (model/parity.py)."""
    instr = system.programs[agent][pc]
    return Violation("BP101", "", agent, instr.target, instr.src)


def search_return(system: System, agent: int, pc: int, below: int, ignore: frozenset[str],
                  cap: int) -> list[int] | None:
    """A shortest schedule, through states that break no rule, that ends with `agent`'s step
    off the bare parity wait at `pc` returning after a completion below `below`: breadth first
    over every interleaving, without reduction, up to `cap` states (None past it or when there
    is none). Used where the reduced search's table did not meet such a return before it
    stopped at a deadlock of that wait (explore.py)."""
    waits = [(a, {pc: at[pc]}) for a, at in bare_waits(system) if a == agent and pc in at]
    if not waits:
        return None
    start = system.initial_state()
    parent: dict[tuple, tuple | None] = {start: None}
    todo = deque([start])
    while todo:
        state = todo.popleft()
        if any(v.code not in ignore for v in system.state_violations(state)):
            continue
        if any(n < below for _, _, n in returning(system, state, waits)):
            actions = [agent]
            while parent[state] is not None:
                state, action = parent[state]
                actions.append(action)
            return actions[::-1]
        for action, nxt, violation in system.successors(state):
            if (violation is not None and violation.code not in ignore) or nxt in parent:
                continue
            parent[nxt] = (state, action)
            if len(parent) > cap:
                return None
            todo.append(nxt)
    return None
