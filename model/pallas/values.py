"""What a jaxpr variable holds while a kernel is translated (besides integer expressions)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..expr import Expr
from ..ir import BarrierAlloc


@dataclass(frozen=True)
class BarrierVal:
    """A barrier allocation as the kernel sees it. A per-thread allocation (run_scoped without
    the thread axis among its collective axes) is one IR array with a leading thread dimension,
    which every reference indexes with the thread index (`prefix`)."""

    alloc: BarrierAlloc
    prefix: tuple[Expr, ...] = ()
    block: tuple[Expr, ...] | None = None


@dataclass(frozen=True)
class MemRef:
    """A non-barrier ref: enough to count the bytes a copy moves, and for SMEM / TMEM
    allocations the IR buffer its accesses are checked on (`alloc`, None for GMEM)."""

    shape: tuple[int, ...]
    dtype: Any
    space: str
    alloc: Any = None          # ir.MemAlloc


@dataclass(eq=False)
class Cell:
    """A scalar `Ref` of `pl.run_state` (a loop index passed in, say): reads give its value."""

    value: Expr
    control: int        # control depth it was created at; writes deeper make it data


@dataclass
class _Frame:
    """Translation context: where we are in the kernel."""

    tracebacks: tuple = ()
    loop_depth: int = 0
    control: int = 0     # enclosing conds and loops


def _clean_name(text: str) -> str:
    """`pipeline_allocs['flat_consumed_barrier_refs'][0]` -> `consumed_barrier_refs_0`,
    `args[2][1]` -> `args_2_1`."""
    parts = re.findall(r"[A-Za-z_]\w*|\d+", text)
    words = [p for p in parts if not p.isdigit()]
    if not words:
        return "barrier"
    digits = [p for p in parts[parts.index(words[-1]) + 1:] if p.isdigit()]
    return "_".join([words[-1].removeprefix("flat_")] + digits)
