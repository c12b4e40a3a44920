"""Static orders read off the tau-ordered run itself, tried before order.py's blind enumeration.

The blind search (TauSearch.candidates) enumerates node orders and interleavings of a loop
group's operations and replays each: with three roles in one loop group there are hundreds of
interleavings, the first ones all putting one role's whole iteration first, and the producer
that must come first in a cluster or a multi-role pipeline is reached after the budget is spent.
Here the order is built on the concrete runs (TauRun: the systems of model/semantics.py at a
few small parameter values) one node at a time:

- the next node is the first ready one (its predecessors in the alignment placed) whose events
  can all run, in every run, from the states the placed prefix reached;
- a loop group's ranks are read off a greedy run of its iterations: at each key, the next
  operation to run is the first (arrivals and copies before waits, then role order) whose
  threads can move; the sequences of all keys and runs are merged into one rank per operation
  (their common precedences, each role's program order kept), and each key's own sequence is
  tried after that.

Running an enabled event early never disables another one when the waits count completions
(barrier_wait: a count that only grows), so a greedy choice loses nothing there; where it could
(wait_parity), the result is still only a candidate. Nothing here is trusted: prove.py replays
the finished order on every run like any other candidate, and the symbolic progress condition of
every class system decides (prove.py, point 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ...model import kinds
from .order import Tau

if TYPE_CHECKING:
    from .order import Alignment, TauRun, TauSearch

WAITS = kinds.blocking_waits("phase")


def guided_candidates(search: "TauSearch", runs: list["TauRun"]) -> Iterator[Tau]:
    """At most one order per alignment, built on `runs` (module doc)."""
    if not runs:
        return
    for al in search.alignments:
        search._use(al)
        tau = _Builder(search, al, runs).build()
        if tau is not None:
            yield tau


class _Builder:
    def __init__(self, search: "TauSearch", al: "Alignment", runs: list["TauRun"]):
        self.search, self.al, self.runs = search, al, runs
        self.frag = search.frag
        self.events = [self._node_events(run) for run in runs]

    def _node_events(self, run: "TauRun") -> dict[int, list[tuple]]:
        """node -> its events in this run: (key, member, op index, agent, pc)."""
        out: dict[int, list[tuple]] = {}
        shift: dict = {}
        for a, rows in enumerate(run.annotations):
            for pc, (r, i, b, iteration) in enumerate(rows):
                item = self.frag.roles[r].items[i]
                key = 0
                if item.kind == "loop":
                    if (r, i) not in shift:
                        shift[(r, i)] = run._value(self.al.shifts[(r, i)])
                    key = iteration + shift[(r, i)]
                out.setdefault(self.al.node_of[(r, i)], []).append((key, (r, i), b, a, pc))
        return out

    # -- running events on the concrete systems ------------------------------------------------

    @staticmethod
    def _settle(sysm, state):
        """Every in-flight agent landed (the tau-ordered run has nothing in flight at a step)."""
        moved = True
        while moved:
            moved = False
            for action in range(sysm.n_agents, sysm.n_actions):
                if sysm.enabled(state, action):
                    state, v = sysm.step(state, action)
                    if v is not None:
                        return None
                    moved = True
        return state

    def _run(self, run: "TauRun", events, state):
        """The state after `events` in order, or None when one is blocked or breaks a rule."""
        sysm = run.system
        for _, _, _, a, _ in events:
            state = self._settle(sysm, state)
            if state is None or not sysm.enabled(state, a):
                return None
            state, v = sysm.step(state, a)
            if v is not None or sysm.state_violations(state):
                return None
        return state

    # -- the order ---------------------------------------------------------------------------

    def build(self) -> Tau | None:
        al = self.al
        n = len(al.nodes)
        preds = {v: {a for a, b in al.edges if b == v} for v in range(n)}
        states = [run.system.initial_state() for run in self.runs]
        order: list[int] = []
        ranks: dict = {}
        done: set[int] = set()
        while len(order) < n:
            ready = [v for v in range(n) if v not in done and preds[v] <= done]
            for v in ready:
                placed = self._place(v, states)
                if placed is not None:
                    node_ranks, states = placed
                    break
            else:
                return None
            order.append(v)
            done.add(v)
            ranks.update(node_ranks)
        return Tau(order, ranks, al.nodes, al.edges, dict(al.shifts))

    def _place(self, v: int, states: list) -> tuple[dict, list] | None:
        """Ranks for node v that let its events run in every run, and the states after them."""
        node = self.al.nodes[v]
        if node.kind == "loop" and len(node.members) > 1:
            candidates = self._merged_ranks(v, states)
        else:
            candidates = [next(self.search.rank_merges(node))]
        for ranks in candidates:
            after = []
            for run, events, state in zip(self.runs, self.events, states):
                mine = sorted(events.get(v, []),
                              key=lambda e: (e[0], (ranks.get(e[1]) or [0] * (e[2] + 1))[e[2]],
                                             e[3], e[4]))
                state = self._run(run, mine, state)
                if state is None:
                    break
                after.append(state)
            else:
                return ranks, after
        return None

    # -- ranks of a loop group ------------------------------------------------------------------

    def _is_wait(self, member, b) -> bool:
        return self.frag.roles[member[0]].items[member[1]].ops[b].op.kind in WAITS

    def _greedy(self, v: int, states: list) -> list[list[tuple]]:
        """Per key and run, the sequence of (member, op index) a greedy run of node v takes."""
        members = self.al.nodes[v].members
        seqs = []
        for run, events, state in zip(self.runs, self.events, states):
            by_key: dict[int, dict] = {}
            for e in events.get(v, []):
                by_key.setdefault(e[0], {}).setdefault((e[1], e[2]), []).append(e)
            for key in sorted(by_key):
                units = by_key[key]
                left = {m: sorted(b for mm, b in units if mm == m) for m in members}
                seq = []
                while any(left.values()):
                    heads = [(m, bs[0]) for m, bs in left.items() if bs]
                    heads.sort(key=lambda u: (self._is_wait(*u), members.index(u[0])))
                    for unit in heads:
                        after = self._run(run, sorted(units[unit], key=lambda e: (e[3], e[4])),
                                          state)
                        if after is not None:
                            break
                    else:
                        break       # stuck: what was learnt so far still proposes ranks
                    state = after
                    seq.append(unit)
                    left[unit[0]].pop(0)
                seqs.append(seq)
                if any(left.values()):
                    break
        return seqs

    def _merged_ranks(self, v: int, states: list) -> list[dict]:
        members = self.al.nodes[v].members
        units = [(m, b) for m in members
                 for b in range(len(self.frag.roles[m[0]].items[m[1]].ops))]
        seqs = self._greedy(v, states)
        program = {(u, (u[0], u[1] + 1)) for u in units if (u[0], u[1] + 1) in units}
        observed = set()
        for seq in seqs:
            for p, x in enumerate(seq):
                for y in seq[p + 1:]:
                    if x[0] != y[0]:
                        observed.add((x, y))
        # precedences every sequence agrees on (a pair seen both ways is left open)
        common = {(x, y) for x, y in observed if (y, x) not in observed}
        first = {}
        for seq in sorted(seqs, key=len, reverse=True):
            for p, u in enumerate(seq):
                first.setdefault(u, p)
        out, seen = [], set()
        for extra in [common] + [{(x, y) for p, x in enumerate(s) for y in s[p + 1:]
                                  if x[0] != y[0]} for s in seqs]:
            order = _topological(units, program | extra, lambda u: (first.get(u, len(units)),
                                                                    members.index(u[0]), u[1]))
            if order is None or tuple(order) in seen:
                continue
            seen.add(tuple(order))
            ranks = {m: [0] * len([u for u in units if u[0] == m]) for m in members}
            for rank, (m, b) in enumerate(order):
                ranks[m][b] = rank
            out.append(ranks)
            if len(out) >= 4:
                break
        return out


def _topological(units: list, edges: set, priority) -> list | None:
    """A linear order of `units` with every edge (x, y) putting x first, least priority first
    among the free ones; None when the edges have a cycle."""
    preds = {u: {x for x, y in edges if y == u} for u in units}
    placed: list = []
    done: set = set()
    while len(placed) < len(units):
        free = [u for u in units if u not in done and preds[u] <= done]
        if not free:
            return None
        u = min(free, key=priority)
        placed.append(u)
        done.add(u)
    return placed
