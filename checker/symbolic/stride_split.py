"""Rings stepped through at a stride, rewritten as rings stepped through one slot per iteration.

Two consumers that take alternate k-blocks of one ring (consumer c's iteration j is block
2j + c) step two slots per iteration while the producer steps one, and the static order
(order.py) aligns loops by a shift of their iterations only. The same program is rewritten so
that every loop on the ring takes the same number of blocks per iteration, and every ring index
moves one slot per iteration:

1. Threads specialised: a loop on the ring whose trip or indices name the thread index is one
   copy per thread (`when thread == c`), so each copy's indices are numbers plus loop terms.
2. Residues: the one symbolic parameter K in the trip counts is M*X + b for each residue
   b < M (X >= 0 a new parameter; the assumptions must give K >= 0), M the smallest modulus
   that makes every trip count p*X + r with p, r numbers (Z3 proves the identity for X >= 0):
   the consumers' (K + 1 - c) // 2 is X + r_c when K = 2X + b.
3. Strip-mining: a loop of p*X + r iterations at stride s is its first r iterations, then X
   iterations doing the old iterations r + p*t + u (u < p) each; every loop on the ring must
   then move A = p*s ring positions per iteration, the same A for all. (A loop of a concrete
   trip count, a producer tail over the stages, is strip-mined alike.)
4. Slots relabelled: with g = gcd(A, S), slot g*q + r of the ring of S is slot q' of sub-ring r
   (an array of S/g), q' = inv * q mod S/g, inv the inverse of A/g modulo S/g: an index
   (A*t + beta) % S becomes sub-ring beta % g at (t + c) % (S/g), one slot per iteration. A
   bijection of barrier instances changes no completion count, so every wait, parity and
   arrival means what it meant; Z3 checks each rewritten index against the old one.
   When A neither divides S nor is a multiple of it (4 positions per ping-pong tile on 3
   slots), a relabelled slot would be filled more than once per lap; the loops are instead
   strip-mined S / gcd(A, S) times further (M grows alike, a case per residue), so every
   iteration takes whole laps and every slot is a number (number_slots.py rewrites them in the
   proof; nothing is relabelled here).

Every step is the same program (each checked as it is made); anything outside these shapes is
left as it is and the reason returned, for the `unknown` (strides.py). A case whose program no
longer differs from the kernel (nothing strided) is not produced.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import z3

from ...model.expr import mk, substitute, substitute_stmts
from ...model.ir import (BarrierAlloc, BarrierRef, BinOp, Const, Expr, Kernel, Loop, ModelError,
                         Op, Param, Var, WarpRegion, When, evaluate, free_vars, unique_name, walk)
from .per_thread import Refused, outer_loops, map_loops, specialise_threads, touches
from .strides import lap_arrays, ring_strides, strided_arrays
from .terms import Solver, Unsupported, z_bool, z_int
from .unroll import MAX_UNROLL, unroll_fixed_loops

MAX_MODULUS = 8         # residues tried for the symbolic trip count
MAX_LAP_UNROLL = 16     # old iterations per new one when strip-mined to whole laps of a ring


@dataclass
class StrideCase:
    label: str              # "k_blocks = 2*k_blocks_q + 1"
    kernel: Kernel
    symbolic: list[str]


def stride_cases(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]
                 ) -> tuple[list[StrideCase] | None, str | None]:
    """(cases, None) when strided rings were rewritten (the kernel is proved iff every case
    is), (None, why) when a strided ring is outside the rewrite, (None, None) when there is
    none."""
    arrays = strided_arrays(kernel, fixed)
    # rings every loop steps alike but not slot by slot: whole laps, the other loops on the
    # same trip count strip-mined alike (the static order aligns iterations by a shift only)
    laps = not arrays
    arrays = arrays or lap_arrays(kernel, fixed)
    if not arrays:
        return None, None
    try:
        return _cases(kernel, list(symbolic), fixed, arrays, laps), None
    except (Refused, Unsupported, ModelError, KeyError, ZeroDivisionError) as err:
        # an expression the values cannot evaluate is outside the rewrite, too
        return None, f"the stride rewrite (stride_split.py) does not apply: {err}"


# ----------------------------------------------------------------------------------------------

def _exprs_of(alloc) -> list:
    """The size expressions of a buffer allocation (whatever fields it has)."""
    out = []
    for f in dataclasses.fields(alloc):
        v = getattr(alloc, f.name)
        for e in (v if isinstance(v, tuple) else (v,)):
            if isinstance(e, Expr):
                out.append(e)
    return out


def _env(kernel: Kernel, fixed, extra: Mapping[str, z3.ArithRef]) -> dict:
    env = {n: z3.IntVal(v) for n, v in fixed.items()}
    env.update(extra)
    return env


def _slot_lhs(ref: BarrierRef, size: int, fixed) -> Expr:
    """v in `v % S`, or a plain index (checked to be a slot below)."""
    if len(ref.index) != 1:
        raise Refused(f"`{ref}` is not indexed by one ring position")
    e = ref.index[0]
    if isinstance(e, BinOp) and e.op == "%" and not free_vars(e.rhs) - set(fixed) and \
            evaluate(e.rhs, fixed) == size:
        return e.lhs
    return e


def _cases(kernel: Kernel, symbolic: list[str], fixed, arrays, align: bool = False
           ) -> list[StrideCase]:
    sizes = {}
    for alloc in kernel.barriers:
        if alloc.name in arrays:
            if len(alloc.shape) != 1 or free_vars(alloc.shape[0]) - set(fixed):
                raise Refused(f"`{alloc.name}` is a ring of symbolic size: its slots cannot be "
                              "relabelled to one slot per iteration")
            sizes[alloc.name] = evaluate(alloc.shape[0], fixed)
    # nested loops of concrete trip unrolled (unroll.py): the ping-pong's k-tiles in a tile
    k = unroll_fixed_loops(specialise_threads(kernel, arrays, fixed), fixed)
    loops = [lp for lp in outer_loops(k.body) if touches(lp.body, arrays)]
    if any(isinstance(s, Loop) for lp in loops for s in walk(lp.body)):
        raise Refused("a loop on the strided ring holds another loop")
    # the loops beside the ring's on its trip count (strip-mined alike when `align`)
    beside = [lp for lp in outer_loops(k.body) if align and lp not in loops
              and free_vars(lp.trip) & set(symbolic)
              and not any(isinstance(s, Loop) for s in walk(lp.body))]
    params = sorted({n for lp in loops for n in free_vars(lp.trip) if n in symbolic})
    if any(free_vars(lp.trip) - set(fixed) - set(symbolic) for lp in loops):
        raise Refused("a trip count of a loop on the strided ring names the thread index or "
                      "another loop's variable")
    if len(params) != 1:
        raise Refused(f"the loops on the strided ring have trip counts over "
                      f"{', '.join(params) or 'no symbolic parameter'}, not over one")
    K = params[0]
    elsewhere = [e for a in k.barriers for e in (a.num_arrivals, *a.shape, a.copies)] + \
        [e for _, e in k.cluster + k.grid] + [e for m in k.buffers for e in _exprs_of(m)]
    if any(K in free_vars(e) for e in elsewhere):
        raise Refused(f"{K} also sizes a barrier, buffer, cluster or grid")
    X = unique_name(f"{K}_q", set(k.params) | {lp.var for lp in outer_loops(k.body)})
    x = z3.Int(X)
    for M in range(1, MAX_MODULUS + 1):
        plans = _plan(k, loops, symbolic, fixed, K, M, x, arrays, sizes, beside=beside)
        if plans is not None:
            break
    else:
        raise Refused(f"no modulus M <= {MAX_MODULUS} makes every trip count of the loops on "
                      f"the strided ring p*X + r with {K} = M*X + b, and every loop move the "
                      "same number of ring positions per iteration")
    for A, _ in plans:
        for name, S in sizes.items():
            if A % S == 0 and M == 1:
                raise Refused(f"every loop iteration takes {A} ring positions, a multiple of "
                              f"the {S} slots of `{name}`: every slot is a number already, "
                              "and the kernel is proved as it is (number_slots.py)")
    if any(A % S and S % A for A, _ in plans for S in sizes.values()):
        # Relabelled, such a ring would be one (sub-)ring that one loop iteration's A blocks
        # reach at A different slots: its phase at block A*t + u is (A*t + u) // S, not the
        # one-completion-per-lap count (i + c) // S' the ring classes read. Strip-mined
        # S / gcd(A, S) times further instead, every iteration takes a multiple of S
        # positions, so every slot is a number (number_slots.py reads the cases so).
        A = plans[0][0]
        name, S = next((n, S) for n, S in sizes.items() if A % S and S % A)
        lap = math.lcm(*(S // math.gcd(A, S) for S in sizes.values()))
        further = _plan(k, loops, symbolic, fixed, K, M * lap, x, arrays, sizes,
                        MAX_LAP_UNROLL, beside) \
            if M * lap <= MAX_MODULUS else None
        if further is None or any(A2 % S2 for A2, _ in further for S2 in sizes.values()):
            raise Refused(
                f"every loop iteration takes {A} ring positions, which do not divide the "
                f"{S} slots of `{name}`: relabelled, a slot is filled {A // math.gcd(A, S)} "
                f"times per lap of {S // math.gcd(A, S)} iterations, so its phase bit "
                f"counts blocks (({A}*t + u) // {S}), not laps of one slot ((t + c) // "
                f"{S // math.gcd(A, S)}), and the ring classes have no term for it; "
                f"strip-mining {lap} times further (a case per residue of {K} modulo "
                f"{M * lap}) to make every slot a number (number_slots.py) needs a modulus "
                f"<= {MAX_MODULUS} and at most {MAX_LAP_UNROLL} old iterations per new one")
        M, plans = M * lap, further
    # whole laps per iteration: every slot is a number (number_slots.py writes it so), nothing
    # to relabel
    relabel = any(A % S for A, _ in plans for S in sizes.values())
    base = _env(k, fixed, {n: z3.Int(n) for n in symbolic})
    solver = Solver([z_bool(a, base) for a in k.assumptions])
    if not solver.valid(base[K] >= 0):
        raise Refused(f"the assumptions do not give {K} >= 0 (state it with k.assume), so "
                      f"{K} is not a multiple of a modulus plus a residue")
    cases = []
    for b, (A, plan) in enumerate(plans):
        cases.append(_rewrite(k, K, X, M, b, A, plan, symbolic, fixed, arrays, sizes,
                              relabel, align))
    return cases


def _plan(k, loops, symbolic, fixed, K, M, x, arrays, sizes, most=MAX_UNROLL, beside=()):
    """Per residue b < M: (A, {id(loop): (p, trip, r)}), or None when M does not fit. A loop of
    p*X + r iterations does p old ones per new one (r peeled first, then X new ones); a loop of
    a concrete trip T (a producer tail over the stages) A / s (T % p peeled, then T // p).
    A loop `beside` (on no strided ring) whose trip is p*X + r too is strip-mined alike; one
    whose trip is not is left as it is."""
    out = []
    for b in range(M):
        env = _env(k, fixed, {n: z3.Int(n) for n in symbolic})
        env[K] = M * x + b
        solver = Solver([x >= 0] + [z_bool(a, env) for a in k.assumptions])
        plan, common, concrete = {}, None, []
        for lp in loops:
            s = _stride(lp, env, arrays, sizes)
            if s is None:
                return None
            if not free_vars(lp.trip) - set(fixed):
                concrete.append((lp, s))
                continue
            got = _split_trip(lp.trip, env, x, solver, most)
            if got is None:
                return None
            p, r = got
            if common is None:
                common = p * s
            elif common != p * s:
                return None
            plan[id(lp)] = (p, None, r)         # None: X new iterations
        if common is None:
            return None
        for lp in beside:
            got = _split_trip(lp.trip, env, x, solver, most)
            if got is not None:
                plan[id(lp)] = (got[0], None, got[1])
        for lp, s in concrete:
            T = max(0, evaluate(lp.trip, fixed))
            if s < 1 or common % s or common // s > most:
                return None
            p = common // s
            plan[id(lp)] = (p, Const(T // p), T % p)
        out.append((common, plan))
    return out


def _split_trip(trip, env, x, solver: Solver, most: int) -> tuple[int, int] | None:
    """(p, r) with trip == p*X + r for every X >= 0 (Z3), 1 <= p and 0 <= r at most `most`."""
    try:
        t = z_int(trip, env)
    except Unsupported:
        return None
    r = z3.simplify(z3.substitute(t, (x, z3.IntVal(0))))
    p = z3.simplify(z3.substitute(t, (x, z3.IntVal(1))) - r)
    if not (z3.is_int_value(p) and z3.is_int_value(r)) or p.as_long() < 1 or \
            not 0 <= r.as_long() <= most or p.as_long() > most:
        return None
    p, r = p.as_long(), r.as_long()
    return (p, r) if solver.valid(t == p * x + r) else None


def _stride(lp: Loop, env, arrays, sizes: Mapping[str, int] | None = None) -> int | None:
    """The one number of ring positions every access of the loop to a strided ring moves per
    iteration, or None. An index whose position is not linear (a cursor's closed form: the
    slot after K, `((2*i % 3) + 1) % 3`) agrees when its slot moves by that number modulo the
    ring's size at every iteration (Z3); the strip-mining it chooses is exact either way."""
    i = z3.Int(f"{lp.var}!stride")
    found = None
    wrapped = []
    for op in walk(lp.body):
        if not isinstance(op, Op) or op.barrier is None or op.barrier.alloc.name not in arrays:
            continue
        try:
            e = op.barrier.index[0]
            lhs = e.lhs if isinstance(e, BinOp) and e.op == "%" else e
            t = z_int(lhs, {**env, lp.var: i})
        except (Unsupported, IndexError):
            return None
        step = z3.simplify(z3.substitute(t, (i, i + 1)) - t)
        if not z3.is_int_value(step):
            if sizes is None or op.barrier.alloc.name not in sizes:
                return None
            wrapped.append((z_int(e, {**env, lp.var: i}), sizes[op.barrier.alloc.name]))
            continue
        if found is None:
            found = step.as_long()
        elif found != step.as_long():
            return None
    if found is not None and wrapped:
        check = Solver([i >= 0])
        if not all(check.valid((z3.substitute(t, (i, i + 1)) - t - found) % S == 0)
                   for t, S in wrapped):
            return None
    return found if found is not None or not wrapped else None


def _rewrite(k: Kernel, K, X, M, b, A, plan, symbolic, fixed, arrays, sizes,
             relabel: bool = True, fold: bool = False) -> StrideCase:
    value = mk("+", mk("*", Var(X), Const(M)), Const(b))
    sub = {K: value}
    taken = set(k.params) | {X} | {s.var for s in walk(k.body) if isinstance(s, Loop)}

    def strip(lp: Loop) -> tuple:
        if id(lp) not in plan:
            (new,) = substitute_stmts((lp,), sub)
            return (new,)
        p, trip, r = plan[id(lp)]
        trip = Var(X) if trip is None else trip
        t = Var(unique_name(lp.var + "_t", taken))
        # the r left over first, at constant positions (slots and phases that are numbers,
        # which a ring class reads most easily), then i = r + p*t + u
        if not relabel:
            # whole laps: the loop first, i = p*t + u, then the r left over, i = p*trip + u
            # (their slots are numbers too, and the static order reads one tail after the
            # loops more easily than a prefix of several tiles beside them)
            body = []
            for u in range(p):
                body.extend(substitute_stmts(lp.body, {**sub, lp.var: mk(
                    "+", mk("*", t, Const(p)), Const(u))}))
            # a loop of no iteration (a producer tail shorter than a lap) runs nothing
            out = [] if isinstance(trip, Const) and trip.value <= 0 else \
                [Loop(t.name, trip, tuple(body), lp.loc)]
            for u in range(r):
                out.extend(substitute_stmts(lp.body, {**sub, lp.var: mk(
                    "+", mk("*", trip, Const(p)), Const(u))}))
            return tuple(out)
        out = []
        for u in range(r):
            out.extend(substitute_stmts(lp.body, {**sub, lp.var: Const(u)}))
        body = []
        for u in range(p):
            body.extend(substitute_stmts(lp.body, {**sub, lp.var: mk(
                "+", mk("*", t, Const(p)), Const(r + u))}))
        out.append(Loop(t.name, trip, tuple(body), lp.loc))
        return tuple(out)

    body = map_loops(k.body, strip)
    # statements outside loops name K too (a producer tail after the loop)
    body = _outside(body, sub)
    params = {n: p for n, p in k.params.items() if n != K}
    default = k.params[K].default
    params[X] = Param(X, max(0, (default - b) // M) if default is not None else None, True)
    kernel = k.replace(body=body, params=params,
                       assumptions=tuple(substitute(a, sub) for a in k.assumptions)
                       + (Var(X) >= 0,),
                       num_threads=substitute(k.num_threads, sub))
    new_symbolic = [s if s != K else X for s in symbolic]
    if relabel:
        kernel = _relabel(kernel, A, X, symbolic, fixed, arrays, sizes)
    else:
        # every slot is a number: written so now (number_slots.py, each step checked by Z3),
        # so every partition of the proof sees scalar slots, not only the cover of hand-off
        # pairs that writes them itself
        from .number_slots import fold_parities, number_slots
        kernel = number_slots(kernel, new_symbolic, fixed)
        if fold:
            kernel = fold_parities(kernel, arrays, new_symbolic, fixed)
    label = f"{K} = {M}*{X} + {b}" if M > 1 else f"{K} = {X}"
    return StrideCase(label, kernel, new_symbolic)


def _outside(body, sub) -> tuple:
    out = []
    for s in body:
        if isinstance(s, Loop):
            out.append(s)           # already rewritten (or free of K by construction)
        elif isinstance(s, When):
            out.append(When(substitute(s.cond, sub), _outside(s.then, sub),
                            _outside(s.orelse, sub), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _outside(s.body, sub), s.loc))
        else:
            (op,) = substitute_stmts((s,), sub)
            out.append(op)
    return tuple(out)


def _relabel(k: Kernel, A: int, X: str, symbolic, fixed, arrays, sizes) -> Kernel:
    """Every strided ring of S slots as g = gcd(A, S) sub-rings of S/g, relabelled so that an
    index moving A positions per iteration moves one."""
    env = _env(k, fixed, {n: z3.Int(n) for n in list(symbolic) + [X]})
    solver = Solver([z_bool(a, env) for a in k.assumptions])
    new_allocs: dict[str, list[BarrierAlloc]] = {}
    info = {}
    for alloc in k.barriers:
        if alloc.name not in arrays:
            continue
        S = sizes[alloc.name]
        g = math.gcd(A, S)
        Sp = S // g
        inv = pow((A // g) % Sp, -1, Sp) if Sp > 1 else 0
        parts = [dataclasses.replace(alloc, name=alloc.name if g == 1 else
                                     f"{alloc.name}[{r}::{g}]", shape=(Const(Sp),), scalar=False)
                 for r in range(g)]
        new_allocs[alloc.name] = parts
        info[alloc.name] = (S, g, Sp, inv)

    def ref(r: BarrierRef, loop_var: str | None) -> BarrierRef:
        S, g, Sp, inv = info[r.alloc.name]
        lhs = _slot_lhs(r, S, fixed)
        names = [n for n in (loop_var, X) if n is not None]
        venv = {**env, **{n: z3.Int(n) for n in names}}
        t = z_int(lhs, venv)
        zero = {n: z3.IntVal(0) for n in names}
        beta = z3.simplify(z3.substitute(t, *[(venv[n], zero[n]) for n in names]))
        coef = {}
        for n in names:
            one = z3.substitute(t, *[(venv[m], z3.IntVal(1 if m == n else 0)) for m in names])
            coef[n] = z3.simplify(one - beta)
        if not z3.is_int_value(beta) or not all(z3.is_int_value(c) for c in coef.values()):
            raise Refused(f"`{r}` is not a ring position linear in the loop index and {X}")
        beta = beta.as_long()
        coef = {n: c.as_long() for n, c in coef.items()}
        linear = beta + sum(coef[n] * venv[n] for n in names)
        if not solver.valid(t == linear):
            raise Refused(f"`{r}` is not a ring position linear in the loop index and {X}")
        if lhs is r.index[0] and not solver.valid(z3.And(t >= 0, t < S)):
            raise Refused(f"`{r}` is neither `v % {S}` nor a slot")
        if any(c % g for c in coef.values()):
            raise Refused(f"`{r}` moves by a multiple of {g} positions in one program "
                          f"and not in another")
        sub_ring, q0 = beta % g, beta // g
        if Sp == 1:
            pos: Expr = Const(0)
        else:
            pos = Const((inv * q0) % Sp)
            for n in names:
                c = (inv * (coef[n] // g)) % Sp
                if c:
                    pos = mk("+", mk("*", Var(n), Const(c)), pos)
            pos = mk("%", pos, Const(Sp))
        # the old slot is slot `pos` of sub-ring `sub_ring`, relabelled back: check it
        back = g * (((A // g) * z_int(pos, venv)) % Sp) + sub_ring if Sp > 1 else sub_ring
        if not solver.valid(t % S == back):
            raise Refused(f"internal: the relabelled `{r}` is not the same slot")
        return BarrierRef(new_allocs[r.alloc.name][sub_ring], (pos,), r.block)

    def body(stmts, loop_var) -> tuple:
        out = []
        for s in stmts:
            if isinstance(s, Op):
                if s.barrier is not None and s.barrier.alloc.name in arrays:
                    names = [n for n in (loop_var, X) if n is not None]
                    venv = {**env, **{n: z3.Int(n) for n in names}}
                    s = dataclasses.replace(
                        s, barrier=ref(s.barrier, loop_var),
                        parity=_fold_div(s.parity, names, venv, solver, fixed),
                        phase=_fold_div(s.phase, names, venv, solver, fixed))
                out.append(s)
            elif isinstance(s, Loop):
                out.append(Loop(s.var, s.trip, body(s.body, s.var), s.loc))
            elif isinstance(s, When):
                out.append(When(s.cond, body(s.then, loop_var), body(s.orelse, loop_var), s.loc))
            else:
                out.append(WarpRegion(s.axis, body(s.body, loop_var), s.loc))
        return tuple(out)

    barriers = []
    for alloc in k.barriers:
        barriers += new_allocs.get(alloc.name, [alloc])
    return k.replace(body=body(k.body, None), barriers=tuple(barriers))


def _fold_div(e, names, env, solver: Solver, fixed):
    """`e` with every `(a*v + a*w + beta) // D` (a > 1 dividing D, beta a number) written
    `(v + w + beta // a) // (D / a)`: the same value for all integers v, w, and the lap count
    of the relabelled ring that the fragment reads from a ring loop's phase bit
    (`(i + c) // S`)."""
    if e is None or not isinstance(e, BinOp):
        return e
    lhs = _fold_div(e.lhs, names, env, solver, fixed)
    rhs = _fold_div(e.rhs, names, env, solver, fixed)
    out = mk(e.op, lhs, rhs)
    if e.op != "//" or free_vars(rhs) - set(fixed):
        return out
    D = evaluate(rhs, fixed)
    try:
        t = z_int(lhs, env)
    except Unsupported:
        return out
    moving = [n for n in names if n in free_vars(lhs)]
    if not moving or D < 2:
        return out
    zero = [(env[n], z3.IntVal(0)) for n in moving]
    beta = z3.simplify(z3.substitute(t, *zero))
    coef = [z3.simplify(z3.substitute(t, *[(env[m], z3.IntVal(int(m == n))) for m in moving])
                        - beta) for n in moving]
    if not (z3.is_int_value(beta) and all(z3.is_int_value(c) for c in coef)):
        return out
    beta, coef = beta.as_long(), [c.as_long() for c in coef]
    a = math.gcd(*coef)
    if a < 2 or D % a or not solver.valid(t == beta + sum(c * env[n]
                                                         for c, n in zip(coef, moving))):
        return out
    folded: Expr = Const(beta // a)
    for c, n in zip(coef, moving):
        folded = mk("+", mk("*", Var(n), Const(c // a)), folded)
    folded = mk("//", folded, Const(D // a))
    if not solver.valid(z_int(folded, env) == z_int(out, env)):
        return out
    return folded


def stride_mismatch(kernel, fixed: Mapping[str, int]) -> str | None:
    """A sentence naming two loops that step through one barrier ring at different strides
    (`(2*j + c) % S` beside `n % S`), and why the rewrite of stride_split.py, which makes
    them step alike, did not apply; or None."""
    for name, by_step in ring_strides(kernel, fixed).items():
        if len(by_step) > 1:
            (sa, (la, oa, ea)), (sb, (lb, ob, eb)) = sorted(by_step.items())[:2]
            symbolic = [n for n in kernel.params if n not in fixed]
            _, why = stride_cases(kernel, symbolic, fixed)
            return (f"the loop over {la.var} at {la.loc} steps through `{name}` {sa} slot(s) per "
                    f"iteration (`{oa.describe()}` at slot `{ea}`) and the loop over {lb.var} at "
                    f"{lb.loc} {sb} (`{ob.describe()}` at slot `{eb}`): a static order aligns "
                    "loops by a shift of their iterations, not by a stride, so no order fits"
                    + (f"; {why}" if why else ""))
    return None
