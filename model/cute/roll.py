"""Loops rolled back from a warp's run, and runs at several values joined into one IR.

The interpreter runs an `scf.for` to its trip count, so a warp's events are the loop unrolled
(marked: `begin`, one `iteration` mark per iteration, `end`). `join` finds the one statement
list that gives each iteration's (or each run's) operations from an integer `t`: the
operations must be the same but for ring slots, parities, counts and bytes, each of which must
be one of these expressions of `t` at every point seen (never a guess on fewer):

- a ring slot of a barrier array of S barriers: `b + (t + c) % m`, m dividing S (a
  pipeline's full and empty barriers can be one array of 2m);
- a parity: `((t + c) // m + d) % 2`, m the period of the same operation's slot (the phase
  flips each lap), or `(t + d) % 2`, or a constant;
- anything else: a constant, affine, or affine clipped by a constant (pallas' `fit_1d`).

A loop whose first iterations (up to MAX_PEEL) differ from the others keeps them unrolled
before the loop of the rest; iterations that do not join otherwise stay unrolled: the IR is
then the concrete run, exact at these values. Within a loop `t` is the iteration number (the
IR loop variable, from 0, counted from the first rolled iteration); across runs it is a kernel
argument's value (translate.py: a trip count from a runtime argument).
"""

from __future__ import annotations

import dataclasses
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Sequence

from .. import primitives as K
from ..expr import mk
from ..ir import BarrierRef, Const, Expr, Loop, Op, Var, When, evaluate
from ..pallas.antiunify import fit_1d
from .counts import NoJoin, Scope, join_grid, join_memory, ring_size as _ring, \
    same_instruction


@dataclass(frozen=True)
class Iterations:
    """A loop of a warp's run: the events of each iteration (nested loops as Iterations)."""

    site: int
    loc: object
    bodies: tuple[tuple, ...]


def nest(events: Sequence) -> list:
    """The events with each marked loop turned into Iterations."""
    out: list = []
    stack: list[tuple[list, list, object]] = []   # (outer list, iterations, begin event)
    current = out
    for e in events:
        if e.kind != "loop":
            current.append(e)
        elif e.name == "begin":
            stack.append((current, [], e))
            current = None
        elif e.name == "iteration":
            outer, bodies, begin = stack[-1]
            bodies.append([])
            current = bodies[-1]
        else:
            outer, bodies, begin = stack.pop()
            outer.append(Iterations(begin.site, begin.loc, tuple(tuple(b) for b in bodies)))
            current = outer
    return out


def _fit_slot(ts, ys, t: Expr, ring: int) -> tuple[Expr, int, int, int] | None:
    """`b + (a*t + c) % m` for m dividing the array's size (the shortest period first: a
    pipeline's full and empty barriers may share one array of 2*S), with c, m and the stride
    a: 1 first, then the others below m (a consumer taking two stages an iteration waits on
    `(2*t) % S` and `(2*t + 1) % S`). Solved, not searched (a buffer's element ring has
    thousands of slots): the first point fixes c for each base b, and the first two fix the
    strides a may take; the answer is the first of the enumeration in `_slot_order`."""
    ts, ys = list(ts), list(ys)
    for m in (m for m in range(1, ring + 1) if ring % m == 0):
        if ys and max(ys) - min(ys) >= m:
            continue                    # (a*t + c) % m spans less than m
        for a in range(1, max(m, 2)):
            if len(ts) > 1 and (a * (ts[1] - ts[0]) - (ys[1] - ys[0])) % m:
                continue
            for b in _slot_bases(ys, ring, m, a):
                c = (ys[0] - b - a * ts[0]) % m if ys else 0
                if all(b + (a * x + c) % m == y for x, y in zip(ts, ys)):
                    step = mk("*", Const(a), t) if a > 1 else t
                    walk = mk("%", mk("+", step, Const(c)), Const(m)) if m > 1 else Const(0)
                    return mk("+", walk, Const(b)), c, m, a
    return None


def _slot_bases(ys, ring: int, m: int, a: int):
    """The bases b a fit may have, in the order the fit prefers them: b in 0..ring-m with every
    y - b in 0..m-1; ascending for stride 1, by b % m first with a stride (a stage pair's second
    slot of the empty half is `(2*t + 1) % m + S`, not `(2*t + 2) % m + (S - 1)`)."""
    lo = max(0, max(ys) - m + 1) if ys else 0
    hi = min(ring - m, min(ys)) if ys else ring - m
    bases = range(lo, hi + 1)
    return bases if a == 1 else sorted(bases, key=lambda b: (b % m, b))


def _fit_parity(ts, ys, t: Expr, ring: int, offset: int | None,
                stride: int = 1) -> Expr | None:
    """The lap form first, with the slot's offset, period and stride when the op has them:
    the same kernel run for fewer iterations than a lap (a constant parity) then gets the form
    a longer run has."""
    for size in dict.fromkeys((ring, 1)):
        a = stride if size == ring else 1
        offsets = [offset] if offset is not None and size == ring else []
        for c in offsets + [c for c in range(size) if c != offset]:
            for d in (0, 1):
                if all(((a * x + c) // size + d) % 2 == y for x, y in zip(ts, ys)):
                    step = mk("*", Const(a), t) if a > 1 else t
                    lap = mk("//", mk("+", step, Const(c)), Const(size)) if size > 1 else \
                        mk("+", step, Const(c))
                    return mk("%", mk("+", lap, Const(d)), Const(2))
    return None


def _values(exprs: Sequence[Expr]) -> list[int] | None:
    try:
        return [evaluate(e, {}) for e in exprs]
    except Exception:       # an expression with free names: not a constant
        return None


def _assignments(ranges: dict[str, int]):
    import itertools
    names = sorted(ranges)
    for values in itertools.product(*(range(ranges[n]) for n in names)):
        yield dict(zip(names, values))


MAX_AGREE = 4096        # loop-variable assignments compared before two forms are told apart


def _agreeing(exprs: Sequence[Expr], ranges: Sequence[dict]) -> Expr | None:
    """Runs whose loops chose different forms for one field (a short run's constant parity,
    a long run's lap form): the form of the run with the most iterations, if it gives every
    run's values at every iteration that run has."""
    sizes = []
    for r in ranges:
        n = 1
        for trip in r.values():
            n *= max(trip, 0)
        sizes.append(n)
    if sum(sizes) > MAX_AGREE:
        return None
    pick = exprs[max(range(len(exprs)), key=lambda k: sizes[k])]
    try:
        for e, r in zip(exprs, ranges):
            if any(evaluate(pick, env) != evaluate(e, env) for env in _assignments(r)):
                return None
    except Exception:       # a name no loop binds
        return None
    return pick


def _expr(exprs: Sequence[Expr], ts, t: Expr, ranges=None) -> Expr:
    """A count, byte count or trip count: the same everywhere, or fit_1d's affine forms."""
    if all(repr(e) == repr(exprs[0]) for e in exprs):
        return exprs[0]
    ys = _values(exprs)
    if ys is None and ranges is not None:
        agreed = _agreeing(exprs, ranges)
        if agreed is not None:
            return agreed
    fitted = fit_1d(ts, ys, t) if ys is not None and len(set(ts)) >= 3 else None
    if fitted is None and ys is not None and len(set(ts)) == 2 and ONE_RUN.get():
        fitted = _through_two(ts, ys, t)
    if fitted is None:
        raise NoJoin(f"{exprs[0]!r} and {exprs[-1]!r} at {list(ts)}")
    return fitted


# Set while the iterations of one run's loop are joined: `t` is then the iteration number and
# takes no value but those seen, so a line through two iterations is exact, not a guess (the
# runs' join checks it against longer runs, _agreeing).
ONE_RUN: ContextVar[bool] = ContextVar("ONE_RUN", default=False)


def _through_two(ts, ys, t: Expr) -> Expr | None:
    (x1, y1), (x2, y2) = sorted(set(zip(ts, ys)))[:2]
    if len(set(zip(ts, ys))) != 2 or (y2 - y1) % (x2 - x1):
        return None
    a = (y2 - y1) // (x2 - x1)
    return mk("+", mk("*", Const(a), t), Const(y1 - a * x1))


def _ring_exprs(slots: Sequence[Expr], parities: Sequence[Expr] | None, ts, t: Expr,
                ring: int, ranges=None) -> tuple[Expr | None, Expr | None]:
    """A ring slot and a parity, as functions of t: in the ring forms whenever they fit (a
    constant slot of a ring of one run is the ring form of another), else as _expr."""
    slot_values = _values(slots) if slots else None
    offset = None
    period = ring
    stride = 1
    slot = None
    if slots and slot_values is None and ranges is not None and ring > 1:
        moved = _moving_ring(slots, parities, ts, t, ring, ranges)
        if moved is not None:
            return moved
    varying = (slots and slot_values is None) or \
        (parities is not None and _values(parities) is None)
    if varying and ranges is not None and any(ranges):
        counted = _counted_ring(slots, parities, ts, t, ring, ranges)
        if counted is not None:
            return counted
    if slots:
        fitted = _fit_slot(ts, slot_values, t, ring) if slot_values is not None and ring > 1 \
            else None
        slot, offset, period, stride = fitted if fitted else \
            (_expr(slots, ts, t, ranges), None, ring, 1)
    parity = None
    if parities is not None:
        ys = _values(parities)
        parity = _fit_parity(ts, ys, t, period, offset, stride) if ys is not None else None
        if parity is None:
            parity = _expr(parities, ts, t, ranges)
    return slot, parity


def _counted_ring(slots, parities, ts, t: Expr, ring: int, ranges):
    """An inner loop's ring slot and parity across the iterations t of the loop around it (a
    k loop inside a persistent kernel's tile loop): the ring advances once per inner iteration
    v, so both are functions of the count n = a*t + v, a the inner trip count when it is the
    same in every t: the slot `b + (n + c) % m` (m dividing the array), the parity
    `((n + c) // m + d) % 2`, checked at every (t, v) seen. Only a multiplier that agrees with
    every point is taken; the inner trip count is tried first, then the residues below 2 * m
    (the parity sees n only modulo 2 * m, so these are the same function at every point)."""
    names = {name for r in ranges for name in r}
    if len(names) != 1:
        return None
    [v] = names
    points = []
    try:
        for k, (x, r) in enumerate(zip(ts, ranges)):
            for j in range(r.get(v, 0)):
                points.append((x, j, evaluate(slots[k], {v: j}) if slots else 0,
                               None if parities is None else evaluate(parities[k], {v: j})))
    except Exception:       # a name no loop binds
        return None
    if not points:
        return None
    trips = {r.get(v) for r in ranges}
    size = ring if slots else 1
    firsts = [trips.pop()] if len(trips) == 1 else []
    for a in dict.fromkeys(firsts + list(range(2 * size))):
        for m in (m for m in range(1, size + 1) if size % m == 0):
            for b in range(size - m + 1):
                for c in range(m):
                    if any(b + (a * x + j + c) % m != y for x, j, y, _ in points):
                        continue
                    for d in (0, 1):
                        if parities is not None and any(
                                ((a * x + j + c) // m + d) % 2 != p for x, j, _, p in points):
                            continue
                        n = mk("+", mk("+", mk("*", Const(a), t), Var(v)), Const(c))
                        slot = mk("+", mk("%", n, Const(m)), Const(b)) if slots else None
                        parity = None if parities is None else \
                            mk("%", mk("+", mk("//", n, Const(m)), Const(d)), Const(2))
                        return slot, parity
    return None


def _offset_of(e: Expr) -> tuple[str, int, int, int] | None:
    """(i, c, m, b) when e is `b + (i + c) % m` (b may be absent, c may be 0)."""
    from ..ir import BinOp
    base = 0
    if isinstance(e, BinOp) and e.op == "+" and isinstance(e.rhs, Const):
        e, base = e.lhs, e.rhs.value
    if not (isinstance(e, BinOp) and e.op == "%" and isinstance(e.rhs, Const)):
        return None
    inner, m = e.lhs, e.rhs.value
    if isinstance(inner, Var):
        return inner.name, 0, m, base
    if isinstance(inner, BinOp) and inner.op == "+" and isinstance(inner.lhs, Var) \
            and isinstance(inner.rhs, Const):
        return inner.lhs.name, inner.rhs.value, m, base
    return None


def _moving_ring(slots, parities, ts, t: Expr, ring: int, ranges):
    """Runs whose loop walks the ring from a slot that moves with t (a producer_tail after a
    loop of t iterations: `b + (j + c) % m` with c = (t + c0) % m in each run): the slot
    `b + (j + t + c0) % m` and the parity `((j + t + c0) // m + d) % 2`, if they give every
    run's values at every iteration it has."""
    forms = [_offset_of(e) for e in slots]
    if any(f is None for f in forms) or len({(f[0], f[2], f[3]) for f in forms}) != 1:
        return None
    name, _, m, base = forms[0]
    var = Var(name)
    c0s = {(c - x) % m for (_, c, _, _), x in zip(forms, ts)}
    if len(c0s) != 1:
        return None
    start = mk("+", mk("+", var, t), Const(c0s.pop()))
    slot = mk("+", mk("%", start, Const(m)), Const(base))
    candidates = [None] if parities is None else [
        mk("%", mk("+", mk("//", start, Const(m)), Const(d)), Const(2)) for d in (0, 1)]

    def agrees(pick, exprs) -> bool:
        try:
            return all(evaluate(pick, dict(env, **{t.name: x})) == evaluate(e, env)
                       for e, r, x in zip(exprs, ranges, ts) for env in _assignments(r))
        except Exception:
            return False
    if not agrees(slot, slots):
        return None
    for parity in candidates:
        if parity is None or agrees(parity, parities):
            return slot, parity
    return None


def _op(ops: Sequence[Op], ts, t: Expr, ranges) -> Op:
    first = same_instruction(ops)
    if first.barrier is None and all(op is first for op in ops):
        return first        # one instruction alike everywhere (a bar.sync): kept as it is, so
        #                     blocks of a grid that run it stay at one instruction
    ring = _ring(first.barrier)
    barrier = first.barrier
    one_index = barrier is not None and len(barrier.index) == 1
    slots = [op.barrier.index[0] for op in ops] if one_index else []
    parities = None if first.parity is None else [op.parity for op in ops]
    slot, parity = _ring_exprs(slots, parities, ts, t, ring, ranges)
    if one_index:
        barrier = BarrierRef(barrier.alloc, (slot,), barrier.block)
    elif barrier is not None and barrier.index:
        barrier = BarrierRef(barrier.alloc, tuple(
            _expr([op.barrier.index[k] for op in ops], ts, t, ranges)
            for k in range(len(barrier.index))), barrier.block)
    return dataclasses.replace(first, barrier=barrier, parity=parity,
                               count=_expr([op.count for op in ops], ts, t, ranges),
                               bytes=_expr([op.bytes for op in ops], ts, t, ranges),
                               reads=_memory([op.reads for op in ops], ts, t, ranges),
                               writes=_memory([op.writes for op in ops], ts, t, ranges))


def _memory(columns: Sequence[tuple], ts, t: Expr, ranges) -> tuple:
    """The shared-memory regions of joined ops (counts.join_memory), with this module's fits:
    a slot as a strided or plain ring slot, a run's start as the size times a ring slot."""
    def slot(slots, ring):
        found = _strided_slot(slots, ts, t, ring)
        return found if found is not None else _ring_exprs(slots, None, ts, t, ring, ranges)[0]
    return join_memory(columns, slot, lambda exprs: _expr(exprs, ts, t, ranges),
                       lambda starts, size, ring: _start(starts, size, ts, t, ring, ranges))


def _strided_slot(slots, ts, t: Expr, ring: int) -> Expr | None:
    """`b + z * ((t + c) % m)`: one slot of each group of z, walking a ring of ring // z
    groups (a warp's rows of each stage), for constant slots that are not a plain ring."""
    ys = _values(slots)
    if ys is None or len(set(ys)) < 2:
        return None
    for z in range(2, ring + 1):
        if ring % z:
            continue
        b = min(ys) % z
        if any((y - b) % z for y in ys):
            continue
        fitted = _fit_slot(ts, [(y - b) // z for y in ys], t, ring // z)
        if fitted is not None:
            return mk("+", mk("*", fitted[0], Const(z)), Const(b))
    return None


def _start(starts, size: Expr, ts, t: Expr, ring: int, ranges) -> Expr:
    """A run's start: `size * slot` for a ring slot of runs of that size, else _expr."""
    ys, width = _values(starts), _values([size])
    if ys is not None and width and width[0] > 0 and all(y % width[0] == 0 for y in ys) \
            and ring % width[0] == 0:
        z = width[0]
        slot, _ = _ring_exprs([Const(y // z) for y in ys], None, ts, t, ring // z, ranges)
        return mk("*", slot, Const(z))
    return _expr(starts, ts, t, ranges)


def join(seqs: Sequence[Sequence], ts: Sequence[int], t: Expr, ranges=None,
         made: dict | None = None) -> tuple:
    """One statement list that is seqs[k] at t = ts[k], or NoJoin. `ranges`: per sequence, the
    trip count of each loop around it (filled in while descending). `made`: the joined op of
    each column of ops already joined, so an instruction two roles share (a named barrier both
    reach at one line) stays one op."""
    ranges = ranges if ranges is not None else [{} for _ in seqs]
    made = made if made is not None else {}
    first = seqs[0]
    if any(len(s) != len(first) for s in seqs):
        raise NoJoin("a different number of operations")
    out = []
    for k, stmt in enumerate(first):
        column = [s[k] for s in seqs]
        if isinstance(stmt, Op) and all(isinstance(s, Op) for s in column):
            key = (tuple(map(id, column)), tuple(tuple(sorted(r.items())) for r in ranges))
            if key not in made:
                made[key] = _op(column, ts, t, ranges)
            out.append(made[key])
        elif isinstance(stmt, Loop) and all(isinstance(s, Loop) and s.var == stmt.var
                                            for s in column):
            trips = _values([s.trip for s in column])
            inner = None if trips is None else \
                [dict(r, **{stmt.var: n}) for r, n in zip(ranges, trips)]
            # a run where the loop has no iteration (`range(1, k)` at k = 1) says nothing of
            # its body: the body is joined over the others, the trip count over all
            live = [k for k in range(len(column)) if trips is None or trips[k] > 0]
            body = () if not live else join(
                [column[k].body for k in live], [ts[k] for k in live], t,
                None if inner is None else [inner[k] for k in live], made)
            out.append(Loop(stmt.var, _expr([s.trip for s in column], ts, t, ranges),
                            body, stmt.loc))
        elif isinstance(stmt, When) and all(isinstance(s, When) and repr(s.cond) == repr(stmt.cond)
                                            for s in column):
            out.append(When(stmt.cond, join([s.then for s in column], ts, t, ranges, made),
                            join([s.orelse for s in column], ts, t, ranges, made), stmt.loc))
        elif all(s is stmt for s in column):
            out.append(stmt)
        else:
            raise NoJoin(f"{type(stmt).__name__} statements that differ")
    return tuple(out)


ROLLED_KINDS = (K.WAIT_PARITY, K.ARRIVE, K.ARRIVE_EXPECT_TX, K.EXPECT_TX, K.TMA_LOAD,
                K.TCGEN05_COMMIT_ARRIVE, K.CP_ASYNC_ARRIVE)


def roll_runs(stmts: Sequence, var: str) -> tuple:
    """Consecutive mbarrier operations of one kind at one line (a loop the Python unrolled
    while tracing, such as a producer_tail's wait on every stage) as one Loop when they join;
    a lone one, or a run that does not join, as it is."""
    out: list = []
    k = 0
    while k < len(stmts):
        first = stmts[k]
        end = k + 1
        if isinstance(first, Op) and first.kind in ROLLED_KINDS and first.barrier is not None:
            while end < len(stmts) and isinstance(stmts[end], Op) and \
                    (stmts[end].kind, stmts[end].loc) == (first.kind, first.loc) and \
                    stmts[end].barrier is not None and \
                    stmts[end].barrier.alloc is first.barrier.alloc:
                end += 1
        if end - k >= 2:
            out.extend(roll([(s,) for s in stmts[k:end]], var, first.loc))
        else:
            out.append(first)
        k = end
    return tuple(out)


# The iterations of each loop (by its MLIR op) kept unrolled before and after the rolled ones
# while several runs of a kernel are read (family.py): set by the longest run, which reads them
# off its iterations, and used by the shorter runs, whose few iterations would not show them.
PEELS: ContextVar[dict | None] = ContextVar("PEELS", default=None)
MAX_PEEL = 2            # first iterations that may differ from the rest (a pipeline's prologue)
MAX_DRAIN = 2           # last iterations that may differ (no peek past the last K tile)


def _peels(least: tuple[int, int]) -> list[tuple[int, int]]:
    """(first, last) iterations kept unrolled, fewest first, from `least` on."""
    pairs = [(p, q) for p in range(least[0], MAX_PEEL + 1) for q in range(least[1], MAX_DRAIN + 1)]
    return sorted(pairs, key=lambda pq: (pq[0] + pq[1], pq[1]))


def roll(bodies: Sequence[tuple], var: str, loc, site: object = None) -> tuple:
    """A loop's iterations (each a statement tuple) as one Loop, or unrolled if they do not
    join. A loop whose first p iterations differ from the rest (a consumer that releases the
    previous stage, so its first iteration releases nothing) is those p iterations as they
    are, then one Loop of the rest, its variable counting from the first rolled iteration; a
    loop whose last q iterations differ (a peek at the next stage while one is left: none in
    the last iteration) is the Loop, then those q iterations as they are. A run with fewer
    iterations than the peels the longest run took has another shape: it does not join."""
    if not bodies:      # no iteration in this run: kept for the join of runs, then dropped
        return (Loop(var, Const(0), (), loc),)
    if not any(bodies):
        return ()
    peels = PEELS.get()
    least = peels.get(site, (0, 0)) if peels is not None and site is not None else (0, 0)
    for p, q in _peels(least):
        prologue = tuple(s for b in bodies[:p] for s in b)
        if len(bodies) < p + q:     # fewer iterations than the longest run peeled
            return tuple(s for b in bodies for s in b) + (Loop(var, Const(0), (), loc),)
        rest = bodies[p:len(bodies) - q]
        drain = tuple(s for b in bodies[len(bodies) - q:] for s in b)
        if not rest:
            body: tuple | None = ()
        else:
            token = ONE_RUN.set(True)
            try:
                body = join(rest, list(range(len(rest))), Var(var))
            except NoJoin:
                body = _nested(rest, var)
            finally:
                ONE_RUN.reset(token)
        if body is not None:
            if peels is not None and site is not None and (p, q) != least:
                peels[site] = (p, q)
            return prologue + (Loop(var, Const(len(rest)), body, loc),) + drain
    return tuple(s for b in bodies for s in b)


def _nested(bodies: Sequence[tuple], var: str) -> tuple | None:
    """Iterations holding loops of several levels whose ring position runs on across all of
    them (`i0 * K * J + i1 * J + i2`, which the fits above in one inner variable miss): the
    running-count fits of counts.py, with this loop's variable as the value of each body."""
    if not any(isinstance(s, Loop) for b in bodies for s in b):
        return None
    try:
        return join_grid(bodies, Scope([{var: i} for i in range(len(bodies))], [var]))
    except NoJoin:
        return None
