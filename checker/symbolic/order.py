"""The static order tau, used to rule out deadlocks.

Every role's top-level items (loops and operations) are merged into groups, loops of different
roles that run the same iterations share a group, and the operations of a group get ranks; tau
orders events by (group, iteration, rank). A candidate order is first checked concretely (the
tau-ordered run of model/semantics.py must pass every wait at small parameter values), then
symbolically by the progress condition of every class.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Mapping

import z3

from ...model import kinds
from ...model.ir import Loop, Op, WarpRegion, When
from .classes import BarrierClass
from .hw import legal_at_exit
from .queue_tail import closed_at_exit
from .program import ClassBuilder
from .terms import Unsupported, evaluate, nonlinear, z_int

if TYPE_CHECKING:
    from .fragment import Fragment, Item, Role

def iterations(trip: z3.ArithRef) -> z3.ArithRef:
    """How many times a loop of trip count `trip` runs its body."""
    return z3.If(trip > 0, trip, 0)


# Where a thread waits for others: a wait on an mbarrier's phase or on a semaphore's value.
WAITS = kinds.blocking_waits("phase", "value")


@dataclass
class Node:
    kind: str                                   # loop, op, fork, join
    members: list[tuple[int, int]]              # (role, item)


@dataclass
class Tau:
    order: list[int]                            # node indices in tau order
    ranks: dict[tuple[int, int], list[int]]     # (role, item) -> rank of each of its ops
    nodes: list[Node] | None = None             # the alignment the order is over
    edges: set | None = None
    shifts: dict = field(default_factory=dict)  # (role, item) -> tau key shift of a loop


@dataclass
class Alignment:
    """Loops of different roles merged into groups; a loop's iteration i has tau key i + shift."""
    nodes: list[Node]
    node_of: dict[tuple[int, int], int]
    edges: set[tuple[int, int]]
    shifts: dict[tuple[int, int], z3.ArithRef]
    anywhere: bool = False      # a loop may join a group before its role's previous one


class TauSearch:
    """Candidate static orders, checked on the tau-ordered run of model/semantics.py.

    Two alignments of loops are tried, in order: the strict one (loops share a group when they
    run the same trip count with the same ring offsets; keys are the iterations), then a relaxed
    one (loops share a group when they use a ring class; each gets the key shift that makes the
    key its virtual iteration v = i + c relative to the group, so the trip counts may differ:
    a prefetch ring whose producer loop loads `(i + 1) % S` for `steps - 1` iterations is
    aligned with its consumers' loop over `i % S`). Each is built twice: with the groups in one
    line (a role's loop joins only a group after its previous one), then `anywhere` (any group
    whose joining keeps the groups acyclic). Only the orders are heuristic: every class
    system re-checks that its loops of one group are compared consistently (see
    ClassBuilder.segments), and the symbolic progress check decides."""

    def __init__(self, frag: "Fragment"):
        self.frag = frag
        self.alignments: list[Alignment] = []
        # the groups in one line first; then any group a loop fits that keeps the groups
        # acyclic (a persistent kernel unrolled: the consumers' second tile joins the
        # producers' second tile although the producers drain their first one in between)
        for anywhere in (False, True):
            for relaxed in (False, True):
                al = self._align(relaxed, anywhere)
                if not any(self._same(al, other) for other in self.alignments):
                    self.alignments.append(al)
        self._use(self.alignments[0])

    def _use(self, al: Alignment) -> None:
        self.nodes, self.node_of, self.edges, self.shifts = \
            al.nodes, al.node_of, al.edges, al.shifts

    def _same(self, a: Alignment, b: Alignment) -> bool:
        if [n.members for n in a.nodes] != [n.members for n in b.nodes]:
            return False
        return all(self.frag.solver.equal(a.shifts[m], b.shifts[m]) for m in a.shifts)

    def _uses(self, item: Item, cls: BarrierClass) -> bool:
        return any(bop.op.barrier is not None and bop.op.barrier.alloc in cls.allocs
                   for bop in item.body)

    def _shared_offsets(self, a: tuple[int, int], b: tuple[int, int]) -> list | None:
        """(offset in loop a, offset in loop b) for every ring class both loops use; None when
        an offset is outside the fragment."""
        frag = self.frag
        ita, itb = frag.roles[a[0]].items[a[1]], frag.roles[b[0]].items[b[1]]
        pairs = []
        for cls in frag.classes:
            if cls.ring is None or not (self._uses(ita, cls) and self._uses(itb, cls)):
                continue
            builder = ClassBuilder(frag, cls)
            try:
                pairs.append((builder.offset(frag.roles[a[0]], ita),
                              builder.offset(frag.roles[b[0]], itb)))
            except Unsupported:
                return None
        return pairs

    def _alignable(self, node: Node, shifts: dict, b: tuple[int, int],
                   relaxed: bool) -> z3.ArithRef | None:
        """The key shift of loop b in the group of `node`, or None if it does not fit."""
        frag = self.frag
        rb, ib = b
        itb = frag.roles[rb].items[ib]
        first = node.members[0]
        ita0 = frag.roles[first[0]].items[first[1]]
        if ita0.loop is itb.loop:
            return shifts[first]
        try:
            ta = z_int(ita0.loop.trip, frag.roles[first[0]].env)
            tb = z_int(itb.loop.trip, frag.roles[rb].env)
        except Unsupported:
            return None
        # as iteration counts: a loop of a negative count runs none, so `steps - 2` and
        # `max(steps - 2, 0)` run the same iterations for every `steps`
        same_trip = frag.solver.equal(iterations(ta), iterations(tb))
        if not relaxed:
            # ring accesses of a class both loops use must sit at the same virtual iterations
            pairs = self._shared_offsets(first, b) if same_trip else None
            if pairs is None or any(not frag.solver.equal(ca, cb) for ca, cb in pairs):
                return None
            return z3.IntVal(0)
        # relaxed: the shift that puts the ring accesses of every shared class at the same key
        shift = None
        for m in node.members:
            pairs = self._shared_offsets(m, b)
            if pairs is None:
                return None
            for ca, cb in pairs:
                cand = z3.simplify(shifts[m] + cb - ca)
                if nonlinear(cand):
                    return None
                if shift is None:
                    shift = cand
                elif not frag.solver.equal(shift, cand):
                    return None
        if shift is None:
            return shifts[first] if same_trip else None
        return shift

    def _align(self, relaxed: bool, anywhere: bool = False) -> Alignment:
        frag = self.frag
        nodes: list[Node] = []
        node_of: dict[tuple[int, int], int] = {}
        edges: set[tuple[int, int]] = set()
        shifts: dict[tuple[int, int], z3.ArithRef] = {}
        loops: list[int] = []
        regions: dict[tuple, int] = {}
        joins: dict[tuple, int] = {}
        follows: set[tuple[int, int]] = set()   # program order between the nodes so far

        def reaches(a: int, b: int) -> bool:
            seen, todo = {a}, [a]
            while todo:
                x = todo.pop()
                if x == b:
                    return True
                for u, w in follows:
                    if u == x and w not in seen:
                        seen.add(w)
                        todo.append(w)
            return False

        for r, role in enumerate(frag.roles):
            last = -1
            for i, item in enumerate(role.items):
                if item.kind == "loop":
                    target = None
                    before = node_of.get((r, i - 1)) if i > 0 else None
                    for pos in range(0 if anywhere else last + 1, len(loops)):
                        node = nodes[loops[pos]]
                        if r in [m[0] for m in node.members]:
                            continue
                        if anywhere and before is not None and reaches(loops[pos], before):
                            continue
                        shift = self._alignable(node, shifts, (r, i), relaxed)
                        if shift is not None:
                            target = pos
                            break
                    if target is None:
                        nodes.append(Node("loop", [(r, i)]))
                        loops.append(len(nodes) - 1)
                        target = len(loops) - 1
                        shift = z3.IntVal(0)
                    else:
                        nodes[loops[target]].members.append((r, i))
                    shifts[(r, i)] = shift
                    last = max(last, target)
                    node_of[(r, i)] = loops[target]
                elif item.kind in ("fork", "await"):
                    key = (role.block, _thread_key(role), id(item.region))
                    if key not in regions:
                        nodes.append(Node("fork", []))
                        regions[key] = len(nodes) - 1
                    nodes[regions[key]].members.append((r, i))
                    node_of[(r, i)] = regions[key]
                elif item.kind == "join":
                    nodes.append(Node("join", [(r, i)]))
                    joins[(role.block, _thread_key(role), id(item.region))] = len(nodes) - 1
                    node_of[(r, i)] = len(nodes) - 1
                else:
                    nodes.append(Node("op", [(r, i)]))
                    node_of[(r, i)] = len(nodes) - 1
                if i > 0 and node_of[(r, i - 1)] != node_of[(r, i)]:
                    follows.add((node_of[(r, i - 1)], node_of[(r, i)]))
        for r, role in enumerate(frag.roles):
            chain = [node_of[(r, i)] for i in range(len(role.items))]
            for a, b in zip(chain, chain[1:]):
                if a != b:
                    edges.add((a, b))
            if role.warp is not None:
                # everything a warp does in a region precedes the warpgroup's join
                for i, item in enumerate(role.items):
                    key = (role.block, _thread_key(role), id(item.region)) if item.region else None
                    if item.kind == "await" and key in joins:
                        for j in range(i, len(role.items)):
                            edges.add((node_of[(r, j)], joins[key]))
        return Alignment(nodes, node_of, edges, shifts, anywhere)

    def orders(self, limit: int = 24) -> Iterator[list[int]]:
        """Topological orders of the nodes (a few, in a heuristic order)."""
        n = len(self.nodes)
        preds = {v: {a for a, b in self.edges if b == v} for v in range(n)}
        seen = set()
        waits, signals = self._barrier_use()
        for prefer in ("low", "high", "loops", "arrivals first"):
            order, done = [], set()
            while len(order) < n:
                ready = [v for v in range(n) if v not in done and preds[v] <= done]
                if not ready:
                    return
                if prefer == "arrivals first":
                    # a wait goes after every node still to come that arrives on its barriers
                    # (all blocks arrive on a cluster-wide barrier before any block waits)
                    later = [u for u in range(n) if u not in done]
                    free = [v for v in ready if not any(
                        waits[v] & signals[u] for u in later if u != v)]
                    if free:
                        v = min(free)
                    else:
                        # every ready wait expects a later arrival: go on with the role whose
                        # later nodes arrive on what the other ready nodes wait for, a guarded
                        # wait first (a slot-reuse wait, skipped while the ring is not full)
                        def unblocks(v):
                            role = self.nodes[v].members[0][0] if self.nodes[v].members else -1
                            mine = set().union(*[signals[u] for u in later if any(
                                m[0] == role for m in self.nodes[u].members)])
                            return len(mine & set().union(*[waits[u] for u in ready
                                                             if u != v]))
                        def guarded(v):
                            return any(self.frag.roles[r].items[i].conds
                                       for r, i in self.nodes[v].members)
                        v = max(ready, key=lambda x: (unblocks(x), guarded(x), -x))
                elif prefer == "low":
                    v = min(ready, key=lambda x: min(m[0] for m in self.nodes[x].members or
                                                     [(0, 0)]))
                elif prefer == "high":
                    v = max(ready, key=lambda x: min(m[0] for m in self.nodes[x].members or
                                                     [(0, 0)]))
                else:
                    v = min(ready, key=lambda x: (self.nodes[x].kind != "loop", x))
                order.append(v)
                done.add(v)
            if tuple(order) not in seen:
                seen.add(tuple(order))
                yield order
        # then every other order, up to the limit
        count = 0

        def dfs(order, done):
            nonlocal count
            if count >= limit:
                return
            if len(order) == n:
                if tuple(order) not in seen:
                    seen.add(tuple(order))
                    count += 1
                    yield list(order)
                return
            for v in range(n):
                if v not in done and preds[v] <= done:
                    order.append(v)
                    done.add(v)
                    yield from dfs(order, done)
                    order.pop()
                    done.discard(v)
        yield from dfs([], set())

    def _barrier_use(self) -> tuple[list[set], list[set]]:
        """Per node: the barrier arrays its operation nodes wait on, and the ones any of its
        operations signal (arrive, copy, commit)."""
        waits, signals = [], []
        for node in self.nodes:
            w, s = set(), set()
            for r, i in node.members:
                item = self.frag.roles[r].items[i]
                for bop in item.ops:
                    if bop.op.barrier is None:
                        continue
                    if bop.op.kind in WAITS:
                        if node.kind == "op":
                            w.add(bop.op.barrier.alloc.name)
                    else:
                        s.add(bop.op.barrier.alloc.name)
            waits.append(w)
            signals.append(s)
        return waits, signals

    def rank_merges(self, node: Node, limit: int = 400) -> Iterator[dict]:
        """Interleavings of the operations of a node's members (each keeps its order)."""
        frag = self.frag
        if node.kind == "fork":
            ranks = {}
            for r, i in node.members:
                ranks[(r, i)] = [0 if frag.roles[r].items[i].kind == "fork" else 1]
            yield ranks
            return
        seqs = [(m, len(frag.roles[m[0]].items[m[1]].ops)) for m in node.members]
        if len(seqs) == 1:
            m, length = seqs[0]
            yield {m: list(range(length))}
            return
        results = []
        seen = set()

        def add(ranks) -> None:
            key = tuple(tuple(ranks[m]) for m, _ in seqs)
            if key not in seen:
                seen.add(key)
                results.append({m: list(ranks[m]) for m, _ in seqs})

        # interleavings, waits last among ready operations first
        count = 0

        def is_wait(m, k):
            op = frag.roles[m[0]].items[m[1]].ops[k].op
            return op.kind in WAITS

        def rec(pos, taken, ranks):
            nonlocal count
            if count >= limit:
                return
            if all(pos[j] == seqs[j][1] for j in range(len(seqs))):
                count += 1
                add(ranks)
                return
            ready = [j for j in range(len(seqs)) if pos[j] < seqs[j][1]]
            ready.sort(key=lambda j: (is_wait(seqs[j][0], pos[j]), j))
            for j in ready:
                m = seqs[j][0]
                ranks[m].append(taken)
                pos[j] += 1
                rec(pos, taken + 1, ranks)
                pos[j] -= 1
                ranks[m].pop()
        def pieces() -> None:
            # each member's iteration in one piece, members in every order (a cluster's
            # contributors, then its reducer)
            if len(seqs) <= 4:
                for perm in itertools.permutations(range(len(seqs))):
                    ranks, taken = {}, 0
                    for j in perm:
                        m, length = seqs[j]
                        ranks[m] = list(range(taken, taken + length))
                        taken += length
                    add(ranks)

        def lockstep() -> None:
            # SPMD rounds: every member's operations up to its next wait, then those waits
            # (blocks that all signal a semaphore, then all wait on it)
            ranks, taken, pos = {m: [] for m, _ in seqs}, 0, [0] * len(seqs)
            while any(pos[j] < seqs[j][1] for j in range(len(seqs))):
                for wait_round in (False, True):
                    for j, (m, length) in enumerate(seqs):
                        while pos[j] < length and is_wait(m, pos[j]) == wait_round:
                            ranks[m].append(taken)
                            taken, pos[j] = taken + 1, pos[j] + 1
                            if wait_round:
                                break
            add(ranks)

        # Blocks of a cluster hand whole iterations to each other (contributors, then the
        # reducer; each block's producer, then the consumers): their lockstep rounds and
        # pieces come first, before the hundreds of interleavings the candidate budget would
        # otherwise spend.
        if len({frag.roles[m[0]].block for m, _ in seqs}) > 1:
            lockstep()
            pieces()
        rec([0] * len(seqs), 0, {m: [] for m, _ in seqs})
        pieces()
        yield from results

    def candidates(self, limit: int = 3000) -> Iterator[Tau]:
        """Candidate orders, per alignment (at most `limit` each)."""
        for al in self.alignments:
            self._use(al)
            count = 0
            streams = (self._ranked(order, al) for order in self.orders())
            if len(self.frag.blocks) > 1:
                # A cluster's blocks make many node orders, most of them wrong (a block waits
                # on a cluster barrier before the others arrive): take the orders in turn
                # rather than every interleaving of the first one before the next.
                streams = _round_robin(list(streams))
            else:
                streams = itertools.chain.from_iterable(streams)
            for tau in streams:
                yield tau
                count += 1
                if count >= limit:
                    break

    def _ranked(self, order: list[int], al: Alignment) -> Iterator[Tau]:
        per_node = [list(self.rank_merges(self.nodes[v])) for v in order]
        for combo in itertools.product(*per_node):
            ranks = {}
            for d in combo:
                ranks.update(d)
            yield Tau(order, ranks, al.nodes, al.edges, dict(al.shifts))

    def apply(self, tau: Tau) -> None:
        if tau.nodes is not None:
            self.nodes, self.edges = tau.nodes, tau.edges
            self.shifts = tau.shifts
        for g, v in enumerate(tau.order):
            for r, i in self.nodes[v].members:
                item = self.frag.roles[r].items[i]
                item.group = g
                item.ranks = tau.ranks.get((r, i)) or [0] * max(1, len(item.ops))
                item.shift = tau.shifts.get((r, i), z3.IntVal(0)) if item.kind == "loop" else 0


def _round_robin(streams: list) -> Iterator:
    """The first item of every stream, then the second of every stream, and so on."""
    while streams:
        alive = []
        for it in streams:
            try:
                yield next(it)
            except StopIteration:
                continue
            alive.append(it)
        streams = alive


def _thread_key(role: Role) -> str:
    return str(z3.simplify(role.lo))


# ----------------------------------------------------------------------------------------------
# Concrete check of a tau candidate: the tau-ordered run of model/semantics.py
# ----------------------------------------------------------------------------------------------

def _legal_at_exit(sysm, v) -> bool:
    """A finding of the rewritten program that the kernel it stands for does not have: an open
    phase of a lowered named barrier (hw.py), a queue another projection closes (queue_tail.py)."""
    return legal_at_exit(sysm, v) or closed_at_exit(sysm, v)


class TauRun:
    """The agents of a concrete System annotated with the role items their instructions come
    from, to replay candidate orders on model/semantics.py."""

    def __init__(self, frag: "Fragment", system, values: Mapping[str, int]):
        self.frag = frag
        self.system = system
        self.values = values
        self.annotations = self._annotate()

    def _substitution(self) -> list:
        """The symbolic parameters and the grid position at this run's values."""
        frag = self.frag
        sub = [(frag.params[n], z3.IntVal(v)) for n, v in self.values.items()
               if n in frag.params and not z3.is_int_value(frag.params[n])]
        for g, v in self.system.grid_position.items():
            if g in frag.grid_vars:
                sub.append((frag.grid_vars[g], z3.IntVal(v)))
        return sub

    def _value(self, t) -> int:
        """A term over the parameters and the grid position at this run's values."""
        return evaluate(t, self._substitution())

    def _role_of(self, agent) -> int:
        sub = self._substitution()
        for r, role in enumerate(self.frag.roles):
            if role.block != agent.block or role.warp != agent.warp:
                continue
            lo, size = evaluate(role.lo, sub), evaluate(role.size, sub)
            if lo <= agent.thread < lo + size:
                return r
        raise Unsupported(f"agent {agent.name} belongs to no role")

    def _annotate(self):
        sysm = self.system
        k = self.frag.kernel
        env0 = {**sysm.params, **sysm.grid_position}
        out = [[] for _ in sysm.agents]
        index = {(a.block, a.thread, a.warp): i for i, a in enumerate(sysm.agents)}
        for a, agent in enumerate(sysm.agents):
            if agent.warp is not None:
                continue
            env = dict(env0)
            for axis, c in zip(self.frag.cluster_axes, agent.block):
                env[axis] = c
            env[k.thread_axis] = agent.thread
            env[k.warp_axis] = 0
            self.walk(k.body, env, a, None, out, index, agent)
        roles = [self._role_of(agent) for agent in sysm.agents]
        lookup = []
        for r, role in enumerate(self.frag.roles):
            table = {}
            for i, item in enumerate(role.items):
                if item.kind == "loop":
                    for b, bop in enumerate(item.body):
                        table[("op", id(bop.op))] = (i, b)
                elif item.kind == "op":
                    table[("op", id(item.op))] = (i, 0)
                else:
                    table[(item.kind, id(item.region))] = (i, 0)
            for twin, op in getattr(role, "twins", {}).items():   # ranges merged into the role
                table[("op", twin)] = table[("op", op)]
            lookup.append(table)
        ann = []
        for a, entries in enumerate(out):
            if len(entries) != len(sysm.programs[a]):
                raise Unsupported("internal: the tau walk disagrees with the unrolled program")
            r = roles[a]
            rows = []
            for key, iteration in entries:
                if key not in lookup[r]:
                    raise Unsupported("internal: an instruction has no role item")
                i, b = lookup[r][key]
                rows.append((r, i, b, iteration))
            ann.append(rows)
        return ann

    def walk(self, body, env, agent, region_warps, out, index, ag, iteration=None):
        from ...model.ir import evaluate
        k = self.frag.kernel
        for stmt in body:
            if isinstance(stmt, Op):
                out[agent].append((("op", id(stmt)), iteration))
            elif isinstance(stmt, Loop):
                trip = evaluate(stmt.trip, env)
                saved = env.get(stmt.var)
                for i in range(max(trip, 0)):
                    env[stmt.var] = i
                    self.walk(stmt.body, env, agent, region_warps, out, index, ag, i)
                if saved is None:
                    env.pop(stmt.var, None)
                else:
                    env[stmt.var] = saved
            elif isinstance(stmt, When):
                branch = stmt.then if evaluate(stmt.cond, env) else stmt.orelse
                self.walk(branch, env, agent, region_warps, out, index, ag, iteration)
            elif isinstance(stmt, WarpRegion):
                out[agent].append((("fork", id(stmt)), None))
                for w in range(1, k.num_warps):
                    wa = index[(ag.block, ag.thread, w)]
                    out[wa].append((("await", id(stmt)), None))
                    wenv = dict(env)
                    wenv[stmt.axis] = wenv[k.warp_axis] = w
                    self.walk(stmt.body, wenv, wa, None, out, index, ag, iteration)
                wenv = dict(env)
                wenv[stmt.axis] = wenv[k.warp_axis] = 0
                self.walk(stmt.body, wenv, agent, None, out, index, ag, iteration)
                out[agent].append((("join", id(stmt)), None))

    def check(self, search: TauSearch) -> str | None:
        """None when the tau-ordered run passes every wait and ends cleanly; else why not."""
        sysm = self.system
        frag = self.frag
        events = []
        shift_of = {}
        for a, rows in enumerate(self.annotations):
            for pc, (r, i, b, iteration) in enumerate(rows):
                item = frag.roles[r].items[i]
                keyed = item.kind == "loop"
                key = 0
                if keyed:
                    if (r, i) not in shift_of:
                        shift_of[(r, i)] = self._value(item.shift_term())
                    key = iteration + shift_of[(r, i)]
                events.append(((item.group, key, item.ranks[b], a, pc), a))
        events.sort()
        state = sysm.initial_state()
        A = sysm.n_agents

        def settle(state):
            moved = True
            while moved:
                moved = False
                for action in range(A, sysm.n_actions):
                    if sysm.enabled(state, action):
                        state, v = sysm.step(state, action)
                        if v is not None:
                            return state, v.code
                        moved = True
            return state, None

        for key, a in events:
            state, code = settle(state)
            if code:
                return f"{code} while landing"
            if not sysm.enabled(state, a):
                instr = sysm.current(state, a)
                what = sysm.sources[instr.src].text if instr is not None else "its end"
                return f"{sysm.agents[a].name} blocked at {what} at {dict(self.values)}"
            state, v = sysm.step(state, a)
            if v is not None:
                return f"{v.code} at {sysm.agents[a].name} at {dict(self.values)}"
            bad = [v for v in sysm.state_violations(state) if not _legal_at_exit(sysm, v)]
            if bad:
                return f"{bad[0].code} at {dict(self.values)}"
        state, code = settle(state)
        if code:
            return f"{code} at {dict(self.values)}"
        if not sysm.is_done(state):
            return f"not done at {dict(self.values)}"
        bad = [v for v in sysm.state_violations(state) if not _legal_at_exit(sysm, v)]
        return f"{bad[0].code} at exit at {dict(self.values)}" if bad else None


def tau_static_ok(frag: "Fragment", search: TauSearch, tau: Tau) -> bool:
    """Fork before every await of its region, join after everything the warps do in it."""
    group = {v: g for g, v in enumerate(tau.order)}
    for a, b in (tau.edges if tau.edges is not None else search.edges):
        if group[a] >= group[b]:
            return False
    return True


# ----------------------------------------------------------------------------------------------
# Classes and systems
# ----------------------------------------------------------------------------------------------
