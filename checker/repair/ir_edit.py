"""Edits of a kernel's IR: statements addressed by paths, rewritten without touching the rest.

A path names one statement: `(2, "then", 0)` is the first statement of the `then` branch of the
third top-level statement. Every rewrite returns a new Kernel; the IR is immutable.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

from ...model.ir import (BarrierAlloc, BarrierRef, BinOp, Expr, Kernel, Loop, Op, Stmt,
                         UnOp, Var, WarpRegion, When)

Path = tuple


def children(stmt: Stmt) -> list[tuple[str, tuple]]:
    if isinstance(stmt, (Loop, WarpRegion)):
        return [("body", stmt.body)]
    if isinstance(stmt, When):
        return [("then", stmt.then), ("orelse", stmt.orelse)]
    return []


def walk_paths(body: tuple, prefix: Path = (), scope: tuple = ()) -> Iterator[tuple]:
    """(path, statement, enclosing statements outermost first) for every statement."""
    for i, stmt in enumerate(body):
        path = prefix + (i,)
        yield path, stmt, scope
        for field, seq in children(stmt):
            yield from walk_paths(seq, path + (field,), scope + (stmt,))


def get(body: tuple, path: Path) -> Stmt:
    stmt = body[path[0]]
    for k in range(1, len(path), 2):
        stmt = getattr(stmt, path[k])[path[k + 1]]
    return stmt


def splice(body: tuple, path: Path, new: tuple) -> tuple:
    """Replace the statement at `path` by the statements `new` (none: delete it)."""
    i = path[0]
    if len(path) == 1:
        return body[:i] + tuple(new) + body[i + 1:]
    stmt, field = body[i], path[1]
    inner = splice(getattr(stmt, field), path[2:], new)
    return body[:i] + (dataclasses.replace(stmt, **{field: inner}),) + body[i + 1:]


def insert(body: tuple, path: Path, new: tuple, after: bool = False) -> tuple:
    """Insert statements before (or after) the statement at `path`."""
    old = get(body, path)
    return splice(body, path, (old,) + tuple(new) if after else tuple(new) + (old,))


def substitute(expr: Expr, old: Expr, new: Expr) -> Expr:
    """Every occurrence of `old` (compared structurally) in `expr` replaced by `new`."""
    if repr(expr) == repr(old):
        return new
    if isinstance(expr, BinOp):
        return BinOp(expr.op, substitute(expr.lhs, old, new), substitute(expr.rhs, old, new))
    if isinstance(expr, UnOp):
        return UnOp(expr.op, substitute(expr.arg, old, new))
    return expr


def map_stmts(body: tuple, fn: Callable[[Stmt], Stmt]) -> tuple:
    """Apply `fn` to every statement bottom-up."""
    out = []
    for stmt in body:
        changes = {field: map_stmts(seq, fn) for field, seq in children(stmt)}
        if changes:
            stmt = dataclasses.replace(stmt, **changes)
        out.append(fn(stmt))
    return tuple(out)


def map_exprs(stmt: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """One statement with `fn` applied to each expression it holds itself (not its children)."""
    if isinstance(stmt, Op):
        ref = stmt.barrier
        if ref is not None:
            ref = BarrierRef(ref.alloc, tuple(fn(i) for i in ref.index),
                             None if ref.block is None else tuple(fn(b) for b in ref.block))
        return dataclasses.replace(stmt, barrier=ref, count=fn(stmt.count),
                                   bytes=fn(stmt.bytes),
                                   parity=None if stmt.parity is None else fn(stmt.parity))
    if isinstance(stmt, Loop):
        return dataclasses.replace(stmt, trip=fn(stmt.trip))
    if isinstance(stmt, When):
        return dataclasses.replace(stmt, cond=fn(stmt.cond))
    return stmt


def replace_alloc(kernel: Kernel, old: BarrierAlloc, **changes) -> Kernel:
    """The kernel with one barrier allocation changed (every reference follows it)."""
    new = dataclasses.replace(old, **changes)

    def retarget(stmt: Stmt) -> Stmt:
        if isinstance(stmt, Op) and stmt.barrier is not None and stmt.barrier.alloc is old:
            return dataclasses.replace(stmt, barrier=dataclasses.replace(stmt.barrier, alloc=new))
        return stmt
    barriers = tuple(new if b is old else b for b in kernel.barriers)
    return kernel.replace(barriers=barriers, body=map_stmts(kernel.body, retarget))


def conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinOp) and expr.op == "and":
        return conjuncts(expr.lhs) + conjuncts(expr.rhs)
    return [expr]


def conjoin(parts: list[Expr]) -> Expr:
    out = parts[0]
    for p in parts[1:]:
        out = BinOp("and", out, p)
    return out


def shape_of(ref: BarrierRef) -> Expr | None:
    """The number of slots of a one-dimensional array barrier (None for scalar barriers)."""
    alloc = ref.alloc
    if alloc.scalar or len(alloc.shape) != 1:
        return None
    return alloc.shape[0]


def ring_position(ref: BarrierRef) -> Expr | None:
    """`v` for a ring index `v % S` on an array of S slots, else None."""
    size = shape_of(ref)
    if size is None or len(ref.index) != 1:
        return None
    index = ref.index[0]
    if isinstance(index, BinOp) and index.op == "%" and repr(index.rhs) == repr(size):
        return index.lhs
    return None


def mentions(expr: Expr, name: str) -> bool:
    if isinstance(expr, Var):
        return expr.name == name
    if isinstance(expr, BinOp):
        return mentions(expr.lhs, name) or mentions(expr.rhs, name)
    if isinstance(expr, UnOp):
        return mentions(expr.arg, name)
    return False


# -- a canonical text of the IR, to compare a repaired kernel with the intended one -------------

def _ref_text(ref: BarrierRef | None) -> str:
    if ref is None:
        return "-"
    return repr(ref)


def canonical(kernel: Kernel) -> str:
    """The kernel's synchronization as text, without source locations, names or defaults: two
    kernels with the same canonical text behave identically for every parameter value."""
    lines = [f"threads {kernel.num_threads!r} warps {kernel.num_warps} "
             f"cluster {[(a, repr(n)) for a, n in kernel.cluster]}"]
    for b in kernel.barriers:
        lines.append(f"{b.kind} {b.name} arrivals={b.num_arrivals!r} shape={list(map(repr, b.shape))}"
                     f" tc={b.orders_tensor_core} axes={b.collective_axes}")

    def emit(body: tuple, depth: int) -> None:
        pad = "  " * depth
        for stmt in body:
            if isinstance(stmt, Op):
                lines.append(f"{pad}{stmt.kind} {_ref_text(stmt.barrier)} count={stmt.count!r} "
                             f"bytes={stmt.bytes!r} parity={stmt.parity!r} "
                             f"axes={stmt.collective_axes} {stmt.name}")
            elif isinstance(stmt, Loop):
                lines.append(f"{pad}loop {stmt.var} < {stmt.trip!r}")
                emit(stmt.body, depth + 1)
            elif isinstance(stmt, When):
                lines.append(f"{pad}when {stmt.cond!r}")
                emit(stmt.then, depth + 1)
                if stmt.orelse:
                    lines.append(f"{pad}else")
                    emit(stmt.orelse, depth + 1)
            elif isinstance(stmt, WarpRegion):
                lines.append(f"{pad}warps {stmt.axis}")
                emit(stmt.body, depth + 1)
    emit(kernel.body, 0)
    return "\n".join(lines)


def unrolled(kernel: Kernel, values: dict[str, int]) -> str:
    """What every thread (and warp) of every block does at concrete parameter values: the
    operations in program order with indices, counts and bytes evaluated. Two kernels with the
    same unrolled text are the same protocol at these values, however their loops and
    expressions are written."""
    import itertools
    from ...model.ir import evaluate
    env0 = dict(values)
    for axis, size in kernel.grid:
        env0[axis] = 0
    lines = []
    for b in kernel.barriers:
        lines.append(f"{b.kind} {b.name} arrivals={evaluate(b.num_arrivals, env0)} "
                     f"shape={[evaluate(d, env0) for d in b.shape]} tc={b.orders_tensor_core} "
                     f"axes={b.collective_axes}")
    cluster = [(a, evaluate(n, env0)) for a, n in kernel.cluster]

    def run(body: tuple, env: dict, out: list) -> None:
        for stmt in body:
            if isinstance(stmt, Op):
                ref = stmt.barrier
                text = stmt.kind
                if ref is not None:
                    text += f" {ref.alloc.name}{[evaluate(i, env) for i in ref.index]}"
                    if ref.block is not None:
                        text += f"@{[evaluate(x, env) for x in ref.block]}"
                text += f" count={evaluate(stmt.count, env)} bytes={evaluate(stmt.bytes, env)}"
                if stmt.parity is not None:
                    text += f" parity={evaluate(stmt.parity, env)}"
                out.append(text + (f" axes={stmt.collective_axes}" if stmt.collective_axes else ""))
            elif isinstance(stmt, Loop):
                for n in range(max(0, evaluate(stmt.trip, env))):
                    run(stmt.body, {**env, stmt.var: n}, out)
            elif isinstance(stmt, When):
                run(stmt.then if evaluate(stmt.cond, env) else stmt.orelse, env, out)
            elif isinstance(stmt, WarpRegion):
                for w in range(kernel.num_warps):
                    out.append(f"warp {w}:")
                    run(stmt.body, {**env, stmt.axis: w}, out)
                    out.append("join")

    for coords in itertools.product(*[range(n) for _, n in cluster]):
        for t in range(evaluate(kernel.num_threads, env0)):
            env = {**env0, kernel.thread_axis: t, **dict(zip([a for a, _ in cluster], coords))}
            ops: list[str] = []
            run(kernel.body, env, ops)
            lines.append(f"block {coords} thread {t}: " + "; ".join(ops))
    return "\n".join(lines)
