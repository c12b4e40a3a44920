"""Loops on a ring that name the thread index, copied once per thread that reaches them, so a
rewrite of the ring's positions (stride_split.py, number_slots.py) sees one thread's program at
a time."""

from __future__ import annotations

from ...model.expr import substitute_stmts
from ...model.ir import (BinOp, Const, Kernel, Loop, Op, Var, WarpRegion, When, evaluate,
                         free_vars, walk)

MAX_THREADS = 8         # threads specialised one copy each


class Refused(Exception):
    """The kernel is not of a shape the rewrite handles; the message says which."""


def touches(stmts, arrays) -> bool:
    return any(isinstance(s, Op) and s.barrier is not None and s.barrier.alloc.name in arrays
               for s in walk(stmts))


def mentions(stmt, name: str) -> bool:
    """Does a loop's trip or anything in its body name `name`?"""
    exprs = [stmt.trip]
    for s in walk(stmt.body):
        if isinstance(s, Op):
            exprs += [s.count, s.bytes, s.parity, s.phase]
            if s.barrier is not None:
                exprs += list(s.barrier.index) + list(s.barrier.block or ())
        elif isinstance(s, Loop):
            exprs.append(s.trip)
        elif isinstance(s, When):
            exprs.append(s.cond)
    return any(e is not None and name in free_vars(e) for e in exprs)


def map_loops(body, fn) -> tuple:
    """The statements with every outermost loop replaced by fn(loop) (a tuple of statements)."""
    out = []
    for s in body:
        if isinstance(s, Loop):
            out.extend(fn(s))
        elif isinstance(s, When):
            out.append(When(s.cond, map_loops(s.then, fn), map_loops(s.orelse, fn), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, map_loops(s.body, fn), s.loc))
        else:
            out.append(s)
    return tuple(out)


def outer_loops(body) -> list[Loop]:
    """The outermost loops."""
    found = []
    map_loops(body, lambda lp: found.append(lp) or (lp,))
    return found


def specialise_threads(kernel: Kernel, arrays, fixed) -> Kernel:
    """Every loop on a strided ring that names the thread index, one copy per thread that can
    reach it (the conditions around it, at that thread and the fixed values)."""
    axis = kernel.thread_axis
    if not any(touches(lp.body, arrays) and mentions(lp, axis)
               for lp in outer_loops(kernel.body)):
        return kernel
    if free_vars(kernel.num_threads) - set(fixed):
        raise Refused("the thread count is symbolic, so the loops on the strided ring cannot "
                      "be specialised per thread")
    n = evaluate(kernel.num_threads, fixed)
    if n > MAX_THREADS:
        raise Refused(f"{n} threads: more than {MAX_THREADS} copies per thread")

    def reaches(conds, c: int) -> bool:
        for cond, holds in conds:
            env = {**fixed, axis: c}
            if free_vars(cond) - set(env):
                continue                # undecided here: keep the copy
            if bool(evaluate(cond, env)) != holds:
                return False
        return True

    def per_thread(lp: Loop, conds) -> tuple:
        if not (touches(lp.body, arrays) and mentions(lp, axis)):
            return (lp,)
        chain: tuple = ()
        for c in reversed([c for c in range(n) if reaches(conds, c)]):
            (copy,) = substitute_stmts((lp,), {axis: Const(c)})
            chain = (When(BinOp("==", Var(axis), Const(c)), (copy,), chain, lp.loc),)
        return chain

    def go(body, conds) -> tuple:
        out = []
        for s in body:
            if isinstance(s, Loop):
                out.extend(per_thread(s, conds))
            elif isinstance(s, When):
                out.append(When(s.cond, go(s.then, conds + [(s.cond, True)]),
                                go(s.orelse, conds + [(s.cond, False)]), s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, go(s.body, conds), s.loc))
            else:
                out.append(s)
        return tuple(out)

    return kernel.replace(body=go(kernel.body, []))
