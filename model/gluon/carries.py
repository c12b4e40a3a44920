"""Closed forms of `scf.for` loop carries: the value of each carried integer at iteration j.

Gluon kernels keep a ring slot and its phase either as functions of the loop index
(`i % STAGES`, `(i // STAGES) & 1`, nothing carried) or as carried counters. The counter forms
the tutorials use are, per iteration:

- `c' = c + s` and the other forms Pallas loops have (model/pallas/loops.py `_induction`);
- a ring slot `c' = (c + s) % S` (printed by Triton as `select(c + 1 == S, 0, c + 1)`, which
  the translator reads as `(c + 1) % S` once it knows `c` stays below S);
- a phase that flips when its ring wraps: `p' = p ^ (c + 1 == S)` or `p' = p ^ ((c + s) // S)`,
  i.e. `p_j = p_0 ^ ((T_j // S) % 2)` where `T_j = c_0 + j*s` counts the ring's slots used;
- a phase toggled by the same value every iteration (`p' = p ^ 1`, or `p ^ x` for the parity x
  of an inner loop's trip count): `p_j = p_0 ^ (x * (j % 2))`, whatever `p_0` is;
- the same advanced several times an iteration (K and V through one ring): the slot
  `((c + 1) % S + 1) % S` is `(c + 2) % S`, and the phase is xor'ed with one wrap test per unit
  step, `(c + 1 == S) ^ ((c + 1) % S + 1 == S)`, whose parity is that of the wraps of the step.

>>> from barrierproof.model.ir import Var, Const
>>> c, p, j = Var("%c"), Var("%p"), Var("j")
>>> at, _ = solve({"%c": (Const(0), mk("%", mk("+", c, Const(1)), Const(3))),
...                "%p": (Const(0), mk("xor", p, mk("==", mk("+", c, Const(1)), Const(3))))},
...               j, Var("K"))
>>> at["%c"], at["%p"]
((j % 3), ((j // 3) % 2))
>>> two = mk("%", mk("+", mk("%", mk("+", c, Const(1)), Const(3)), Const(1)), Const(3))
>>> flip = mk("xor", mk("xor", p, mk("==", mk("+", c, Const(1)), Const(3))),
...           mk("==", mk("+", mk("%", mk("+", c, Const(1)), Const(3)), Const(1)), Const(3)))
>>> at, _ = solve({"%c": (Const(0), two), "%p": (Const(0), flip)}, j, Var("K"))
>>> at["%c"], at["%p"]
(((j * 2) % 3), (((j * 2) // 3) % 2))
"""

from __future__ import annotations

from ..expr import mk, same, substitute
from ..ir import BinOp, Const, Expr, Var, free_vars
from ..pallas.loops import _induction


def _position(e: Expr, rings_or_p, mod: int | None = None):
    """(ring, k, d) when `e` is `R + d` with R = `(c + k) % S` reduced (the ring `c` itself
    when k = 0): a position k unit steps past the ring's slot, d added after the last reduction.
    A `% S` of a position is that position reduced (the advances of a `Counter` composed)."""
    if isinstance(e, Var):
        names = rings_or_p
        if (e.name == names) if isinstance(names, str) else (e.name in names):
            return e.name, 0, 0
        return None
    if isinstance(e, BinOp) and e.op == "%" and isinstance(e.rhs, Const):
        inner = _position(e.lhs, rings_or_p, mod)
        s = e.rhs.value if mod is None else mod
        if inner is None or e.rhs.value != s:
            return None
        if not isinstance(rings_or_p, str) and rings_or_p[inner[0]][1] != s:
            return None
        return inner[0], inner[1] + inner[2], 0
    if isinstance(e, BinOp) and e.op == "+" and isinstance(e.rhs, Const):
        inner = _position(e.lhs, rings_or_p, mod)
        if inner is not None:
            return inner[0], inner[1], inner[2] + e.rhs.value
    return None


def _ring(new: Expr, p: str):
    """(step, modulus) when `new` is `(p + step) % S`, or a composition of such advances
    (`((p + 1) % S + 1) % S`: a `Counter` advanced twice per iteration)."""
    if isinstance(new, BinOp) and new.op == "%" and isinstance(new.rhs, Const) \
            and new.rhs.value > 0:
        inner = new.lhs
        if isinstance(inner, BinOp) and inner.op == "+" and isinstance(inner.lhs, Var) \
                and inner.lhs.name == p:
            return inner.rhs, new.rhs.value
        if isinstance(inner, Var) and inner.name == p:
            return Const(0), new.rhs.value
        pos = _position(new, p, new.rhs.value)
        if pos is not None:
            return Const(pos[1] + pos[2]), new.rhs.value
    return None


def _xor_terms(e: Expr) -> list[Expr]:
    if isinstance(e, BinOp) and e.op == "xor":
        return _xor_terms(e.lhs) + _xor_terms(e.rhs)
    return [e]


def _unit_wrap(e: Expr, rings: dict) -> tuple[str, int] | None:
    """(ring, k) when `e` is 1 exactly when the k-th unit step of the ring's advance wraps:
    `R + d == S` with R = `(c + k0) % S` reduced, i.e. `(c + k0 + d - 1) % S == S - 1`."""
    if not (isinstance(e, BinOp) and e.op == "==" and isinstance(e.rhs, Const)):
        return None
    pos = _position(e.lhs, rings)
    if pos is None:
        return None
    ring, k0, d = pos
    step, mod, _ = rings[ring]
    if e.rhs.value != mod or not 1 <= d <= mod:
        return None
    return ring, k0 + d - 1


def _flips(terms: list[Expr], rings: dict) -> str | None:
    """The ring whose wraps `terms` (xor'ed) flip a phase by: one `_wraps` term, or one unit
    wrap per unit step of a constant step (a `Counter` advanced several times an iteration)."""
    if len(terms) == 1:
        w = _wraps(terms[0], rings)
        if w is not None:
            return w[0]
    units = [_unit_wrap(t, rings) for t in terms]
    if not units or None in units or len({r for r, _ in units}) != 1:
        return None
    ring = units[0][0]
    step = rings[ring][0]
    if isinstance(step, Const) and sorted(k for _, k in units) == list(range(step.value)):
        return ring
    return None


def _wraps(e: Expr, rings: dict) -> tuple[str, bool] | None:
    """(ring, _) when `e` is 1 exactly at iterations where that ring wraps: `c + 1 == S` for a
    ring of step 1, or `(c + s) // S` (optionally `% 2`) for a ring of step s."""
    if isinstance(e, BinOp) and e.op == "%" and isinstance(e.rhs, Const) and e.rhs.value == 2:
        e = e.lhs
    if isinstance(e, BinOp) and e.op == "==" and isinstance(e.rhs, Const):
        lhs = e.lhs
        if isinstance(lhs, BinOp) and lhs.op == "+" and isinstance(lhs.lhs, Var) \
                and lhs.lhs.name in rings:
            step, mod, _ = rings[lhs.lhs.name]
            if same(lhs.rhs, Const(1)) and same(step, Const(1)) and e.rhs.value == mod:
                return lhs.lhs.name, True
    if isinstance(e, BinOp) and e.op == "//" and isinstance(e.rhs, Const):
        lhs = e.lhs
        if isinstance(lhs, BinOp) and lhs.op == "+" and isinstance(lhs.lhs, Var) \
                and lhs.lhs.name in rings:
            step, mod, _ = rings[lhs.lhs.name]
            if same(lhs.rhs, step) and e.rhs.value == mod:
                return lhs.lhs.name, True
    return None


def _below(init: Expr, mod: int, assumed: list | None) -> bool:
    """Is `init` known to lie in [0, mod)? A carry of an enclosing loop (a Var named `%...`)
    is taken to, and the claim is put on `assumed` for that loop to discharge."""
    if isinstance(init, Const):
        return 0 <= init.value < mod
    if isinstance(init, Var) and init.name.startswith("%") and assumed is not None:
        assumed.append((init.name, mod))
        return True
    return isinstance(init, BinOp) and init.op == "%" and isinstance(init.rhs, Const) \
        and init.rhs.value == mod


def discharged(value: Expr, mod: int) -> bool:
    """Does a closed form stay in [0, mod)?"""
    return _below(value, mod, None)


def solve(carries: dict[str, tuple[Expr, Expr]], j: Var, trip: Expr | None,
          assumed: list | None = None):
    """Closed forms {placeholder: value at iteration j} and {placeholder: value after `trip`
    iterations} for the carries that have one; the others are missing from both. `assumed`
    collects the ranges taken for enclosing loops' carries (see `_below`)."""
    at: dict[str, Expr] = {}
    rings: dict[str, tuple[Expr, int, Expr]] = {}      # placeholder -> (step, S, T_j)
    names = set(carries)
    for _ in range(len(carries) + 1):
        progress = False
        for p, (init, new) in carries.items():
            if p in at or not isinstance(init, Expr):
                continue
            others = free_vars(new) & (names - {p})
            ring = _ring(new, p)
            if ring is not None and not (free_vars(ring[0]) & names) \
                    and j.name not in free_vars(ring[0]) and _below(init, ring[1], assumed):
                total = mk("+", init, mk("*", j, ring[0]))
                at[p] = mk("%", total, Const(ring[1]))
                rings[p] = (ring[0], ring[1], total)
                progress = True
                continue
            terms = _xor_terms(new)
            own = [t for t in terms if isinstance(t, Var) and t.name == p]
            if len(own) == 1 and len(terms) > 1 \
                    and (not isinstance(init, Const) or init.value in (0, 1)):
                rest = [t for t in terms if t is not own[0]]
                ring = _flips(rest, rings)
                if ring is not None:
                    _, mod, total = rings[ring]
                    at[p] = mk("xor", init, mk("%", mk("//", total, Const(mod)), Const(2)))
                    progress = True
                    continue
            if len(own) == 1 and len(terms) > 1 and isinstance(init, Expr):
                # a phase toggled by the same x every iteration (`p ^ 1`, or the parity of an
                # inner loop's trip count): x ^ x cancels, so p_j = p_0 ^ (x * (j % 2))
                rest = [t for t in terms if t is not own[0]]
                flip = rest[0]
                for t in rest[1:]:
                    flip = mk("xor", flip, t)
                if not free_vars(flip) & (names | {j.name}):
                    at[p] = mk("xor", init, mk("*", flip, mk("%", j, Const(2))))
                    progress = True
                    continue
            if others:
                continue
            value, _ = _induction(Var(p), init, new, j, None, names)
            if value is not None:
                at[p] = value
                progress = True
        if not progress:
            break
    after = {p: substitute(v, {j.name: trip}) for p, v in at.items()} if trip is not None else {}
    return at, after
