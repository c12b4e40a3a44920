"""Where a System sits in the grid and what its cluster holds: the cluster positions a kernel's
grid is checked at, the clusters modelled in lockstep as blocks of their own, and the blocks a
multicast along cluster axes reaches. Pure functions of the kernel and its parameter values;
semantics.py builds one System per behaviour (`compile_systems`), positions told apart first
by `position_key`.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Iterator, Mapping

from . import kinds
from .ir import BinOp, Expr, Kernel, Loop, ModelError, UnOp, WarpRegion, evaluate, free_vars
from .lanes import IN_WARP_REGION, LANES_SPLIT

# Above this many cluster positions a grid is checked at a few positions per axis (the check
# says so).
GRID_LIMIT = 4096
# Lockstep clusters modelled as blocks of their own: the axis's name (not an identifier, so no
# name of the protocol can clash) and the most blocks this may make.
LOCKSTEP_AXIS = "·lockstep"
LOCKSTEP_LIMIT = 16


def lockstep_blocks(kernel: Kernel, env: Mapping[str, int], blocks: int) -> int:
    """How many clusters a System models explicitly, as blocks along LOCKSTEP_AXIS (1: none).

    A global semaphore signalled in lockstep by `copies` clusters is one counter; while its waits
    only read it, one modelled cluster whose signals count `copies` times stands for all of them.
    A decrementing wait takes from the counter what the other clusters' waits then lack, so the
    copies are modelled as clusters of their own (each its own barriers, the one counter shared)
    when every semaphore has the same `copies`, the kernel has no cluster barrier (which would
    then span them) and they make at most LOCKSTEP_LIMIT blocks."""
    sems = [a for a in kernel.barriers if a.semaphore]
    copies = {evaluate(a.copies, env) for a in sems}
    if len(copies) != 1 or (n := copies.pop()) <= 1 or n * blocks > LOCKSTEP_LIMIT:
        return 1
    ops = list(kernel.ops())
    classes = [kinds.lookup(op.kind) for op in ops]
    if not any(p is not None and p.consumes and op.decrement for p, op in zip(classes, ops)) \
            or any(p is not None and p.cluster_wide for p in classes):
        return 1
    return n


def grid_size(kernel: Kernel, params: Mapping[str, int]) -> int:
    total = 1
    for _, n in kernel.grid:
        total *= max(1, evaluate(n, kernel.param_values(params)))
    return total


def grid_positions(kernel: Kernel, params: Mapping[str, int], limit: int = GRID_LIMIT
                   ) -> list[dict[str, int]]:
    """Every cluster position of the grid while there are at most `limit`; beyond that the
    first, second and last position along each axis (the caller must say so)."""
    values = kernel.param_values(params)
    sizes = [(axis, max(1, evaluate(n, values))) for axis, n in kernel.grid]
    if grid_size(kernel, values) > limit:
        ranges = [sorted({0, min(1, n - 1), n - 1}) for _, n in sizes]
    else:
        ranges = [range(n) for _, n in sizes]
    return [dict(zip([a for a, _ in sizes], combo)) for combo in itertools.product(*ranges)]


def peer_blocks(block: tuple[int, ...], dims: list[int], shape: tuple[int, ...]) -> list[tuple]:
    """Every block of the cluster that agrees with `block` outside the dimensions `dims` (the
    blocks a multicast along those cluster axes reaches, `block` included)."""
    peers = []
    for coords in itertools.product(*[range(shape[d]) for d in dims]):
        b = list(block)
        for d, c in zip(dims, coords):
            b[d] = c
        peers.append(tuple(b))
    return peers


def position_key(kernel: Kernel, values: Mapping[str, int]) -> Callable[[Mapping[str, int]], tuple]:
    """A key of grid positions such that two positions with the same key compile to the same
    System (but for the position it names): the values there of every expression of the kernel
    the position enters. Compiling reads the position only by evaluating the kernel's
    expressions, and an expression's value is fixed by its variables, so it suffices to key on
    the largest sub-expressions over grid axes and parameters alone (`(sm < 16) + 124`, not the
    loop variable beside it). A grid axis that the program rebinds, or an expression that cannot
    be evaluated at a position (it may sit in a branch never taken there), keys the position
    apart: no two positions are then merged that might differ."""
    axes = {a for a, _ in kernel.grid}
    bound = _bound_names(kernel)
    if axes & bound:
        return lambda position: tuple(sorted(position.items()))
    fixed = (axes | set(values)) - bound
    parts: dict[str, Expr] = {}
    for expr in _exprs(kernel):
        for part in _position_parts(expr, axes, fixed):
            parts.setdefault(repr(part), part)
    exprs = list(parts.values())

    def key(position: Mapping[str, int]) -> tuple:
        env = {**values, **position}
        try:
            return tuple(evaluate(e, env) for e in exprs)
        except ModelError:
            return ("apart",) + tuple(sorted(position.items()))
    return key


def _position_parts(expr: Expr, axes: set[str], fixed: set[str]) -> Iterator[Expr]:
    """The largest sub-expressions of `expr` that name a grid axis and nothing but grid axes and
    parameters (`fixed`)."""
    names = free_vars(expr)
    if not names & axes:
        return
    if names <= fixed:
        yield expr
    elif isinstance(expr, BinOp):
        yield from _position_parts(expr.lhs, axes, fixed)
        yield from _position_parts(expr.rhs, axes, fixed)
    elif isinstance(expr, UnOp):
        yield from _position_parts(expr.arg, axes, fixed)


def _exprs(node, seen: set[int] | None = None) -> Iterator[Expr]:
    """Every expression held by an IR node (statements, references, allocations, the kernel's
    shape), each shared node visited once."""
    seen = set() if seen is None else seen
    if isinstance(node, Expr):
        yield node
    elif isinstance(node, (tuple, list)):
        for x in node:
            yield from _exprs(x, seen)
    elif isinstance(node, dict):
        for x in node.values():
            yield from _exprs(x, seen)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type) and id(node) not in seen:
        seen.add(id(node))
        for f in dataclasses.fields(node):
            yield from _exprs(getattr(node, f.name), seen)


def _bound_names(kernel: Kernel) -> set[str]:
    """Names compiling binds beside the parameters and the position (loop variables, warp
    region axes, cluster, thread and warp axes): where one shadows an axis or parameter, its
    value is not the position's."""
    names = {"thread", "warp", kernel.thread_axis, kernel.warp_axis, LOCKSTEP_AXIS,
             IN_WARP_REGION, LANES_SPLIT} | {a for a, _ in kernel.cluster}
    stack = list(kernel.body)
    while stack:
        s = stack.pop()
        if isinstance(s, Loop):
            names.add(s.var)
        if isinstance(s, WarpRegion):
            names.add(s.axis)
        for f in ("body", "then", "orelse"):
            stack.extend(getattr(s, f, ()))
    return names
