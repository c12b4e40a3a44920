"""Ring slots that are numbers: a loop that takes a multiple of the ring's size per iteration.

For both proofs: the barrier proof reads the numbered barrier arrays (hand-off pairs per slot),
the race proof the numbered buffers too (a ring's tile buffer at the slots of its barriers).

The sm90 ping-pong with its sizes fixed (2 stages, 3 k-tiles) has two math warpgroups each
reading 3 slots of a tile and skipping the other's 3: warpgroup w's iteration m reads ring
positions 6m + 3w + j, the producer's (strip-mined, unroll.py) 6m + u, and a tail after it
2*T*3 + j. Every position moves by a multiple of the 2 slots per iteration of any loop and per
unit of any symbolic parameter, so each operation names ONE slot, `(6m + 3w + j) % 2` =
`(3w + j) % 2`: a number, once the loop is one copy per thread. Its lap count moves alike:
`(6m + 3w + j) // 2` = `3m + (3w + j) // 2`. Written so, the arrays are indexed by numbers, so
partition.py splits them into scalar barriers and hand-off pairs (`full[0]`, `empty[0]`), and
every phase is linear, with no division left for Z3. A hand-off pair alone does not prove the
ping-pong (its class drops the order barrier that keeps the second warpgroup's wait from
passing on the slot's earlier phase): prove.py tries each pair joined with the barriers that
order it (classes.py), which proves it within `--timeout 60`, where the class of every barrier
did not.

The rewrite, for a concrete barrier array (each dimension S of it alike):

1. Loops of concrete trip on the array (a producer tail over the stages) unrolled, and every
   loop on it that names the thread index one copy per thread (stride_split.py);
2. every index `v % S` with v = beta + sum(c_n * n) over the enclosing loop variables and the
   symbolic parameters, each c_n a multiple of S and beta a number, becomes `beta % S` (a
   plain index naming only the thread becomes its number in each thread's copy), and
   every `v // S` (in a parity or stated phase of an operation on the array) becomes
   `sum(c_n / S * n) + beta // S`; Z3 proves each new expression equal to the old one under
   the assumptions (an exact identity of floor division for integers, so no case is lost).

3. for the race proof, every buffer's leading slot `v % S` (S the buffer's concrete leading
   size) of the same form becomes `beta % S` by the same Z3 check (`kv[(6*t) % 3]` is
   `kv[0]`), so partition.py `split_constant_buffers` judges each tile by the barriers of its
   slot; a leading slot of another form is left as it is (the buffer stays one, coarser).

An array with a use of another shape is left as it is; nothing is rewritten when no array is
rewritten completely (every use a number), so the kernel the proof sees is either this same
program or the kernel itself.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import z3

from ...model.expr import mk, substitute_stmts
from ...model.ir import (BinOp, Const, Expr, Kernel, Loop, ModelError, Op, Var, WarpRegion,
                         When, evaluate, free_vars, map_ops, walk)
from .per_thread import Refused, specialise_threads
from .terms import Solver, Unsupported, z_bool, z_int
from .unroll import MAX_UNROLL


def _concrete_arrays(kernel: Kernel, fixed) -> dict[str, tuple[int, ...]]:
    out = {}
    for alloc in kernel.barriers:
        if alloc.cluster or alloc.semaphore or alloc.scalar or \
                any(free_vars(d) - set(fixed) for d in alloc.shape):
            continue
        dims = tuple(evaluate(d, fixed) for d in alloc.shape)
        if all(d >= 1 for d in dims) and max(dims, default=0) > 1:
            out[alloc.name] = dims
    return out


def _ops_with_loops(body, loops=()) -> list[tuple[Op, tuple[str, ...]]]:
    out = []
    for s in body:
        if isinstance(s, Op):
            out.append((s, loops))
        elif isinstance(s, Loop):
            out += _ops_with_loops(s.body, loops + (s.var,))
        elif isinstance(s, When):
            out += _ops_with_loops(s.then, loops) + _ops_with_loops(s.orelse, loops)
        elif isinstance(s, WarpRegion):
            out += _ops_with_loops(s.body, loops)
    return out


class _Linear:
    """v as beta + sum(c_n * n) over `names`, beta and c_n numbers, checked by Z3."""

    def __init__(self, env, names: Sequence[str], solver: Solver):
        self.env, self.names, self.solver = env, list(names), solver

    def split(self, e: Expr) -> tuple[int, dict[str, int]] | None:
        try:
            t = z_int(e, self.env)
        except Unsupported:
            return None
        got = self.coefficients(t, e)
        if got is None or not self.solver.valid(t == got[0] + sum(
                c * self.env[n] for n, c in got[1].items())):
            return None
        return got

    def coefficients(self, t, e: Expr) -> tuple[int, dict[str, int]] | None:
        """(beta, c_n) read off the term t of `e` at 0 and at each name 1 (unchecked)."""
        moving = [n for n in self.names if n in free_vars(e)]
        beta = z3.simplify(z3.substitute(t, *[(self.env[n], z3.IntVal(0)) for n in moving]))
        if not z3.is_int_value(beta):
            return None
        coef = {}
        for n in moving:
            one = z3.substitute(t, *[(self.env[m], z3.IntVal(int(m == n))) for m in moving])
            c = z3.simplify(one - beta)
            if not z3.is_int_value(c):
                return None
            coef[n] = c.as_long()
        return beta.as_long(), coef


def _size_of(e: Expr, fixed) -> int | None:
    if free_vars(e) - set(fixed):
        return None
    try:
        return evaluate(e, fixed)
    except (ModelError, ArithmeticError):
        return None


def _wraps(e: Expr, S: int, fixed) -> bool:
    return isinstance(e, BinOp) and e.op == "%" and _size_of(e.rhs, fixed) == S


def _slot(e: Expr, S: int, lin: _Linear, fixed) -> int | None:
    """The number `e` (`v % S`, or a plain index) always is, or None."""
    got = lin.split(e.lhs if _wraps(e, S, fixed) else e)
    if got is None:
        return None
    beta, coef = got
    if _wraps(e, S, fixed):
        slot = beta % S
        if any(c % S for c in coef.values()):
            return None
    elif any(coef.values()) or not 0 <= beta < S:
        return None
    else:
        slot = beta
    try:        # the identity (S*x + beta) % S == beta % S, checked as every step is
        same = lin.solver.valid(z_int(e, lin.env) == slot)
    except Unsupported:
        same = False
    return slot if same else None


def _fold_laps(e: Expr | None, lin: _Linear, fixed) -> Expr | None:
    """`e` with every `v // D` (D a number dividing every coefficient of v) spelled out."""
    if not isinstance(e, BinOp):
        return e
    lhs, rhs = _fold_laps(e.lhs, lin, fixed), _fold_laps(e.rhs, lin, fixed)
    out = mk(e.op, lhs, rhs)
    D = _size_of(rhs, fixed) if e.op == "//" else None
    if D is None or D < 1:
        return out
    got = lin.split(lhs)
    if got is None or not got[1] or any(c % D for c in got[1].values()):
        return out
    beta, coef = got
    folded: Expr = Const(beta // D)
    for n, c in coef.items():
        if c:
            folded = mk("+", mk("*", Var(n), Const(c // D)), folded)
    try:
        same = lin.solver.valid(z_int(folded, lin.env) == z_int(out, lin.env))
    except Unsupported:
        same = False
    return folded if same else out


def _unroll_concrete(kernel: Kernel, arrays, fixed) -> Kernel:
    """Loops of a concrete trip (at most MAX_UNROLL) on the arrays, unrolled."""

    def touches(lp):
        return any(isinstance(s, Op) and s.barrier is not None and s.barrier.alloc.name in arrays
                   for s in walk(lp.body))

    def go(body) -> tuple:
        out = []
        for s in body:
            if isinstance(s, Loop):
                n = _size_of(s.trip, fixed)
                if n is not None and 0 <= n <= MAX_UNROLL and touches(s):
                    for v in range(n):
                        out.extend(go(substitute_stmts(s.body, {s.var: Const(v)})))
                else:
                    out.append(Loop(s.var, s.trip, go(s.body), s.loc))
            elif isinstance(s, When):
                out.append(When(s.cond, go(s.then), go(s.orelse), s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, go(s.body), s.loc))
            else:
                out.append(s)
        return tuple(out)

    return kernel.replace(body=go(kernel.body))


def number_slots(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int]) -> Kernel:
    """The kernel with the slots of every concrete ring that only loops stepping a multiple of
    its size use written as numbers (module docstring), and a buffer's leading slot where Z3
    shows it is a number too (the ring's tiles, for the race proof); the kernel itself
    otherwise."""
    sizes = _concrete_arrays(kernel, fixed)
    if not sizes:
        return kernel
    original = kernel
    kernel = _unroll_concrete(kernel, sizes, fixed)
    axis = kernel.thread_axis
    env = {n: z3.IntVal(v) for n, v in fixed.items()}
    env.update({n: z3.Int(n) for n in symbolic})
    env[axis] = z3.Int(axis)
    loop_vars = {s.var for s in walk(kernel.body) if isinstance(s, Loop)}
    env.update({v: z3.Int(v) for v in loop_vars})
    try:
        solver = Solver([z_bool(a, env) for a in kernel.assumptions])
    except Unsupported:
        return original
    # candidates: every use `v % S` whose moving names (not the thread) step by multiples of S
    lin_all = _Linear(env, sorted(loop_vars | set(symbolic) | {axis}), solver)
    arrays = set()
    for name, dims in sizes.items():
        uses = [(op, lps) for op, lps in _ops_with_loops(kernel.body)
                if op.barrier is not None and op.barrier.alloc.name == name]
        ok = bool(uses) and any(lps for _, lps in uses)
        for op, _ in uses:
            ok = ok and len(op.barrier.index) == len(dims)
            for e, S in zip(op.barrier.index, dims):
                wraps = _wraps(e, S, fixed)
                got = lin_all.split(e.lhs if wraps else e)
                # a plain index may name the thread only (one number per thread's copy)
                ok = ok and got is not None and all(c % S == 0 if wraps else c == 0
                                                    for n, c in got[1].items() if n != axis)
        if ok:
            arrays.add(name)
    if not arrays:
        return original
    try:
        k = specialise_threads(kernel, arrays, fixed)
    except (Refused, ModelError):
        return original
    loop_vars = {s.var for s in walk(k.body) if isinstance(s, Loop)}
    env.update({v: z3.Int(v) for v in loop_vars})
    lin = _Linear(env, sorted(loop_vars | set(symbolic)), solver)
    done = set(arrays)
    for op, _ in _ops_with_loops(k.body):
        if op.barrier is not None and op.barrier.alloc.name in done:
            dims = sizes[op.barrier.alloc.name]
            if any(_size_of(e, fixed) is None and _slot(e, S, lin, fixed) is None
                   for e, S in zip(op.barrier.index, dims)):
                done.discard(op.barrier.alloc.name)
    if not done:
        return original

    def slot_of(ref):
        """A buffer's leading slot as a number where Z3 shows it is one (`kv[(6*t) % 3]`
        is `kv[0]`): the ring's buffer numbered as its barriers are."""
        S = _size_of(ref.alloc.shape[0], fixed) if ref.index else None
        if S is None or _size_of(ref.index[0], fixed) is not None:
            return ref
        n = _slot(ref.index[0], S, lin, fixed)
        return ref if n is None else dataclasses.replace(ref, index=(Const(n),) + ref.index[1:])

    def rewrite(op: Op) -> Op:
        if op.reads or op.writes:
            op = dataclasses.replace(op, reads=tuple(slot_of(r) for r in op.reads),
                                     writes=tuple(slot_of(r) for r in op.writes))
        if op.barrier is None or op.barrier.alloc.name not in done:
            return op
        index = tuple(Const(evaluate(e, fixed)) if _size_of(e, fixed) is not None
                      else Const(_slot(e, S, lin, fixed))
                      for e, S in zip(op.barrier.index, sizes[op.barrier.alloc.name]))
        ref = dataclasses.replace(op.barrier, index=index)
        return dataclasses.replace(op, barrier=ref, parity=_fold_laps(op.parity, lin, fixed),
                                   phase=_fold_laps(op.phase, lin, fixed))

    return k.replace(body=map_ops(k.body, rewrite))


def _fold_parity(e: Expr | None, lin: _Linear) -> Expr | None:
    """`e` written `(sum(c_n * n) + beta) % 2` (c_n, beta in {0, 1}) when Z3 proves it that for
    every value: a cursor's phase bit, `(2*t % 2) ^ (((6*t % 3) + 1) == 3)` once the loop takes
    whole laps, is a lap count's parity (or a number) that the ring classes read."""
    if e is None or isinstance(e, Const):
        return e
    try:        # a wait reads only the parity (xor as a sum)
        t = z_int(e, lin.env, parity=True) % 2
    except Unsupported:
        return e
    got = lin.coefficients(t, e)
    if got is None:
        return e
    folded: Expr = Const(got[0] % 2)
    for n, c in got[1].items():
        if c % 2:
            folded = mk("+", Var(n), folded)
    if not isinstance(folded, Const):
        folded = mk("%", folded, Const(2))
    return folded if lin.solver.valid(t == z_int(folded, lin.env)) else e


def fold_parities(kernel: Kernel, arrays, symbolic: Sequence[str], fixed: Mapping[str, int]
                  ) -> Kernel:
    """The parities of the operations on `arrays` folded (`_fold_parity`), each checked by Z3."""
    env = {n: z3.IntVal(v) for n, v in fixed.items()}
    names = sorted({s.var for s in walk(kernel.body) if isinstance(s, Loop)} | set(symbolic))
    env.update({n: z3.Int(n) for n in names})
    try:
        solver = Solver([z_bool(a, env) for a in kernel.assumptions])
    except Unsupported:
        return kernel
    lin = _Linear(env, names, solver)

    def rewrite(op: Op) -> Op:
        if op.barrier is None or op.barrier.alloc.name not in arrays or op.parity is None:
            return op
        return dataclasses.replace(op, parity=_fold_parity(op.parity, lin))

    return kernel.replace(body=map_ops(kernel.body, rewrite))
