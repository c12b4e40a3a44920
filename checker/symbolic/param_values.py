"""The small values of a parameter worth running: where the kernel can tell them apart.

A shape parameter often reaches the protocol only through a trip count such as
`N_CTX // BLOCK_N` or `cdiv(K, BLOCK_K)`. Sampling it at 0, 1, ..., 8 then runs one protocol
nine times (no iteration at all when BLOCK_N is 128), and neither the search for the smallest
breaking values nor the explorer's cross-check before a proof sees a single iteration. Such a
parameter is sampled where one of its quotients changes instead: 0, 128, 256, ... for a floor
division by 128; 0, 1, 65, 129, ... for a ceiling division by 64.

Only a parameter that appears nowhere but inside divisions by constants larger than the sample
count is resampled (its assumptions aside, which every point is filtered by anyway); any other
occurrence, in a count, a byte size, an index or a comparison, keeps the plain 0, 1, 2, ...:
values the kernel can tell apart are never skipped.

>>> from barrierproof.model.ir import Var
>>> from barrierproof.model.dsl import protocol
>>> @protocol
... def rows(k, n_ctx=256):
...     k.threads(1)
...     bar = k.Barrier()
...     with k.loop(n_ctx // 128):
...         k.barrier_arrive(bar)
...         k.barrier_wait(bar)
>>> sample_values(rows.build(), "n_ctx", {}, 4)
[0, 128, 256, 384]
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Mapping

from ...model.ir import BinOp, Const, Expr, Kernel, ModelError, UnOp, Var, evaluate, free_vars


def sample_values(kernel: Kernel, name: str, fixed: Mapping[str, int], count: int) -> list[int]:
    """The `count` smallest values of parameter `name` that give distinct quotients in every
    division of it by a constant larger than `count`; 0..count-1 when it appears elsewhere."""
    divisions: list[tuple[Expr, int]] = []
    for expr in _kernel_exprs(kernel):
        if not _only_divided(expr, name, count, divisions):
            return list(range(count))
    if not divisions:
        return list(range(count))
    candidates = sorted({0, 1} | {m * d + r for _, d in divisions for m in range(count + 1)
                                  for r in (-1, 0, 1) if m * d + r >= 0})
    out: list[int] = []
    seen: set[tuple[int, ...]] = set()
    for value in candidates:
        quotients = tuple(_quotient(lhs, d, name, value, fixed) for lhs, d in divisions)
        if quotients not in seen:
            seen.add(quotients)
            out.append(value)
            if len(out) == count:
                break
    return out


def _only_divided(expr: Expr, name: str, count: int, divisions: list) -> bool:
    """True iff every occurrence of `name` in `expr` lies in the dividend of a floor division
    by a constant larger than `count`; such divisions are collected."""
    if isinstance(expr, Var):
        return expr.name != name
    if isinstance(expr, BinOp):
        if expr.op == "//" and isinstance(expr.rhs, Const) and expr.rhs.value > count \
                and name in free_vars(expr.lhs):
            divisions.append((expr.lhs, expr.rhs.value))
            return True
        return _only_divided(expr.lhs, name, count, divisions) and \
            _only_divided(expr.rhs, name, count, divisions)
    if isinstance(expr, UnOp):
        return _only_divided(expr.arg, name, count, divisions)
    return True


def _quotient(lhs: Expr, divisor: int, name: str, value: int, fixed: Mapping[str, int]) -> int:
    # Other free variables (loop counters, thread indices) at 0: the quotient of the part the
    # parameter moves, which is what decides a trip count.
    env = {v: 0 for v in free_vars(lhs)}
    env.update((k, v) for k, v in fixed.items() if k in env)
    env[name] = value
    try:
        return evaluate(lhs, env) // divisor
    except (ModelError, ZeroDivisionError, ArithmeticError):
        return value


def _kernel_exprs(kernel: Kernel) -> Iterator[Expr]:
    """Every integer expression of the kernel but its assumptions: program, allocations, shape."""
    for part in (kernel.body, kernel.barriers, kernel.buffers, kernel.num_threads, kernel.cluster,
                 kernel.grid):
        yield from _exprs(part)


def _exprs(obj) -> Iterator[Expr]:
    if isinstance(obj, Expr):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _exprs(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _exprs(item)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _exprs(getattr(obj, f.name))
