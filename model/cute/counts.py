"""Runs at a grid of values of several runtime counts, joined into one IR.

A persistent GEMM has two counts set at run time: its tile count (a tile scheduler's loop) and
its K-block count (the mainloop inside). Its `PipelineState`s advance across both loops, so the
ring slot of a K step is `(t * k_tiles + kk) % stages`: a product of a loop variable and a
parameter, which roll.py's fits in one value do not express. family.py runs the kernel at every
point of a small grid of values (each run's loops rolled by roll.py, so each run is exact at its
values) and `join_grid` finds the one statement list giving every run, where every varying field
is one of these functions of the parameters and the loop variables around it, checked at every
run and every iteration (never a guess on fewer points):

- a count, byte count, trip count or index: a function of one variable in fit_1d's forms
  (constant, affine, affine clipped by a constant), or a multilinear polynomial in the
  variables with integer coefficients (`tiles * k_tiles`, `i0 + 1`);
- a ring slot of an array of S barriers: `n % m + b` (m dividing S), with its parity
  `(n // m + d) % 2`, where the running count n is a multilinear polynomial in the variables
  taken modulo 2m (the slot and parity see n only modulo 2m): `i0 * k_tiles + i1` for a K step,
  `tiles * k_tiles + j0` for the producer tail after both loops.

A multilinear polynomial (each variable of degree at most one in each term) is read off a cube
of runs and iterations by finite differences and then checked at every point; a field with no
such form makes the join fail (NoJoin), and the loops stay BP190.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Mapping, Sequence

from ..expr import mk, substitute
from ..ir import BarrierRef, Const, Expr, Loop, MemRef, Op, Slice, Var, When, evaluate
from ..pallas.antiunify import fit_1d

class NoJoin(Exception):
    """The runs differ in more than the expressions a join fits (here or in roll.py)."""


def ring_size(ref: BarrierRef | None) -> int:
    """The number of barriers of the array a reference indexes (1: a single one)."""
    if ref is None or not ref.index:
        return 1
    size = ref.alloc.shape[0]
    return size.value if isinstance(size, Const) else 1


MAX_VARIABLES = 6       # a cube of 2**6 corners; deeper nests of symbolic counts are refused
MAX_POINTS = 20_000     # points a field is checked at


# ----------------------------------------------------------------------------------------------
# multilinear polynomials: a cube of points, finite differences, a check at every point
# ----------------------------------------------------------------------------------------------

Point = tuple[Mapping[str, int], int]


def _cube_base(points: Sequence[Point], names: Sequence[str]) -> dict | None:
    """A base value per variable such that every corner `base + 1_U` (U a set of variables)
    is a point: the smallest in the order of the points' values."""
    seen = {tuple(env[n] for n in names) for env, _ in points}
    choices = []
    for k, n in enumerate(names):
        values = sorted({key[k] for key in seen})
        choices.append([v for v in values if v + 1 in values][:4])
    for base in itertools.product(*choices):
        if all(tuple(b + (k in corner) for k, b in enumerate(base)) in seen
               for r in range(len(names) + 1) for corner in itertools.combinations(
                   range(len(names)), r)):
            return dict(zip(names, base))
    return None


def multilinear(points: Sequence[Point], names: Sequence[str],
                modulus: int | None = None) -> dict[tuple[str, ...], int] | None:
    """Coefficients {monomial: a} of the multilinear polynomial in `names` that gives every
    point's value (modulo `modulus` if given, coefficients then in [0, modulus)), or None."""
    names = list(names)
    if len(names) > MAX_VARIABLES or len(points) > MAX_POINTS:
        return None
    value: dict[tuple, int] = {}
    for env, y in points:
        key = tuple(env[n] for n in names)
        if value.setdefault(key, y) != y:
            return None         # one point, two values: no function of these variables
    base = _cube_base(points, names)
    if base is None:
        return None
    b = [base[n] for n in names]
    idx = range(len(names))
    subsets = [frozenset(c) for r in range(len(names) + 1) for c in itertools.combinations(idx, r)]

    def at(corner: frozenset) -> int:
        return value[tuple(b[k] + (k in corner) for k in idx)]
    # Q(x - base): the coefficient of each monomial of the shifted variables
    shifted = {s: sum((-1) ** (len(s) - len(u)) * at(u) for u in subsets if u <= s)
               for s in subsets}
    # P(x) = Q(x - base), expanded: a_U = sum over S >= U of c_S * prod_{S \ U} (-b)
    coeffs: dict[frozenset, int] = {}
    for u in subsets:
        total = 0
        for s, c in shifted.items():
            if c and u <= s:
                term = c
                for k in s - u:
                    term *= -b[k]
                total += term
        if modulus is not None:
            total %= modulus
        if total:
            coeffs[u] = total
    poly = {tuple(names[k] for k in sorted(u)): a for u, a in coeffs.items()}
    for env, y in points:
        got = sum(a * _product(env, mono) for mono, a in poly.items())
        if (got - y) % modulus if modulus is not None else got != y:
            return None
    return poly


def _product(env: Mapping[str, int], mono: tuple[str, ...]) -> int:
    out = 1
    for n in mono:
        out *= env[n]
    return out


def polynomial_expr(poly: Mapping[tuple[str, ...], int]) -> Expr:
    """The polynomial as an IR expression: terms of higher degree first, each a product in
    the order of its variables (loop variables, then parameters in their order)."""
    out: Expr = Const(0)
    for mono in sorted(poly, key=lambda m: (-len(m), m)):
        if not mono:
            continue
        term: Expr = Var(mono[0])
        for n in mono[1:]:
            term = mk("*", term, Var(n))
        if poly[mono] != 1:
            term = mk("*", Const(poly[mono]), term)
        out = term if isinstance(out, Const) and out.value == 0 else mk("+", out, term)
    return mk("+", out, Const(poly.get((), 0)))


# ----------------------------------------------------------------------------------------------
# fields
# ----------------------------------------------------------------------------------------------

class Scope:
    """The runs' parameter values and, per run, the trip count of each loop around."""

    def __init__(self, envs: Sequence[Mapping[str, int]], order: Sequence[str],
                 ranges: Sequence[Mapping[str, int]] | None = None,
                 loops: Sequence[str] = (), strides: Sequence[int] = ()):
        self.envs = list(envs)
        self.ranges = list(ranges) if ranges is not None else [{} for _ in envs]
        self.order = list(order)            # parameters, in the order of their products
        self.loops = list(loops)            # loop variables, outermost first
        self.strides = tuple(strides)       # a grid's sizes its blocks stride a count by

    def inside(self, var: str, trips: Sequence[int]) -> "Scope":
        return Scope(self.envs, self.order,
                     [dict(r, **{var: n}) for r, n in zip(self.ranges, trips)],
                     self.loops + [var], self.strides)

    def only(self, runs: Sequence[int]) -> "Scope":
        return Scope([self.envs[k] for k in runs], self.order,
                     [self.ranges[k] for k in runs], self.loops, self.strides)

    def quotients(self):
        """This scope with one parameter p read as the floor quotient `(p + c) // m`, m a
        stride of the grid: a block's walk count (module doc), with the quotient."""
        for p in self.order:
            for m in self.strides:
                for c in range(m):
                    q = mk("//", mk("+", Var(p), Const(c)), Const(m)) if c else \
                        mk("//", Var(p), Const(m))
                    yield Scope([dict(env, **{p: (env[p] + c) // m}) for env in self.envs],
                                self.order, self.ranges, self.loops), p, q

    @property
    def names(self) -> list[str]:
        return self.loops + self.order

    def points(self, exprs: Sequence[Expr]) -> list[Point]:
        """(every variable's value, the expression's value) at each iteration of each run."""
        out: list[Point] = []
        for e, env, r in zip(exprs, self.envs, self.ranges):
            names = list(r)
            for values in itertools.product(*(range(r[n]) for n in names)):
                at = dict(zip(names, values))
                out.append(({**env, **at}, evaluate(e, at)))
                if len(out) > MAX_POINTS:
                    raise NoJoin("too many points to check a field at")
        return out


def _used(points: Sequence[Point], names: Sequence[str]) -> list[str]:
    """The variables the values depend on (one that never changes a value at fixed others is
    left out: a smaller cube)."""
    keep = []
    for n in names:
        groups: dict[tuple, set] = {}
        for env, y in points:
            groups.setdefault(tuple(env[m] for m in names if m != n), set()).add(y)
        if any(len(ys) > 1 for ys in groups.values()):
            keep.append(n)
    return keep


def fit_value(exprs: Sequence[Expr], scope: Scope) -> Expr:
    """A count, byte count, trip count or index at every run and iteration (module doc); with
    a grid's strides, also one of those forms of a block's walk count (module doc)."""
    try:
        return _fit_value(exprs, scope)
    except NoJoin:
        for inner, p, q in scope.quotients():
            try:
                return substitute(_fit_value(exprs, inner), {p: q})
            except NoJoin:
                continue
        raise


def _fit_value(exprs: Sequence[Expr], scope: Scope) -> Expr:
    if all(repr(e) == repr(exprs[0]) for e in exprs) and not _reads(exprs[0], scope.order):
        return exprs[0]
    try:
        points = scope.points(exprs)
    except NoJoin:
        raise
    except Exception:       # a name no loop binds
        raise NoJoin(f"{exprs[0]!r} reads a value no loop or parameter gives") from None
    used = _used(points, scope.names)
    if not used:
        return Const(points[0][1])
    if len(used) == 1:
        [n] = used
        pairs = sorted({(env[n], y) for env, y in points})
        fitted = fit_1d([v for v, _ in pairs], [y for _, y in pairs], Var(n))
        if fitted is not None:
            return fitted
    poly = multilinear(points, [n for n in scope.names if n in used])
    if poly is None:
        raise NoJoin(f"{exprs[0]!r} and {exprs[-1]!r}: no form in {', '.join(used)}")
    return polynomial_expr(poly)


def _reads(e: Expr, names: Sequence[str]) -> bool:
    from ..ir import free_vars
    return bool(free_vars(e) & set(names))


def fit_ring(slots: Sequence[Expr] | None, parities: Sequence[Expr] | None, ring: int,
             scope: Scope) -> tuple[Expr | None, Expr | None]:
    """A ring slot `n % m + b` and parity `(n // m + d) % 2`, n a multilinear polynomial
    (module doc); a field alone (a parity on a single barrier) with m = 1. With a grid's
    strides, n may be one of a block's walk count (a producer tail after a walk)."""
    try:
        return _fit_ring(slots, parities, ring, scope)
    except NoJoin:
        for inner, p, q in scope.quotients():
            try:
                slot, parity = _fit_ring(slots, parities, ring, inner)
            except NoJoin:
                continue
            return tuple(None if e is None else substitute(e, {p: q}) for e in (slot, parity))
        raise


def _fit_ring(slots: Sequence[Expr] | None, parities: Sequence[Expr] | None, ring: int,
              scope: Scope) -> tuple[Expr | None, Expr | None]:
    try:
        slot_points = scope.points(slots) if slots else None
        parity_points = scope.points(parities) if parities is not None else None
    except NoJoin:
        raise
    except Exception:
        raise NoJoin("a ring slot or parity reads a value no loop or parameter gives") from None
    size = ring if slots else 1
    envs = [env for env, _ in (slot_points or parity_points)]
    for m in (m for m in range(1, size + 1) if size % m == 0):
        for b in range(size - m + 1):
            if slot_points is not None and any(not b <= y < b + m for _, y in slot_points):
                continue
            for d in ((0, 1) if parity_points is not None else (0,)):
                residues = []
                for k, env in enumerate(envs):
                    r = slot_points[k][1] - b if slot_points is not None else 0
                    if parity_points is not None:
                        r += m * ((parity_points[k][1] - d) % 2)
                    residues.append((env, r))
                modulus = 2 * m if parity_points is not None else m
                used = _used(residues, scope.names)
                poly = multilinear(residues, [n for n in scope.names if n in used], modulus)
                if poly is None:
                    continue
                if parity_points is not None and poly.get((), 0) >= m:
                    # a lap ahead is the other parity: the constant below m, d flipped
                    poly = {**poly, (): poly[()] - m}
                    d_out = 1 - d
                else:
                    d_out = d
                n = polynomial_expr(poly)
                slot = None if slot_points is None else \
                    (Const(b) if m == 1 else mk("+", mk("%", n, Const(m)), Const(b)))
                parity = None if parity_points is None else \
                    mk("%", mk("+", mk("//", n, Const(m)) if m > 1 else n, Const(d_out)),
                       Const(2))
                return slot, parity
    raise NoJoin("a ring slot or parity with no running-count form")


# ----------------------------------------------------------------------------------------------
# the statement lists
# ----------------------------------------------------------------------------------------------

def _op(ops: Sequence[Op], scope: Scope) -> Op:
    try:
        return _fit_op(ops, scope)
    except NoJoin as e:     # the line whose pipeline state has no form, for the note
        where = f" (line {ops[0].loc.line})" if ops[0].loc and ops[0].loc.line else ""
        raise NoJoin(f"{ops[0].kind}{where}: {e}") from None


def same_instruction(ops: Sequence[Op]) -> Op:
    """The first of ops that are one instruction (same kind, line, barrier array) in every run,
    or NoJoin: only their slots, parities, counts and bytes may differ."""
    first = ops[0]
    for op in ops[1:]:
        if (op.kind, op.name, op.aligned, op.loc, repr(op.bar_id)) != \
                (first.kind, first.name, first.aligned, first.loc, repr(first.bar_id)):
            raise NoJoin(f"{first.describe()} and {op.describe()}")
        if (op.barrier is None) != (first.barrier is None) or (
                op.barrier is not None and op.barrier.alloc is not first.barrier.alloc):
            raise NoJoin(f"{first.describe()} and {op.describe()} on different barriers")
    return first


def _fit_op(ops: Sequence[Op], scope: Scope) -> Op:
    first = same_instruction(ops)
    barrier = first.barrier
    one_index = barrier is not None and len(barrier.index) == 1
    slots = [op.barrier.index[0] for op in ops] if one_index else None
    parities = None if first.parity is None else [op.parity for op in ops]
    slot, parity = (None, None)
    if slots is not None or parities is not None:
        slot, parity = fit_ring(slots, parities, ring_size(barrier), scope)
    if one_index:
        barrier = BarrierRef(barrier.alloc, (slot,), barrier.block)
    elif barrier is not None and barrier.index:
        barrier = BarrierRef(barrier.alloc, tuple(
            fit_value([op.barrier.index[k] for op in ops], scope)
            for k in range(len(barrier.index))), barrier.block)
    return dataclasses.replace(first, barrier=barrier, parity=parity,
                               count=fit_value([op.count for op in ops], scope),
                               bytes=fit_value([op.bytes for op in ops], scope),
                               reads=_fit_memory([op.reads for op in ops], scope),
                               writes=_fit_memory([op.writes for op in ops], scope))


def join_memory(columns: Sequence[tuple], slot, value, start) -> tuple:
    """The shared-memory regions of joined ops, each field fitted by the caller's fits
    (`slot(slots, ring)`, `value(exprs)`, `start(starts, size, ring)`): a slot as a ring slot of
    the buffer's slots (a pipeline's stage), a run of slots by its start and its size."""
    first = columns[0]
    if any(len(c) != len(first) for c in columns):
        raise NoJoin("accesses to a different number of buffers")
    out = []
    for k, ref in enumerate(first):
        refs = [c[k] for c in columns]
        if any(r.alloc is not ref.alloc or len(r.index) != len(ref.index)
               or len(r.region) != len(ref.region) for r in refs):
            raise NoJoin(f"accesses to {ref!r} and {refs[-1]!r}")
        ring = ref.alloc.shape[0].value if ref.alloc.shape and isinstance(
            ref.alloc.shape[0], Const) else 1
        if len(ref.index) == 1 and not ref.region:
            out.append(MemRef(ref.alloc, (slot([r.index[0] for r in refs], ring),)))
        elif not ref.index and len(ref.region) == 1:
            size = value([r.region[0].size for r in refs])
            begin = start([r.region[0].start for r in refs], size, ring)
            out.append(MemRef(ref.alloc, (), (Slice(begin, size),)))
        elif any(repr(r) != repr(ref) for r in refs):
            raise NoJoin(f"accesses to {ref!r} and {refs[-1]!r}")
        else:
            out.append(ref)
    return tuple(out)


def _fit_memory(columns: Sequence[tuple], scope: Scope) -> tuple:
    """join_memory with the grid's fits: a ring slot where one fits, else a plain value."""
    def slot(slots, ring):
        try:
            return fit_ring(slots, None, ring, scope)[0]
        except NoJoin:
            return fit_value(slots, scope)
    return join_memory(columns, slot, lambda exprs: fit_value(exprs, scope),
                       lambda starts, size, ring: _fit_start(starts, size, ring, scope))


def _fit_start(starts: Sequence[Expr], size: Expr, ring: int, scope: Scope) -> Expr:
    """A run's start: a plain form, else `size * slot` for a ring slot of runs of that size
    (every start a multiple of the size, checked at every point)."""
    try:
        return fit_value(starts, scope)
    except NoJoin:
        if not isinstance(size, Const) or size.value <= 0 or ring % size.value:
            raise
    z = size.value
    try:
        ys = [y for _, y in scope.points(starts)]
    except NoJoin:
        raise
    except Exception:
        raise NoJoin(f"{starts[0]!r} reads a value no loop or parameter gives") from None
    if any(y % z for y in ys):
        raise NoJoin(f"a run start {starts[0]!r} that is not a multiple of its size {z}")
    slot, _ = fit_ring([mk("//", e, Const(z)) for e in starts], None, ring // z, scope)
    return mk("*", slot, Const(z))


def join_grid(seqs: Sequence[Sequence], scope: Scope, made: dict | None = None) -> tuple:
    """One statement list that is seqs[k] in the run at scope.envs[k], or NoJoin."""
    made = made if made is not None else {}
    first = seqs[0]
    if any(len(s) != len(first) for s in seqs):
        raise NoJoin("a different number of operations")
    out = []
    for k, stmt in enumerate(first):
        column = [s[k] for s in seqs]
        if isinstance(stmt, Op) and all(isinstance(s, Op) for s in column):
            key = (tuple(map(id, column)), tuple(scope.loops))
            if key not in made:
                made[key] = _op(column, scope)
            out.append(made[key])
        elif isinstance(stmt, Loop) and all(isinstance(s, Loop) and s.var == stmt.var
                                            for s in column):
            try:
                trips = [evaluate(s.trip, {}) for s in column]
            except Exception:
                raise NoJoin(f"a loop whose trip count is not a number in a run ({stmt.loc})") \
                    from None
            trip = fit_value([s.trip for s in column], scope)
            live = [k for k, n in enumerate(trips) if n > 0]    # runs with an iteration
            body = () if not live else join_grid(
                [column[k].body for k in live], scope.inside(stmt.var, trips).only(live), made)
            out.append(Loop(stmt.var, trip, body, stmt.loc))
        elif isinstance(stmt, When) and all(isinstance(s, When) and repr(s.cond) == repr(stmt.cond)
                                            for s in column):
            out.append(When(stmt.cond, join_grid([s.then for s in column], scope, made),
                            join_grid([s.orelse for s in column], scope, made), stmt.loc))
        elif all(s is stmt for s in column):
            out.append(stmt)
        else:
            raise NoJoin(f"{type(stmt).__name__} statements that differ")
    return tuple(out)
