"""A grid whose positions run different nests, proved one position at a time.

A persistent kernel on a grid of m blocks under a static scheduler walks ceil((tiles - b) / m)
tiles in block b: the frontend reads it as `when block in B: nest over T_b x K else: ...`, one
nest shape per grid position (model/cute/walks.py). nested.py flattens one tile x K shape per
kernel, so the kernel as a whole is outside its reach, each position's program within it.

Grid positions share nothing: the semantics compiles one System per grid position
(model/grid.py, `compile_systems`), each with its own barriers, buffers and threads, and a
kernel's verdict is the union of its positions' verdicts. So the kernel is proved for every
parameter value iff the program of every position is, where the program of position b is the
kernel with its grid axes bound to b (a branch on them kept or dropped, model/expr.py's
substitution) and no grid left. The split is taken only when that binding is complete: every
grid size a constant at the fixed parameters (not a symbolic one, which would make the set of
positions depend on the values proved for), at most MAX_POSITIONS positions, no name of the
program shadowing an axis, no global semaphore (one counter the whole grid signals) and no
axis left in any expression afterwards; otherwise the kernel is proved as it is (and the nest
names what stops it there).

In a position's program the tile count n is often read only through the block's share of it
(`(n + 1) // 2`): that share is a parameter of its own there, proved from the least value Z3
shows it takes (a wider range than the shares of n, and linear: the division leaves the
invariant searches). Two positions whose programs then differ only in such lower bounds are one
program, proved once from the lesser bound.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Callable, Mapping, Sequence

from ...model.expr import substitute
from ...model.grid import _bound_names, _exprs
import z3

from ...model.ir import (BinOp, Const, Expr, Kernel, Loop, Op, Param, UnOp, Var, WarpRegion, When,
                         evaluate, free_vars, iter_ops, unique_name)
from .nested import _map_exprs, _replace, _term
from .proofs import ClassProof, Proof

MAX_POSITIONS = 8


@dataclasses.dataclass
class Position:
    positions: list[dict[str, int]]     # grid axis -> its value, at each position it stands for
    program: Kernel                     # the kernel there, without a grid
    symbolic: list[str]             # its symbolic parameters
    notes: list[str]                # the rewrites it rests on


def _nest_per_position(body, axes: set[str]) -> bool:
    """Whether a branch on the grid axes alone holds a loop holding a loop: the positions then
    run nests of their own (a static scheduler's walk)."""
    for s in body:
        if isinstance(s, When):
            if free_vars(s.cond) and free_vars(s.cond) <= axes and any(
                    isinstance(x, Loop) and any(isinstance(y, Loop) for y in _loops(x.body))
                    for x in _loops(s.then + s.orelse)):
                return True
            if _nest_per_position(s.then + s.orelse, axes):
                return True
        elif hasattr(s, "body") and _nest_per_position(s.body, axes):
            return True
    return False


def _loops(body):
    for s in body:
        if isinstance(s, Loop):
            yield s
            yield from _loops(s.body)
        elif isinstance(s, When):
            yield from _loops(s.then + s.orelse)
        elif hasattr(s, "body"):
            yield from _loops(s.body)


def _rewrite(body, fn, memo: dict) -> tuple:
    """The statements with `fn` applied to every expression, a branch on a constant kept or
    dropped; an op held at two places stays one op (the roles of a block share the instruction
    of a named barrier they all reach: hw.py tells instructions apart by identity)."""
    out = []
    for s in body:
        if isinstance(s, Op):
            if id(s) not in memo:
                memo[id(s)] = _map_exprs((s,), fn)[0]
            out.append(memo[id(s)])
        elif isinstance(s, Loop):
            out.append(Loop(s.var, fn(s.trip), _rewrite(s.body, fn, memo), s.loc))
        elif isinstance(s, When):
            cond = fn(s.cond)
            then, orelse = _rewrite(s.then, fn, memo), _rewrite(s.orelse, fn, memo)
            if isinstance(cond, Const):
                out.extend(then if cond.value else orelse)
            else:
                out.append(When(cond, then, orelse, s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _rewrite(s.body, fn, memo), s.loc))
        else:
            raise TypeError(f"not a statement: {s!r}")
    return tuple(out)


def _names(program: Kernel) -> set[str]:
    """Every name the program's expressions read (statements, operands, declarations)."""
    rest = (program.body, program.barriers, program.buffers, program.num_threads,
            program.cluster, program.grid)
    return set().union(*(free_vars(e) for e in _exprs(rest)))


def _quotients(e: Expr, name: str, params: set[str]):
    """The floor quotients by a positive constant inside `e` that read `name` and nothing but
    parameters."""
    if isinstance(e, BinOp):
        if e.op == "//" and isinstance(e.rhs, Const) and e.rhs.value > 0 and \
                name in free_vars(e) <= params:
            yield e
        yield from _quotients(e.lhs, name, params)
        yield from _quotients(e.rhs, name, params)
    elif isinstance(e, UnOp):
        yield from _quotients(e.arg, name, params)


def _share(program: Kernel, symbolic: list[str], fixed: Mapping[str, int]
           ) -> tuple[Kernel, list[str], list[str]]:
    """The program with each position's share of a count -- a floor quotient E of a symbolic
    parameter n that reads n wherever n is read (`(tiles + 1) // 2` in block 0 of two) -- as a
    parameter of its own, proved for every value >= the least E takes under the assumptions on
    n. The program reads n only through E, so its runs at any n are its runs at that value of
    E: covering every value from E's least one up covers every n (a wider range). E's
    divisions stay hidden variables of every invariant otherwise."""
    notes = []
    for n in list(symbolic):
        found = {repr(q): q for e in _exprs((program.body, program.barriers, program.buffers))
                 for q in _quotients(e, n, set(program.params))}
        name = unique_name(f"{n}_share", set(program.params) | _names(program))
        for key, E in sorted(found.items(), key=lambda kv: len(kv[0])):
            candidate = program.replace(body=_rewrite(
                program.body, lambda e, key=key: _replace(e, {key}, Var(name)), {}))
            if n not in _names(candidate):
                break           # n is read through E alone
        else:
            continue            # read elsewhere too, or no quotient: kept as it is
        on_n = [a for a in program.assumptions if n in free_vars(a)]
        if any(free_vars(a) - {n} - set(fixed) for a in on_n):
            continue            # an assumption tying n to another symbolic parameter
        least = _least(E, on_n, fixed)
        if least is None:
            continue
        params = {k: q for k, q in program.params.items() if k != n}
        try:
            default = evaluate(E, program.param_values(dict(fixed)))
        except Exception:       # a parameter without a default: the share has none either
            default = None
        params[name] = Param(name, default, symbolic=True)
        kept = tuple(a for a in program.assumptions if n not in free_vars(a))
        program = candidate.replace(params=params,
                                    assumptions=kept + (BinOp(">=", Var(name), Const(least)),))
        symbolic = [x for x in symbolic if x != n] + [name]
        notes.append(f"`{n}` is read only through `{E}` here: that is a parameter `{name}` "
                     f"of its own, proved for every {name} >= {least} (the least value it "
                     f"takes under the assumptions on {n}, Z3), which covers every {n}")
    return program, symbolic, notes


def _least(E: Expr, assumptions: list[Expr], fixed: Mapping[str, int]) -> int | None:
    """The largest c in 0..8 with E >= c wherever the assumptions hold (Z3, floor division
    exact); None when they do not keep E >= 0."""
    env = {k: z3.IntVal(v) for k, v in fixed.items()}
    solver = z3.Solver()
    solver.set(timeout=5000)
    solver.add(*(_term(a, env) != 0 for a in assumptions))
    for c in range(8, -1, -1):
        solver.push()
        solver.add(_term(E, env) < c)
        answer = solver.check()
        solver.pop()
        if answer == z3.unsat:
            return c
    return None


def split_positions(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]
                    ) -> list[Position] | None:
    """The program of every grid position when the kernel's positions run nests of their own
    and bind completely (module doc); else None. A position's share of the tiles, a floor
    quotient of the tile count read only as its loops' trip count, is a parameter of its own
    there (opaque_counts.py)."""
    axes = {a for a, _ in kernel.grid}
    if not axes or axes & _bound_names(kernel) or not _nest_per_position(kernel.body, axes) \
            or any(b.semaphore for b in kernel.barriers):
        return None             # (a global semaphore is one counter across the grid)
    sizes = []
    for axis, size in kernel.grid:
        if free_vars(size) - set(fixed):
            return None         # a grid sized by a symbolic parameter
        sizes.append((axis, evaluate(size, dict(fixed))))
    total = 1
    for _, n in sizes:
        total *= max(1, n)
    if total > MAX_POSITIONS:
        return None
    out = []
    for combo in itertools.product(*(range(max(1, n)) for _, n in sizes)):
        position = dict(zip((a for a, _ in sizes), combo))
        env = {a: Const(v) for a, v in position.items()}
        body = _rewrite(kernel.body, lambda e: substitute(e, env), {})
        program = kernel.replace(body=body, grid=())
        rest = (program.body, program.barriers, program.buffers, program.num_threads,
                program.cluster, program.assumptions)
        if any(free_vars(e) & axes for e in _exprs(rest)):
            return None         # an axis read where the substitution does not reach
        program, names, notes = _share(program, list(symbolic), fixed)
        out.append(Position([position], program, names, notes))
    return _merge(out)


def _key(part: Position) -> tuple:
    """What a position's program is, but for the lower bounds its assumptions put on its
    parameters (`x >= c`) and the parameters' defaults: the statements (with which of them are
    one op held at two places), the declarations and the other assumptions."""
    k = part.program
    first: dict[int, int] = {}
    shared = tuple(first.setdefault(id(op), len(first)) for op in iter_ops(k.body))
    return (repr(k.body), shared, repr(k.barriers), repr(k.buffers), repr(k.num_threads),
            repr(k.cluster), tuple(part.symbolic), tuple(k.params),
            tuple(sorted(repr(a) for a in k.assumptions if _lower_bound(a) is None)))


def _lower_bound(a: Expr) -> tuple[str, int] | None:
    if isinstance(a, BinOp) and a.op == ">=" and isinstance(a.lhs, Var) and \
            isinstance(a.rhs, Const):
        return a.lhs.name, a.rhs.value
    return None


def _merge(parts: list[Position]) -> list[Position]:
    """Positions whose programs are one program but for the lower bounds on its parameters
    proved once, from the least bound of each (a wider range covers each of them; block 1 of
    two walks `tiles // 2` >= 0 tiles, block 0 `(tiles + 1) // 2` >= 1: one program over a
    share >= 0)."""
    groups: dict[tuple, list[Position]] = {}
    for part in parts:
        groups.setdefault(_key(part), []).append(part)
    out = []
    for group in groups.values():
        head = group[0]
        if len(group) == 1:
            out.append(head)
            continue
        bounds: dict[str, set] = {}
        for part in group:
            for a in part.program.assumptions:
                if (b := _lower_bound(a)) is not None:
                    bounds.setdefault(b[0], set()).add(b[1])
        # a name bounded in some positions only is unbounded in the merge (wider still)
        every = {n for n in bounds if all(any((b := _lower_bound(a)) and b[0] == n
                                              for a in p.program.assumptions) for p in group)}
        kept = tuple(a for a in head.program.assumptions if _lower_bound(a) is None) + tuple(
            BinOp(">=", Var(n), Const(min(bounds[n]))) for n in sorted(every))
        positions = [x for p in group for x in p.positions]
        notes = list(dict.fromkeys(n for p in group for n in p.notes))
        notes.append(f"{len(group)} positions run one program but for lower bounds on its "
                     "parameters: proved once from the least bound of each, which covers "
                     "every one of them")
        out.append(Position(positions, head.program.replace(assumptions=kept), head.symbolic,
                            notes))
    return out


def _text(position: Mapping[str, int]) -> str:
    return ", ".join(f"{a}={v}" for a, v in position.items())


def by_position(parts: list[Position], budget,
                prove_one: Callable[[Kernel, list[str], object], Proof], what: str = "") -> Proof:
    """The kernel's proof from its positions' proofs (`prove_one(program, its symbolic
    parameters, budget share)`):
    proved iff every position is; failed if one fails; else unknown, naming the position. Each
    position gets an equal share of what the ones before it left."""
    start = time.perf_counter()
    classes: list[ClassProof] = []
    side: list[str] = []
    cases: list[str] = []
    for i, part in enumerate(parts):
        name = " and ".join(_text(p) for p in part.positions)
        share = budget.share_of_left(1 / (len(parts) - i)) if i < len(parts) - 1 else budget
        proof = prove_one(part.program, part.symbolic, share)
        if proof.status != "proved":
            return Proof(proof.status, time.perf_counter() - start,
                         f"grid position {name}{what}: {proof.reason}", classes + proof.classes,
                         side + proof.side_conditions)
        classes += [ClassProof(f"{name}: {c.name}", c.status, c.seconds, c.reason,
                               c.invariant_size, c.samples, c.peer_exit) for c in proof.classes]
        side += [s for s in proof.side_conditions if s not in side]
        cases += [f"{name}: {c}" for c in part.notes + proof.cases]
    names = "; ".join(" and ".join(_text(x) for x in p.positions) for p in parts)
    note = (f"grid positions proved one by one ({names}): each is a System of its own with its "
            "own barriers and buffers (model/grid.py), so the kernel holds iff every position "
            "does (checker/symbolic/positions.py)")
    return Proof("proved", time.perf_counter() - start, "", classes, side, cases=[note] + cases)


__all__ = ["MAX_POSITIONS", "Position", "by_position", "split_positions"]
