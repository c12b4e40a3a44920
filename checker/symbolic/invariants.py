"""Candidate facts for a counter system's inductive invariant, guessed from samples.

1. Sample: for small concrete parameter values, explore the counter system explicitly (its
   clauses compiled to Python) and collect every reachable state.
2. Guess: candidate facts that hold on every sample: linear equalities (the null space of the
   sample matrix), the same restricted to the states where a thread is at a given local state
   ("a thread of role r is at L implies e == 0"), constant bounds, bounds on differences, and,
   for a one-thread role at a position, the observations sampled there (a disjunction: the
   local states it is never seen in, as n[L] == 0 says for a counter role).

The samples only propose: houdini.py keeps the largest subset Z3 proves inductive for ALL
parameter values, and every step that decides the verdict is a Z3 validity check over the
symbolic parameters there. The compiled-term machinery (Compiler, Substitution) lives here,
with the candidates it evaluates; houdini.py imports it (never the other way round).
"""

from __future__ import annotations

import copy
import math
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import z3
from z3.z3 import _to_expr_ref

from .conservation import column as product_column, count_products
from .encode import Encoder
from .symmetry import mirror
from .budget import FACT_CELLS_PER_UNIT, UNITS_PER_FACT_ROW, UNITS_PER_SAMPLED_STATE
from .work import tick, ticks

# ----------------------------------------------------------------------------------------------
# Z3 terms as Python functions of the state vector
# ----------------------------------------------------------------------------------------------

_ARITH = {
    z3.Z3_OP_ADD: lambda xs: "(" + " + ".join(xs) + ")",
    z3.Z3_OP_SUB: lambda xs: "(" + " - ".join(xs) + ")",
    z3.Z3_OP_MUL: lambda xs: "(" + " * ".join(xs) + ")",
    z3.Z3_OP_UMINUS: lambda xs: f"(-{xs[0]})",
    z3.Z3_OP_LE: lambda xs: f"({xs[0]} <= {xs[1]})",
    z3.Z3_OP_LT: lambda xs: f"({xs[0]} < {xs[1]})",
    z3.Z3_OP_GE: lambda xs: f"({xs[0]} >= {xs[1]})",
    z3.Z3_OP_GT: lambda xs: f"({xs[0]} > {xs[1]})",
    z3.Z3_OP_EQ: lambda xs: f"({xs[0]} == {xs[1]})",
    z3.Z3_OP_DISTINCT: lambda xs: f"({xs[0]} != {xs[1]})",
    z3.Z3_OP_AND: lambda xs: "(" + " and ".join(xs) + ")" if xs else "True",
    z3.Z3_OP_OR: lambda xs: "(" + " or ".join(xs) + ")" if xs else "False",
    z3.Z3_OP_NOT: lambda xs: f"(not {xs[0]})",
    z3.Z3_OP_IMPLIES: lambda xs: f"((not {xs[0]}) or {xs[1]})",
    z3.Z3_OP_ITE: lambda xs: f"({xs[1]} if {xs[0]} else {xs[2]})",
    z3.Z3_OP_MOD: lambda xs: f"_mod({xs[0]}, {xs[1]})",
    z3.Z3_OP_IDIV: lambda xs: f"_div({xs[0]}, {xs[1]})",
    z3.Z3_OP_TRUE: lambda xs: "True",
    z3.Z3_OP_FALSE: lambda xs: "False",
}


def _mod(a, b):
    # SMT-LIB: a mod b is in [0, |b|)
    return a % abs(b) if b else 0


def _div(a, b):
    if b == 0:
        return 0
    q = (a - _mod(a, b)) // b
    return q


class Compiler:
    """Turns Z3 terms over the state variables into Python source, sharing subterms."""

    def __init__(self, variables: Sequence[z3.ArithRef]):
        self.index = {v.get_id(): i for i, v in enumerate(variables)}
        self.cache: dict[int, str] = {}

    def expr(self, e) -> str:
        key = e.get_id()
        if key in self.cache:
            return self.cache[key]
        if z3.is_int_value(e):
            out = str(e.as_long())
        elif z3.is_const(e) and key in self.index:
            out = f"s[{self.index[key]}]"
        elif z3.is_true(e):
            out = "True"
        elif z3.is_false(e):
            out = "False"
        else:
            kind = e.decl().kind()
            if kind not in _ARITH:
                raise ValueError(f"cannot compile {e.decl()} in {e}")
            out = _ARITH[kind]([self.expr(c) for c in e.children()])
        self.cache[key] = out
        return out

    def function(self, terms: Sequence, what: str = "tuple") -> Callable:
        body = ", ".join(self.expr(t) for t in terms)
        src = f"lambda s: ({body},)" if what == "tuple" else f"lambda s: {self.expr(terms[0])}"
        return eval(src, {"_mod": _mod, "_div": _div})

    def any_of(self, conditions: Sequence) -> Callable:
        """One function: does any of the conditions hold (evaluated in order, short-circuit)."""
        body = " or ".join(self.expr(c) for c in conditions) or "False"
        return eval(f"lambda s: {body}", {"_mod": _mod, "_div": _div})


class Substitution:
    """z3.substitute for many terms with the same pairs, without the Python API's per-call
    checks (a large share of the time otherwise)."""

    def __init__(self, src: Sequence, dst: Sequence):
        from z3 import z3core
        self.core = z3core
        self.n = len(src)
        self.ctx = src[0].ctx if src else z3.main_ctx()
        self._from = (z3.Ast * self.n)()
        self._to = (z3.Ast * self.n)()
        self.keep = list(src) + list(dst)
        for i, (a, b) in enumerate(zip(src, dst)):
            self._from[i] = a.as_ast()
            self._to[i] = b.as_ast()

    def __call__(self, e):
        ast = self.core.Z3_substitute(self.ctx.ref(), e.as_ast(), self.n, self._from, self._to)
        return _to_expr_ref(ast, self.ctx)


def mirror_of(encoder: Encoder, comp: Compiler):
    """The swap of a cluster's two blocks as Z3 checks it a symmetry of the class system
    (symmetry.py), or None; found once per system."""
    if not hasattr(encoder, "_mirror"):
        encoder._mirror = mirror(encoder, comp, Substitution)
    return encoder._mirror


def check_construction(encoder: Encoder, timeout: float) -> str | None:
    """encoder.check_sane, asking on a 2-block cluster's class system only the transitions
    Houdini asks (the others are the checked mirror images of those: symmetry.py); None when
    the construction facts are inductive."""
    sym = mirror_of(encoder, Compiler(encoder.vars))
    return encoder.check_sane(timeout=timeout, asked=sym.asked if sym is not None else None)


# ----------------------------------------------------------------------------------------------
# Sampling
# ----------------------------------------------------------------------------------------------

@dataclass
class Samples:
    states: list[tuple]
    errors: dict[str, tuple]           # error label -> a frozen valuation that reaches it
    truncated: bool = False
    # frozen valuation -> its reachable states, for the valuations explored to the end (a
    # later sample of the same system with a larger limit takes them as they are)
    complete: dict[tuple, set] = field(default_factory=dict)
    units: int = 0                     # the counted work it took
    # every state's mirror is among the states (a 2-block cluster's checked swap, symmetry.py)
    mirrored: bool = False


def sample(encoder: Encoder, valuations: Iterable[Sequence[int]], limit: int = 4000,
           budget: float = 20.0, known: "Samples | None" = None) -> Samples:
    """Explore the counter system for each concrete valuation of the frozen variables, at most
    `limit` states each. The valuations `known` explored to the end are taken from it as they
    are (the same system: the same states, in the same order, at no cost).

    On a class system Z3 checks symmetric under the swap of a cluster's two blocks
    (symmetry.py) a state and its mirror are one: the search keeps the lesser of the two and
    returns both (the same states, half of them explored; samples only propose candidates)."""
    nf = len(encoder.system.frozen)
    comp = Compiler(encoder.vars)
    sym = mirror_of(encoder, comp)
    perm = sym.perm if sym is not None and sym.closed else None
    keyed, unkeyed = _steps_by_position(encoder, comp)
    bads = [(label, comp.function([cond], "bool")) for label, cond in encoder.bad]
    # one call tells whether any error condition holds (a system has hundreds, rarely met)
    any_bad = comp.any_of([cond for _, cond in encoder.bad])
    sane = comp.function([z3.And(encoder.sane)], "bool")
    init_ok = comp.function([encoder.init_body], "bool")
    init = comp.function(encoder.init_head)
    states: list[tuple] = []
    errors: dict[str, tuple] = {}
    complete: dict[tuple, set] = {}
    truncated = False
    start = time.perf_counter()
    first = ticks()
    for frozen in valuations:
        frozen = tuple(frozen)
        if known is not None and frozen in known.complete:
            complete[frozen] = known.complete[frozen]
            states.extend(complete[frozen])
            continue
        seed = frozen + (0,) * (len(encoder.vars) - nf)
        if not init_ok(seed):
            continue
        s0 = init(seed)
        if perm is not None:
            s0 = min(s0, tuple([s0[j] for j in perm]))
        seen = {s0}
        frontier = [s0]
        while frontier:
            if len(seen) > limit or time.perf_counter() - start > budget:
                truncated = True
                break
            nxt = []
            for s in frontier:
                if not sane(s):
                    errors.setdefault("construction invariant broken", frozen)
                    continue
                if any_bad(s):
                    for label, bad in bads:
                        if bad(s):
                            errors.setdefault(label, frozen)
                if perm is not None:
                    twin = tuple([s[j] for j in perm])
                    if not sane(twin):
                        errors.setdefault("construction invariant broken", frozen)
                    elif any_bad(twin):
                        for label, bad in bads:
                            if bad(twin):
                                errors.setdefault(label, frozen)
                succ = [post(s) for i, table in keyed for pre, post in table.get(s[i], ())
                        if pre(s)] + [post(s) for pre, post in unkeyed if pre(s)]
                for t in succ:
                    if perm is not None:
                        t = min(t, tuple([t[j] for j in perm]))
                    if t not in seen:
                        seen.add(t)
                        nxt.append(t)
            tick(len(frontier) * UNITS_PER_SAMPLED_STATE)   # counted work (budget.py)
            frontier = nxt
        if perm is not None:
            seen = seen | {tuple([t[j] for j in perm]) for t in seen}
        if not frontier:
            complete[frozen] = seen
        states.extend(seen)
    return Samples(states, errors, truncated, complete, ticks() - first,
                   mirrored=perm is not None)


def _steps_by_position(encoder: Encoder, comp: Compiler):
    """The compiled transitions, indexed by a conjunct `x == c` of their guard (x a state
    variable, c a constant: a one-thread role's position, mostly): a state tries only the
    transitions whose conjunct it satisfies (`(variable index, {c: [(guard, successor)]})`)
    and those without one. The same successors as trying every guard, at a fraction of the
    calls: a system of 200 transitions has a few enabled per position."""
    index = {v.get_id(): i for i, v in enumerate(encoder.vars)}
    nf = len(encoder.system.frozen)
    tables: dict[int, dict[int, list]] = {}
    unkeyed = []
    for _, pre, nxt in encoder.steps:
        step = (comp.function([pre], "bool"), comp.function(nxt))
        key = _position_conjunct(pre, index, nf)
        if key is None:
            unkeyed.append(step)
        else:
            tables.setdefault(key[0], {}).setdefault(key[1], []).append(step)
    return sorted(tables.items()), unkeyed


def _position_conjunct(pre, index: dict, nf: int):
    """(i, c) for the first top-level conjunct `vars[i] == c` of a guard, i not frozen."""
    for c in (pre.children() if z3.is_and(pre) else [pre]):
        if not z3.is_eq(c):
            continue
        a, b = c.children()
        if z3.is_int_value(a):
            a, b = b, a
        if z3.is_const(a) and z3.is_int_value(b) and index.get(a.get_id(), -1) >= nf:
            return index[a.get_id()], b.as_long()
    return None


# ----------------------------------------------------------------------------------------------
# Guessing
# ----------------------------------------------------------------------------------------------

_PRIME = 2_147_483_647


def _eliminate(m, n_keep: int = 0) -> list[int]:
    """Indices of a maximal linearly independent subset of the rows of `m` (an int64 array
    reduced modulo _PRIME), by elimination there, column by column (the first row with a
    nonzero entry is the pivot)."""
    import numpy as np
    m = m.copy()
    n, ncols = m.shape
    alive = np.ones(n, dtype=bool)
    chosen = []
    for c in range(ncols):
        nz = np.nonzero(alive & (m[:, c] != 0))[0]
        if len(nz) == 0:
            continue
        r = nz[0]
        chosen.append(int(r))
        alive[r] = False
        inv = pow(int(m[r, c]), _PRIME - 2, _PRIME)
        pivot = (m[r] * inv) % _PRIME
        others = nz[1:]
        if len(others):
            f = m[others, c][:, None]
            m[others] = (m[others] - (f * pivot[None, :]) % _PRIME) % _PRIME
    return chosen


def _null_mod(m):
    """A basis of the null space of the rows of `m` (independent modulo _PRIME) there."""
    import numpy as np
    rows = np.array(m, dtype=np.int64) % _PRIME
    ncols = rows.shape[1]
    pivots = []
    r = 0
    for c in range(ncols):
        nz = np.nonzero(rows[r:, c])[0]
        if len(nz) == 0:
            continue
        p = r + int(nz[0])
        rows[[r, p]] = rows[[p, r]]
        inv = pow(int(rows[r, c]), _PRIME - 2, _PRIME)
        rows[r] = rows[r] * inv % _PRIME
        f = rows[:, c].copy()
        f[r] = 0
        hit = np.nonzero(f)[0]
        if len(hit):
            rows[hit] = (rows[hit] - f[hit, None] * rows[r][None, :] % _PRIME) % _PRIME
        pivots.append(c)
        r += 1
        if r == len(rows):
            break
    free = [c for c in range(ncols) if c not in pivots]
    out = np.zeros((len(free), ncols), dtype=np.int64)
    out[np.arange(len(free)), free] = 1
    if pivots and free:
        out[:, pivots] = (-rows[:len(pivots)][:, free].T) % _PRIME
    return out


# Rows (after removing duplicates) beyond which `_independent_rows` checks all of them against
# the span of a few, instead of eliminating on every row
_SPAN_CHECK_ROWS = 512
_CHUNK_ROWS = 1 << 15


def _independent_rows(rows) -> list[Sequence[int]]:
    """A maximal linearly independent subset of rows, found by elimination modulo a prime
    (rows independent there are independent over the rationals; the exact work is then done on
    these few rows only). Many rows (a class's samples run to hundreds of thousands, of rank a
    few dozen): the elimination runs on a few rows, then every row is tested against their span
    at once (two random combinations of a basis of its orthogonal complement modulo the prime,
    fixed seed: a row outside the span passes both with probability 2^-62), and rows spread
    over those that fail join the next round, which tests only them. The rows kept span the
    same space as all rows, so the exact null space found from them is theirs; the work is
    counted (budget.py)."""
    import numpy as np
    if len(rows) == 0:
        return []
    m = np.asarray(rows, dtype=np.int64).reshape(len(rows), -1)
    n, ncols = m.shape
    tick(n * ncols // FACT_CELLS_PER_UNIT)
    small = n <= _SPAN_CHECK_ROWS or ncols >= 1024 or max(-int(m.min()), int(m.max())) >= 1 << 20
    if small:
        m = np.unique(m, axis=0)
        chosen = _eliminate(m % _PRIME)
        return [tuple(int(x) for x in m[r]) for r in chosen]
    rng = np.random.default_rng(0)
    picked = _spread(np.arange(n), 2 * ncols + 8)
    # the rows not yet found in the span of the picked rows: one found there stays there as
    # more rows are picked (the span only grows), so each round tests only the rows the
    # round before found outside
    tested = np.arange(n)
    while True:
        keep = _eliminate(m[picked] % _PRIME)
        picked = picked[keep]
        null = _null_mod(m[picked])
        if not len(null):
            break
        mix = rng.integers(0, _PRIME, size=(len(null), 2))
        probe = np.zeros((ncols, 2), dtype=np.int64)
        for v, g in zip(null, mix):         # every product < 2^62, every sum < 2^63
            probe = (probe + v[:, None] * g[None, :] % _PRIME) % _PRIME
        # m @ probe modulo the prime, exact in floating point: |m| < 2^20, probe split into
        # halves < 2^16, ncols < 2^10, so every partial sum stays below 2^53
        halves = np.hstack([probe & 0xFFFF, probe >> 16]).astype(np.float64)
        outside = []
        for first in range(0, len(tested), _CHUNK_ROWS):   # a chunk at a time: bounded memory
            chunk = tested[first:first + _CHUNK_ROWS]
            part = (m[chunk].astype(np.float64) @ halves).astype(np.int64)
            test = (part[:, 2:] % _PRIME * (1 << 16) + part[:, :2] % _PRIME) % _PRIME
            outside.append(chunk[np.nonzero(test.any(axis=1))[0]])
        outside = np.concatenate(outside)
        tick(len(tested) * ncols // FACT_CELLS_PER_UNIT)
        if len(outside) == 0:
            break
        tested = outside
        picked = np.concatenate([picked, _spread(outside, 2 * ncols + 8)])
    return [tuple(int(x) for x in m[r]) for r in picked]


def _spread(rows, most: int):
    """At most `most` of `rows`, evenly spread: samples come in search order, so the first
    rows are alike (few independent ones) and the rounds above would be many."""
    import numpy as np
    if len(rows) <= most:
        return rows
    return rows[np.unique(np.linspace(0, len(rows) - 1, most).astype(np.int64))]


def nullspace_primitive(rows: Sequence[Sequence[int]], ncols: int) -> list[list[int]]:
    """A basis of {c : row . c == 0 for every row}, each vector integral and primitive: the
    reduced echelon form's (one vector per free column, 1 there before scaling), found by
    fraction-free elimination on Python integers (rows divided by their gcd as they go), which
    is exact and far faster than rational arithmetic."""
    return _nullspace_of_span(_independent_rows(rows), ncols)


def _nullspace_of_span(independent: Sequence[Sequence[int]], ncols: int) -> list[list[int]]:
    """nullspace_primitive of rows spanning the space `independent` spans: the basis is the
    reduced echelon form's, a function of that space alone."""
    matrix = [list(row) for row in independent]
    pivots: list[int] = []
    r = 0
    for c in range(ncols):
        pivot = next((i for i in range(r, len(matrix)) if matrix[i][c] != 0), None)
        if pivot is None:
            continue
        matrix[r], matrix[pivot] = matrix[pivot], matrix[r]
        if matrix[r][c] < 0:
            matrix[r] = [-x for x in matrix[r]]
        pv, prow = matrix[r][c], matrix[r]
        for i in range(len(matrix)):
            f = matrix[i][c]
            if i != r and f != 0:
                row = [pv * a - f * b for a, b in zip(matrix[i], prow)]
                g = 0
                for x in row:
                    g = math.gcd(g, x)
                matrix[i] = [x // g for x in row] if g > 1 else row
        pivots.append(c)
        r += 1
        if r == len(matrix):
            break
    free = [c for c in range(ncols) if c not in pivots]
    basis = []
    for f in free:
        # vec[f] = 1, vec[c_i] = -m[i][f] / m[i][c_i] (m[i][c_i] > 0), scaled to integers
        den = 1
        for i, c in enumerate(pivots):
            if matrix[i][f]:
                d = matrix[i][c] // math.gcd(matrix[i][c], matrix[i][f])
                den = den * d // math.gcd(den, d)
        ints = [0] * ncols
        ints[f] = den
        for i, c in enumerate(pivots):
            if matrix[i][f]:
                ints[c] = -matrix[i][f] * den // matrix[i][c]
        g = 0
        for x in ints:
            g = math.gcd(g, x)
        basis.append([x // g for x in ints] if g > 1 else ints)
    return basis


class _Span:
    """A growing set of integer vectors in echelon form modulo a prime: whether a vector is in
    their span there, as `len(_independent_rows(vectors + [v])) == len(...vectors)` decides it,
    without eliminating every vector again."""

    def __init__(self, vectors: Sequence[Sequence[int]] = ()):
        self.rows: list[tuple[int, list[int]]] = []      # (pivot column, row with pivot 1)
        for v in vectors:
            self.add(v)

    def reduce(self, vec: Sequence[int]) -> list[int]:
        v = [x % _PRIME for x in vec]
        for c, row in self.rows:
            f = v[c]
            if f:
                v = [(a - f * b) % _PRIME for a, b in zip(v, row)]
        return v

    def add(self, vec: Sequence[int]) -> bool:
        """Add vec; False when it is already in the span (nothing added)."""
        v = self.reduce(vec)
        c = next((i for i, x in enumerate(v) if x), None)
        if c is None:
            return False
        inv = pow(v[c], _PRIME - 2, _PRIME)
        self.rows.append((c, [(x * inv) % _PRIME for x in v]))
        return True


def _linear(coeffs: Sequence[int], variables: Sequence[z3.ArithRef], const: int):
    terms = [c * v if c != 1 else v for c, v in zip(coeffs, variables) if c]
    return (z3.Sum(terms) if terms else z3.IntVal(0)) + const


@dataclass
class Candidate:
    formula: z3.BoolRef
    text: str


def hull_facets(points) -> list[tuple[int, int, int]]:
    """The facets a*x + b*y <= c (integers, gcd 1) of the convex hull of 2-D integer points that
    are not bounds of one coordinate (those are candidates already); none when the points are
    collinear (an equality, found by the null space).

    >>> sorted(hull_facets([(0, 1), (1, 0), (2, 0), (0, 0)]))
    [(1, 2, 2)]
    """
    pts = sorted(set(points))
    if len(pts) < 3:
        return []

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
    lower, upper = [], []
    for q in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], q) <= 0:
            lower.pop()
        lower.append(q)
    for q in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], q) <= 0:
            upper.pop()
        upper.append(q)
    hull = lower[:-1] + upper[:-1]           # counter-clockwise
    if len(hull) < 3:
        return []
    out = []
    for p, q in zip(hull, hull[1:] + hull[:1]):
        a, b = q[1] - p[1], p[0] - q[0]      # outward normal of a counter-clockwise edge
        if a == 0 or b == 0:
            continue
        g = math.gcd(a, b)
        a, b = a // g, b // g
        out.append((a, b, a * p[0] + b * p[1]))
    return out


def _local_states(encoder: Encoder, states, values_of) -> list[Candidate]:
    """`pos[r] == v => obs[r] is one of the combinations sampled at v`, for a one-thread role:
    the local states it is never seen in. A counter role gets the same from its constant
    candidates (n[L] == 0 for an unsampled local state L); for a one-thread role no linear fact
    says it, since an unsampled combination is usually in the affine span of sampled ones (a
    thread never waited on its second barrier while it has waited on its first: `U` then `J1`
    is excluded, `U U`, `J0 U` and `J0 J1` are not). Houdini checks it like any candidate.
    `states`: one row a state (an array)."""
    import numpy as np
    names = encoder.layout.names
    variables = encoder.vars
    out = []
    for i, name in enumerate(names):
        if not name.startswith("pos["):
            continue
        obs = [o for o in range(len(names)) if names[o].startswith(f"obs[{name[4:-1]},")]
        if not obs:
            continue
        seen: dict[int, set] = {}
        for row in np.unique(np.asarray(states)[:, [i] + obs], axis=0).tolist():
            seen.setdefault(row[0], set()).add(tuple(row[1:]))
        for value in values_of[i]:
            combos = sorted(seen[value])
            if len(combos) == 3 ** len(obs):          # UNJOINED, J0, J1 each: nothing excluded
                continue
            allowed = z3.Or([z3.And([variables[o] == c for o, c in zip(obs, combo)])
                             for combo in combos])
            out.append(Candidate(z3.Implies(variables[i] == value, allowed),
                                 f"{name} == {value} => obs in {combos}"))
    return out


def _global_facets(variables, names, numeric: Sequence[int], proj: Sequence[tuple],
                   pairs: Sequence[tuple[int, int]]) -> list[Candidate]:
    """The facets of the convex hull of every sampled state, projected on each pair of numeric
    variables, that are not bounds of one coordinate or of a difference (those are candidates
    already): `4096*pend + tx <= 4096` (no bytes are counted on a barrier before its
    arrival; `pend == 1 => tx <= 0`), `pend + fly <= 2`. A relation of two counters that holds
    in every sampled state, which no difference bound and no place-conditioned facet says.
    Candidates only: Houdini keeps those Z3 proves inductive."""
    import numpy as np
    if not proj or not pairs:
        return []
    at = {i: a for a, i in enumerate(numeric)}
    table = np.array(proj, dtype=np.int64)
    out = []
    for i, j in pairs:
        xs, ys = table[:, at[i]], table[:, at[j]]
        lo = int(ys.min())
        span = int(ys.max()) - lo + 1
        keys = np.unique(xs * span + (ys - lo))       # the distinct points, one key each
        pts = [(int(x), int(y) + lo) for x, y in zip(keys // span, keys % span)]
        for ca, cb, cc in hull_facets(pts):
            if abs(ca) == abs(cb) == 1 and ca != cb:
                continue                      # a difference bound
            out.append(Candidate(ca * variables[i] + cb * variables[j] <= cc,
                                 f"{ca}*{names[i]} + {cb}*{names[j]} <= {cc}"))
    return out


def guess(encoder: Encoder, states: Sequence[tuple],
          check: Sequence[tuple] = (), conditional_pairs: bool = True,
          hulls: bool = False, mirrored: bool = False) -> list[Candidate]:
    """Facts that every sampled state satisfies: linear equalities over the state variables and
    indicators of where one-thread roles are and what they observed, constant bounds, bounds on
    differences; globally and conditioned on where a thread is. With `hulls`, also the facets
    of the convex hull of every pair of numeric variables where a thread is (`fly + 2*pend <= 2`
    for two copies in flight on a barrier that counts one arrival: differences miss it).
    `mirrored`: every state's mirror under the class system's checked block swap is among
    `states` (Samples.mirrored); then the equalities where a thread of one block is are read off
    those where its twin is, columns swapped, not off the states again (the same ones)."""
    layout = encoder.layout
    variables = encoder.vars
    names = layout.names
    n = len(variables)
    nf = len(encoder.system.frozen)
    out: list[Candidate] = []
    if not states:
        return out
    states = list(dict.fromkeys(states))
    import numpy as np
    at_state = np.array(states, dtype=np.int64).reshape(len(states), n)   # one row a state
    tick(at_state.size // FACT_CELLS_PER_UNIT)
    values_of = [np.unique(at_state[:, i]).tolist() for i in range(n)]
    varying = [i for i in range(n) if len(values_of[i]) > 1]
    for i in range(n):
        if len(values_of[i]) == 1:
            out.append(Candidate(variables[i] == values_of[i][0],
                                 f"{names[i]} == {values_of[i][0]}"))
    # Features for linear equalities: numeric variables as they are, positions and
    # observations of one-thread roles as indicators (their integer codes are arbitrary).
    feat_terms, feat_names, feat_cols = [], [], []
    for i in varying:
        name = names[i]
        if name.startswith(("pos[", "obs[", "newest[")):
            for v in values_of[i]:
                feat_terms.append(z3.If(variables[i] == v, 1, 0))
                feat_names.append(f"[{name}=={v}]")
                feat_cols.append((i, v))
        else:
            feat_terms.append(variables[i])
            feat_names.append(name)
            feat_cols.append((i, None))
    for hit, (a, b) in _ring_hits(names, nf):
        # threads at a place times whether a ring position lands on the slot (U[x+1] - U[x],
        # 0 or 1): what the threads past that position added to the slot's barrier
        for i in varying:
            if names[i].startswith("n["):
                feat_terms.append(z3.If(variables[b] - variables[a] == 1, variables[i], 0))
                feat_names.append(f"{hit}*{names[i]}")
                feat_cols.append((i, (a, b)))
    # arrivals absorbed and made (conservation.py): exp*ph of a barrier, size*k of a role
    size_comp = Compiler(variables)

    def size_of(role_name):
        code = next(c for c in layout.codes if c.role.name == role_name)
        term = z3.substitute(code.role.size, *zip(encoder.system.frozen, variables[:nf]))
        return term, size_comp.function([term])
    for term, name, how in count_products(encoder, variables, names, varying, size_of):
        feat_terms.append(term)
        feat_names.append(name)
        feat_cols.append((None, how))
    # the variable of an indicator feature ([pos[wg0]==3]), None for the other features
    indicator_of = [i if v is not None and not isinstance(v, tuple) else None
                    for i, v in feat_cols]
    # the features of every state, one row each, with a first column of ones (the constant)
    columns = [np.ones(len(states), dtype=np.int64)]
    for i, v in feat_cols:
        if i is None:
            columns.append(product_column(at_state, v))
            continue
        x = at_state[:, i]
        columns.append(x if v is None else (x == v).astype(np.int64) if not isinstance(v, tuple)
                       else x * (at_state[:, v[1]] - at_state[:, v[0]] == 1))
    table = np.column_stack(columns)
    del columns
    tick(table.size // FACT_CELLS_PER_UNIT)
    counts = [i for i in varying if names[i].startswith("n[")]
    numeric = [i for i in varying if i not in counts and not names[i].startswith(("pos[", "obs[", "newest["))]

    def state_pairs():
        """Pairs of numeric variables, not both frozen (two constants of the system)."""
        for a in range(len(numeric)):
            for b in range(a + 1, len(numeric)):
                if numeric[a] >= nf or numeric[b] >= nf:
                    yield numeric[a], numeric[b]

    def text_of(coeffs, const):
        return " + ".join(f"{c}*{feat_names[j]}" for j, c in enumerate(coeffs) if c) + \
            f" + {const} == 0"

    def equalities(rows_idx, exclude_span=None, fixed=frozenset(), spanning=None):
        """The equalities every row of `rows_idx` satisfies, less those in `exclude_span`;
        `fixed`: the variables the rows' condition fixes (a place, what it observed), whose
        indicators are constants there, so an equality over them alone says nothing;
        `spanning`: independent rows spanning what those rows span, when known. Returns the
        equalities and independent rows spanning the rows."""
        if spanning is None:
            spanning = _independent_rows(table[rows_idx])
        found = []
        span = copy.deepcopy(exclude_span) if exclude_span is not None else None
        for ints in _nullspace_of_span(spanning, len(feat_terms) + 1):
            if not any(ints[1:]):
                continue
            if span is not None and not span.add(ints):
                continue
            # kept in the span, so the other equalities found are the same ones
            if fixed and all(c == 0 or indicator_of[j] in fixed
                             for j, c in enumerate(ints[1:])):
                continue        # `pos == 5 => [pos == 1] == 0`: true under its condition
            found.append(ints)
        return found, spanning

    def eq_formula(ints):
        return _linear(ints[1:], feat_terms, ints[0]) == 0

    glob, _ = equalities(slice(None))
    glob_span = _Span(glob) if glob else None
    for ints in glob:
        out.append(Candidate(eq_formula(ints), text_of(ints[1:], ints[0])))
    for i in numeric + counts:
        lo, hi = values_of[i][0], values_of[i][-1]
        out.append(Candidate(variables[i] >= lo, f"{names[i]} >= {lo}"))
        out.append(Candidate(variables[i] <= hi, f"{names[i]} <= {hi}"))
    # Pairs and bounds read only the numeric variables: work on the distinct projections of
    # the states onto them (far fewer rows than states, which differ mostly in positions).
    at = {i: a for a, i in enumerate(numeric)}

    # the distinct projections onto the numeric variables (sorted), and each state's
    if numeric:
        glob_table, proj_of = np.unique(at_state[:, numeric], axis=0, return_inverse=True)
        proj_of = proj_of.reshape(-1)
    else:       # one projection, the empty one
        glob_table, proj_of = np.zeros((1, 0), dtype=np.int64), np.zeros(len(states), int)

    def project(subset):
        """The distinct projections of the states `subset` (sorted, as np.unique sorts)."""
        return glob_table[np.unique(proj_of[subset])]
    glob_proj = [tuple(p) for p in glob_table.tolist()]
    for i, j in state_pairs():
        xi, xj = variables[i], variables[j]
        diffs = glob_table[:, at[i]] - glob_table[:, at[j]]     # the same extremes as over states
        lo, hi = int(diffs.min()), int(diffs.max())
        out.append(Candidate(xi - xj <= hi, f"{names[i]} - {names[j]} <= {hi}"))
        out.append(Candidate(xi - xj >= lo, f"{names[i]} - {names[j]} >= {lo}"))
    out += _local_states(encoder, at_state, values_of)
    # Where a thread is: pos == value for a one-thread role (alone and with what it observed),
    # n[L] >= 1 and n[L] == size for a counter role.
    atoms = []
    frozen_vars = variables[:nf]
    sizes = {code.role.name: z3.substitute(code.role.size,
                                           *zip(encoder.system.frozen, frozen_vars))
             for code in layout.codes if not code.role.single}
    comp = Compiler(variables)
    for i in varying:
        name = names[i]
        if name.startswith("pos["):
            role = name[4:-1]
            obs = [o for o in range(n) if names[o].startswith(f"obs[{role},")]
            for value in values_of[i]:
                here = at_state[:, i] == value
                atoms.append((variables[i] == value, f"{name} == {value}", here, {i},
                              ((i, "==", value),)))
                combos = [tuple(c) for c in np.unique(at_state[here][:, obs], axis=0).tolist()] \
                    if obs else [()]
                if len(combos) > 1:
                    for combo in combos:
                        cond = z3.And([variables[i] == value] +
                                      [variables[o] == c for o, c in zip(obs, combo)])
                        atoms.append((cond, f"{name} == {value} & obs == {combo}",
                                      here & (at_state[:, obs] == combo).all(axis=1),
                                      {i, *obs}, ((i, "==", value),
                                                  *((o, "==", c) for o, c in zip(obs, combo)))))
        elif name.startswith("n["):
            atoms.append((variables[i] >= 1, f"{name} >= 1", at_state[:, i] >= 1, set(),
                          ((i, ">=", 1),)))
            role = name[2:].split(",")[0]
            size = sizes.get(role)
            if size is not None:
                fn = comp.function([size])
                tick(len(states) * UNITS_PER_FACT_ROW)
                atoms.append((variables[i] == size, f"{name} == size", np.fromiter(
                    (s[i] == fn(s)[0] for s in states), dtype=bool, count=len(states)), set(),
                    None))
    pair_list = list(state_pairs()) if (conditional_pairs or hulls) else []
    glob_diff = {(i, j): (int((glob_table[:, at[i]] - glob_table[:, at[j]]).min()),
                          int((glob_table[:, at[i]] - glob_table[:, at[j]]).max()))
                 for i, j in pair_list}
    glob_points = {(i, j): {(p[at[i]], p[at[j]]) for p in glob_proj} for i, j in pair_list} \
        if hulls else {}
    out += _global_facets(variables, names, numeric, glob_proj, list(state_pairs()))
    swap = _swapped_columns(encoder, feat_terms) if mirrored else None
    spans: dict[tuple, list] = {}       # a place -> independent rows of its states' features
    for cond, ctext, holds, fixed, place in atoms:
        subset = np.nonzero(holds)[0]
        if not len(subset) or len(subset) == len(states):
            continue
        spanning = None
        if swap is not None and place is not None:
            perm, cols = swap
            # the states where the twin is are the mirrors of these, whose features are
            # these states' with the columns swapped (_swapped_columns)
            twin = spans.get(tuple(sorted((perm[i], op, v) for i, op, v in place)))
            if twin is not None:
                spanning = [tuple(row[j] for j in cols) for row in twin]
        found, spanning = equalities(subset, exclude_span=glob_span, fixed=fixed,
                                     spanning=spanning)
        if place is not None:
            spans[tuple(sorted(place))] = spanning
        for ints in found:
            out.append(Candidate(z3.Implies(cond, eq_formula(ints)),
                                 f"{ctext} => " + text_of(ints[1:], ints[0])))
        sub_proj = project(subset)
        # counted work (budget.py): the states of this place, then its distinct projections
        # once per pair of variables
        tick(len(subset) * len(numeric) // FACT_CELLS_PER_UNIT
             + len(sub_proj) * UNITS_PER_FACT_ROW * (2 + len(pair_list)))
        for i in numeric:
            lo, hi = int(sub_proj[:, at[i]].min()), int(sub_proj[:, at[i]].max())
            if lo > values_of[i][0]:
                out.append(Candidate(z3.Implies(cond, variables[i] >= lo),
                                     f"{ctext} => {names[i]} >= {lo}"))
            if hi < values_of[i][-1]:
                out.append(Candidate(z3.Implies(cond, variables[i] <= hi),
                                     f"{ctext} => {names[i]} <= {hi}"))
        for i, j in (pair_list if conditional_pairs else ()):
            diffs = sub_proj[:, at[i]] - sub_proj[:, at[j]]
            dlo, dhi = int(diffs.min()), int(diffs.max())
            glo, ghi = glob_diff[(i, j)]
            xi, xj = variables[i], variables[j]
            if dhi < ghi:
                out.append(Candidate(z3.Implies(cond, xi - xj <= dhi),
                                     f"{ctext} => {names[i]} - {names[j]} <= {dhi}"))
            if dlo > glo:
                out.append(Candidate(z3.Implies(cond, xi - xj >= dlo),
                                     f"{ctext} => {names[i]} - {names[j]} >= {dlo}"))
        for i, j in (pair_list if hulls else ()):
            for ca, cb, cc in hull_facets([tuple(p) for p in sub_proj[:, [at[i], at[j]]].tolist()]):
                if abs(ca) == abs(cb) == 1 and ca != cb:
                    continue                  # a difference bound: above
                if all(ca * x + cb * y <= cc for x, y in glob_points[(i, j)]):
                    continue                  # holds everywhere: not about this place
                out.append(Candidate(
                    z3.Implies(cond, ca * variables[i] + cb * variables[j] <= cc),
                    f"{ctext} => {ca}*{names[i]} + {cb}*{names[j]} <= {cc}"))
    if check:
        # Drop what larger parameter values refute (bounds that only reflect small samples).
        comp = Compiler(variables)
        kept = []
        for c in out:
            fn = comp.function([c.formula], "bool")
            if all(fn(s) for s in check):
                kept.append(c)
        out = kept
    return out


def _swapped_columns(encoder: Encoder, feat_terms: list):
    """(perm, cols) for the class system's checked block swap (symmetry.py): perm the swap of
    the state variables, cols[j] the feature column (0 the constant) whose value at a state is
    column j's value at the state's mirror -- the feature's term with every variable swapped
    is that column's term (Z3 shares equal terms); None when some feature's swapped term is
    none of the features or the system has no checked swap."""
    variables = encoder.vars
    sym = mirror_of(encoder, Compiler(variables))
    if sym is None or not sym.closed:
        return None
    perm = sym.perm
    swapped = Substitution(variables, [variables[perm[i]] for i in range(len(variables))])
    column = {t.get_id(): j + 1 for j, t in enumerate(feat_terms)}
    cols = [0]
    for t in feat_terms:
        j = column.get(swapped(t).get_id())
        if j is None:
            return None
        cols.append(j)
    return perm, cols


def _ring_hits(names, nf) -> list:
    """Pairs of frozen lap counts U[x], U[x + 1] of one ring (U(x) = #{k >= 0 : s + k*S < x}):
    their difference says whether position x is the class's slot."""
    found = {}
    for i in range(nf):
        m = re.fullmatch(r"U\[(.*)\]", names[i])
        if m:
            found[m.group(1)] = i
    out = []
    for text, i in found.items():
        step = re.fullmatch(r"(-?\d+) \+ (.*)", text)
        base, rest = (int(step.group(1)), step.group(2)) if step else (0, text)
        nxt = f"{base + 1} + {rest}" if base + 1 else rest
        if nxt in found and not rest.lstrip("-").isdigit():
            out.append((f"[U[{nxt}]-U[{text}]]", (i, found[nxt])))
    return out
