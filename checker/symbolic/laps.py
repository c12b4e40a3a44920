"""A software pipeline whose drain names its last slot by the trip count, cut into whole laps.

A single-loop pipeline over a concrete ring of S slots (Gluon's tcgen05 matmul) issues its first
loads before the loop, `when n > j: load(j)`, waits inside it for the MMA that last read the
slot it refills, `when k > 0: wait(mma[(k + S - 1) % S])`, and drains after it with
`when n > 0: wait(mma[(n - 1) % S], ((n - 1) // S) & 1)`. The drain's slot depends on n, so
no representative slot of the ring stands for it (classes.py), and the class of every barrier
pays for the first and the last lap's guards in Houdini. The same program, case by case on
the trip count n:

- n <= 0 and 1 <= n < 2S: programs with nothing symbolic left, for the explorer (every
  guard and trip count over n is proved by Z3 to take its value at n = 0 for every n <= 0);
- n = S*X + b for each b < S, X >= 2: the loop is its first lap, a loop of X - 2 middle
  laps, its last lap and b more iterations, each lap its S iterations written out. Every
  guard whose value Z3 proves (under X >= 2 and the lap's range) is resolved, so the middle
  laps run unguarded, and every slot is a number (number_slots.py, each rewrite checked by
  Z3 there): a loop of hand-off pairs `load[j]`/`mma[j]` with linear phases.

Races are proved on the same cases (engine.py), each slot's buffers split per slot and judged
with its hand-off pair; buffers only the thread's tcgen05 MMAs touch are left out (one agent).

A count read only through `(K + c) // d` (d >= 1: onto the integers) is that count: the
kernel depends on K only through it, so cases over it cover every K.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import z3

from ...model.expr import mk, substitute_stmts
from ...model.ir import (BinOp, Const, Expr, Kernel, Loop, Op, Param, Var, When, evaluate,
                         free_vars, map_ops, unique_name, walk)
from ...model.primitives import TCGEN05_MMA
from .number_slots import number_slots
from .terms import Unsupported, z_bool, z_int

MAX_RING = 8


@dataclass
class LapCase:
    label: str
    kernel: Kernel
    symbolic: list[str]          # [] for a case the explorer decides
    values: dict[str, int]       # the case's parameter values (its point when concrete)


def _replace_expr(obj, key: str, new: Expr):
    """`obj` (statements or an expression) with every subexpression printed `key` replaced."""
    if isinstance(obj, Expr):
        if repr(obj) == key:
            return new
        if isinstance(obj, BinOp):
            return BinOp(obj.op, _replace_expr(obj.lhs, key, new), _replace_expr(obj.rhs, key, new))
        return obj
    return obj


def _count_of(kernel: Kernel, p: str) -> Expr | None:
    """The one expression `(p + c) // d` through which the loops' trip counts read p, or p."""
    trips = [s.trip for s in walk(kernel.body) if isinstance(s, Loop) and p in free_vars(s.trip)]
    if len(trips) != 1:
        return None
    t = trips[0]
    if isinstance(t, Var):
        return t
    if isinstance(t, BinOp) and t.op == "//" and isinstance(t.rhs, Const) and t.rhs.value >= 1:
        inner = t.lhs
        if isinstance(inner, Var) or (isinstance(inner, BinOp) and inner.op in ("+", "-") and
                                      isinstance(inner.lhs, Var) and isinstance(inner.rhs, Const)):
            return t
    return None


def _map_exprs(stmts, f) -> tuple:
    out = []
    for s in stmts:
        if isinstance(s, Loop):
            out.append(Loop(s.var, f(s.trip), _map_exprs(s.body, f), s.loc))
        elif isinstance(s, When):
            out.append(When(f(s.cond), _map_exprs(s.then, f), _map_exprs(s.orelse, f), s.loc))
        elif isinstance(s, Op):
            kw = {}
            for name in ("count", "bytes", "parity", "phase", "bar_id"):
                v = getattr(s, name)
                if isinstance(v, Expr):
                    kw[name] = f(v)
            if s.barrier is not None:
                kw["barrier"] = dataclasses.replace(s.barrier,
                                                    index=tuple(f(i) for i in s.barrier.index))
            kw["reads"] = tuple(dataclasses.replace(r, index=tuple(f(i) for i in r.index))
                                for r in s.reads)
            kw["writes"] = tuple(dataclasses.replace(r, index=tuple(f(i) for i in r.index))
                                 for r in s.writes)
            out.append(dataclasses.replace(s, **kw))
        else:
            raise Unsupported(f"{type(s).__name__} in a lap-cut program")
    return tuple(out)


def _resolve(stmts, facts, env) -> tuple:
    """Guards whose value Z3 proves under `facts` resolved (the same program where they hold)."""
    out: list = []
    for s in stmts:
        if isinstance(s, When):
            c = z_bool(s.cond, env)
            if _valid(facts, c):
                out += _resolve(s.then, facts, env)
                continue
            if _valid(facts, z3.Not(c)):
                out += _resolve(s.orelse, facts, env)
                continue
            out.append(When(s.cond, _resolve(s.then, facts, env), _resolve(s.orelse, facts, env),
                            s.loc))
        elif isinstance(s, Loop):
            v = z3.Int(s.var)
            env2 = {**env, s.var: v}
            inner = facts + [v >= 0, v < z_int(s.trip, env)]
            out.append(Loop(s.var, s.trip, _resolve(s.body, inner, env2), s.loc))
        else:
            out.append(s)
    return tuple(out)


def _valid(facts, claim) -> bool:
    s = z3.Solver()
    s.set("timeout", 5000)
    s.add(*facts, z3.Not(claim))
    return s.check() == z3.unsat


def _ring_size(kernel: Kernel, fixed) -> int | None:
    sizes = set()
    for a in kernel.barriers:
        if len(a.shape) != 1:
            return None
        try:
            sizes.add(evaluate(a.shape[0], dict(fixed)) if isinstance(a.shape[0], Expr)
                      else int(a.shape[0]))
        except Exception:
            return None
    sizes.discard(1)
    return sizes.pop() if len(sizes) == 1 and 2 <= min(sizes) <= MAX_RING else None


def lap_cases(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]
              ) -> tuple[list[LapCase], str] | None:
    """The cases of the module doc, with the note that says what was cut; None when the kernel
    is not of that shape (one symbolic count, one top-level loop over it, a top-level
    operation on the ring whose slot reads the count)."""
    if len(symbolic) != 1 or repr(kernel.num_threads) != "1" or kernel.assumptions:
        return None
    p = symbolic[0]
    loops = [i for i, s in enumerate(kernel.body) if isinstance(s, Loop)]
    if len(loops) != 1 or any(isinstance(s, Loop) for s in walk(kernel.body[loops[0]].body)):
        return None
    S = _ring_size(kernel, fixed)
    if S is None:
        return None
    count = _count_of(kernel, p)
    if count is None:
        return None
    # the drain: an operation after the loop whose slot reads the count
    drains = [op for s in kernel.body[loops[0] + 1:] for op in walk((s,)) if isinstance(op, Op)
              and op.barrier is not None and any(p in free_vars(i) for i in op.barrier.index)]
    if not drains:
        return None
    n = unique_name("n", set(kernel.params) | {s.var for s in walk(kernel.body)
                                                if isinstance(s, Loop)})
    body = _map_exprs(kernel.body, lambda e: _replace_expr(e, repr(count), Var(n)))
    reads = set()
    for s in walk(body):
        if isinstance(s, (Loop, When, Op)):
            reads |= free_vars(_map_probe(s))
    if p in reads and not isinstance(count, Var):
        return None         # the parameter is read beside its count
    base = kernel.replace(body=body, params={**{k: v for k, v in kernel.params.items()
                                                if k != p}, n: Param(n, None, symbolic=True)})
    env = {k: z3.IntVal(v) for k, v in fixed.items()}
    zn = z3.Int(n)
    env[n] = zn
    cases: list[LapCase] = []
    # n <= 0: the program at n = 0, each guard and count proved to take its value there
    at0 = _resolve(body, [zn <= 0], env)
    # (what is left reads n only in loops that run no iteration)
    if any(isinstance(s, Loop) and not _valid([zn <= 0], z_int(s.trip, env) <= 0)
           for s in at0) or any(isinstance(s, When) for s in at0) or \
            any(not isinstance(s, Loop) and n in free_vars(_map_probe(s)) for s in at0):
        return None
    cases.append(LapCase(f"{n} <= 0", base.replace(body=substitute_stmts(at0, {n: Const(0)})),
                         [], {n: 0}))
    for v in range(1, 2 * S):
        cases.append(LapCase(f"{n} = {v}", base.replace(body=substitute_stmts(body, {n: Const(v)})),
                             [], {n: v}))
    i = loops[0]
    loop = body[i]
    X = unique_name("laps", set(base.params) | {n})
    t = unique_name("t", {s.var for s in walk(body) if isinstance(s, Loop)} | {X, n})
    vx, vt = Var(X), Var(t)
    for b in range(S):
        total = mk("+", mk("*", Const(S), vx), Const(b))

        def lap(start: Expr, width: int) -> tuple:
            out: tuple = ()
            for r in range(width):
                out += substitute_stmts(loop.body, {loop.var: mk("+", start, Const(r))})
            return out

        first = lap(Const(0), S)
        middle = lap(mk("*", Const(S), mk("+", vt, Const(1))), S)
        last = lap(mk("*", Const(S), mk("-", vx, Const(1))), S) + lap(mk("*", Const(S), vx), b)
        cut = body[:i] + first + (Loop(t, mk("-", vx, Const(2)), middle, loop.loc),) + last \
            + body[i + 1:]
        cut = substitute_stmts(cut, {n: total})
        zx = z3.Int(X)
        envx = {**{k: z3.IntVal(v) for k, v in fixed.items()}, X: zx}
        cut = _resolve(cut, [zx >= 2], envx)
        params = {k: v for k, v in base.params.items() if k != n}
        params[X] = Param(X, 2, symbolic=True)
        k2 = base.replace(body=cut, params=params, assumptions=(BinOp(">=", vx, Const(2)),))
        numbered = number_slots(k2, [X], fixed)
        if numbered is k2:
            return None
        numbered = _split_buffers(numbered.replace(
            body=_map_mem(numbered.body, _buffer_slot(envx, [zx >= 2]))))
        cases.append(LapCase(f"{n} = {S}*{X} + {b}, {X} >= 2", numbered, [X], {}))
    note = (f"the loop's trip count `{count}` taken as {n}, cut into laps of the ring of {S} "
            f"(checker/symbolic/laps.py): {n} <= 0 and {n} = 1..{2 * S - 1} by the explorer, "
            f"{n} = {S}*{X} + b (b < {S}, {X} >= 2) proved with the first and last lap apart")
    return cases, note


def _buffer_slot(env, facts):
    """A buffer index `e % S` that Z3 proves one number (a whole lap's multiple of S plus a
    number) written as that number."""
    def f(e):
        if not (isinstance(e, BinOp) and e.op == "%" and isinstance(e.rhs, Const)):
            return e
        names = free_vars(e)
        local = dict(env)
        extra = list(facts)
        for v in names:
            if v not in local:
                local[v] = z3.Int(v)
                extra.append(local[v] >= 0)
        try:
            value = evaluate(e, {v: 2 for v in names})
            if _valid(extra, z_int(e, local) == value):
                return Const(value)
        except (Unsupported, Exception):
            pass
        return e
    return f


def _split_buffers(kernel: Kernel) -> Kernel:
    """Each 1-D buffer whose every use names one number split into one buffer per slot (a
    bijection of cells: the same accesses), so each slot goes with its hand-off pair."""
    uses: dict[str, set] = {}
    whole = set()
    for op in walk(kernel.body):
        if isinstance(op, Op):
            for r in op.reads + op.writes:
                if len(r.index) == 1 and isinstance(r.index[0], Const) and not r.region:
                    uses.setdefault(r.alloc.name, set()).add(r.index[0].value)
                else:
                    whole.add(r.alloc.name)
    parts = {}
    for alloc in kernel.buffers:
        if alloc.name in uses and alloc.name not in whole and len(alloc.shape) == 1 \
                and not alloc.scalar and not alloc.granule:
            parts[alloc.name] = {i: dataclasses.replace(alloc, name=f"{alloc.name}[{i}]",
                                                        shape=(Const(1),), scalar=True)
                                 for i in sorted(uses[alloc.name])}
    if not parts:
        return kernel

    def f(r):
        if r.alloc.name not in parts:
            return r
        return dataclasses.replace(r, alloc=parts[r.alloc.name][r.index[0].value], index=())

    body = _map_refs(kernel.body, f)
    buffers = []
    for alloc in kernel.buffers:
        buffers += list(parts[alloc.name].values()) if alloc.name in parts else [alloc]
    return kernel.replace(body=body, buffers=tuple(buffers))


def _map_refs(stmts, f) -> tuple:
    """Every memory reference of the operations mapped by `f`."""
    return map_ops(stmts, lambda op: dataclasses.replace(
        op, reads=tuple(f(r) for r in op.reads), writes=tuple(f(r) for r in op.writes))
        if op.reads or op.writes else op)


def _map_mem(stmts, f) -> tuple:
    """Every index expression of the operations' memory references mapped by `f`."""
    return _map_refs(stmts, lambda r: dataclasses.replace(r, index=tuple(f(i) for i in r.index)))


def _map_probe(s) -> Expr:
    """One expression holding every name a statement reads at its own level (for `reads`)."""
    exprs: list[Expr] = []
    if isinstance(s, Loop):
        exprs.append(s.trip)
    elif isinstance(s, When):
        exprs.append(s.cond)
    elif isinstance(s, Op):
        exprs += [e for e in (s.count, s.bytes, s.parity, s.phase, s.bar_id)
                  if isinstance(e, Expr)]
        if s.barrier is not None:
            exprs += list(s.barrier.index)
        for r in s.reads + s.writes:
            exprs += [i for i in r.index if isinstance(i, Expr)]
    out: Expr = Const(0)
    for e in exprs:
        out = BinOp("+", out, e)
    return out


def queue_only_buffers_dropped(kernel: Kernel) -> Kernel:
    """The one-thread kernel of a lap case without the buffers only its tcgen05 MMAs touch (the
    accumulator): they are accessed by one agent, the thread's tcgen05 queue, and a race needs
    two (model/memory.py), so no race is lost. The slots' hand-off classes then see only the
    buffers their barriers order."""
    touched: dict[str, set] = {}
    for op in walk(kernel.body):
        if isinstance(op, Op):
            for r in op.reads + op.writes:
                touched.setdefault(r.alloc.name, set()).add(op.kind)
    gone = {n for n, kinds in touched.items() if kinds == {TCGEN05_MMA}}
    if not gone or repr(kernel.num_threads) != "1":
        return kernel

    def strip(stmts) -> tuple:
        out = []
        for s in stmts:
            if isinstance(s, Loop):
                out.append(Loop(s.var, s.trip, strip(s.body), s.loc))
            elif isinstance(s, When):
                out.append(When(s.cond, strip(s.then), strip(s.orelse), s.loc))
            elif isinstance(s, Op) and (s.reads or s.writes):
                out.append(dataclasses.replace(
                    s, reads=tuple(r for r in s.reads if r.alloc.name not in gone),
                    writes=tuple(r for r in s.writes if r.alloc.name not in gone)))
            else:
                out.append(s)
        return tuple(out)

    return kernel.replace(body=strip(kernel.body),
                          buffers=tuple(b for b in kernel.buffers if b.name not in gone))


__all__ = ["LapCase", "lap_cases", "queue_only_buffers_dropped"]
