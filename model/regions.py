"""Regions of a buffer, concretely: which slots a reference touches, and where two overlap.

A reference (ir.MemRef) names per dimension one slot (`index`), a strided range (`region`,
a Slice: start, size, stride) or, past both, the whole dimension. For concrete values each
dimension is a *run* (start, size, stride) of slots; a region is the product of its runs, so
two regions share a slot iff every dimension's runs share one. That is decided exactly here,
per dimension, by integer arithmetic (two arithmetic progressions meet iff the start
difference is a multiple of the strides' gcd, within both spans).

Races are judged on *cells* of `granule[d]` slots (model/memory.py): `granules` picks, per
dimension, the largest granule dividing every start, size, stride and index any reference can
take, so each region is a union of whole cells (a strided run touches the first slot of each
of its cells, and so does every other run there: the divisor divides them all) and two regions
share a cell iff they share a slot.

>>> meet((0, 4, 2), (1, 4, 2)) is None, meet((0, 64, 1), (63, 64, 1))
(True, (63, 1, 1))
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from .ir import BinOp, Const, Expr, Loc, MemRef, ModelError, UnOp, evaluate

Run = tuple[int, int, int]          # start, size, stride


def runs(ref: MemRef, shape: Sequence[int], env: Mapping[str, int], loc: Loc) -> tuple[Run, ...]:
    """The run of slots `ref` names in every dimension of a buffer of `shape`, bounds checked."""
    name = ref.alloc.name
    out: list[Run] = [(evaluate(i, env), 1, 1) for i in ref.index]
    for d, s in enumerate(ref.region, start=len(ref.index)):
        start, size, stride = (evaluate(e, env) for e in s.exprs())
        if size < 1 or stride < 1:
            raise ModelError(f"region ds({start}, {size}, stride={stride}) of buffer `{name}` "
                             "is empty or runs backwards", loc=loc,
                             hint="give a slice a size and a stride of at least 1")
        out.append((start, size, stride))
    if len(out) > len(shape):
        raise ModelError(f"buffer `{name}` has {len(shape)} dimension(s), indexed with "
                         f"{len(out)}", loc=loc, hint="index at most every dimension once")
    for d, ((start, size, stride), n) in enumerate(zip(out, shape)):
        last = start + (size - 1) * stride
        if start < 0 or last >= n:
            where = f"slot {start}" if size == 1 else f"slots {start}..{last}"
            raise ModelError(f"{where} of dimension {d} out of range for buffer `{name}` with "
                             f"{n} slot(s) there", loc=loc,
                             hint=f"keep the region within 0..{n - 1}")
    out += [(0, n, 1) for n in shape[len(out):]]
    return tuple(out)


def run_text(run: Run, whole: int | None = None) -> str:
    """`5`, `64:128` or `0:8:2` (Python's slice notation); `:` for a whole dimension."""
    start, size, stride = run
    if size == 1:
        return str(start)
    if whole is not None and run == (0, whole, 1):
        return ":"
    stop = start + (size - 1) * stride + 1
    return f"{start}:{stop}" if stride == 1 else f"{start}:{stop}:{stride}"


def region_text(name: str, box: Sequence[Run], named: int, shape: Sequence[int]) -> str:
    """`acc[64:128]`: the buffer with the `named` leading dimensions the reference names."""
    if not named:
        return name
    return name + "[" + ",".join(run_text(r, n) for r, n in zip(box[:named], shape)) + "]"


def dest_text(name: str, box: Sequence[Run], shape: Sequence[int]) -> str:
    """`ring[1]`, `acc[0:64]`: a region by its slots alone, however the reference spelled it
    (whole trailing dimensions left out), so equal regions read alike. It names the destination
    of a TMA copy in the step that lands it (the reference interpreter spells it the same)."""
    parts = [":" if r == (0, n, 1) else run_text(r) for r, n in zip(box, shape)]
    while parts and parts[-1] == ":":
        parts.pop()
    return name + ("[" + ",".join(parts) + "]" if parts else "")


def meet(a: Run, b: Run) -> Run | None:
    """The slots two runs share, as one run (two progressions meet in a progression), or None."""
    (s1, n1, d1), (s2, n2, d2) = a, b
    g = math.gcd(d1, d2)
    if (s2 - s1) % g:
        return None
    lcm = d1 // g * d2
    # the first common slot at or after both starts: s1 + d1*x == s2 (mod d2)
    x = ((s2 - s1) // g * pow(d1 // g, -1, d2 // g)) % (d2 // g) if d2 // g > 1 else 0
    first = s1 + d1 * x
    lo = max(s1, s2)
    if first < lo:
        first += (lo - first + lcm - 1) // lcm * lcm
    hi = min(s1 + (n1 - 1) * d1, s2 + (n2 - 1) * d2)
    if first > hi:
        return None
    return (first, (hi - first) // lcm + 1, lcm)


def overlap(a: Sequence[Run], b: Sequence[Run]) -> tuple[Run, ...] | None:
    """The slots two regions share, per dimension, or None when they are disjoint."""
    out = []
    for x, y in zip(a, b):
        m = meet(x, y)
        if m is None:
            return None
        out.append(m)
    return tuple(out)


def cell_runs(box: Sequence[Run], granule: Sequence[int]) -> list[range | list[int]]:
    """Per dimension, the cells (of `granule[d]` slots) a region touches."""
    out: list[range | list[int]] = []
    for (start, size, stride), g in zip(box, granule):
        if stride == 1 or size == 1:
            out.append(range(start // g, (start + (size - 1) * stride) // g + 1))
        else:
            out.append(sorted({(start + j * stride) // g for j in range(size)}))
    return out


# -- granules ---------------------------------------------------------------------------------

def divisor(expr: Expr) -> int:
    """A positive integer dividing every value of `expr` (1 when nothing better is known).

    >>> from .ir import Var
    >>> divisor(Var("wg") * 64 + 128), divisor(Var("i") % 4 * 32), divisor(Var("i") + 1)
    (64, 32, 1)
    >>> divisor((Var("wg") * 64) // 8)
    8
    """
    if isinstance(expr, Const):
        return abs(expr.value)              # 0: divisible by anything (gcd(0, n) = n)
    if isinstance(expr, UnOp) and expr.op == "neg":
        return divisor(expr.arg)
    if isinstance(expr, BinOp):
        a, b = divisor(expr.lhs), divisor(expr.rhs)
        if expr.op in ("+", "-", "%", "min", "max"):
            return math.gcd(a, b)           # x % m = x - m*q: both parts divisible
        if expr.op == "*":
            return a * b
        if expr.op == "//" and isinstance(expr.rhs, Const) and expr.rhs.value > 0 and \
                a % expr.rhs.value == 0:
            return a // expr.rhs.value      # (k*a) // c = k*(a/c) when c divides a
    return 1


def granules(refs: Iterable[MemRef], shape: Sequence[int]) -> tuple[int, ...]:
    """Per dimension, the largest cell size dividing the extent and every index, start, size
    and stride that `refs` name there (a stride counts only for the first slot of each cell,
    which is what makes a strided run a union of cells' first slots)."""
    gs = list(shape)
    for ref in refs:
        for d, e in enumerate(ref.index):
            gs[d] = math.gcd(gs[d], divisor(e))
        for d, s in enumerate(ref.region, start=len(ref.index)):
            strided = not (isinstance(s.stride, Const) and s.stride.value == 1)
            # contiguous: whole cells from start, size; strided: one slot per cell, the first
            parts = (s.start, s.stride) if strided else (s.start, s.size)
            for e in parts:
                gs[d] = math.gcd(gs[d], divisor(e))
    return tuple(max(g, 1) for g in gs)
